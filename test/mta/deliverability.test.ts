// Issue 19 item 7, what receivers check, on a message sent through the service to a loopback SMTP sink: To with
// its bare address in angle brackets, an html-only message with a text/plain alternative (read back by Python's
// `email` package), Feedback-ID, and DKIM's oversigned fields: the message as delivered passes python3-dkim, and
// a copy with one more Subject, Reply-To or Feedback-ID prepended (what a reader's client would show instead of
// ours) fails it.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender } from '../helpers/sender.js';
import { verifyDkimAll } from '../helpers/dkim-verify.js';
import { parseWithPython } from '../helpers/python-email.js';

t.test('To: <addr>, a text part for html-only, Feedback-ID, a prepended field breaks DKIM', async (t) => {
  const { zone, sink, svc } = await deliveryWorld(t);
  const s = await sender(svc, { ed25519: true });
  for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);

  const html =
    '<h1>Reset your password</h1><p>Hello&nbsp;Zoë &amp; co,<br>click ' +
    '<a href="https://app.example.test/reset?t=1">here</a> to reset.</p><p>Thanks</p>';
  await s.key.v1.services.sendEmail({
    from: `Support <help@${s.domain}>`,
    to: 'zoe@dest.test',
    cc: ['cc@dest.test'],
    subject: 'Reset',
    html,
    unsubscribeUrl: 'https://app.example.test/u?t=1',
  });
  const [got] = await sink.waitForMessages(1);
  const head = got!.raw.toString('latin1').split('\r\n\r\n')[0]!;
  const lines = head.split('\r\n');

  t.ok(lines.includes('To: <zoe@dest.test>'), 'a bare address in angle brackets');
  t.ok(lines.includes('Cc: <cc@dest.test>'));
  t.ok(lines.includes(`Feedback-ID: ${s.outboundId}:${s.projectId}:svc`), 'Feedback-ID: capability:project:svc');

  const m = await parseWithPython(got!.raw);
  t.same(m.defects, [], 'Python finds no defect');
  t.equal(m.contentType, 'multipart/alternative');
  t.same(
    m.parts.map((p) => p.contentType),
    ['text/plain', 'text/html'],
    'a text/plain alternative first, then the html',
  );
  const text = m.parts[0]!.content.toString('utf8');
  t.match(text, /RESET YOUR PASSWORD/i, 'the words');
  t.match(text, /Hello\s+Zoë & co,\s*\nclick here \[https:\/\/app\.example\.test\/reset\?t=1\] to reset\./, 'entities');
  t.notMatch(text, /<[a-z/]/i, 'no tags');
  t.equal(m.parts[1]!.content.toString('utf8').replace(/\r\n/g, '\n'), html, 'the html as given');

  // h= names every oversigned field one time more than the message has it.
  const sigs = head.replace(/\r\n[ \t]+/g, ' ').match(/^DKIM-Signature:.*$/gm) ?? [];
  t.equal(sigs.length, 2, 'RSA and Ed25519');
  for (const sig of sigs) {
    const h = /\bh=([^;]+)/
      .exec(sig)![1]!
      .split(':')
      .map((x) => x.trim().toLowerCase());
    const count = (n: string) => h.filter((x) => x === n).length;
    for (const [name, present] of [
      ['subject', 1],
      ['to', 1],
      ['cc', 1],
      ['reply-to', 0],
      ['in-reply-to', 0],
      ['mime-version', 1],
      ['list-unsubscribe', 1],
      ['list-unsubscribe-post', 1],
      ['feedback-id', 1],
    ] as const) {
      t.equal(count(name), present + 1, `h= names ${name} ${present + 1} times`);
    }
  }

  const forged = ['Subject: You won a prize', 'Reply-To: thief@evil.test', 'Feedback-ID: a:b:c:evil'].map((f) =>
    Buffer.concat([Buffer.from(`${f}\r\n`), got!.raw]),
  );
  const results = await verifyDkimAll([got!.raw, ...forged], s.dkimTxt);
  t.same(
    results.map((r) => r.map((x) => x.ok)),
    [
      [true, true],
      [false, false],
      [false, false],
      [false, false],
    ],
    'python3-dkim: the message passes, each copy with a prepended field fails',
  );
});
