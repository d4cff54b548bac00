// docs/api.md §4.5 inboxes (create, list, delete, storage limit, new password) and §3 (soft delete, the
// initial password), through the SDK against the running service, with the capability verified through a
// loopback DNS zone. The row, the blob store and the change feed are read through the service's own storage.
import t from 'tap';
import { createHash } from 'node:crypto';
import { isInboxNotice, type ChangeNotice } from '../../mail/mail-store.js';
import { verifyPassword } from '../../core/passwords.js';
import { finishInterruptedPurges } from '../../core/inboxes.js';
import { testClock } from '../helpers/clock.js';
import { errorOf } from '../helpers/errors.js';
import { waitFor } from '../helpers/wait-for.js';
import {
  at,
  inboundCapability,
  inboxEnv,
  inboxes,
  inboxRow,
  message,
  simulateFirstLogin,
  tenant,
} from './inbox-fixture.js';

const GB = 2 ** 30;

t.test('create, list, the initial password until the first login', async (t) => {
  const e = await inboxEnv(t);
  const r = inboxes(e);
  const made = await r.create({ ...at(e), localpart: 'Info' });
  t.match(made.inbox, { localpart: 'info', address: `info@${e.domain}`, type: 'individual', capabilityId: e.capId });
  t.match(made.initialPassword, /^[34679abcdefghjkmnpqrstuvwxyz]{4}(-[34679abcdefghjkmnpqrstuvwxyz]{4})+$/);
  t.ok(made.initialPassword.replace(/-/g, '').length * Math.log2(28) >= 96, 'at least 96 bits');
  const group = await r.create({ ...at(e), localpart: 'team.sales', type: 'group' });
  t.equal(group.inbox.type, 'group');

  const { inboxes: listed } = await r.list(at(e));
  t.same(
    listed.map((i) => [i.localpart, i.initialPassword, i.storageUsedBytes, i.storageLimitBytes]),
    [
      ['info', made.initialPassword, 0, GB],
      ['team.sales', group.initialPassword, 0, GB],
    ],
    'listed with the initial password, 0 bytes used of 1 GB = 2^30 bytes',
  );
  const [row] = await e.svc.running.storage.db.query<{ sealed: string; hash: string }>(
    'SELECT initial_password_sealed AS sealed, password_hash AS hash FROM inboxes WHERE id = $1',
    [made.inbox.id],
  );
  t.notOk(row!.sealed.includes(made.initialPassword), 'kept sealed at rest');
  t.match(row!.hash, /^scrypt\$/, 'a memory-hard hash for logins');
  t.ok(await verifyPassword(made.initialPassword, row!.hash));

  await simulateFirstLogin(e, made.inbox.id, new Date(e.svc.clock.now()));
  const after = (await r.list(at(e))).inboxes.find((i) => i.id === made.inbox.id)!;
  t.equal(after.initialPassword, null, 'null after the first login');

  const nested = await e.owner.client.console.projects.domains.inbound.inboxes.list({
    ...at(e),
    domainId: e.claimId,
  });
  t.equal(nested.inboxes.length, 2, 'the nested alias path lists the same');
  const elsewhere = '00000000-0000-4000-8000-000000000000';
  t.match(
    await errorOf(e.owner.client.console.projects.domains.inbound.inboxes.list({ ...at(e), domainId: elsewhere })),
    { status: 404 },
    'the nested path under another claim: 404',
  );
});

t.test('localparts: RFC 5321 Dot-strings only; duplicates in any case; unverified capability', async (t) => {
  const e = await inboxEnv(t);
  const r = inboxes(e);
  const bad = ['', 'a..b', '.a', 'a.', 'a b', 'ü', '"quoted"', 'a@b', 'a(b)', 'a,b', 'a\\b', 'x'.repeat(65)];
  for (const localpart of bad) {
    t.match(await errorOf(r.create({ ...at(e), localpart })), { status: 400 }, `${JSON.stringify(localpart)}: 400`);
  }
  t.equal((await r.list(at(e))).inboxes.length, 0, 'none created');
  for (const localpart of ['x'.repeat(64), "o'brien", 'a+tag', 'first.last', "!#$%&'*+-/=?^_`{|}~"]) {
    t.ok((await r.create({ ...at(e), localpart })).inbox.id, `${localpart}: created`);
  }
  await r.create({ ...at(e), localpart: 'Sales' });
  t.match(await errorOf(r.create({ ...at(e), localpart: 'SALES' })), { status: 409, code: 'conflict' }, 'other case');
  t.match(await errorOf(r.create({ ...at(e), localpart: 'sales' })), { status: 409 });
  t.match(
    await errorOf(r.create({ ...at(e), localpart: 'x', type: 'shared' as 'group' })),
    { status: 400, code: 'invalid_request' },
    'an unknown type',
  );

  const pending = await inboundCapability(e, e.owner, { claimId: e.claimId, subdomain: 'pending', verify: false });
  t.match(
    await errorOf(r.create({ id: e.owner.projectId, capId: pending.capId, localpart: 'info' })),
    { status: 400, code: 'invalid_request' },
    'an unverified capability: 400',
  );
  t.match(await errorOf(r.create({ id: e.owner.projectId, capId: 'nope', localpart: 'info' })), { status: 404 });
  // Same localpart on another capability: another address.
  const second = await inboundCapability(e, e.owner, { claimId: e.claimId, subdomain: 'mail' });
  t.ok((await r.create({ id: e.owner.projectId, capId: second.capId, localpart: 'sales' })).inbox.id);
});

t.test('access: members read, auditors may not write, non-members get 404', async (t) => {
  const e = await inboxEnv(t);
  const made = await inboxes(e).create({ ...at(e), localpart: 'info' });
  e.svc.clock.advance(1000);
  const { code } = await e.owner.client.console.organizations.joinCodes.create({
    id: e.owner.organizationId,
    role: 'auditor',
  });
  const auditor = await e.svc.signup();
  await auditor.client.console.organizations.join({ code });
  const a = inboxes(e, auditor.client);
  t.equal((await a.list(at(e))).inboxes.length, 1, 'an auditor lists');
  const inboxAt = { ...at(e), inboxId: made.inbox.id };
  for (const [what, call] of [
    ['create', () => a.create({ ...at(e), localpart: 'x' })],
    ['delete', () => a.delete(inboxAt)],
    ['storage', () => a.storage({ ...inboxAt, limitGb: 2 })],
    ['import', () => a.import({ ...inboxAt, messages: [] })],
    ['password', () => a.password(inboxAt)],
  ] as const) {
    t.match(await errorOf(call()), { status: 403, code: 'forbidden' }, `auditor: ${what} 403`);
  }

  const stranger = await tenant(e.svc, 'Stranger');
  const s = inboxes(e, stranger);
  t.match(await errorOf(s.list(at(e))), { status: 404 }, 'a non-member lists: 404');
  t.match(await errorOf(s.create({ ...at(e), localpart: 'x' })), { status: 404 });
  t.match(await errorOf(s.delete(inboxAt)), { status: 404 });
  // The stranger's own project does not reach another project's capability or inbox.
  const theirs = { id: stranger.projectId, capId: e.capId };
  t.match(await errorOf(s.list(theirs)), { status: 404 }, 'capability of another project: 404');
  t.match(await errorOf(s.password({ ...theirs, inboxId: made.inbox.id })), { status: 404 });

  const platform = inboxes(e, e.svc.admin());
  t.equal((await platform.list(at(e))).inboxes.length, 1, 'the platform key lists');
});

t.test('storage limit: whole GB from 1 to 1024, else 400 invalid_storage_limit', async (t) => {
  const e = await inboxEnv(t);
  const r = inboxes(e);
  const { inbox } = await r.create({ ...at(e), localpart: 'info' });
  const inboxAt = { ...at(e), inboxId: inbox.id };
  for (const limitGb of [0, 1.5, 1025, '2', -1, null, true, 1e300]) {
    t.match(
      await errorOf(r.storage({ ...inboxAt, limitGb })),
      { status: 400, code: 'invalid_storage_limit' },
      `${JSON.stringify(limitGb)}: 400 invalid_storage_limit`,
    );
  }
  t.same(await r.storage({ ...inboxAt, limitGb: 5 }), { storage: { usedBytes: 0, limitBytes: 5 * GB } });
  t.equal((await r.list(at(e))).inboxes[0]!.storageLimitBytes, 5 * GB, 'listed');
  t.same(await r.storage({ ...inboxAt, limitGb: 1024 }), { storage: { usedBytes: 0, limitBytes: 1024 * GB } });
  t.same(await r.storage({ ...inboxAt, limitGb: 1 }), { storage: { usedBytes: 0, limitBytes: GB } });
  t.match(await errorOf(r.storage({ ...at(e), inboxId: '00000000-0000-4000-8000-000000000000', limitGb: 2 })), {
    status: 404,
  });
});

t.test('new password: answered once, the old one stops working, sessions are told', async (t) => {
  const e = await inboxEnv(t);
  const r = inboxes(e);
  const made = await r.create({ ...at(e), localpart: 'info' });
  const inboxAt = { ...at(e), inboxId: made.inbox.id };
  const before = await inboxRow(e, made.inbox.id);
  const notices: ChangeNotice[] = [];
  const stop = await e.svc.running.storage.mail.changes.subscribe({ inboxId: made.inbox.id }, (n) => notices.push(n));
  t.teardown(stop);

  const { password } = await r.password(inboxAt);
  t.not(password, made.initialPassword);
  t.match(password, /^[34679abcdefghjkmnpqrstuvwxyz-]+$/);
  const after = await inboxRow(e, made.inbox.id);
  t.notOk(await verifyPassword(made.initialPassword, after.passwordHash!), 'the old password no longer verifies');
  t.ok(await verifyPassword(password, after.passwordHash!), 'the new one does');
  t.equal(after.credentialsVersion, before.credentialsVersion + 1, 'a new credentials version');
  await waitFor(() => notices.some(isInboxNotice), { what: 'the inbox notice' });
  t.same(notices, [{ inboxId: made.inbox.id, mailboxId: '', modseq: 0 }], 'one inbox notice');
  t.equal(
    (await r.list(at(e))).inboxes[0]!.initialPassword,
    made.initialPassword,
    "the listing's initial password stays as it was",
  );
  const again = await r.password(inboxAt);
  t.not(again.password, password, 'a fresh one each time');
});

t.test('delete: soft, purged, sessions told, the address free at once, billed days kept', async (t) => {
  const e = await inboxEnv(t);
  const r = inboxes(e);
  const made = await r.create({ ...at(e), localpart: 'info' });
  const inboxAt = { ...at(e), inboxId: made.inbox.id };
  const raw = message({ subject: 'to be purged' });
  t.match(await r.import({ ...inboxAt, messages: [{ raw }, { raw: message(), folder: 'sent' }] }), { imported: 2 });
  const { storage } = e.svc.running;
  const address = createHash('sha256').update(Buffer.from(raw, 'base64')).digest('hex');
  t.equal(await storage.mail.blobs.refs(address), 1, 'the stored body has one reference');
  const startedAt = new Date(e.svc.clock.now());
  await simulateFirstLogin(e, made.inbox.id, startedAt);
  const notices: ChangeNotice[] = [];
  const stop = await storage.mail.changes.subscribe({ inboxId: made.inbox.id }, (n) => notices.push(n));
  t.teardown(stop);
  const version = (await inboxRow(e, made.inbox.id)).credentialsVersion;

  t.same(await r.delete(inboxAt), { ok: true });
  t.same((await r.list(at(e))).inboxes, [], 'no longer listed');
  const row = await inboxRow(e, made.inbox.id);
  t.ok(row.deletedAt, 'soft-deleted: the row stays');
  t.equal(row.passwordHash, null, 'it can no longer log in');
  t.equal(row.credentialsVersion, version + 1);
  t.same(row.billingStartedAt, startedAt, 'its billing start is kept');
  t.equal(row.usedBytes, 0);
  const [{ n }] = (await storage.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM mail_messages WHERE inbox_id = $1',
    [made.inbox.id],
  )) as [{ n: number }];
  t.equal(n, 0, 'its mail is purged');
  t.equal(await storage.mail.blobs.refs(address), 0, 'the body reference is given back');
  await waitFor(() => notices.some(isInboxNotice), { what: 'the inbox notice' });

  t.match(await errorOf(r.delete(inboxAt)), { status: 404 }, 'deleting again: 404');
  t.match(await errorOf(r.password(inboxAt)), { status: 404 });
  t.match(await errorOf(r.import({ ...inboxAt, messages: [{ raw }] })), { status: 404 });
  const again = await r.create({ ...at(e), localpart: 'INFO' });
  t.not(again.inbox.id, made.inbox.id, 'the address can be created again at once');
  t.match(await r.import({ ...at(e), inboxId: again.inbox.id, messages: [{ raw }] }), { imported: 1 });
  t.equal(await storage.mail.blobs.refs(address), 1, 'the same body stored anew for the new inbox');
});

t.test(
  'removing the receiving capability, or releasing its claim, deletes its inboxes as one delete does',
  async (t) => {
    const clock = testClock();
    clock.freeze(Date.parse('2031-06-20T09:00:00Z'));
    const e = await inboxEnv(t, { clock });
    const r = inboxes(e);
    const { storage } = e.svc.running;
    const p = e.owner.client.console.projects;
    const usage = async () =>
      (await e.owner.client.console.organizations.get({ id: e.owner.organizationId })).inboxUsage;
    const refsOf = (raw: string) =>
      storage.mail.blobs.refs(createHash('sha256').update(Buffer.from(raw, 'base64')).digest('hex'));

    // docs/decisions.md #50, for a capability removed on its own.
    const made = await r.create({ ...at(e), localpart: 'info' });
    const raw = message({ subject: 'kept until the capability goes' });
    t.match(await r.import({ ...at(e), inboxId: made.inbox.id, messages: [{ raw }] }), { imported: 1 });
    await simulateFirstLogin(e, made.inbox.id, new Date('2031-06-02T00:00:00Z'));
    t.match(await usage(), { activeInboxes: 1, billedCents: 63 });
    const version = (await inboxRow(e, made.inbox.id)).credentialsVersion;
    t.same(await p.inbound.delete(at(e)), { ok: true });
    const row = await inboxRow(e, made.inbox.id);
    t.ok(row.deletedAt, 'the inbox is soft-deleted, not dropped');
    t.equal(row.passwordHash, null, 'it can no longer log in');
    t.equal(row.credentialsVersion, version + 1, 'its sessions are told');
    t.equal(await refsOf(raw), 0, 'its mail is purged and the body reference given back');
    t.match(await usage(), { activeInboxes: 0, billedCents: 63 }, 'its 19 billed days stay on the bill');
    const again = await inboundCapability(e, e.owner, { claimId: e.claimId });
    const back = await r.create({ id: e.owner.projectId, capId: again.capId, localpart: 'info' });
    t.not(back.inbox.id, made.inbox.id, 'the address can be created again under a new capability');

    // The same when the claim goes with its capabilities; a deleted inbox whose purge was cut short is finished.
    const other = await inboxEnv(t, { clock });
    const o = inboxes(other);
    const a = await o.create({ ...at(other), localpart: 'a' });
    const b = await o.create({ ...at(other), localpart: 'b' });
    const rawA = message({ subject: 'a' });
    const rawB = message({ subject: 'b' });
    await o.import({ ...at(other), inboxId: a.inbox.id, messages: [{ raw: rawA }] });
    await o.import({ ...at(other), inboxId: b.inbox.id, messages: [{ raw: rawB }] });
    const os = other.svc.running.storage;
    await os.db.query('UPDATE inboxes SET deleted_at = $2, password_hash = NULL WHERE id = $1', [
      b.inbox.id,
      new Date(),
    ]);
    t.equal(await finishInterruptedPurges({ ctx: other.svc.running.ctx, storage: os }), 1, 'the sweep empties b');
    const refs = (raw: string) =>
      os.mail.blobs.refs(createHash('sha256').update(Buffer.from(raw, 'base64')).digest('hex'));
    t.equal(await refs(rawB), 0);
    t.equal(await finishInterruptedPurges({ ctx: other.svc.running.ctx, storage: os }), 0, 'and finds nothing more');
    t.same(
      await other.owner.client.console.projects.domains.delete({ id: other.owner.projectId, domainId: other.claimId }),
      {
        ok: true,
      },
    );
    t.ok((await inboxRow(other, a.inbox.id)).deletedAt, 'the claim took its inbox with it, soft-deleted');
    t.equal(await refs(rawA), 0, 'and purged');
    const [left] = await os.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM inboxes WHERE id = ANY($1::uuid[]) AND capability_id IS NULL',
      [[a.inbox.id, b.inbox.id]],
    );
    t.equal(left?.n, 2, 'both rows kept without their capability');
  },
);
