// docs/api.md §4.11 recipients (issue 16 item 1): to, cc and bcc, each an address or an array, display-name
// form allowed; at least one to, at most 50 in all; duplicates sent once; bcc in no header. Every refusal is
// a 400 naming its field and queues nothing; each recipient counts one against the daily quota, and a send
// that would pass the free limit is refused whole. The test-message routes take the same body.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';
import { parseWithPython } from '../helpers/python-email.js';

type Detail = { field: string; message: string };
const fieldsOf = (err: { details?: unknown }) => [...new Set(((err.details ?? []) as Detail[]).map((d) => d.field))];
const many = (n: number, tag = 'r') => Array.from({ length: n }, (_, i) => `${tag}${i}@example.com`);

t.test('every refusal is a 400 naming its field, and queues nothing', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const base = { from: `ada@${s.domain}`, to: 'bob@example.com', subject: 'Hi', text: 'x' };
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['to missing', { to: undefined }, ['body.to']],
    ['to not an address', { to: 'nobody' }, ['body.to']],
    ['to: an empty list', { to: [] }, ['body.to']],
    ['to: only cc and bcc', { to: [], cc: 'c@example.com', bcc: 'd@example.com' }, ['body.to']],
    ['to: the bad one of a list', { to: ['a@example.com', 'Bob <bob@>'] }, ['body.to[1]']],
    ['to: not a string', { to: 5 }, ['body.to']],
    ['to with an IDN domain', { to: 'a@bücher.example' }, ['body.to']],
    ['to with a group', { to: 'Friends: a@example.com, b@example.com;' }, ['body.to']],
    ['to with two addresses in one string', { to: 'a@example.com, b@example.com' }, ['body.to']],
    ['cc not an address', { cc: 'nope' }, ['body.cc']],
    ['cc with a line break', { cc: ['c@example.com\r\nBcc: x@example.com'] }, ['body.cc[0]']],
    ['bcc: the bad one of a list', { bcc: ['d@example.com', 'not-an-address'] }, ['body.bcc[1]']],
    ['bcc with NUL', { bcc: 'd@example.com\0' }, ['body.bcc']],
    ['to: 51 addresses', { to: many(51) }, ['body.to']],
    ['51 recipients in all', { to: many(30), cc: many(11, 'c'), bcc: many(10, 'b') }, ['body']],
    ['51 recipients in all, duplicates counted', { to: many(26), bcc: many(25) }, ['body']],
    ['to and cc both bad', { to: ['to-nobody'], cc: ['cc-nobody'] }, ['body.to[0]', 'body.cc[0]']],
    ['a recipient shorter than 3 characters', { cc: ['c@example.com', 'x'] }, ['body.cc', 'body.cc[1]']],
  ];
  for (const [what, extra, fields] of cases) {
    const e = await errorOf(s.key.request('POST', '/v1/services/sendEmail', { ...base, ...extra }));
    t.equal(e.status, 400, `${what}: 400`);
    t.equal(e.code, 'invalid_request', `${what}: invalid_request`);
    t.same(fieldsOf(e), fields, `${what}: names ${fields.join(', ')}`);
  }
  const db = svc.running.storage.db;
  t.same(await db.query('SELECT id FROM messages'), [], 'nothing was queued');
  t.equal(svc.running.storage.spool.count(), 0, 'nothing spooled');
});

t.test('to, cc and bcc: one message, recipients in order, duplicates once, bcc in no header', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const r = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: ['"Ann, Example" <ann@dest.test>', 'bob@Other.Test'],
    cc: ['Carl <carl@dest.test>', 'ann@DEST.test'],
    bcc: ['dan@other.test', 'bob@other.test', 'Bob@other.test'],
    subject: 'Hi',
    text: 'x',
  });
  t.equal(r.status, 'queued');
  const row = (await s.key.v1.messages.get({ id: r.providerMessageId })).row;
  t.equal(row.status, 'queued');
  t.equal(row.to, 'ann@dest.test');
  t.same(row.recipients, [
    { address: 'ann@dest.test', kind: 'to', status: 'queued' },
    { address: 'bob@other.test', kind: 'to', status: 'queued' },
    { address: 'carl@dest.test', kind: 'cc', status: 'queued' },
    { address: 'dan@other.test', kind: 'bcc', status: 'queued' },
    // The local part is case-sensitive (RFC 5321 §2.4): Bob@ is another mailbox.
    { address: 'Bob@other.test', kind: 'bcc', status: 'queued' },
  ]);
  const { spool } = svc.running.storage;
  const entry = spool.get(r.providerMessageId)!;
  t.same(
    entry.envelopes?.map((v) => [v.domain, v.rcpts]),
    [
      ['dest.test', ['ann@dest.test', 'carl@dest.test']],
      ['other.test', ['bob@other.test', 'dan@other.test', 'Bob@other.test']],
    ],
    'one envelope per recipient domain',
  );
  const m = await parseWithPython(spool.body(r.providerMessageId)!);
  t.same(m.headers['to'], ['"Ann, Example" <ann@dest.test>, bob@other.test']);
  t.same(m.headers['cc'], ['Carl <carl@dest.test>'], 'a duplicate is shown once, where first given');
  t.notOk('bcc' in m.headers, 'no Bcc field');
  t.notMatch(spool.body(r.providerMessageId)!.toString(), /dan@|Bob@/, 'no bcc recipient in the message');

  // The plain send is unchanged: one recipient, no list in its spool entry, a read with one recipient.
  const one = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'x@dest.test',
    subject: 'Hi',
    text: 'x',
  });
  t.equal(spool.get(one.providerMessageId)?.envelopes, undefined);
  t.same((await s.key.v1.messages.get({ id: one.providerMessageId })).row.recipients, [
    { address: 'x@dest.test', kind: 'to', status: 'queued' },
  ]);
  const named = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'Xavier <x@dest.test>',
    subject: 'Hi',
    text: 'x',
  });
  t.same((await parseWithPython(spool.body(named.providerMessageId)!)).headers['to'], ['Xavier <x@dest.test>']);
  t.same(
    (await s.key.v1.messages.get({ id: named.providerMessageId })).row.recipients.map((x) => x.address),
    ['x@dest.test'],
  );

  const fifty = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: many(20),
    cc: many(20, 'c'),
    bcc: many(10, 'b'),
    subject: 'Hi',
    text: 'x',
  });
  t.equal((await s.key.v1.messages.get({ id: fifty.providerMessageId })).row.recipients.length, 50, '50 in all');

  const test = await s.owner.client.console.projects.testMessage({
    id: s.projectId,
    from: `ada@${s.domain}`,
    to: 'a@dest.test',
    cc: 'c@dest.test',
    bcc: ['b@dest.test'],
    subject: 'Test',
    text: 'x',
  });
  t.same(
    (await s.key.v1.messages.get({ id: test.providerMessageId })).row.recipients.map((x) => x.kind),
    ['to', 'cc', 'bcc'],
    'the test-message route takes cc and bcc',
  );
  const admin = await svc.admin().admin.testMessage({
    projectId: s.projectId,
    from: `ada@${s.domain}`,
    to: ['a@dest.test', 'b@dest.test'],
    subject: 'Test',
    text: 'x',
  });
  t.equal((await s.key.v1.messages.get({ id: admin.providerMessageId })).row.recipients.length, 2);
});

t.test('the daily quota counts each recipient; a send that would pass it is refused whole', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const db = svc.running.storage.db;
  const day = new Date(svc.clock.now()).toISOString().slice(0, 10);
  await db.query('INSERT INTO quota_days (organization_id, day, accepted) VALUES ($1, $2, 495)', [s.orgId, day]);
  const used = async () =>
    (await db.query<{ accepted: number }>('SELECT accepted FROM quota_days WHERE organization_id = $1', [s.orgId]))[0]!
      .accepted;
  const send = (to: string[], extra: Record<string, unknown> = {}) =>
    s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to, subject: 'Hi', text: 'x', ...extra });

  await s.owner.client.console.projects.suppressions.create({ id: s.projectId, address: 'sup@example.com' });
  const r = await send(['a@example.com', 'A@example.com'], { cc: 'sup@example.com', bcc: 'a@EXAMPLE.com' });
  t.equal(await used(), 498, 'three distinct recipients, the suppressed one included, count three');
  t.equal(r.status, 'queued');
  const refused = await errorOf(send(['x@example.com', 'y@example.com', 'z@example.com']));
  t.same([refused.status, refused.code], [429, 'quota_exceeded'], 'three more would pass 500: refused whole');
  t.equal(await used(), 498, 'nothing counted');
  t.equal((await db.query('SELECT id FROM messages')).length, 1, 'nothing queued');
  t.equal(svc.running.storage.spool.count(), 1, 'nothing left in the spool');
  await send(['x@example.com', 'y@example.com']);
  t.equal(await used(), 500, 'two fit exactly');
  t.equal((await errorOf(send(['z@example.com']))).code, 'quota_exceeded', 'the 501st recipient');

  // All recipients suppressed: the message is suppressed (and never spooled).
  await s.owner.client.console.organizations.plan({ id: s.orgId, plan: 'payg' });
  await s.owner.client.console.projects.suppressions.create({ id: s.projectId, address: 'sup2@example.com' });
  const all = await send(['sup@example.com', 'sup2@example.com']);
  t.equal(all.status, 'suppressed', 'every recipient suppressed: suppressed');
  t.equal(svc.running.storage.spool.get(all.providerMessageId), undefined, 'not spooled');
  const ev = await s.key.v1.messages.events({ id: all.providerMessageId });
  t.same(
    ev.events.map((e) => [e.type, (e.detail as { recipient: string }).recipient]),
    [
      ['suppressed', 'sup@example.com'],
      ['suppressed', 'sup2@example.com'],
    ],
    'a suppressed event per recipient, naming it',
  );

  // An idempotent replay of a send to several: the same message.
  const key = 'multi-key-0001';
  const first = await send(['p@example.com', 'q@example.com'], { idempotencyKey: key });
  const again = await send(['p@example.com', 'q@example.com'], { idempotencyKey: key });
  t.equal(again.providerMessageId, first.providerMessageId, 'replayed');
  t.equal((await errorOf(send(['p@example.com'], { idempotencyKey: key }))).code, 'idempotency_key_reused');
});
