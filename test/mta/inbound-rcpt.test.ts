// Issue 12 item 12 (docs/api.md §6 item 5, docs/decisions.md #19): who the MX listener takes mail for, over
// real SMTP on loopback: a live inbox on a verified inbound capability is accepted; an unknown localpart
// gets 550 5.1.1; a domain we do not receive for (unclaimed, or its capability unverified) 550 5.7.1; an
// inbox at or over its limit 552 5.2.2 at RCPT, while a message accepted at DATA is stored for every
// accepted recipient even past the limit.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { addInbox, inboundDomain, inboxNow, readMailbox } from '../helpers/inbox.js';
import { dialogue, swaks } from '../helpers/smtp-client.js';
import { setUsedBytes } from '../../storage/pg/inboxes.js';

const rcpt = async (port: number, to: string) => {
  const replies = await dialogue(port, ['EHLO client.test', 'MAIL FROM:<ada@sender.test>', `RCPT TO:<${to}>`, 'QUIT']);
  return replies[3] ?? '';
};

t.test('RCPT policy', async (t) => {
  const svc = await startTestService(t, { mta: true });
  const storage = svc.running.storage;
  const port = svc.running.ports.smtp!;
  const d = await inboundDomain(svc, storage);
  const pending = await inboundDomain(svc, storage, { verify: false });
  const box = await addInbox(storage, d, 'Info');
  await addInbox(storage, pending, 'info');

  t.match(await rcpt(port, `info@${d.domain}`), /^250 /, 'a live inbox: 250');
  t.match(await rcpt(port, `INFO@${d.domain.toUpperCase()}`), /^250 /, 'localpart and domain in any case: 250');
  t.match(await rcpt(port, `nobody@${d.domain}`), /^550 5\.1\.1 /, 'an unknown localpart: 550 5.1.1');
  t.match(await rcpt(port, 'info@unclaimed.test'), /^550 5\.7\.1 /, 'a domain we do not receive for: 550 5.7.1');
  t.match(await rcpt(port, `info@sub.${d.domain}`), /^550 5\.7\.1 /, 'a subdomain without its own capability');
  t.match(await rcpt(port, `info@${pending.domain}`), /^550 5\.7\.1 /, 'an unverified capability: 550 5.7.1');
  t.match(await rcpt(port, 'info@[127.0.0.1]'), /^550 5\.7\.1 /, 'an address literal: 550 5.7.1');

  await storage.db.query('UPDATE inboxes SET deleted_at = now() WHERE id = $1', [box.inbox.id]);
  t.match(await rcpt(port, `info@${d.domain}`), /^550 5\.1\.1 /, 'a deleted inbox is an unknown localpart');
});

t.test('the storage limit: 552 5.2.2 at or over it; a message accepted at DATA is stored past it', async (t) => {
  const svc = await startTestService(t, { mta: true });
  const storage = svc.running.storage;
  const port = svc.running.ports.smtp!;
  const d = await inboundDomain(svc, storage);
  const a = await addInbox(storage, d, 'a');
  const b = await addInbox(storage, d, 'b');
  const limit = a.inbox.storageLimitBytes;
  t.equal(limit, 2 ** 30, 'the default limit is 1 GB (docs/decisions.md #17)');

  await setUsedBytes(storage.db, a.inbox.id, limit - 1);
  t.match(await rcpt(port, a.address), /^250 /, 'one byte under the limit: accepted');
  await setUsedBytes(storage.db, a.inbox.id, limit);
  t.match(await rcpt(port, a.address), /^552 5\.2\.2 mailbox is full/, 'at the limit: 552 5.2.2 mailbox is full');
  await setUsedBytes(storage.db, a.inbox.id, limit + 5);
  t.match(await rcpt(port, a.address), /^552 5\.2\.2 /, 'over the limit: 552 5.2.2');

  // Both one byte under: both accepted at RCPT, and the message (far more than a byte) stored in both.
  await setUsedBytes(storage.db, a.inbox.id, limit - 1);
  await setUsedBytes(storage.db, b.inbox.id, limit - 1);
  const sent = await swaks(port, {
    from: 'ada@sender.test',
    to: `${a.address},${b.address}`,
    data: 'From: ada@sender.test\nSubject: over the edge\nMessage-ID: <edge@sender.test>\n\nA body of some bytes.\n',
  });
  t.equal(sent.code, 0, `swaks: both recipients and DATA accepted\n${sent.out}`);
  for (const x of [a, b]) {
    const [m] = await readMailbox(storage, x.mailboxes.INBOX!.id);
    t.equal(m?.messageId, 'edge@sender.test', `${x.address}: stored`);
    t.equal((await inboxNow(storage, x.inbox.id)).usedBytes, limit - 1 + m!.size, `${x.address}: past its limit`);
  }
  t.match(await rcpt(port, a.address), /^552 5\.2\.2 /, 'the next message is refused');
});
