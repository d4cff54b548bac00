// Delivery to a real receiving MTA no one here wrote: Debian's Postfix on loopback, reached through the
// MX of a loopback DNS zone. Postfix's answers (250, its own 550 and 450 texts) drive the outcomes, and
// python3-dkim checks the signatures of what Postfix stored.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startPostfix } from '../helpers/postfix.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { verifyDkimAll } from '../helpers/dkim-verify.js';

t.test('Postfix receives signed mail; its refusals bounce or defer', async (t) => {
  const postfix = await startPostfix(t, {
    domains: ['pf.test'],
    recipientReplies: {
      'gone@pf.test': '550 5.1.1 <gone@pf.test>: Recipient address rejected: User unknown in virtual mailbox table',
      'busy@pf.test': '450 4.2.0 <busy@pf.test>: Recipient address rejected: try later',
    },
  });
  const zone = await startDnsZone(t);
  zone.mx('pf.test', 10, 'mx.pf.test').a('mx.pf.test', '127.0.0.1');
  const svc = await startTestService(t, {
    env: { SVC_DNS_SERVERS: zone.hostPort, SVC_OUTBOUND_PORT: String(postfix.port) },
    mta: { pollMs: 20 },
  });
  const s = await sender(svc, { ed25519: true });
  const status = async (id: string) =>
    (await svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
      ?.status;
  const send = async (to: string, subject: string) =>
    (
      await s.key.v1.services.sendEmail({
        from: `Ada Lovelace <ada@${s.domain}>`,
        to,
        subject,
        text: 'Plain part, with a long line '.repeat(60),
        html: '<p>Hé, <b>HTML</b></p>',
      })
    ).providerMessageId;

  const ok = await Promise.all([send('ann@pf.test', 'One'), send('bob@pf.test', 'Zwei — ünïcode')]);
  const gone = await send('gone@pf.test', 'x');
  const busy = await send('busy@pf.test', 'x');
  const stored = await postfix.waitForMessages(2);
  for (const id of ok) await waitFor(async () => (await status(id)) === 'delivered', { what: `${id} delivered` });
  await waitFor(async () => (await status(gone)) === 'bounced', { what: 'gone bounced' });
  await waitFor(async () => (await status(busy)) === 'deferred', { what: 'busy deferred' });

  t.same(stored.map((m) => m.rcpt).sort(), ['ann@pf.test', 'bob@pf.test']);
  t.ok(
    stored.every((m) => /^b-[0-9a-f]{32}-[0-9a-f]{12}@bounces\./.test(m.mailFrom)),
    'Postfix saw the VERP return path',
  );
  const verdicts = await verifyDkimAll(
    stored.map((m) => m.raw),
    s.dkimTxt,
  );
  t.same(
    verdicts.map((sigs) => sigs.map((x) => `${x.algorithm}:${x.ok}`).sort()),
    [
      ['ed25519-sha256:true', 'rsa-sha256:true'],
      ['ed25519-sha256:true', 'rsa-sha256:true'],
    ],
    'python3-dkim: both signatures of both messages pass after Postfix stored them',
  );

  const events = await s.key.v1.messages.events({ id: gone });
  t.match(events.events.at(-1), {
    type: 'bounced',
    detail: { class: 'unknown_user', reply: /550 5\.1\.1 <gone@pf\.test>: Recipient address rejected/ },
  });
  const deferred = await s.key.v1.messages.events({ id: busy });
  t.match(deferred.events.at(-1), { type: 'deferred', detail: { reply: /^450 4\.2\.0/ } });
  const delivered = await s.key.v1.messages.events({ id: ok[0]! });
  t.match(delivered.events.at(-1), { type: 'delivered', detail: { reply: /^250 2\.0\.0 Ok: queued as / } });
});
