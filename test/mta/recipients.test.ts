// Issue 16 items 1 and 6 end to end: one sendEmail to to, cc and bcc recipients of two domains → the MTA
// (loopback DNS zone) → an SMTP sink. One message (one providerMessageId), one envelope per recipient domain,
// no Bcc in any copy, the same DKIM signature on every copy (python3-dkim verifies it), an outcome per
// recipient; a recipient refused, deferred, or bounced by a later DSN changes only its own status.
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { TestService } from '../helpers/service.js';
import type { SinkOptions, SmtpSink } from '../helpers/smtp-sink.js';
import { sender, type Sender } from '../helpers/sender.js';
import { verifyDkimAll } from '../helpers/dkim-verify.js';
import { parseWithPython } from '../helpers/python-email.js';
import { waitFor } from '../helpers/wait-for.js';

interface World {
  svc: TestService;
  sink: SmtpSink;
  s: Sender;
}

async function world(t: Test, answer?: SinkOptions['answer']): Promise<World> {
  const { zone, sink, svc } = await deliveryWorld(t, { env: { SVC_RETRY_DELAYS: '1m,5m' }, sink: { answer } });
  zone.mx('other.test', 10, 'mx.other.test').a('mx.other.test', '127.0.0.1');
  const s = await sender(svc);
  for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);
  return { svc, sink, s };
}

const read = (w: World, id: string) => w.s.key.v1.messages.get({ id }).then((r) => r.row);
const eventsOf = async (w: World, id: string) =>
  (await w.s.key.v1.messages.events({ id })).events.map((e) => ({
    type: e.type,
    recipient: (e.detail as { recipient?: string } | null)?.recipient ?? null,
  }));
const statusIs = (w: World, id: string, status: string) =>
  waitFor(async () => (await read(w, id)).status === status, { what: `${id} ${status}` });
const suppressed = async (w: World, address: string) =>
  (
    await w.svc.running.storage.db.query<{ reason: string }>(
      'SELECT reason FROM suppressions WHERE project_id = $1 AND address = $2',
      [w.s.projectId, address],
    )
  )[0]?.reason ?? null;

t.test('to, cc and bcc: one envelope per domain, no Bcc anywhere, signed once, a delivery per recipient', async (t) => {
  const w = await world(t);
  const { providerMessageId: id, status } = await w.s.key.v1.services.sendEmail({
    from: `Ada <ada@${w.s.domain}>`,
    to: ['Ann Example <ann@dest.test>', 'bob@other.test'],
    cc: 'Carl <carl@DEST.test>',
    // ann again (the domain's case differs): sent once, shown in To where she was given first.
    bcc: ['dan@other.test', 'ann@DEST.TEST', 'eve@dest.test'],
    subject: 'Minutes',
    text: 'Attached are the minutes.',
  });
  t.equal(status, 'queued');
  const got = await w.sink.waitForMessages(2);
  await statusIs(w, id, 'delivered');
  t.equal(w.sink.messages.length, 2, 'two transactions: one per recipient domain');
  const byDomain = Object.fromEntries(got.map((m) => [m.rcptTo[0]!.split('@')[1], m]));
  t.same(byDomain['dest.test']?.rcptTo, ['ann@dest.test', 'carl@dest.test', 'eve@dest.test'], 'dest.test envelope');
  t.same(byDomain['other.test']?.rcptTo, ['bob@other.test', 'dan@other.test'], 'other.test envelope');
  t.equal(got[0]!.mailFrom, got[1]!.mailFrom, 'one VERP return path: one message');

  for (const m of got) {
    const p = await parseWithPython(m.raw);
    t.same(p.defects, []);
    t.same(p.headers['to'], ['Ann Example <ann@dest.test>, bob@other.test'], 'To lists the to recipients');
    t.same(p.headers['cc'], ['Carl <carl@dest.test>'], 'Cc lists the cc recipient');
    t.notOk('bcc' in p.headers, 'no Bcc field');
    const head = m.raw.subarray(0, m.raw.indexOf('\r\n\r\n')).toString();
    t.notMatch(head, /dan@|eve@/, 'no bcc recipient named in any header');
  }
  const sig = (raw: Buffer) => /^DKIM-Signature:[^]*?(?=\r\n\S)/m.exec(raw.toString())?.[0];
  t.equal(sig(got[0]!.raw), sig(got[1]!.raw), 'the same DKIM signature on both copies: signed once');
  const dkim = await verifyDkimAll(
    got.map((m) => m.raw),
    w.s.dkimTxt,
  );
  t.same(
    dkim.map((r) => r.map((x) => (x.ok ? 'pass' : x.error))),
    [['pass'], ['pass']],
    'python3-dkim: both copies pass',
  );

  const row = await read(w, id);
  t.equal(row.to, 'ann@dest.test', 'to: the first to recipient');
  t.same(row.recipients, [
    { address: 'ann@dest.test', kind: 'to', status: 'delivered' },
    { address: 'bob@other.test', kind: 'to', status: 'delivered' },
    { address: 'carl@dest.test', kind: 'cc', status: 'delivered' },
    { address: 'dan@other.test', kind: 'bcc', status: 'delivered' },
    { address: 'eve@dest.test', kind: 'bcc', status: 'delivered' },
  ]);
  t.equal(row.attempts, 1);
  const ev = await eventsOf(w, id);
  t.same(ev[0], { type: 'queued', recipient: null }, 'one queued event for the message');
  t.same(
    ev
      .slice(1)
      .map((e) => `${e.type} ${e.recipient}`)
      .sort(),
    ['ann@dest.test', 'bob@other.test', 'carl@dest.test', 'dan@other.test', 'eve@dest.test'].map(
      (a) => `delivered ${a}`,
    ),
    'a delivered event per recipient, naming it',
  );
});

t.test('one recipient refused while the others are delivered; one deferred, retried alone', async (t) => {
  let later = true;
  const w = await world(t, (rcpt) =>
    rcpt === 'gone@dest.test'
      ? { code: 550, message: '5.1.1 No such user' }
      : rcpt === 'slow@other.test' && later
        ? { code: 450, message: '4.2.1 Try again later' }
        : null,
  );
  const { providerMessageId: id } = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: ['ok@dest.test', 'gone@dest.test'],
    cc: ['slow@other.test', 'fine@other.test'],
    subject: 'Hi',
    text: 'x',
  });
  await statusIs(w, id, 'deferred');
  let row = await read(w, id);
  t.same(
    row.recipients.map((r) => `${r.address} ${r.status}`),
    ['ok@dest.test delivered', 'gone@dest.test bounced', 'slow@other.test deferred', 'fine@other.test delivered'],
    'each recipient its own outcome; the message is deferred while one is',
  );
  t.equal(await suppressed(w, 'gone@dest.test'), 'hard_bounce', 'the bounced recipient is suppressed');
  t.equal(await suppressed(w, 'ok@dest.test'), null, 'the others are not');
  t.equal(await suppressed(w, 'slow@other.test'), null);
  const bounce = (await w.s.key.v1.messages.events({ id })).events.find((e) => e.type === 'bounced');
  t.match(bounce?.detail, { recipient: 'gone@dest.test', class: 'unknown_user' }, 'the bounce names its recipient');

  const before = w.sink.messages.length;
  later = false;
  w.svc.clock.advance(60_000);
  await waitFor(() => w.sink.messages.length > before, { what: 'the retry' });
  t.same(w.sink.messages.at(-1)!.rcptTo, ['slow@other.test'], 'the retry carries the deferred recipient alone');
  await waitFor(async () => (await read(w, id)).recipients[2]!.status === 'delivered', { what: 'slow delivered' });
  row = await read(w, id);
  // docs/api.md §3: some delivered, one bounced: done, but not every recipient delivered.
  t.equal(row.status, 'sending', 'delivered and bounced recipients: the furthest state all reached is sending');
  t.equal(row.attempts, 2);
});

t.test('every recipient delivered: delivered; all refused: bounced', async (t) => {
  const w = await world(t, (rcpt) => (rcpt.startsWith('no') ? { code: 550, message: '5.1.1 No such user' } : null));
  const all = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: ['no1@dest.test', 'no2@other.test'],
    subject: 'Hi',
    text: 'x',
  });
  await statusIs(w, all.providerMessageId, 'bounced');
  t.same(
    (await read(w, all.providerMessageId)).recipients.map((r) => r.status),
    ['bounced', 'bounced'],
  );
  t.equal(await suppressed(w, 'no1@dest.test'), 'hard_bounce');
  t.equal(await suppressed(w, 'no2@other.test'), 'hard_bounce');
});

t.test('a suppressed recipient is skipped, the others are sent', async (t) => {
  const w = await world(t);
  await w.s.owner.client.console.projects.suppressions.create({ id: w.s.projectId, address: 'blocked@dest.test' });
  const r = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'ann@dest.test',
    cc: 'blocked@dest.test',
    subject: 'Hi',
    text: 'x',
  });
  t.equal(r.status, 'queued', 'queued: not every recipient is suppressed');
  const [m] = await w.sink.waitForMessages(1);
  t.same(m!.rcptTo, ['ann@dest.test'], 'the suppressed recipient is not in the envelope');
  await statusIs(w, r.providerMessageId, 'delivered');
  t.same((await read(w, r.providerMessageId)).recipients, [
    { address: 'ann@dest.test', kind: 'to', status: 'delivered' },
    { address: 'blocked@dest.test', kind: 'cc', status: 'suppressed' },
  ]);
  const ev = await eventsOf(w, r.providerMessageId);
  t.same(
    ev.map((e) => `${e.type} ${e.recipient}`),
    ['queued null', 'suppressed blocked@dest.test', 'delivered ann@dest.test'],
  );
  t.match((await w.s.key.v1.messages.events({ id: r.providerMessageId })).events[1]!.detail, {
    reason: 'manual',
    recipient: 'blocked@dest.test',
  });

  const all = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: ['blocked@dest.test', 'BLOCKED@dest.test'],
    subject: 'Hi',
    text: 'x',
  });
  t.equal(all.status, 'queued', 'the local part is case-sensitive: BLOCKED@ is another recipient');
});

/** swaks, a real SMTP client: null sender (RFC 5321 §4.5.5), the report as DATA. */
function swaks(w: World, to: string, data: string): Promise<number> {
  return new Promise((resolve) => {
    const child = execFile(
      'swaks',
      ['--server', `127.0.0.1:${w.svc.running.ports.smtp}`, '--from', '<>', '--to', to, '--data', '-'],
      (err) => resolve(err ? ((err as { code?: number }).code ?? 1) : 0),
    );
    child.stdin!.end(data.replace(/\r?\n/g, '\r\n'));
  });
}

t.test('a DSN naming one recipient bounces that one only', async (t) => {
  const w = await world(t);
  const { providerMessageId: id } = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: ['ann@dest.test', 'gone@dest.test'],
    subject: 'Hi',
    text: 'x',
  });
  const [m] = await w.sink.waitForMessages(1);
  await statusIs(w, id, 'delivered');
  const dsn = `From: MAILER-DAEMON@mx.dest.test
To: ${m!.mailFrom}
Subject: Undelivered Mail Returned to Sender
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="B1"

--B1
Content-Type: text/plain

Your message could not be delivered.

--B1
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.dest.test

Final-Recipient: rfc822; Gone@dest.test
Action: failed
Status: 5.1.1
Diagnostic-Code: smtp; 550 5.1.1 <gone@dest.test>: User unknown

--B1--
`;
  t.equal(await swaks(w, m!.mailFrom, dsn), 0, 'the report is taken');
  await waitFor(async () => (await read(w, id)).recipients[1]!.status === 'bounced', { what: 'gone bounced' });
  const row = await read(w, id);
  t.same(
    row.recipients.map((r) => `${r.address} ${r.status}`),
    ['ann@dest.test delivered', 'gone@dest.test bounced'],
  );
  t.equal(row.status, 'sending', 'one delivered, one bounced');
  t.equal(await suppressed(w, 'gone@dest.test'), 'hard_bounce');
  t.equal(await suppressed(w, 'ann@dest.test'), null);
  const ev = (await w.s.key.v1.messages.events({ id })).events.at(-1)!;
  t.match(ev, { type: 'bounced', detail: { recipient: 'gone@dest.test', source: 'dsn', status: '5.1.1' } });
});
