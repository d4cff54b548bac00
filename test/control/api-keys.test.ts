// docs/api.md §4.7 project API keys: platform-managed tk_ keys (scopes, allowedCidrs, rotation with a 24 h
// grace) and older local svc_ keys (renamable, not rotatable, same signing scheme); §5.3 scopes;
// §3 and §8 (rotation grace); docs/decisions.md #1.
import t from 'tap';
import net from 'node:net';
import { createClient, type Client, type Scope } from '@svc-mail/sdk';
import { DEFAULT_SCOPES, ROTATION_GRACE_MS, mintProjectKey } from '../../core/projects.js';
import { startTestService, uniqueEmail } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);

const MINUTE = 60_000;
const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const KEY_FIELDS = [
  'allowedCidrs',
  'allowed_cidrs',
  'createdAt',
  'expiresAt',
  'id',
  'keyId',
  'label',
  'managed',
  'rotatedFrom',
  'scopes',
];

const keyClient = (k: { keyId: string; secret: string }) => svc.client({ keyId: k.keyId, secret: k.secret });

interface Project {
  id: string;
  organizationId: string;
  owner: Client;
  admin: Client;
  adminKeyId: string;
}

/** A fresh organization with one project; `admin` is its first (project:admin) key. */
async function newProject(tag = 'keys'): Promise<Project> {
  const u = await svc.signup(uniqueEmail(tag));
  const org = await u.client.console.organizations.create({ name: `${tag} org` });
  const p = await u.client.console.projects.create({ name: `${tag} project`, organizationId: org.organization.id });
  return {
    id: p.project.id,
    organizationId: org.organization.id,
    owner: u.client,
    admin: keyClient(p.apiKey),
    adminKeyId: p.apiKey.keyId,
  };
}

async function localKey(projectId: string, scopes: Scope[], extra: { allowedCidrs?: string[] } = {}) {
  const { db, sealer } = svc.running.storage;
  return mintProjectKey(db, sealer, {
    projectId,
    label: 'legacy',
    scopes,
    managed: 'local',
    now: new Date(svc.clock.now()),
    ...extra,
  });
}

const liveKeyIds = async (p: Project) =>
  (await p.owner.console.projects.apiKeys.list({ id: p.id })).apiKeys.map((k) => k.keyId).sort();

const p = await newProject('main');

t.test('create with label, scopes and allowedCidrs', async (t) => {
  const before = svc.clock.now();
  const k = await p.admin.console.projects.apiKeys.create({
    id: p.id,
    label: 'worker',
    scopes: ['messages:send', 'suppressions:read'],
    allowedCidrs: ['127.0.0.1/32', '10.0.0.0/8', '2001:db8::/32'],
  });
  t.strictSame(Object.keys(k).sort(), [...KEY_FIELDS, 'secret', 'warning'].sort());
  t.match(k.id, UUID_RE);
  t.match(k.keyId, /^tk_[A-Za-z0-9_-]+$/);
  t.not(k.keyId, p.adminKeyId);
  t.type(k.secret, 'string');
  t.ok(k.secret.length >= 32, 'the secret has real entropy');
  t.equal(k.label, 'worker');
  t.strictSame(k.scopes, ['messages:send', 'suppressions:read']);
  t.equal(k.managed, 'platform');
  t.strictSame(k.allowedCidrs, ['127.0.0.1/32', '10.0.0.0/8', '2001:db8::/32']);
  t.strictSame(k.allowed_cidrs, k.allowedCidrs, 'allowed_cidrs mirrors allowedCidrs');
  t.equal(k.rotatedFrom, null);
  t.equal(k.expiresAt, null);
  t.match(k.createdAt, ISO_RE);
  t.ok(Date.parse(k.createdAt) >= before - 1, 'createdAt is the service clock');
  t.ok(k.warning.length > 0);
  t.strictSame(await keyClient(k).v1.services.whoami(), {
    principal: 'project_api_key',
    projectId: p.id,
    organizationId: p.organizationId,
    scopes: ['messages:send', 'suppressions:read'],
  });

  // The owner's account token mints too; defaults when fields are omitted.
  const d = await p.owner.console.projects.apiKeys.create({ id: p.id });
  t.strictSame(d.scopes, DEFAULT_SCOPES, 'default scopes');
  t.strictSame(
    d.scopes,
    ['messages:send', 'messages:read', 'suppressions:read', 'suppressions:write'],
    'everything but project:admin',
  );
  t.strictSame(d.allowedCidrs, [], 'no CIDR restriction');
  t.equal(d.label, null);
  t.equal(d.managed, 'platform');
  t.match(await keyClient(d).v1.services.whoami(), { scopes: DEFAULT_SCOPES });
});

t.test('invalid scopes and CIDRs are 400', async (t) => {
  const before = await liveKeyIds(p);
  const bad: [string, Record<string, unknown>][] = [
    ['unknown scope', { scopes: ['messages:delete'] }],
    ['scope with a typo', { scopes: ['messages:send', 'Project:Admin'] }],
    ['scopes not an array', { scopes: 'messages:send' }],
    ['CIDR bits over 32', { allowedCidrs: ['10.0.0.0/33'] }],
    ['IPv6 bits over 128', { allowedCidrs: ['::1/129'] }],
    ['not an address', { allowedCidrs: ['not-a-cidr'] }],
    ['host name', { allowedCidrs: ['localhost/32'] }],
    ['two slashes', { allowedCidrs: ['10.0.0.0/8/8'] }],
    ['one good one bad', { allowedCidrs: ['127.0.0.1/32', '300.1.1.1/32'] }],
  ];
  for (const [what, body] of bad) {
    const e = await errorOf(p.admin.console.projects.apiKeys.create({ id: p.id, ...body } as never));
    t.match(e, { status: 400, code: 'invalid_request' }, what);
  }
  t.strictSame(await liveKeyIds(p), before, 'no key was minted');
});

t.test('list: live keys without secrets', async (t) => {
  const q = await newProject('list');
  const a = await q.admin.console.projects.apiKeys.create({ id: q.id, label: 'a', allowedCidrs: ['10.1.0.0/16'] });
  const b = await q.admin.console.projects.apiKeys.create({ id: q.id, label: 'b', scopes: ['messages:read'] });
  const res = await q.admin.console.projects.apiKeys.list({ id: q.id });
  t.strictSame(Object.keys(res), ['apiKeys']);
  t.strictSame(res.apiKeys.map((k) => k.keyId).sort(), [q.adminKeyId, a.keyId, b.keyId].sort());
  for (const row of res.apiKeys) {
    t.strictSame(Object.keys(row).sort(), KEY_FIELDS, `fields of ${row.keyId}`);
    t.equal(row.managed, 'platform');
  }
  const raw = JSON.stringify(res);
  t.notOk(raw.includes(a.secret) || raw.includes(b.secret), 'no secret value in the list');
  const rowA = res.apiKeys.find((k) => k.keyId === a.keyId);
  t.strictSame(rowA?.allowed_cidrs, ['10.1.0.0/16'], 'list rows carry allowed_cidrs');
  t.equal(rowA?.label, 'a');
  t.strictSame(res.apiKeys.find((k) => k.keyId === b.keyId)?.scopes, ['messages:read']);
});

t.test('rename: 400 for tk_ keys; a local svc_ key is renamed and signs like any key', async (t) => {
  const q = await newProject('rename');
  const tk = await q.admin.console.projects.apiKeys.create({ id: q.id, label: 'fixed' });
  const e = await errorOf(q.admin.console.projects.apiKeys.update({ id: q.id, keyId: tk.keyId, label: 'changed' }));
  t.match(e, { status: 400, code: 'invalid_request' }, 'a tk_ key cannot be renamed');
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.update({ id: q.id, keyId: tk.id, label: 'changed' })),
    { status: 400 },
    'not by database id either',
  );
  const after = (await q.admin.console.projects.apiKeys.list({ id: q.id })).apiKeys.find((k) => k.keyId === tk.keyId);
  t.equal(after?.label, 'fixed', 'the label is unchanged');

  const local = await localKey(q.id, ['project:admin', 'messages:send']);
  t.match(local.keyId, /^svc_[A-Za-z0-9_-]+$/);
  t.equal(local.managed, 'local');
  const lc = keyClient(local);
  t.strictSame(
    await lc.v1.services.whoami(),
    {
      principal: 'project_api_key',
      projectId: q.id,
      organizationId: q.organizationId,
      scopes: ['project:admin', 'messages:send'],
    },
    'a local key signs requests with the same scheme',
  );

  const renamed = await q.admin.console.projects.apiKeys.update({
    id: q.id,
    keyId: local.keyId,
    label: 'renamed legacy',
  });
  t.strictSame(Object.keys(renamed), ['key']);
  t.strictSame(Object.keys(renamed.key).sort(), KEY_FIELDS);
  t.match(renamed.key, {
    id: local.id,
    keyId: local.keyId,
    label: 'renamed legacy',
    managed: 'local',
    scopes: ['project:admin', 'messages:send'],
  });
  t.notOk(JSON.stringify(renamed).includes(local.secret), 'no secret in the answer');
  const row = (await q.owner.console.projects.apiKeys.list({ id: q.id })).apiKeys.find((k) => k.keyId === local.keyId);
  t.equal(row?.label, 'renamed legacy', 'the list shows the new label');
  t.equal(row?.managed, 'local');
  t.match(
    await lc.console.projects.apiKeys.update({ id: q.id, keyId: local.id, label: 'by itself' }),
    { key: { label: 'by itself' } },
    'by database id, by the key itself',
  );
  t.match(
    await lc.console.projects.get({ id: q.id }),
    { project: { id: q.id } },
    'the renamed local key still works on console routes',
  );

  // A local key is not bound by allowedCidrs (they apply to platform keys only).
  const fenced = await localKey(q.id, ['messages:send'], { allowedCidrs: ['10.0.0.0/8'] });
  t.match(
    await keyClient(fenced).v1.services.whoami(),
    { projectId: q.id },
    'allowedCidrs do not restrict a local key',
  );

  // Rotate a local key: 400.
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.rotate({ id: q.id, keyId: local.keyId })),
    { status: 400, code: 'invalid_request' },
    'a local key does not rotate',
  );
  t.match(await lc.v1.services.whoami(), { projectId: q.id }, 'and keeps working');
  t.strictSame((await liveKeyIds(q)).length, 4, 'no successor was minted');

  // Unknown key.
  t.match(await errorOf(q.admin.console.projects.apiKeys.update({ id: q.id, keyId: 'svc_nope', label: 'x' })), {
    status: 404,
  });
});

t.test('revoke by tk_ key id and by database id; other projects are out of reach', async (t) => {
  const q = await newProject('revoke');
  const byKeyId = await q.admin.console.projects.apiKeys.create({ id: q.id, label: 'by keyId' });
  const byDbId = await q.admin.console.projects.apiKeys.create({ id: q.id, label: 'by id' });
  const local = await localKey(q.id, ['messages:send']);
  for (const k of [byKeyId, byDbId, local])
    t.match(await keyClient(k).v1.services.whoami(), { projectId: q.id }, `${k.keyId} works before`);

  t.strictSame(await q.admin.console.projects.apiKeys.delete({ id: q.id, keyId: byKeyId.keyId }), { ok: true });
  t.match(
    await errorOf(keyClient(byKeyId).v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'revoked by tk_ id',
  );
  t.strictSame(await q.admin.console.projects.apiKeys.delete({ id: q.id, keyId: byDbId.id }), { ok: true });
  t.match(
    await errorOf(keyClient(byDbId).v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'revoked by database id',
  );
  t.strictSame(await q.owner.console.projects.apiKeys.delete({ id: q.id, keyId: local.id }), { ok: true });
  t.match(
    await errorOf(keyClient(local).v1.services.whoami()),
    { status: 401 },
    'a local key revoked by its database id',
  );
  t.strictSame(await liveKeyIds(q), [q.adminKeyId], 'revoked keys leave the list');
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.delete({ id: q.id, keyId: byKeyId.keyId })),
    { status: 404 },
    'revoking twice is 404',
  );

  // A key of another project, named through this one.
  const other = await newProject('revoke-other');
  const theirs = await other.admin.console.projects.apiKeys.create({ id: other.id, label: 'theirs' });
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.delete({ id: q.id, keyId: theirs.keyId })),
    { status: 404, code: 'not_found' },
    'by tk_ id',
  );
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.delete({ id: q.id, keyId: theirs.id })),
    { status: 404 },
    'by database id',
  );
  t.match(
    await errorOf(q.owner.console.projects.apiKeys.delete({ id: q.id, keyId: other.adminKeyId })),
    { status: 404 },
    'through the owner too',
  );
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.rotate({ id: q.id, keyId: theirs.keyId })),
    { status: 404 },
    'nor rotate it',
  );
  t.match(await keyClient(theirs).v1.services.whoami(), { projectId: other.id }, "the other project's key still works");
  t.match(await other.admin.v1.services.whoami(), { projectId: other.id });
});

t.test('scopes are enforced', async (t) => {
  const q = await newProject('scopes');
  const send = await q.admin.console.projects.apiKeys.create({ id: q.id, scopes: ['messages:send'] });
  const e = await errorOf(keyClient(send).console.projects.get({ id: q.id }));
  t.match(e, { status: 403, code: 'forbidden' }, 'messages:send alone cannot read the project (needs project:admin)');
  t.match(
    await errorOf(keyClient(send).console.projects.apiKeys.create({ id: q.id, scopes: ['project:admin'] })),
    { status: 403 },
    'nor mint itself an admin key',
  );
  t.match(await q.admin.console.projects.get({ id: q.id }), { project: { id: q.id } }, 'project:admin reads it');
});

t.test('allowedCidrs over IPv4 loopback', async (t) => {
  const q = await newProject('cidr4');
  const cases: [string[], boolean][] = [
    [['127.0.0.1/32'], true],
    [['127.0.0.0/8'], true],
    [['127.0.0.1'], true],
    [['10.0.0.0/8', '127.0.0.1/32'], true],
    [['10.0.0.0/8'], false],
    [['127.0.0.2/32'], false],
    [['::1/128'], false],
  ];
  for (const [cidrs, ok] of cases) {
    const k = await q.admin.console.projects.apiKeys.create({ id: q.id, allowedCidrs: cidrs });
    const c = keyClient(k);
    if (ok) t.match(await c.v1.services.whoami(), { projectId: q.id }, `${cidrs} admits 127.0.0.1`);
    else
      t.match(
        await errorOf(c.v1.services.whoami()),
        { status: 401, code: 'unauthorized' },
        `${cidrs} refuses 127.0.0.1`,
      );
  }
});

async function ipv6Loopback(): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(0, '::1', () => s.close(() => resolve(true)));
  });
}

const v6 = await ipv6Loopback();
t.test(
  'allowedCidrs over IPv6 loopback',
  { skip: v6 ? false : 'IPv6 loopback (::1) is unavailable on this machine' },
  async (t) => {
    const svc6 = await startTestService(t, { env: { SVC_BIND_HOST: '::1' } });
    const port = svc6.running.ports.http;
    t.equal(svc6.running.publicUrl, `http://[::1]:${port}`, 'the service is bound to ::1');
    const client6 = (credential?: { keyId: string; secret: string }) =>
      createClient({ baseUrl: `http://[::1]:${port}`, credential, now: svc6.clock.now });

    const signup = await client6().auth.signup({ email: uniqueEmail('v6'), password: 'correct horse battery' });
    const owner = client6({ keyId: signup.accountToken.tokenId, secret: signup.accountToken.secret });
    const org = await owner.console.organizations.create({ name: 'v6 org' });
    const proj = await owner.console.projects.create({ name: 'v6 project', organizationId: org.organization.id });
    const admin = client6(proj.apiKey);
    t.match(await admin.v1.services.whoami(), { projectId: proj.project.id }, 'an unrestricted key works over IPv6');

    const cases: [string[], boolean][] = [
      [['::1/128'], true],
      [['::1'], true],
      [['2001:db8::/32', '::1/128'], true],
      [['2001:db8::/32'], false],
      [['127.0.0.0/8'], false],
      [['127.0.0.1/32'], false],
      [['::2/128'], false],
    ];
    for (const [cidrs, ok] of cases) {
      const k = await admin.console.projects.apiKeys.create({ id: proj.project.id, allowedCidrs: cidrs });
      const c = client6(k);
      if (ok) t.match(await c.v1.services.whoami(), { projectId: proj.project.id }, `${cidrs} admits ::1`);
      else
        t.match(await errorOf(c.v1.services.whoami()), { status: 401, code: 'unauthorized' }, `${cidrs} refuses ::1`);
    }
  },
);

// Moves the service clock by a day; last in this file.
t.test('rotate: successor minted, old key works 24 h more, then dies', async (t) => {
  const q = await newProject('rotate');
  const old = await q.admin.console.projects.apiKeys.create({
    id: q.id,
    label: 'rotating',
    scopes: ['messages:send', 'project:admin'],
    allowedCidrs: ['127.0.0.0/8'],
  });
  const oldClient = keyClient(old);
  t.match(await oldClient.v1.services.whoami(), { projectId: q.id });

  const next = await q.admin.console.projects.apiKeys.rotate({ id: q.id, keyId: old.keyId });
  t.strictSame(Object.keys(next).sort(), [...KEY_FIELDS, 'secret', 'warning'].sort());
  t.match(next.keyId, /^tk_/);
  t.not(next.keyId, old.keyId, 'a new key id');
  t.not(next.secret, old.secret, 'a new secret');
  t.equal(next.rotatedFrom, old.keyId);
  t.equal(next.managed, 'platform');
  t.equal(next.label, 'rotating', 'the label carries over');
  t.strictSame(next.scopes, old.scopes, 'the scopes carry over');
  t.strictSame(next.allowedCidrs, ['127.0.0.0/8'], 'the CIDRs carry over');
  const newClient = keyClient(next);
  t.match(
    await newClient.v1.services.whoami(),
    { projectId: q.id, scopes: ['messages:send', 'project:admin'] },
    'the successor works',
  );

  const oldRow = (await q.owner.console.projects.apiKeys.list({ id: q.id })).apiKeys.find((k) => k.keyId === old.keyId);
  t.ok(oldRow, 'the old key is still listed during the grace window');
  t.equal(
    Date.parse(oldRow?.expiresAt ?? '') - Date.parse(next.createdAt),
    ROTATION_GRACE_MS,
    'it expires 24 h after the rotation',
  );
  t.equal(ROTATION_GRACE_MS, 24 * 60 * MINUTE);

  t.match(
    await errorOf(q.admin.console.projects.apiKeys.rotate({ id: q.id, keyId: 'tk_nope' })),
    { status: 404 },
    'an unknown key does not rotate',
  );

  svc.clock.advance(ROTATION_GRACE_MS - MINUTE);
  t.match(await oldClient.v1.services.whoami(), { projectId: q.id }, 'the old key works at 24 h minus a minute');
  t.match(await oldClient.console.projects.get({ id: q.id }), { project: { id: q.id } }, 'on console routes too');
  t.match(await newClient.v1.services.whoami(), { projectId: q.id });

  svc.clock.advance(2 * MINUTE);
  t.match(
    await errorOf(oldClient.v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'the old key is refused past 24 h',
  );
  t.match(await newClient.v1.services.whoami(), { projectId: q.id }, 'the successor keeps working');
  t.strictSame(await liveKeyIds(q), [q.adminKeyId, next.keyId].sort(), 'the expired key leaves the list');
  t.match(
    await errorOf(q.admin.console.projects.apiKeys.rotate({ id: q.id, keyId: old.keyId })),
    { status: 404 },
    'an expired key cannot be rotated again',
  );
});
