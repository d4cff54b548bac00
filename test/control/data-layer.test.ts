// docs/api.md §4.1 data layer /v1/<table>/<verb> through the SDK against the live service: the routes the
// registry generates, row scoping per credential (§4.1 rule 1, §5.3), the writable tables (rule 3),
// the users self update and self delete (rules 4 and 5), limit (docs/decisions.md #6), roles (§5.5)
// and that no response ever carries a secret column.
import t from 'tap';
import { routeTable, createClient, SvcError, type Client, type Credential } from '@svc-mail/sdk';
import { mintProjectKey } from '../../core/projects.js';
import { startTestService, uniqueEmail } from '../helpers/service.js';

const svc = await startTestService(t);
const db = svc.running.storage.db;

// Every answer of this file, to scan for secret columns at the end. Each request also moves the
// service clock a second on, so no credential's rate-limit bucket (docs/decisions.md #7) runs dry.
const answers: { method: string; path: string; status: number; text: string }[] = [];
const recording = (async (url: string | URL | Request, init?: RequestInit) => {
  svc.clock.advance(1000);
  const res = await fetch(url, init);
  const text = await res.text();
  answers.push({ method: init?.method ?? 'GET', path: new URL(String(url)).pathname, status: res.status, text });
  return new Response(text, { status: res.status, headers: res.headers });
}) as typeof fetch;
const clientOf = (credential?: Credential): Client =>
  createClient({ baseUrl: svc.url, credential, now: svc.clock.now, fetch: recording });
const admin = clientOf({ adminKey: 'test-platform-admin-key-0123456789' });
const lastStatus = () => answers[answers.length - 1]?.status;

const FORBIDDEN_COLUMNS = ['secret_sealed', 'password_hash', 'token_hash', 'code_hash', 'body_hash'];
const leaks = (text: string) => FORBIDDEN_COLUMNS.filter((c) => text.includes(c));

async function errorOf(p: Promise<unknown>): Promise<{ status: number; code: string; details?: unknown }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SvcError) return { status: err.status, code: err.code, details: err.details };
    throw err;
  }
  throw new Error('expected the call to fail, it succeeded');
}

async function user(email = uniqueEmail('dl')) {
  const u = await svc.signup(email);
  return { ...u, client: clientOf({ keyId: u.tokenId, secret: u.secret }) };
}

/** A customer with an organization, a project, its first key (project:admin) and the organization token. */
async function tenant(name: string) {
  const owner = await user();
  const { organization: org, organizationToken } = await owner.client.console.organizations.create({
    name: `${name} Org`,
  });
  const { project, apiKey } = await owner.client.console.projects.create({
    name: `${name} Project`,
    organizationId: org.id,
  });
  return {
    owner,
    org,
    project,
    apiKey,
    organizationToken,
    keyClient: clientOf({ keyId: apiKey.keyId, secret: apiKey.secret }),
    orgClient: clientOf({ keyId: organizationToken.tokenId, secret: organizationToken.secret }),
  };
}

async function joinAs(owner: Client, orgId: string, role: 'owner' | 'admin' | 'member' | 'auditor' | 'billing') {
  const { code } = await owner.console.organizations.joinCodes.create({ id: orgId, role });
  const u = await user();
  await u.client.console.organizations.join({ code });
  return u;
}

const auditOf = (action: string, targetId: string) =>
  db.query<{
    organization_id: string | null;
    project_id: string | null;
    target_id: string | null;
    actor_id: string | null;
  }>('SELECT organization_id, project_id, target_id, actor_id FROM audit_log WHERE action = $1 AND target_id = $2', [
    action,
    targetId,
  ]);

t.test('the route table holds exactly the registered tables and their enabled verbs', async (t) => {
  const found: Record<string, string[]> = {};
  for (const [name, r] of Object.entries(routeTable)) {
    const m = /^v1\.(\w+)\.(\w+)$/.exec(name);
    // /v1/messages/get and /events are the message reads of docs/api.md §4.11 (sdk/src/api/messages.ts), not
    // generated routes: the messages table of the registry has list only, its get is that route. cancel and
    // reschedule are §4.11's operations on a scheduled message, not data-layer verbs either.
    const messageRoutes = ['v1.messages.get', 'v1.messages.events', 'v1.messages.cancel', 'v1.messages.reschedule'];
    if (!m || m[1] === 'services' || messageRoutes.includes(name)) continue;
    const [, table = '', verb = ''] = m;
    (found[table] ??= []).push(verb);
    t.equal(r.path, `/v1/${table}/${verb}`, `${name} is at /v1/${table}/${verb}`);
    t.equal(r.method, verb === 'list' || verb === 'get' ? 'GET' : 'POST', `${name} method`);
  }
  t.strictSame(found, {
    projects: ['list', 'get', 'update', 'delete'],
    api_keys: ['list', 'get', 'create', 'update', 'delete'],
    users: ['list', 'get', 'update', 'delete'],
    account_tokens: ['list', 'get', 'create', 'delete'],
    organizations: ['list', 'get'],
    organization_members: ['list', 'get'],
    organization_tokens: ['list', 'get'],
    audit_log: ['list', 'get'],
    rate_limits: ['list', 'get'],
    sender_domains: ['list', 'get'],
    messages: ['list'],
    message_events: ['list', 'get'],
    idempotency_keys: ['list', 'get'],
    suppressions: ['list', 'get', 'create', 'delete'],
    webhook_endpoints: ['list', 'get', 'create', 'update', 'upsert', 'delete'],
    webhook_deliveries: ['list', 'get'],
  });
  t.equal(
    routeTable['v1.messages.get'].path,
    '/v1/messages/get',
    'the get of messages is the message read of docs/api.md §4.11',
  );
});

t.test('sender_domains lists the sending capabilities of visible projects, without key material', async (t) => {
  const owner = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Senders' });
  const { project } = await owner.client.console.projects.create({ name: 'sends', organizationId: organization.id });
  const claim = await owner.client.console.projects.domains.create({
    id: project.id,
    domain: `senders-${project.id.slice(0, 8)}.test`,
  });
  const withOut = await owner.client.console.projects.domains.outbound.create({
    id: project.id,
    domainId: claim.id,
    ed25519: true,
  });
  const cap = withOut.outbound[0]!;
  const rows = (await owner.client.v1.sender_domains.list()).rows;
  t.same(
    rows.map((r) => r.id),
    [cap.id],
    'the owner sees its capability',
  );
  t.match(rows[0], { project_id: project.id, domain: claim.domain, status: 'pending', dkim_selector: cap.selector });
  const text = JSON.stringify(await owner.client.v1.sender_domains.get({ id: cap.id }));
  t.notMatch(text, /PRIVATE KEY|sealed|dkim_private|v1\./, 'no private key, sealed or not');
  const stranger = await svc.signup();
  t.same((await stranger.client.v1.sender_domains.list()).rows, [], 'another user sees none');
  t.equal((await errorOf(stranger.client.v1.sender_domains.get({ id: cap.id }))).status, 404, 'and cannot get it');
});

t.test('404 not_found for an unknown table, an unknown verb and a write that is not enabled', async (t) => {
  const u = await user();
  t.same((await u.client.v1.projects.list()).rows, [], 'the credential works on an enabled route');
  const calls: [string, string][] = [
    ['GET', '/v1/no_such_table/list'],
    ['GET', '/v1/no_such_table/get?id=x'],
    ['POST', '/v1/no_such_table/create'],
    ['GET', '/v1/projects/frobnicate'],
    ['POST', '/v1/projects/frobnicate'],
    ['GET', '/v1/projects/update'],
    ['POST', '/v1/projects/create'],
    ['POST', '/v1/projects/upsert'],
    ['POST', '/v1/api_keys/upsert'],
    ['POST', '/v1/organizations/create'],
    ['POST', '/v1/organizations/update'],
    ['POST', '/v1/organization_members/delete'],
    ['POST', '/v1/organization_tokens/create'],
    ['POST', '/v1/audit_log/create'],
    ['POST', '/v1/audit_log/delete'],
    ['POST', '/v1/rate_limits/update'],
    ['POST', '/v1/rate_limits/delete'],
    ['POST', '/v1/users/create'],
    ['POST', '/v1/account_tokens/update'],
    // docs/api.md §4.1 rule 6 and §6 rule 1: messages are written by sendEmail only; the engine tables never.
    ['POST', '/v1/messages/create'],
    ['POST', '/v1/messages/update'],
    ['POST', '/v1/messages/upsert'],
    ['POST', '/v1/messages/delete'],
    ['POST', '/v1/message_events/create'],
    ['POST', '/v1/message_events/update'],
    ['POST', '/v1/message_events/delete'],
    ['POST', '/v1/idempotency_keys/create'],
    ['POST', '/v1/idempotency_keys/upsert'],
    ['POST', '/v1/idempotency_keys/delete'],
    // Suppressions: create and delete only (rule 3).
    ['POST', '/v1/suppressions/update'],
    ['POST', '/v1/suppressions/upsert'],
    ['GET', '/v1/suppressions/create'],
    ['GET', '/v1/messages/frobnicate'],
  ];
  for (const [method, target] of calls) {
    const body = method === 'POST' ? { id: u.userId, name: 'x' } : undefined;
    t.match(
      await errorOf(u.client.request(method, target, body)),
      { status: 404, code: 'not_found' },
      `${method} ${target} as a user`,
    );
    t.match(
      await errorOf(admin.request(method, target, body)),
      { status: 404, code: 'not_found' },
      `${method} ${target} as the platform key`,
    );
  }
});

t.test('projects: list, get, update, delete (soft, like the console)', async (t) => {
  const a = await tenant('Projects');
  const { rows } = await a.owner.client.v1.projects.list();
  t.equal(rows.length, 1, 'the owner sees its one project');
  t.strictSame(Object.keys(rows[0] ?? {}).sort(), [
    'created_at',
    'id',
    'name',
    'organization_id',
    'plan',
    'status',
    'updated_at',
  ]);
  t.match(rows[0], {
    id: a.project.id,
    organization_id: a.org.id,
    name: 'Projects Project',
    status: 'active',
    plan: 'free',
  });
  t.strictSame((await a.owner.client.v1.projects.get({ id: a.project.id })).row, rows[0], 'get returns the listed row');

  const { row } = await a.owner.client.v1.projects.update({ id: a.project.id, name: 'Renamed' });
  t.equal(row.name, 'Renamed');
  t.equal(
    (await a.owner.client.console.projects.get({ id: a.project.id })).project.name,
    'Renamed',
    'the console sees the new name',
  );
  t.match(
    await auditOf('v1.projects.update', a.project.id),
    [{ organization_id: a.org.id, project_id: a.project.id, actor_id: a.owner.userId }],
    'one audit row names the organization, the project and the actor',
  );
  t.match(await errorOf(a.owner.client.v1.projects.update({ id: a.project.id, name: '' })), {
    status: 400,
    code: 'invalid_request',
  });

  t.strictSame(await a.owner.client.v1.projects.delete({ id: a.project.id }), { ok: true });
  t.match(
    await errorOf(a.owner.client.v1.projects.get({ id: a.project.id })),
    { status: 404, code: 'not_found' },
    'gone from get',
  );
  t.same((await a.owner.client.v1.projects.list()).rows, [], 'gone from list');
  t.match(
    await errorOf(a.owner.client.v1.projects.update({ id: a.project.id, name: 'again' })),
    { status: 404 },
    'update after delete',
  );
  t.match(
    await errorOf(a.owner.client.v1.projects.delete({ id: a.project.id })),
    { status: 404 },
    'delete after delete',
  );
  t.match(await errorOf(a.keyClient.v1.services.whoami()), { status: 401 }, "the deleted project's key stops working");
  const kept = await db.query<{ deleted_at: Date | null }>('SELECT deleted_at FROM projects WHERE id = $1', [
    a.project.id,
  ]);
  t.ok(kept[0]?.deleted_at, 'the row stays, soft-deleted');
});

t.test('api_keys: create returns the secret once; update renames local keys only; delete revokes', async (t) => {
  const a = await tenant('Keys');
  const created = await a.owner.client.v1.api_keys.create({
    project_id: a.project.id,
    label: 'sender',
    scopes: ['messages:send'],
    allowed_cidrs: ['127.0.0.1/32'],
  });
  t.equal(lastStatus(), 201, 'create answers 201');
  const key = created.row;
  t.strictSame(Object.keys(key).sort(), [
    'allowed_cidrs',
    'created_at',
    'expires_at',
    'id',
    'key_id',
    'label',
    'managed',
    'project_id',
    'revoked_at',
    'rotated_from',
    'scopes',
    'secret',
  ]);
  t.match(key, {
    project_id: a.project.id,
    label: 'sender',
    scopes: ['messages:send'],
    managed: 'platform',
    allowed_cidrs: ['127.0.0.1/32'],
    revoked_at: null,
  });
  t.match(key.key_id, /^tk_/);
  t.ok(key.secret.length >= 32, 'the secret is returned');
  const keyClient = clientOf({ keyId: key.key_id, secret: key.secret });
  t.match(
    await keyClient.v1.services.whoami(),
    { principal: 'project_api_key', projectId: a.project.id, scopes: ['messages:send'] },
    'the key works',
  );
  t.match(await auditOf('v1.api_keys.create', key.key_id), [{ organization_id: a.org.id, project_id: a.project.id }]);

  const got = (await a.owner.client.v1.api_keys.get({ id: key.id })).row;
  t.notOk('secret' in got, 'get never shows the secret again');
  const { rows } = await a.owner.client.v1.api_keys.list();
  t.same(rows.map((r) => r.key_id).sort(), [a.apiKey.keyId, key.key_id].sort(), "list: the project's two keys");
  t.ok(
    rows.every((r) => !('secret' in r)),
    'list never shows secrets',
  );

  // docs/api.md §4.7: the label of a platform-managed key is not renamed; a local key's is.
  t.match(await errorOf(a.owner.client.v1.api_keys.update({ id: key.id, label: 'x' })), {
    status: 400,
    code: 'invalid_request',
  });
  const local = await mintProjectKey(db, svc.running.storage.sealer, {
    projectId: a.project.id,
    label: 'old',
    scopes: ['messages:send'],
    managed: 'local',
    now: new Date(svc.clock.now()),
  });
  const renamed = await a.owner.client.v1.api_keys.update({ id: local.id, label: 'new' });
  t.match(renamed.row, { id: local.id, key_id: local.keyId, label: 'new', managed: 'local' });
  t.equal((await a.owner.client.v1.api_keys.get({ id: local.id })).row.label, 'new');
  t.match(await auditOf('v1.api_keys.update', local.keyId), [{ organization_id: a.org.id, project_id: a.project.id }]);

  t.strictSame(await a.owner.client.v1.api_keys.delete({ id: key.id }), { ok: true });
  t.match(await errorOf(keyClient.v1.services.whoami()), { status: 401 }, 'the revoked key stops working');
  t.not(
    (await a.owner.client.v1.api_keys.get({ id: key.id })).row.revoked_at,
    null,
    'the row stays with revoked_at set',
  );
  t.match(
    await errorOf(a.owner.client.v1.api_keys.delete({ id: key.id })),
    { status: 404 },
    'a revoked key is not revoked again',
  );
  t.match(await errorOf(a.owner.client.v1.api_keys.update({ id: key.id, label: 'x' })), { status: 404 }, 'nor renamed');
  t.match(await auditOf('v1.api_keys.delete', key.key_id), [{ organization_id: a.org.id, project_id: a.project.id }]);

  // A project key: with project:admin it manages its project's keys; without, it gets 403.
  const byKey = await a.keyClient.v1.api_keys.create({ project_id: a.project.id });
  t.match(
    byKey.row,
    { project_id: a.project.id, scopes: ['messages:send', 'messages:read', 'suppressions:read', 'suppressions:write'] },
    'default scopes',
  );
  t.ok((await a.keyClient.v1.api_keys.list()).rows.every((r) => r.project_id === a.project.id));
  const weak = await a.owner.client.v1.api_keys.create({ project_id: a.project.id, scopes: ['messages:send'] });
  const weakClient = clientOf({ keyId: weak.row.key_id, secret: weak.row.secret });
  t.match(
    await errorOf(weakClient.v1.api_keys.list()),
    { status: 403, code: 'forbidden' },
    'reading keys needs project:admin',
  );
  t.match(await errorOf(weakClient.v1.api_keys.create({ project_id: a.project.id })), {
    status: 403,
    code: 'forbidden',
  });
  t.match(await errorOf(weakClient.v1.api_keys.delete({ id: byKey.row.id })), { status: 403, code: 'forbidden' });
  t.same(
    (await weakClient.v1.projects.list()).rows.map((r) => r.id),
    [a.project.id],
    'its own project row needs no scope',
  );
  t.match(
    await errorOf(a.owner.client.v1.api_keys.create({ project_id: a.project.id, scopes: ['nope' as 'messages:send'] })),
    { status: 400 },
  );
});

t.test('account_tokens: own only; create returns the secret once; delete revokes', async (t) => {
  const me = await user();
  const other = await user();
  const { row } = await me.client.v1.account_tokens.create({ label: 'ci' });
  t.equal(lastStatus(), 201);
  t.strictSame(Object.keys(row).sort(), ['created_at', 'id', 'label', 'revoked_at', 'secret', 'token_id', 'user_id']);
  t.match(row, { user_id: me.userId, label: 'ci', revoked_at: null });
  t.match(row.token_id, /^svca_/);
  const tokenClient = clientOf({ keyId: row.token_id, secret: row.secret });
  t.match(await tokenClient.v1.services.whoami(), { userId: me.userId }, 'the token works');

  const { rows } = await me.client.v1.account_tokens.list();
  t.same(rows.map((r) => r.token_id).sort(), [me.tokenId, row.token_id].sort(), 'own tokens, both');
  t.ok(rows.every((r) => r.user_id === me.userId && !('secret' in r)));
  t.match(
    await errorOf(other.client.v1.account_tokens.get({ id: row.id })),
    { status: 404 },
    'another user cannot get it',
  );
  t.match(await errorOf(other.client.v1.account_tokens.delete({ id: row.id })), { status: 404 }, 'nor delete it');
  t.notOk(
    (await other.client.v1.account_tokens.list()).rows.some((r) => r.user_id === me.userId),
    'nor list it',
  );

  t.strictSame(await me.client.v1.account_tokens.delete({ id: row.id }), { ok: true });
  t.match(await errorOf(tokenClient.v1.services.whoami()), { status: 401 }, 'the revoked token stops working');
  t.not(
    (await me.client.v1.account_tokens.get({ id: row.id })).row.revoked_at,
    null,
    'the row stays with revoked_at set',
  );
  t.match(await errorOf(me.client.v1.account_tokens.delete({ id: row.id })), { status: 404 });
  t.match(await auditOf('v1.account_tokens.delete', row.id), [{ actor_id: me.userId }]);

  // Only an account token writes account tokens: the others are refused as credentials.
  const a = await tenant('Tokens');
  t.match(await errorOf(a.orgClient.v1.account_tokens.create({})), { status: 401 });
  t.match(await errorOf(a.keyClient.v1.account_tokens.create({})), { status: 401 });
  t.match(await errorOf(admin.v1.account_tokens.delete({ id: me.tokenId })), { status: 401 });
  t.same((await a.keyClient.v1.account_tokens.list()).rows, [], 'a project key sees no account tokens');
});

t.test('users: self only; an email change resets email_verified_at; 409 for a taken email', async (t) => {
  const me = await user();
  const other = await user();
  const { rows } = await me.client.v1.users.list();
  t.equal(rows.length, 1, 'a user sees only itself');
  t.strictSame(Object.keys(rows[0] ?? {}).sort(), [
    'created_at',
    'email',
    'email_verified_at',
    'id',
    'role',
    'updated_at',
  ]);
  t.match(rows[0], { id: me.userId, email: me.email, role: 'customer' });
  t.match(await errorOf(me.client.v1.users.get({ id: other.userId })), { status: 404 });
  t.match(await errorOf(me.client.v1.users.update({ id: other.userId, email: uniqueEmail() })), { status: 404 });
  t.match(await errorOf(me.client.v1.users.delete({ id: other.userId })), { status: 404 });
  t.match(await errorOf(me.client.v1.users.get({ id: 'not-a-uuid' })), { status: 404 });

  await db.query('UPDATE users SET email_verified_at = $2 WHERE id = $1', [me.userId, new Date(svc.clock.now())]);
  t.not((await me.client.v1.users.get({ id: me.userId })).row.email_verified_at, null, 'verified before the change');
  const same = await me.client.v1.users.update({ id: me.userId, email: me.email });
  t.not(same.row.email_verified_at, null, 'the same address stays verified');

  const newEmail = uniqueEmail('moved');
  const { row } = await me.client.v1.users.update({ id: me.userId, email: newEmail });
  t.equal(row.email, newEmail);
  t.equal(row.email_verified_at, null, 'the change resets email_verified_at');
  t.match(
    await clientOf().auth.login({ email: newEmail, password: me.password }),
    { user: { id: me.userId } },
    'login with the new address',
  );
  t.match(await auditOf('v1.users.update', me.userId), [{ actor_id: me.userId, organization_id: null }]);

  t.match(
    await errorOf(me.client.v1.users.update({ id: me.userId, email: other.email.toUpperCase() })),
    { status: 409, code: 'conflict' },
    'taken',
  );
  t.match(await errorOf(me.client.v1.users.update({ id: me.userId, email: 'not an email' })), {
    status: 400,
    code: 'invalid_request',
  });
  t.equal((await me.client.v1.users.get({ id: me.userId })).row.email, newEmail, 'unchanged by the refused updates');

  // Staff see every user but still write only themselves.
  const staff = await user();
  await db.query(`UPDATE users SET role = 'staff' WHERE id = $1`, [staff.userId]);
  t.match((await staff.client.v1.users.get({ id: other.userId })).row, { id: other.userId });
  t.match(await errorOf(staff.client.v1.users.update({ id: other.userId, email: uniqueEmail() })), { status: 404 });
  t.match(await errorOf(staff.client.v1.users.delete({ id: other.userId })), { status: 404 });
});

t.test('users self delete cascades to tokens, memberships and sole-member organizations', async (t) => {
  const a = await tenant('Doomed');
  const extra = await a.owner.client.v1.api_keys.create({ project_id: a.project.id });
  await a.owner.client.console.organizations.invitations.create({ id: a.org.id, email: uniqueEmail('inv') });
  await a.owner.client.console.organizations.joinCodes.create({ id: a.org.id });
  const second = await a.owner.client.v1.account_tokens.create({});

  t.strictSame(await a.owner.client.v1.users.delete({ id: a.owner.userId }), { ok: true });
  t.match(await errorOf(a.owner.client.v1.services.whoami()), { status: 401 }, "the user's token stops working");
  t.match(
    await errorOf(clientOf({ keyId: second.row.token_id, secret: second.row.secret }).v1.services.whoami()),
    { status: 401 },
    'every one of them',
  );
  t.match(await errorOf(a.keyClient.v1.services.whoami()), { status: 401 }, "the project's key is gone");
  t.match(await errorOf(clientOf({ keyId: extra.row.key_id, secret: extra.row.secret }).v1.services.whoami()), {
    status: 401,
  });
  t.match(await errorOf(a.orgClient.v1.services.whoami()), { status: 401 }, "the organization's token is gone");
  t.match(await errorOf(admin.v1.users.get({ id: a.owner.userId })), { status: 404 }, 'the user is gone');
  t.match(
    await errorOf(admin.v1.organizations.get({ id: a.org.id })),
    { status: 404 },
    'the sole-member organization is gone',
  );
  t.match(await errorOf(admin.v1.projects.get({ id: a.project.id })), { status: 404 }, 'its project is gone');
  const left = await db.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM organizations WHERE id = $1)
       + (SELECT count(*) FROM projects WHERE organization_id = $1)
       + (SELECT count(*) FROM organization_tokens WHERE organization_id = $1)
       + (SELECT count(*) FROM invitations WHERE organization_id = $1)
       + (SELECT count(*) FROM join_codes WHERE organization_id = $1)
       + (SELECT count(*) FROM api_keys WHERE project_id = $2)
       + (SELECT count(*) FROM account_tokens WHERE user_id = $3)
       + (SELECT count(*) FROM organization_members WHERE user_id = $3)
       + (SELECT count(*) FROM users WHERE id = $3) AS n`,
    [a.org.id, a.project.id, a.owner.userId],
  );
  t.equal(
    Number(left[0]?.n),
    0,
    'no row of the user, its organization, projects, keys, tokens, invitations or join codes is left (hard delete)',
  );
  t.match(await auditOf('v1.users.delete', a.owner.userId), [{ actor_id: a.owner.userId }], 'the deletion is audited');
});

t.test('users self delete: 409 for the only owner of an organization with other members', async (t) => {
  const b = await tenant('Shared');
  const member = await joinAs(b.owner.client, b.org.id, 'member');
  t.match(await errorOf(b.owner.client.v1.users.delete({ id: b.owner.userId })), {
    status: 409,
    code: 'conflict',
    details: { organizationId: b.org.id },
  });
  t.match(await b.owner.client.v1.services.whoami(), { userId: b.owner.userId }, 'nothing was deleted');
  t.equal((await admin.v1.organizations.get({ id: b.org.id })).row.id, b.org.id);

  // A plain member leaves: the organization stays with its owner.
  t.strictSame(await member.client.v1.users.delete({ id: member.userId }), { ok: true });
  t.same(
    (await b.owner.client.v1.organization_members.list()).rows.map((m) => m.user_id),
    [b.owner.userId],
    'the membership went with the member',
  );
  t.equal((await b.owner.client.v1.projects.get({ id: b.project.id })).row.id, b.project.id, 'the project stays');

  // An owner who is not the only one may go; the organization stays with the other owner.
  const coOwner = await joinAs(b.owner.client, b.org.id, 'owner');
  t.strictSame(await b.owner.client.v1.users.delete({ id: b.owner.userId }), { ok: true });
  t.match((await coOwner.client.v1.organizations.get({ id: b.org.id })).row, { id: b.org.id });
  t.same(
    (await coOwner.client.v1.organization_members.list()).rows.map((m) => [m.user_id, m.role]),
    [[coOwner.userId, 'owner']],
  );
  t.equal((await coOwner.client.v1.projects.list()).rows.length, 1, 'the project stays');
});

t.test('row scoping: another organization sees nothing of the first and gets 404 by id', async (t) => {
  const a = await tenant('Alpha');
  const b = await tenant('Beta');
  const aMember = await joinAs(a.owner.client, a.org.id, 'member');
  const aKey = await a.owner.client.v1.api_keys.create({ project_id: a.project.id, label: 'alpha-extra' });
  const aToken = await a.owner.client.v1.account_tokens.create({ label: 'alpha-token' });
  const aAudit = (await a.owner.client.v1.audit_log.list()).rows;
  t.ok(aAudit.length > 0, 'the first organization has audit rows');
  const aOrgToken = (await a.orgClient.v1.organization_tokens.list()).rows;
  t.same(
    aOrgToken.map((r) => r.token_id),
    [a.organizationToken.tokenId],
    'its token sees its organization tokens',
  );

  const alphaIds = [
    a.org.id,
    a.project.id,
    a.owner.userId,
    aMember.userId,
    a.apiKey.keyId,
    aKey.row.id,
    aKey.row.key_id,
    aToken.row.id,
    a.owner.tokenId,
    a.organizationToken.tokenId,
    ...aAudit.map((r) => r.id),
  ];
  const tables = [
    'projects',
    'api_keys',
    'users',
    'account_tokens',
    'organizations',
    'organization_members',
    'organization_tokens',
    'audit_log',
    'rate_limits',
  ] as const;
  for (const [who, c] of [
    ['owner', b.owner.client],
    ['organization token', b.orgClient],
    ['project key', b.keyClient],
  ] as const) {
    for (const table of tables) {
      const text = JSON.stringify(await c.v1[table].list({ limit: 200 }));
      t.same(
        alphaIds.filter((id) => text.includes(id)),
        [],
        `${table}.list as Beta's ${who}: nothing of Alpha`,
      );
    }
  }

  const byId: [(typeof tables)[number], string][] = [
    ['projects', a.project.id],
    ['api_keys', aKey.row.id],
    ['users', a.owner.userId],
    ['account_tokens', aToken.row.id],
    ['organizations', a.org.id],
    ['organization_members', `${a.org.id}:${aMember.userId}`],
    ['organization_tokens', aOrgToken[0]?.id ?? ''],
    ['audit_log', aAudit[0]?.id ?? ''],
    ['rate_limits', a.owner.tokenId],
  ];
  for (const [table, id] of byId) {
    t.match(
      await errorOf(b.owner.client.v1[table].get({ id })),
      { status: 404, code: 'not_found' },
      `${table}.get of Alpha's row as Beta`,
    );
    t.ok(await a.owner.client.v1[table].get({ id }), `${table}.get of the same row as Alpha works`);
  }
  t.match(await errorOf(b.owner.client.v1.projects.update({ id: a.project.id, name: 'pwned' })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.projects.delete({ id: a.project.id })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.api_keys.create({ project_id: a.project.id })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.api_keys.update({ id: aKey.row.id, label: 'pwned' })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.api_keys.delete({ id: aKey.row.id })), { status: 404 });
  t.match(await errorOf(b.keyClient.v1.api_keys.delete({ id: aKey.row.id })), { status: 404 });
  t.match(await errorOf(b.orgClient.v1.projects.update({ id: a.project.id, name: 'pwned' })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.account_tokens.delete({ id: aToken.row.id })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.users.update({ id: a.owner.userId, email: uniqueEmail() })), { status: 404 });
  t.match(await errorOf(b.owner.client.v1.users.delete({ id: a.owner.userId })), { status: 404 });
  t.match(
    (await a.owner.client.v1.projects.get({ id: a.project.id })).row,
    { name: 'Alpha Project' },
    "Alpha's project untouched",
  );
  t.equal((await a.owner.client.v1.api_keys.get({ id: aKey.row.id })).row.revoked_at, null, "Alpha's key untouched");
  t.match(await clientOf({ keyId: aToken.row.token_id, secret: aToken.row.secret }).v1.services.whoami(), {
    userId: a.owner.userId,
  });

  // A project key: its project's rows only, and its own rate-limit bucket.
  t.same(
    (await a.keyClient.v1.projects.list()).rows.map((r) => r.id),
    [a.project.id],
  );
  const keys = (await a.keyClient.v1.api_keys.list()).rows;
  t.same(keys.map((k) => k.key_id).sort(), [a.apiKey.keyId, aKey.row.key_id].sort(), "its project's keys");
  for (const table of [
    'organizations',
    'organization_members',
    'organization_tokens',
    'users',
    'account_tokens',
  ] as const) {
    t.same((await a.keyClient.v1[table].list()).rows, [], `a project key sees no ${table}`);
  }
  const keyAudit = (await a.keyClient.v1.audit_log.list()).rows;
  t.ok(keyAudit.length > 0 && keyAudit.every((r) => r.project_id === a.project.id), 'audit rows of its project only');
  t.same(
    (await a.keyClient.v1.rate_limits.list()).rows.map((r) => r.key),
    [a.apiKey.keyId],
    'its own bucket only',
  );
  t.match(await errorOf(a.keyClient.v1.organizations.get({ id: a.org.id })), { status: 404 });

  // An organization token: its organization's rows, never users or account tokens.
  t.same(
    (await a.orgClient.v1.organizations.list()).rows.map((r) => r.id),
    [a.org.id],
  );
  t.same(
    (await a.orgClient.v1.projects.list()).rows.map((r) => r.id),
    [a.project.id],
  );
  t.same(
    (await a.orgClient.v1.organization_members.list()).rows.map((r) => r.user_id).sort(),
    [a.owner.userId, aMember.userId].sort(),
  );
  t.same((await a.orgClient.v1.users.list()).rows, []);
  t.same((await a.orgClient.v1.account_tokens.list()).rows, []);

  // A member: its organizations' rows, its own user and tokens, its own bucket.
  const members = (await aMember.client.v1.organization_members.list()).rows;
  t.same(members.map((m) => m.id).sort(), [`${a.org.id}:${a.owner.userId}`, `${a.org.id}:${aMember.userId}`].sort());
  t.match((await aMember.client.v1.organization_members.get({ id: `${a.org.id}:${a.owner.userId}` })).row, {
    role: 'owner',
  });
  t.same(
    (await aMember.client.v1.users.list()).rows.map((r) => r.id),
    [aMember.userId],
  );
  t.same(
    (await aMember.client.v1.rate_limits.list()).rows.map((r) => r.key),
    [aMember.tokenId],
  );
  t.match(
    await errorOf(aMember.client.v1.account_tokens.get({ id: aToken.row.id })),
    { status: 404 },
    "not the owner's tokens",
  );

  // The platform key and staff see every row.
  const all = (await admin.v1.projects.list({ limit: 200 })).rows.map((r) => r.id);
  t.ok(all.includes(a.project.id) && all.includes(b.project.id), 'the platform key lists both projects');
  for (const [table, id] of byId) t.ok(await admin.v1[table].get({ id }), `the platform key gets ${table} ${id}`);
  const staff = await user();
  await db.query(`UPDATE users SET role = 'staff' WHERE id = $1`, [staff.userId]);
  for (const [table, id] of byId) t.ok(await staff.client.v1[table].get({ id }), `staff get ${table} ${id}`);
});

/**
 * A tenant ready to send: its project's domain has an outbound capability verified by the platform
 * key (no DNS needed), and `sendClient` is a key with messages:send and messages:read.
 */
async function sendingTenant() {
  const a = await tenant('Sending');
  const domain = `dl-${a.project.id.slice(0, 8)}.test`;
  const claim = await a.owner.client.console.projects.domains.create({ id: a.project.id, domain });
  await a.owner.client.console.projects.domains.outbound.create({ id: a.project.id, domainId: claim.id });
  await admin.admin.senderDomains.markVerified({ id: claim.id });
  const key = await a.owner.client.v1.api_keys.create({
    project_id: a.project.id,
    scopes: ['messages:send', 'messages:read'],
  });
  return {
    owner: a.owner,
    orgId: a.org.id,
    projectId: a.project.id,
    domain,
    ownerClient: a.owner.client,
    sendClient: clientOf({ keyId: key.row.key_id, secret: key.row.secret }),
  };
}

t.test(
  'suppressions: create normalizes the domain, 409 on a duplicate; get, list filters, delete; sendEmail honours them',
  async (t) => {
    const s = await sendingTenant();
    const owner = s.ownerClient;
    const send = (to: string) =>
      s.sendClient.v1.services.sendEmail({ from: `a@${s.domain}`, to, subject: 'x', text: 'x' });

    const { row } = await owner.v1.suppressions.create({ project_id: s.projectId, address: 'Bob.Smith@Example.COM' });
    t.equal(lastStatus(), 201, 'create answers 201');
    t.strictSame(Object.keys(row).sort(), ['address', 'created_at', 'detail', 'id', 'project_id', 'reason']);
    t.match(
      row,
      { project_id: s.projectId, address: 'Bob.Smith@example.com', reason: 'manual', detail: null },
      'the domain lower-cased, reason manual',
    );
    t.match(row.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'a uuid id');
    t.match(
      await auditOf('v1.suppressions.create', 'Bob.Smith@example.com'),
      [{ organization_id: s.orgId, project_id: s.projectId, actor_id: s.owner.userId }],
      'one audit row names the organization, the project and the address',
    );

    // docs/api.md §6 rule 4: a message to a suppressed address is suppressed, whatever the case of its domain.
    t.equal((await send('Bob.Smith@EXAMPLE.com')).status, 'suppressed', 'sendEmail to the address is suppressed');
    t.equal((await send('bob.smith@example.com')).status, 'queued', 'the local part keeps its case: another address');

    t.match(
      await errorOf(
        owner.v1.suppressions.create({
          project_id: s.projectId,
          address: 'Bob.Smith@EXAMPLE.com',
          reason: 'complaint',
        }),
      ),
      { status: 409, code: 'conflict', details: { id: row.id, address: 'Bob.Smith@example.com' } },
      'a duplicate is 409 conflict, naming the row',
    );
    t.strictSame((await owner.v1.suppressions.get({ id: row.id })).row, row, 'the duplicate changed nothing');

    const bounced = (
      await owner.v1.suppressions.create({
        project_id: s.projectId,
        address: 'gone@Example.org',
        reason: 'hard_bounce',
        detail: '550 5.1.1 no such user',
      })
    ).row;
    t.match(bounced, { address: 'gone@example.org', reason: 'hard_bounce', detail: '550 5.1.1 no such user' });
    for (const address of [
      'not-an-address',
      'a@',
      '@example.com',
      'a b@example.com',
      'x@[127.0.0.1]',
      'x@bücher.example',
    ]) {
      t.match(
        await errorOf(owner.v1.suppressions.create({ project_id: s.projectId, address })),
        { status: 400, code: 'invalid_request' },
        `${address}: 400`,
      );
    }
    t.match(
      await errorOf(
        owner.request('POST', '/v1/suppressions/create', {
          project_id: s.projectId,
          address: 'r@example.com',
          reason: 'spam',
        }),
      ),
      { status: 400, code: 'invalid_request' },
      'a reason outside SuppressionReason: 400',
    );

    // The MTA's insert (no id; ON CONFLICT on the primary key) keeps working, and its row gets an id.
    const mta = `INSERT INTO suppressions (project_id, address, reason, created_at)
               VALUES ($1, 'soft@example.net', 'soft_bounce_max', $2)
               ON CONFLICT (project_id, address) DO NOTHING`;
    await db.query(mta, [s.projectId, new Date(svc.clock.now())]);
    await db.query(mta, [s.projectId, new Date(svc.clock.now())]);

    const { rows } = await owner.v1.suppressions.list();
    t.same(
      rows.map((r) => r.address),
      ['Bob.Smith@example.com', 'gone@example.org', 'soft@example.net'],
      'list: oldest first',
    );
    t.match(rows[2], { reason: 'soft_bounce_max', id: /^[0-9a-f-]{36}$/ }, "the MTA's row has an id");
    t.strictSame((await owner.v1.suppressions.get({ id: bounced.id })).row, rows[1], 'get returns the listed row');
    const addresses = async (q: Parameters<typeof owner.v1.suppressions.list>[0]) =>
      (await owner.v1.suppressions.list(q)).rows.map((r) => r.address);
    t.same(
      await addresses({ address: 'Bob.Smith@EXAMPLE.COM' }),
      ['Bob.Smith@example.com'],
      'address filter: the domain in any case',
    );
    t.same(await addresses({ address: 'bob.smith@example.com' }), [], 'address filter: the local part as given');
    t.same(await addresses({ reason: 'hard_bounce' }), ['gone@example.org'], 'reason filter');
    t.same(
      await addresses({ project_id: s.projectId, reason: 'manual' }),
      ['Bob.Smith@example.com'],
      'filters combine',
    );
    t.same(await addresses({ limit: 1, project_id: s.projectId }), ['Bob.Smith@example.com'], 'with limit');
    t.match(await errorOf(owner.request('GET', '/v1/suppressions/list?reason=spam')), {
      status: 400,
      code: 'invalid_request',
    });
    t.match(await errorOf(owner.request('GET', '/v1/suppressions/list?project_id=nope')), {
      status: 400,
      code: 'invalid_request',
    });

    // Scopes (docs/api.md §5.3): suppressions:read to read, suppressions:write to add and lift.
    t.match(
      await errorOf(s.sendClient.v1.suppressions.list()),
      { status: 403, code: 'forbidden' },
      'a key without suppressions:read',
    );
    const readKey = await owner.v1.api_keys.create({ project_id: s.projectId, scopes: ['suppressions:read'] });
    const reader = clientOf({ keyId: readKey.row.key_id, secret: readKey.row.secret });
    t.same(
      (await reader.v1.suppressions.list()).rows.map((r) => r.id),
      rows.map((r) => r.id),
      'suppressions:read lists',
    );
    t.match(await errorOf(reader.v1.suppressions.create({ project_id: s.projectId, address: 'r@example.com' })), {
      status: 403,
      code: 'forbidden',
    });
    t.match(await errorOf(reader.v1.suppressions.delete({ id: bounced.id })), { status: 403, code: 'forbidden' });
    const writeKey = await owner.v1.api_keys.create({
      project_id: s.projectId,
      scopes: ['suppressions:read', 'suppressions:write'],
    });
    const writer = clientOf({ keyId: writeKey.row.key_id, secret: writeKey.row.secret });
    const byKey = (
      await writer.v1.suppressions.create({ project_id: s.projectId, address: 'key@example.com', reason: 'complaint' })
    ).row;
    t.match(byKey, { project_id: s.projectId, reason: 'complaint' }, 'suppressions:write adds');
    t.strictSame(await writer.v1.suppressions.delete({ id: byKey.id }), { ok: true }, 'and lifts');

    // Roles (docs/api.md §5.5): suppressions are projects:manage; an auditor reads only.
    const auditor = await joinAs(owner, s.orgId, 'auditor');
    t.same((await auditor.client.v1.suppressions.list()).rows.length, 3, 'an auditor reads');
    t.match(
      await errorOf(auditor.client.v1.suppressions.create({ project_id: s.projectId, address: 'r@example.com' })),
      { status: 403, code: 'forbidden' },
    );
    t.match(await errorOf(auditor.client.v1.suppressions.delete({ id: bounced.id })), {
      status: 403,
      code: 'forbidden',
    });

    // The project detail (docs/api.md §4.6) shows the newest suppressions and messages.
    const detail = await owner.console.projects.get({ id: s.projectId });
    t.same(
      detail.suppressions.map((x) => x.address),
      ['soft@example.net', 'gone@example.org', 'Bob.Smith@example.com'],
      'detail: newest first',
    );
    t.strictSame(detail.suppressions[1], {
      id: bounced.id,
      address: 'gone@example.org',
      reason: 'hard_bounce',
      detail: '550 5.1.1 no such user',
      createdAt: bounced.created_at,
    });
    t.same(
      detail.messages.map((m) => [m.to, m.status]),
      [
        ['bob.smith@example.com', 'queued'],
        ['Bob.Smith@example.com', 'suppressed'],
      ],
      'detail: messages, newest first',
    );
    t.strictSame(
      detail.messages[0],
      (await s.sendClient.v1.messages.get({ id: detail.messages[0]!.id })).row,
      'the rows of /v1/messages/get',
    );

    // Delete lifts it: sendEmail queues again, and the address may be suppressed anew.
    t.strictSame(await owner.v1.suppressions.delete({ id: row.id }), { ok: true });
    t.match(await auditOf('v1.suppressions.delete', 'Bob.Smith@example.com'), [
      { organization_id: s.orgId, project_id: s.projectId, actor_id: s.owner.userId },
    ]);
    t.match(
      await errorOf(owner.v1.suppressions.get({ id: row.id })),
      { status: 404, code: 'not_found' },
      'gone from get',
    );
    t.match(
      await errorOf(owner.v1.suppressions.delete({ id: row.id })),
      { status: 404, code: 'not_found' },
      'deleting twice is 404',
    );
    t.match(await errorOf(owner.v1.suppressions.delete({ id: 'not-a-uuid' })), { status: 404, code: 'not_found' });
    t.equal((await send('Bob.Smith@example.com')).status, 'queued', 'mail to the address is sent again');
    const again = (await owner.v1.suppressions.create({ project_id: s.projectId, address: 'Bob.Smith@example.com' }))
      .row;
    t.not(again.id, row.id, 'suppressed anew, with a new id');
  },
);

t.test('messages, message_events, idempotency_keys: read-only, scoped, filtered', async (t) => {
  const s = await sendingTenant();
  const owner = s.ownerClient;
  const first = await s.sendClient.v1.services.sendEmail({
    from: `Ada <a@${s.domain}>`,
    to: 'one@example.com',
    subject: 'first',
    text: 'x',
    idempotencyKey: 'order-0001',
  });
  const second = await s.sendClient.v1.services.sendEmail({
    from: `a@${s.domain}`,
    to: 'two@example.com',
    subject: 'second',
    text: 'x',
  });
  await db.query(`UPDATE messages SET status = 'delivered' WHERE id = $1`, [first.providerMessageId]);

  // messages: list has the rows of /v1/messages/get (docs/decisions.md #4), newest first.
  const { rows } = await owner.v1.messages.list();
  t.same(
    rows.map((r) => r.id),
    [second.providerMessageId, first.providerMessageId],
    'newest first',
  );
  t.strictSame(Object.keys(rows[0] ?? {}).sort(), [
    'attempts',
    'createdAt',
    'from',
    'id',
    'messageId',
    'metadata',
    'projectId',
    'recipients',
    'scheduledAt',
    'status',
    'subject',
    'tags',
    'to',
    'updatedAt',
  ]);
  t.match(rows[1], {
    projectId: s.projectId,
    status: 'delivered',
    from: `Ada <a@${s.domain}>`,
    to: 'one@example.com',
    subject: 'first',
    attempts: 0,
  });
  for (const r of rows)
    t.strictSame((await owner.v1.messages.get({ id: r.id })).row, r, `${r.subject}: the row of /v1/messages/get`);
  t.same(
    (await owner.v1.messages.list({ status: 'delivered' })).rows.map((r) => r.id),
    [first.providerMessageId],
    'status filter',
  );
  t.same((await owner.v1.messages.list({ status: 'bounced' })).rows, [], 'a status with none');
  t.same(
    (await s.sendClient.v1.messages.list({ projectId: s.projectId, limit: 1 })).rows.map((r) => r.id),
    [second.providerMessageId],
    'projectId filter and limit',
  );
  t.match(await errorOf(owner.request('GET', '/v1/messages/list?status=lost')), {
    status: 400,
    code: 'invalid_request',
  });

  // message_events: the engine's rows, newest first.
  const events = (await owner.v1.message_events.list()).rows;
  t.strictSame(Object.keys(events[0] ?? {}).sort(), ['created_at', 'detail', 'id', 'message_id', 'project_id', 'type']);
  t.same(
    events.map((e) => [e.message_id, e.type]),
    [
      [second.providerMessageId, 'queued'],
      [first.providerMessageId, 'queued'],
    ],
  );
  t.same(
    (await owner.v1.message_events.list({ message_id: first.providerMessageId })).rows.map((e) => e.id),
    [events[1]?.id],
    'message_id filter',
  );
  t.same((await owner.v1.message_events.list({ type: 'delivered' })).rows, [], 'type filter');
  t.strictSame(
    (await owner.v1.message_events.get({ id: events[0]?.id ?? '' })).row,
    events[0],
    'get returns the listed row',
  );
  const history = (await owner.v1.messages.events({ id: first.providerMessageId })).events;
  t.same(
    history.map((e) => e.id),
    [events[1]?.id],
    'the same event as /v1/messages/events',
  );

  // idempotency_keys: named <project_id>:<key>; no body hash.
  const keys = (await s.sendClient.v1.idempotency_keys.list()).rows;
  t.equal(keys.length, 1);
  t.strictSame(Object.keys(keys[0] ?? {}).sort(), [
    'created_at',
    'expires_at',
    'id',
    'key',
    'message_id',
    'project_id',
  ]);
  t.match(keys[0], {
    id: `${s.projectId}:order-0001`,
    project_id: s.projectId,
    key: 'order-0001',
    message_id: first.providerMessageId,
  });
  t.ok(
    Date.parse(keys[0]!.expires_at) - Date.parse(keys[0]!.created_at) === 24 * 3_600_000,
    'expires 24 h after creation',
  );
  t.strictSame((await owner.v1.idempotency_keys.get({ id: `${s.projectId}:order-0001` })).row, keys[0]);
  t.same((await owner.v1.idempotency_keys.list({ project_id: s.projectId })).rows.length, 1, 'project_id filter');
  t.match(await errorOf(owner.v1.idempotency_keys.get({ id: 'order-0001' })), { status: 404, code: 'not_found' });

  // Reading them takes messages:read (docs/api.md §5.3).
  const sendOnly = await owner.v1.api_keys.create({ project_id: s.projectId, scopes: ['messages:send'] });
  const sendOnlyClient = clientOf({ keyId: sendOnly.row.key_id, secret: sendOnly.row.secret });
  for (const table of ['messages', 'message_events', 'idempotency_keys'] as const) {
    t.match(
      await errorOf(sendOnlyClient.v1[table].list()),
      { status: 403, code: 'forbidden' },
      `${table}.list needs messages:read`,
    );
  }
  // An auditor reads (membership only).
  const auditor = await joinAs(owner, s.orgId, 'auditor');
  t.same(
    (await auditor.client.v1.messages.list()).rows.map((r) => r.id),
    rows.map((r) => r.id),
    'an auditor reads messages',
  );
});

t.test('the sending tables across tenants: nothing listed, 404 by id, by project filter and on writes', async (t) => {
  const a = await sendingTenant();
  const b = await tenant('Other');
  const bKey = await b.owner.client.v1.api_keys.create({
    project_id: b.project.id,
    scopes: ['messages:send', 'messages:read', 'suppressions:read', 'suppressions:write', 'project:admin'],
  });
  const sent = await a.sendClient.v1.services.sendEmail({
    from: `a@${a.domain}`,
    to: 'victim-rcpt@example.com',
    subject: 'secret subject',
    text: 'x',
    idempotencyKey: 'victim-key-1',
  });
  const supp = (
    await a.ownerClient.v1.suppressions.create({ project_id: a.projectId, address: 'victim-suppressed@example.com' })
  ).row;
  const event = (await a.ownerClient.v1.message_events.list({ message_id: sent.providerMessageId })).rows[0]!;
  const ids = {
    messages: sent.providerMessageId,
    message_events: event.id,
    idempotency_keys: `${a.projectId}:victim-key-1`,
    suppressions: supp.id,
  };
  const marks = [
    a.projectId,
    sent.providerMessageId,
    'victim-rcpt',
    'victim-suppressed',
    'victim-key-1',
    'secret subject',
  ];

  const intruders = [
    ['owner', b.owner.client],
    ['organization token', b.orgClient],
    ['project key', clientOf({ keyId: bKey.row.key_id, secret: bKey.row.secret })],
  ] as const;
  for (const [who, c] of intruders) {
    for (const table of ['messages', 'message_events', 'idempotency_keys', 'suppressions'] as const) {
      const text = JSON.stringify(await c.v1[table].list({ limit: 200 }));
      t.same(
        marks.filter((m) => text.includes(m)),
        [],
        `${table}.list as ${who}: nothing of the other tenant`,
      );
    }
    t.match(
      await errorOf(c.v1.messages.get({ id: ids.messages })),
      { status: 404, code: 'not_found' },
      `messages.get as ${who}`,
    );
    for (const table of ['message_events', 'idempotency_keys', 'suppressions'] as const) {
      t.match(
        await errorOf(c.v1[table].get({ id: ids[table] })),
        { status: 404, code: 'not_found' },
        `${table}.get as ${who}`,
      );
    }
    t.match(
      await errorOf(c.v1.messages.list({ projectId: a.projectId })),
      { status: 404, code: 'not_found' },
      `messages.list?projectId= as ${who}`,
    );
    for (const table of ['message_events', 'idempotency_keys', 'suppressions'] as const) {
      t.match(
        await errorOf(c.v1[table].list({ project_id: a.projectId })),
        { status: 404, code: 'not_found' },
        `${table}.list?project_id= as ${who}`,
      );
    }
    t.match(
      await errorOf(c.v1.suppressions.create({ project_id: a.projectId, address: 'intruder@example.com' })),
      { status: 404, code: 'not_found' },
      `suppressions.create in the other project as ${who}`,
    );
    t.match(
      await errorOf(c.v1.suppressions.delete({ id: supp.id })),
      { status: 404, code: 'not_found' },
      `suppressions.delete as ${who}`,
    );
  }
  t.strictSame((await a.ownerClient.v1.suppressions.list()).rows, [supp], 'the suppression is untouched, none added');
  t.strictSame(
    (await a.ownerClient.v1.message_events.get({ id: event.id })).row,
    event,
    'the owner still reads its event',
  );
  // A soft-deleted project's rows leave every list, and its filter is 404 even to its owner.
  await a.ownerClient.v1.projects.delete({ id: a.projectId });
  t.same((await a.ownerClient.v1.suppressions.list()).rows, [], "a deleted project's suppressions are not listed");
  t.match(
    await errorOf(a.ownerClient.v1.suppressions.list({ project_id: a.projectId })),
    { status: 404 },
    'a filter on the deleted project: 404',
  );
  t.match(
    await errorOf(admin.v1.suppressions.get({ id: supp.id })),
    { status: 404 },
    'not even the platform key gets it',
  );
  // The platform key sees the rows of every live project.
  const bSupp = (await b.owner.client.v1.suppressions.create({ project_id: b.project.id, address: 'x@example.com' }))
    .row;
  t.strictSame(
    (await admin.v1.suppressions.get({ id: bSupp.id })).row,
    bSupp,
    "the platform key gets a live project's suppression",
  );
  t.same(
    (await admin.v1.suppressions.list({ project_id: b.project.id })).rows.map((r) => r.id),
    [bSupp.id],
    'and lists it by project',
  );
});

t.test('limit: default 50, larger values accepted and clamped at 200', async (t) => {
  const me = await user();
  // 60 more account tokens for one user, in one statement (they are never used to sign).
  await db.query(
    `INSERT INTO account_tokens (id, token_id, user_id, secret_sealed, label, created_at)
     SELECT gen_random_uuid(), 'svca_bulk_' || n, $1, 'unused', 'bulk', now() FROM generate_series(1, 60) AS n`,
    [me.userId],
  );
  t.equal((await me.client.v1.account_tokens.list()).rows.length, 50, 'default 50');
  t.equal((await me.client.v1.account_tokens.list({ limit: 60 })).rows.length, 60, 'limit=60');
  t.equal(
    (await me.client.v1.account_tokens.list({ limit: 100000 })).rows.length,
    61,
    'limit=100000 is accepted: all 61',
  );
  t.match(await errorOf(me.client.v1.account_tokens.list({ limit: 0 })), { status: 400, code: 'invalid_request' });
  t.match(await errorOf(me.client.request('GET', '/v1/account_tokens/list?limit=many')), {
    status: 400,
    code: 'invalid_request',
  });

  // 250 buckets: the platform key sees every one, yet gets at most 200.
  await db.query(
    `INSERT INTO rate_limits (key, tokens, allowed, updated_at)
     SELECT 'bulk-' || n, 1, true, now() FROM generate_series(1, 250) AS n`,
  );
  t.equal((await admin.v1.rate_limits.list()).rows.length, 50, 'default 50');
  t.equal((await admin.v1.rate_limits.list({ limit: 100000 })).rows.length, 200, 'clamped at 200');
  t.equal((await admin.v1.rate_limits.list({ limit: 201 })).rows.length, 200, 'clamped at 200');
  t.equal((await admin.v1.rate_limits.list({ limit: 7 })).rows.length, 7);

  // 250 suppressions of one project, with a filter: the same default and clamp.
  const a = await tenant('Many');
  await db.query(
    `INSERT INTO suppressions (project_id, address, reason, created_at)
     SELECT $1, 'r' || n || '@example.com', CASE WHEN n % 2 = 0 THEN 'hard_bounce' ELSE 'manual' END, now()
     FROM generate_series(1, 250) AS n`,
    [a.project.id],
  );
  t.equal((await a.owner.client.v1.suppressions.list()).rows.length, 50, 'default 50');
  t.equal((await a.owner.client.v1.suppressions.list({ limit: 100000 })).rows.length, 200, 'clamped at 200');
  t.equal(
    (await a.owner.client.v1.suppressions.list({ limit: 100000, reason: 'hard_bounce' })).rows.length,
    125,
    'a filter, then the limit',
  );
  t.equal((await a.owner.client.v1.suppressions.list({ limit: 3, project_id: a.project.id })).rows.length, 3);
  t.equal(
    (await a.owner.client.console.projects.get({ id: a.project.id })).suppressions.length,
    50,
    'the project detail shows 50',
  );
});

t.test('roles: an auditor reads but gets 403 on writes; an owner writes', async (t) => {
  const a = await tenant('Roles');
  const auditor = await joinAs(a.owner.client, a.org.id, 'auditor');
  t.same(
    (await auditor.client.v1.projects.list()).rows.map((r) => r.id),
    [a.project.id],
    'reads need membership only',
  );
  t.ok((await auditor.client.v1.api_keys.list()).rows.length >= 1);
  t.match(await errorOf(auditor.client.v1.projects.update({ id: a.project.id, name: 'nope' })), {
    status: 403,
    code: 'forbidden',
  });
  t.match(await errorOf(auditor.client.v1.projects.delete({ id: a.project.id })), { status: 403, code: 'forbidden' });
  t.match(await errorOf(auditor.client.v1.api_keys.create({ project_id: a.project.id })), {
    status: 403,
    code: 'forbidden',
  });
  const keyRow = (await auditor.client.v1.api_keys.list()).rows[0];
  t.match(await errorOf(auditor.client.v1.api_keys.delete({ id: keyRow?.id ?? '' })), {
    status: 403,
    code: 'forbidden',
  });
  t.equal((await a.owner.client.v1.projects.get({ id: a.project.id })).row.name, 'Roles Project', 'unchanged');

  t.match((await a.owner.client.v1.projects.update({ id: a.project.id, name: 'Owned' })).row, { name: 'Owned' });
  await a.owner.client.v1.api_keys.create({ project_id: a.project.id });
  t.equal(lastStatus(), 201, 'the owner mints a key');
});

t.test('no answer of this file carried a secret column', async (t) => {
  t.same(leaks('{"secret_sealed":"x","rows":[]}'), ['secret_sealed'], 'the scan can say no');
  t.ok(answers.length > 200, `${answers.length} answers scanned`);
  t.ok(
    answers.some((a) => a.path.startsWith('/v1/') && a.status === 200),
    'data-layer answers among them',
  );
  const bad = answers.filter((a) => leaks(a.text).length > 0).map((a) => `${a.method} ${a.path}: ${leaks(a.text)}`);
  t.same(bad, [], 'none mentions secret_sealed, password_hash, token_hash, code_hash or body_hash');
});
