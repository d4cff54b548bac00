// docs/api.md §4.5 import rules and docs/decisions.md #20, through the SDK against the running service: the
// batch limit, failed entries with their reasons, folders, \Seen, INTERNALDATE, deduplication per inbox
// (also between concurrent imports), the storage limit. Stored rows are read through the mail store.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import type { Mailbox } from '../../mail/mail-store.js';
import { errorOf } from '../helpers/errors.js';
import { at, inboxEnv, inboxes, inboxRow, message, type InboxEnv } from './inbox-fixture.js';

const GB = 2 ** 30;
const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');

async function newInbox(e: InboxEnv) {
  const { inbox } = await inboxes(e).create({ ...at(e), localpart: `u${randomBytes(4).toString('hex')}` });
  const inboxAt = { ...at(e), inboxId: inbox.id };
  const store = e.svc.running.storage.mail.store;
  const boxes = await store.mailboxes(inbox.id);
  const box = (name: string): Mailbox => boxes.find((b) => b.name === name)!;
  const stored = async (name = 'INBOX') => store.messages(box(name).id);
  return {
    inbox,
    inboxAt,
    stored,
    run: (messages: Parameters<ReturnType<typeof inboxes>['import']>[0]['messages']) =>
      inboxes(e).import({ ...inboxAt, messages }),
  };
}

t.test('more than 200 messages: 400, nothing imported', async (t) => {
  const e = await inboxEnv(t);
  const x = await newInbox(e);
  const messages = Array.from({ length: 201 }, () => ({ raw: message() }));
  t.match(await errorOf(x.run(messages)), { status: 400, code: 'invalid_request' });
  t.same(await x.stored(), [], 'nothing stored');
  t.equal((await inboxRow(e, x.inbox.id)).usedBytes, 0);
  t.match(await x.run(messages.slice(0, 200)), { total: 200, imported: 200, skipped: 0, failed: 0 }, '200 is fine');
});

t.test('failed entries: not base64, empty, not a message; the rest imported', async (t) => {
  const e = await inboxEnv(t);
  const x = await newInbox(e);
  const res = await x.run([
    { raw: message({ subject: 'first' }) },
    { raw: 'this is not base64!' },
    { raw: '' },
    { raw: b64('hello world, no header at all') },
    { raw: b64('\x00\x01\x02\xff binary') },
    { raw: 'QUJD=' },
    { raw: message({ subject: 'last' }) },
  ]);
  t.same(res, {
    total: 7,
    imported: 2,
    skipped: 0,
    failed: 5,
    failures: [
      { index: 1, reason: 'not_base64' },
      { index: 2, reason: 'empty' },
      { index: 3, reason: 'not_a_message' },
      { index: 4, reason: 'not_a_message' },
      { index: 5, reason: 'not_base64' },
    ],
  });
  const rows = await x.stored();
  t.same(
    rows.map((m) => (m.envelope as { subject: string }).subject),
    ['first', 'last'],
    'in the order given',
  );
  // A base64 body wrapped at 76 characters (RFC 2045 §6.8) is still base64.
  const wrapped = message({ body: 'x'.repeat(300) }).replace(/(.{76})/g, '$1\r\n');
  t.match(await x.run([{ raw: wrapped }]), { imported: 1, failed: 0 }, 'line breaks in base64 are fine');
});

t.test('folders, \\Seen, INTERNALDATE, envelope and structure stored', async (t) => {
  const e = await inboxEnv(t);
  e.svc.clock.freeze(Date.parse('2031-05-04T03:02:01.000Z'));
  const x = await newInbox(e);
  const res = await x.run([
    { raw: message({ subject: 'in' }), read: true, date: '2020-01-02T03:04:05.000Z' },
    { raw: message({ subject: 'header date', date: 'Tue, 01 Jul 2003 10:52:37 +0200' }), folder: 'sent' },
    { raw: message({ subject: 'no date', date: null }), folder: 'drafts', read: false },
    { raw: message({ subject: 'bin' }), folder: 'trash' },
  ]);
  t.match(res, { imported: 4, failed: 0 });
  const [inbox] = await x.stored('INBOX');
  t.same(inbox!.flags, ['\\Seen'], 'read: \\Seen');
  t.equal(inbox!.internalDate.toISOString(), '2020-01-02T03:04:05.000Z', 'date: INTERNALDATE');
  t.match(inbox!.envelope, { subject: 'in', from: [{ mailbox: 'alice', host: 'example.com' }] });
  t.match(inbox!.structure, { version: 1, messageId: String, body: { type: 'text' } });
  t.ok(inbox!.messageId, 'Message-ID kept');
  const [sent] = await x.stored('Sent');
  t.same(sent!.flags, [], 'unread by default');
  t.equal(sent!.internalDate.toISOString(), '2003-07-01T08:52:37.000Z', "else the message's Date field");
  const [draft] = await x.stored('Drafts');
  t.equal(draft!.internalDate.toISOString(), '2031-05-04T03:02:01.000Z', 'else the time of import');
  t.equal((await x.stored('Trash')).length, 1);
  t.equal((await x.stored('Junk')).length, 0);
  t.match(
    await errorOf(x.run([{ raw: message(), folder: 'junk' as 'trash' }])),
    { status: 400, code: 'invalid_request' },
    'an unknown folder',
  );
  t.match(await errorOf(x.run([{ raw: message(), date: 'yesterday' }])), { status: 400 }, 'a date that is not ISO');
});

t.test('idempotent per inbox: by Message-ID across folders, else by content hash', async (t) => {
  const e = await inboxEnv(t);
  const x = await newInbox(e);
  const withId = message({ messageId: 'same@example.com', subject: 'one' });
  const sameIdOtherBytes = message({ messageId: 'same@example.com', subject: 'other bytes' });
  const noId = message({ messageId: null, subject: 'no id' });
  const noIdOther = message({ messageId: null, subject: 'no id either' });
  const batch = [{ raw: withId }, { raw: noId }, { raw: message() }];
  t.match(await x.run(batch), { total: 3, imported: 3, skipped: 0 });
  const used = (await inboxRow(e, x.inbox.id)).usedBytes;
  t.same(await x.run(batch), { total: 3, imported: 0, skipped: 3, failed: 0, failures: [] }, 're-import: all skipped');
  t.match(
    await x.run([
      { raw: sameIdOtherBytes, folder: 'sent' },
      { raw: noId, folder: 'trash' },
      { raw: noIdOther },
      { raw: noIdOther },
    ]),
    { imported: 1, skipped: 3 },
    'same Message-ID in another folder, same bytes without one, and a repeat within the call: skipped',
  );
  t.equal((await x.stored('Sent')).length, 0);
  t.equal((await x.stored()).length, 4);
  t.ok((await inboxRow(e, x.inbox.id)).usedBytes > used);

  // Another inbox is another scope.
  const y = await newInbox(e);
  t.match(await y.run(batch), { imported: 3, skipped: 0 }, 'per inbox');
});

t.test('two concurrent imports of the same batch store it once', async (t) => {
  const e = await inboxEnv(t);
  const x = await newInbox(e);
  const batch = Array.from({ length: 20 }, (_, i) =>
    i % 2 ? { raw: message({ subject: `m${i}` }) } : { raw: message({ messageId: null, subject: `h${i}` }) },
  );
  const [a, b] = await Promise.all([x.run(batch), x.run(batch)]);
  t.equal(a.imported + b.imported, 20, 'each message imported once');
  t.equal(a.skipped + b.skipped, 20, 'and skipped once');
  t.equal((await x.stored()).length, 20, 'stored once');
  const sizes = (await x.stored()).reduce((s, m) => s + m.size, 0);
  t.equal((await inboxRow(e, x.inbox.id)).usedBytes, sizes, 'used bytes count each once');
});

t.test('storage: imported bytes count; past the limit an entry fails with mailbox_full', async (t) => {
  const e = await inboxEnv(t);
  const x = await newInbox(e);
  const raw = message({ body: 'a'.repeat(1000) });
  const size = Buffer.from(raw, 'base64').length;
  t.match(await x.run([{ raw }]), { imported: 1 });
  const listed = async () => (await inboxes(e).list(at(e))).inboxes.find((i) => i.id === x.inbox.id)!;
  t.equal((await listed()).storageUsedBytes, size, 'storageUsedBytes counts the imported bytes');

  // Fill the inbox to just under its limit through storage (no test stores a gigabyte): room for one large
  // message and one small one.
  const [big, big2, small] = [message({ body: 'b'.repeat(1000) }), message({ body: 'c'.repeat(1000) }), message()];
  const len = (s: string) => Buffer.from(s, 'base64').length;
  const room = len(big) + len(small);
  await e.svc.running.storage.db.query('UPDATE inboxes SET used_bytes = $2 WHERE id = $1', [x.inbox.id, GB - room]);
  const res = await x.run([{ raw: big }, { raw: big2 }, { raw: small }]);
  t.same(res.failures, [{ index: 1, reason: 'mailbox_full' }], 'the entry that would pass the limit fails');
  t.match(res, { imported: 2, failed: 1 }, 'a smaller one still fits');
  t.equal((await listed()).storageUsedBytes, GB, 'up to the limit, never past it');
  await inboxes(e).storage({ ...x.inboxAt, limitGb: 2 });
  t.match(await x.run([{ raw: message({ body: 'c'.repeat(1000) }) }]), { imported: 1 }, 'room again at 2 GB');
});

t.test('the import body may pass the 1 MB and 10 MB limits of other routes', async (t) => {
  const e = await inboxEnv(t);
  const x = await newInbox(e);
  // 100 messages of ~100 KB: ~13 MB of JSON.
  const messages = Array.from({ length: 100 }, (_, i) => ({
    raw: message({ subject: `big ${i}`, body: `${i} `.padEnd(100_000, 'z').replace(/(.{76})/g, '$1\r\n') }),
  }));
  t.ok(JSON.stringify({ messages }).length > 10 * 2 ** 20, 'over 10 MB');
  t.match(await x.run(messages), { total: 100, imported: 100, failed: 0 });
});
