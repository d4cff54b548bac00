// docs/api.md §4.14 admin routes (users, their projects and account tokens), docs/decisions.md #6 and #8, and the
// audit-log reads of §4.14 and §4.10.
import t from 'tap';
import { createClient, type Client } from '@svc-mail/sdk';
import { startTestService, uniqueEmail, type TestService } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const UNKNOWN_UUID = '00000000-0000-4000-8000-000000000000';
const PASSWORD = 'a long enough password';

/** A staff user made through POST /admin/v1/users, logged in with its password. */
async function staffOf(svc: TestService): Promise<{ client: Client; userId: string; email: string }> {
  const email = uniqueEmail('staff');
  const { user } = await svc.admin().admin.users.create({ email, password: PASSWORD, role: 'staff' });
  const login = await svc.client().auth.login({ email, password: PASSWORD });
  return {
    client: svc.client({ keyId: login.accountToken.tokenId, secret: login.accountToken.secret }),
    userId: user.id,
    email,
  };
}

/** A client that remembers the X-Request-Id of every answer, in order. */
function recordingClient(svc: TestService, keyId: string, secret: string) {
  const requestIds: string[] = [];
  const recording = (async (url: string | URL | Request, init?: RequestInit) => {
    const res = await fetch(url, init);
    requestIds.push(res.headers.get('x-request-id') ?? 'missing');
    return res;
  }) as typeof fetch;
  const client = createClient({
    baseUrl: svc.url,
    credential: { keyId, secret },
    fetch: recording,
    now: svc.clock.now,
  });
  return { client, lastRequestId: () => requestIds[requestIds.length - 1] as string };
}

t.test('users: create and list, with the platform key and a staff token', async (t) => {
  const svc = await startTestService(t);
  const admin = svc.admin();

  const staffEmail = uniqueEmail('staff');
  const created = await admin.admin.users.create({ email: staffEmail, password: PASSWORD, role: 'staff' });
  t.strictSame(Object.keys(created), ['user']);
  t.match(created.user, { email: staffEmail, role: 'staff', email_verified_at: null });
  t.match(created.user.id, UUID_RE);
  t.match(created.user.created_at, ISO_RE);
  t.notOk('password_hash' in created.user, 'no password hash in the answer');

  // The new staff user logs in with the password it was given and gets a staff token.
  const login = await svc.client().auth.login({ email: staffEmail, password: PASSWORD });
  t.equal(login.user.role, 'staff');
  const staff = svc.client({ keyId: login.accountToken.tokenId, secret: login.accountToken.secret });
  t.match(await staff.v1.services.whoami(), { principal: 'account_token', userId: created.user.id, role: 'staff' });

  // Staff may create users too; a customer made this way is an ordinary customer.
  const custEmail = uniqueEmail('cust');
  const cust = await staff.admin.users.create({ email: custEmail, password: PASSWORD, role: 'customer' });
  t.equal(cust.user.role, 'customer');
  const custLogin = await svc.client().auth.login({ email: custEmail, password: PASSWORD });
  t.equal(custLogin.user.id, cust.user.id);

  // Both credentials list; newest first.
  for (const [who, c] of [
    ['platform key', admin],
    ['staff token', staff],
  ] as const) {
    const { users } = await c.admin.users.list();
    t.same(
      users.slice(0, 2).map((u) => u.id),
      [cust.user.id, created.user.id],
      `${who}: newest first`,
    );
    t.ok(
      users.every((u) => !('password_hash' in u)),
      `${who}: no password hashes`,
    );
  }
  // The email filter is exact and case-insensitive.
  const byEmail = await admin.admin.users.list({ email: staffEmail.toUpperCase() });
  t.same(
    byEmail.users.map((u) => u.id),
    [created.user.id],
    'email filter finds the one user',
  );
  t.same((await admin.admin.users.list({ email: 'nobody@example.test' })).users, [], 'unknown email: none');
  t.same((await admin.admin.users.list({ email: staffEmail.slice(0, 8) })).users, [], 'a prefix is not a match');

  // docs/decisions.md #6: limit.
  const more = await svc.signup();
  t.same(
    (await admin.admin.users.list({ limit: 1 })).users.map((u) => u.id),
    [more.userId],
    'limit 1: the newest',
  );
  t.equal((await admin.admin.users.list({ limit: 100000 })).users.length, 3, 'a large limit is clamped, not refused');
  t.match(await errorOf(admin.admin.users.list({ limit: 0 })), { status: 400, code: 'invalid_request' });
  t.match(await errorOf(admin.request('GET', '/admin/v1/users?limit=abc')), { status: 400, code: 'invalid_request' });

  // Validation and conflicts.
  t.match(
    await errorOf(admin.admin.users.create({ email: uniqueEmail(), password: 'short', role: 'customer' })),
    { status: 400, code: 'invalid_request' },
    'password under 10 characters',
  );
  t.match(
    await errorOf(admin.admin.users.create({ email: uniqueEmail(), password: '123456789', role: 'customer' })),
    { status: 400, code: 'invalid_request' },
    '9 characters is still too short',
  );
  t.match(
    await errorOf(
      admin.request('POST', '/admin/v1/users', { email: uniqueEmail(), password: PASSWORD, role: 'owner' }),
    ),
    { status: 400, code: 'invalid_request' },
    'role is staff or customer',
  );
  t.match(
    await errorOf(admin.request('POST', '/admin/v1/users', { email: uniqueEmail(), password: PASSWORD })),
    { status: 400, code: 'invalid_request' },
    'role is required',
  );
  t.match(await errorOf(admin.admin.users.create({ email: 'not an email', password: PASSWORD, role: 'customer' })), {
    status: 400,
    code: 'invalid_request',
  });
  t.match(
    await errorOf(admin.admin.users.create({ email: staffEmail.toUpperCase(), password: PASSWORD, role: 'customer' })),
    { status: 409, code: 'conflict' },
    'taken email (case-insensitive)',
  );
  t.match(
    await errorOf(staff.admin.users.create({ email: more.email, password: PASSWORD, role: 'staff' })),
    { status: 409, code: 'conflict' },
    'a signed-up email is taken too',
  );
  t.equal((await admin.admin.users.list()).users.length, 3, 'refused creations made no users');
});

t.test('admin routes: a customer token is 403, other credentials 401', async (t) => {
  const svc = await startTestService(t);
  const customer = await svc.signup();
  const { organization, organizationToken } = await customer.client.console.organizations.create({ name: 'Acme' });
  const { project, apiKey } = await customer.client.console.projects.create({
    name: 'web',
    organizationId: organization.id,
  });
  const orgClient = svc.client({ keyId: organizationToken.tokenId, secret: organizationToken.secret });
  const keyClient = svc.client({ keyId: apiKey.keyId, secret: apiKey.secret });
  const { client: staff } = await staffOf(svc);
  const someToken = await customer.client.console.accountTokens.create({ label: 'victim' });

  const calls: [string, (c: Client) => Promise<unknown>][] = [
    ['admin.users.list', (c) => c.admin.users.list()],
    ['admin.users.create', (c) => c.admin.users.create({ email: uniqueEmail(), password: PASSWORD, role: 'staff' })],
    ['admin.users.projects.list', (c) => c.admin.users.projects.list({ id: customer.userId })],
    ['admin.users.accountTokens.create', (c) => c.admin.users.accountTokens.create({ id: customer.userId })],
    ['admin.users.accountTokens.list', (c) => c.admin.users.accountTokens.list({ id: customer.userId })],
    ['admin.accountTokens.delete', (c) => c.admin.accountTokens.delete({ id: someToken.tokenId })],
    ['admin.audit.list', (c) => c.admin.audit.list()],
  ];
  for (const [name, call] of calls) {
    t.match(await errorOf(call(customer.client)), { status: 403, code: 'forbidden' }, `${name}: customer token 403`);
    t.match(await errorOf(call(orgClient)), { status: 401, code: 'unauthorized' }, `${name}: org token 401`);
    t.match(await errorOf(call(keyClient)), { status: 401, code: 'unauthorized' }, `${name}: project key 401`);
    t.match(await errorOf(call(svc.client())), { status: 401, code: 'unauthorized' }, `${name}: unsigned 401`);
    t.match(
      await errorOf(call(svc.client({ adminKey: 'wrong-admin-key-0123456789' }))),
      { status: 401 },
      `${name}: wrong platform key 401`,
    );
  }
  // The refused calls changed nothing: the customer's token still works, no user was made.
  t.match(await customer.client.v1.services.whoami(), { userId: customer.userId });
  t.match(await svc.client({ keyId: someToken.tokenId, secret: someToken.secret }).v1.services.whoami(), {
    userId: customer.userId,
  });
  t.equal((await svc.admin().admin.users.list()).users.length, 2, 'the customer and the staff user only');
  // And the same routes pass for staff (the delete last: it revokes the token).
  for (const [name, call] of calls) t.ok(await call(staff), `${name}: staff token passes`);
  t.ok(project.id);
});

t.test('docs/decisions.md #8: a staff token acts as staff on every organization', async (t) => {
  const svc = await startTestService(t);
  const owner = await svc.signup();
  const outsider = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Owned by someone else' });
  const { project } = await owner.client.console.projects.create({ name: 'p', organizationId: organization.id });
  const { client: staff, userId: staffId } = await staffOf(svc);

  t.match(
    await errorOf(outsider.client.console.organizations.get({ id: organization.id })),
    { status: 404 },
    'a customer non-member: 404',
  );
  const seen = await staff.console.organizations.get({ id: organization.id });
  t.equal(seen.organization.id, organization.id, 'staff reads an org it is not a member of');
  t.notOk(
    seen.members.some((m) => m.userId === staffId),
    'staff is not a member',
  );
  const renamed = await staff.console.organizations.update({ id: organization.id, name: 'Renamed by staff' });
  t.equal(renamed.organization.name, 'Renamed by staff', 'staff writes to it');
  t.equal(
    (await owner.client.console.organizations.get({ id: organization.id })).organization.name,
    'Renamed by staff',
  );
  t.equal(
    (await staff.console.projects.update({ id: project.id, name: 'staff-named' })).project.name,
    'staff-named',
    'and to its projects',
  );
  t.match(await errorOf(outsider.client.console.organizations.update({ id: organization.id, name: 'nope' })), {
    status: 404,
  });
});

t.test("a user's projects", async (t) => {
  const svc = await startTestService(t);
  const { client: staff } = await staffOf(svc);
  const owner = await svc.signup();
  const other = await svc.signup();
  const lonely = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Org A' });
  const p1 = (await owner.client.console.projects.create({ name: 'one', organizationId: organization.id })).project;
  const p2 = (await owner.client.console.projects.create({ name: 'two', organizationId: organization.id })).project;
  const { organization: orgB } = await other.client.console.organizations.create({ name: 'Org B' });
  const p3 = (await other.client.console.projects.create({ name: 'three', organizationId: orgB.id })).project;
  await owner.client.console.projects.delete({ id: p2.id });

  for (const [who, c] of [
    ['platform key', svc.admin()],
    ['staff token', staff],
  ] as const) {
    const { projects } = await c.admin.users.projects.list({ id: owner.userId });
    t.same(
      projects.map((p) => p.id),
      [p1.id],
      `${who}: the owner's live projects`,
    );
    t.match(projects[0], { id: p1.id, organization_id: organization.id, name: 'one', status: 'active' });
    t.same(
      (await c.admin.users.projects.list({ id: other.userId })).projects.map((p) => p.id),
      [p3.id],
      `${who}: the other user's`,
    );
    t.same(
      (await c.admin.users.projects.list({ id: lonely.userId })).projects,
      [],
      `${who}: a user in no organization has none`,
    );
  }
  t.match(
    await errorOf(staff.admin.users.projects.list({ id: UNKNOWN_UUID })),
    { status: 404, code: 'not_found' },
    'unknown user',
  );
  t.match(
    await errorOf(staff.admin.users.projects.list({ id: 'not-a-uuid' })),
    { status: 404, code: 'not_found' },
    'malformed id',
  );
});

t.test("a user's account tokens: mint, list, revoke", async (t) => {
  const svc = await startTestService(t);
  const { client: staff } = await staffOf(svc);
  const admin = svc.admin();
  const user = await svc.signup();

  const minted = await staff.admin.users.accountTokens.create({ id: user.userId, label: 'support session' });
  t.strictSame(Object.keys(minted).sort(), ['createdAt', 'id', 'label', 'secret', 'tokenId', 'warning']);
  t.match(minted, { label: 'support session', id: UUID_RE, tokenId: /^svca_/, createdAt: ISO_RE });
  t.ok(minted.secret.length >= 32 && minted.warning.length > 0);
  const asUser = svc.client({ keyId: minted.tokenId, secret: minted.secret });
  t.strictSame(
    await asUser.v1.services.whoami(),
    { principal: 'account_token', userId: user.userId, role: 'customer', organizations: [] },
    'the minted token acts as the user',
  );
  const unlabeled = await admin.admin.users.accountTokens.create({ id: user.userId });
  t.equal(unlabeled.label, null, 'the platform key mints too; no label is null');

  // Listed, never with secrets; the user sees them as its own as well.
  for (const [who, c] of [
    ['staff', staff],
    ['platform key', admin],
  ] as const) {
    const { tokens } = await c.admin.users.accountTokens.list({ id: user.userId });
    t.same(
      tokens.map((x) => x.tokenId).sort(),
      [user.tokenId, minted.tokenId, unlabeled.tokenId].sort(),
      `${who}: every live token`,
    );
    t.ok(
      tokens.every((x) => Object.keys(x).sort().join() === 'createdAt,id,label,tokenId'),
      `${who}: no secret field`,
    );
    const text = JSON.stringify(tokens);
    t.notOk(text.includes(minted.secret) || text.includes(user.secret), `${who}: no secret anywhere`);
  }
  t.ok((await user.client.console.accountTokens.list()).tokens.some((x) => x.tokenId === minted.tokenId));

  // Revoke by tokenId, then by database id.
  t.same(await staff.admin.accountTokens.delete({ id: minted.tokenId }), { ok: true });
  t.match(
    await errorOf(asUser.v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'the revoked token is refused',
  );
  t.match(
    await errorOf(staff.admin.accountTokens.delete({ id: minted.tokenId })),
    { status: 404, code: 'not_found' },
    'revoking twice',
  );
  t.same(await admin.admin.accountTokens.delete({ id: unlabeled.id }), { ok: true }, 'by database id');
  t.match(await errorOf(svc.client({ keyId: unlabeled.tokenId, secret: unlabeled.secret }).v1.services.whoami()), {
    status: 401,
  });
  t.same(
    (await staff.admin.users.accountTokens.list({ id: user.userId })).tokens.map((x) => x.tokenId),
    [user.tokenId],
    'only the signup token is left',
  );
  t.match(await user.client.v1.services.whoami(), { userId: user.userId }, "the user's other token still works");
  t.match(await errorOf(staff.admin.accountTokens.delete({ id: UNKNOWN_UUID })), { status: 404, code: 'not_found' });
  t.match(await errorOf(staff.admin.accountTokens.delete({ id: 'svca_nonesuch' })), { status: 404, code: 'not_found' });

  // Unknown users.
  t.match(await errorOf(staff.admin.users.accountTokens.create({ id: UNKNOWN_UUID })), {
    status: 404,
    code: 'not_found',
  });
  t.match(await errorOf(staff.admin.users.accountTokens.list({ id: UNKNOWN_UUID })), {
    status: 404,
    code: 'not_found',
  });
  t.match(await errorOf(staff.admin.users.accountTokens.list({ id: 'x' })), { status: 404, code: 'not_found' });
  t.match(await errorOf(staff.admin.users.accountTokens.create({ id: user.userId, label: 'x'.repeat(201) })), {
    status: 400,
  });
});

t.test('audit log: rows of mutations, newest first, filters, the project view', async (t) => {
  const svc = await startTestService(t);
  const admin = svc.admin();
  const u = await svc.signup();
  const { client, lastRequestId } = recordingClient(svc, u.tokenId, u.secret);
  // Each mutation at its own instant, so "newest first" has one right answer.
  const step = () => svc.clock.advance(1000);

  step();
  const { organization, organizationToken } = await client.console.organizations.create({ name: 'Audited' });
  const orgReq = lastRequestId();
  step();
  const { project, apiKey } = await client.console.projects.create({ name: 'first', organizationId: organization.id });
  const createReq = lastRequestId();
  step();
  await client.console.projects.update({ id: project.id, name: 'renamed' });
  const updateReq = lastRequestId();
  step();

  const { entries } = await admin.admin.audit.list();
  t.same(
    entries.slice(0, 3).map((e) => e.action),
    ['console.projects.update', 'console.projects.create', 'console.organizations.create'],
    'newest first, actions are route names',
  );
  const [update, create, org] = entries as [
    (typeof entries)[number],
    (typeof entries)[number],
    (typeof entries)[number],
  ];
  t.match(update, {
    id: UUID_RE,
    createdAt: ISO_RE,
    actorKind: 'user',
    actorId: u.userId,
    method: 'PATCH',
    path: `/console/v1/projects/${project.id}`,
    status: 200,
    organizationId: organization.id,
    projectId: project.id,
    targetId: project.id,
    requestId: updateReq,
  });
  t.match(create, {
    actorKind: 'user',
    actorId: u.userId,
    method: 'POST',
    organizationId: organization.id,
    projectId: project.id,
    requestId: createReq,
  });
  t.match(org, {
    actorKind: 'user',
    actorId: u.userId,
    method: 'POST',
    path: '/console/v1/organizations',
    requestId: orgReq,
    projectId: null,
  });
  t.not(updateReq, createReq, 'each request has its own id');
  const times = entries.map((e) => Date.parse(e.createdAt));
  t.ok(
    times.every((x, i) => i === 0 || (times[i - 1] as number) >= x),
    'createdAt descends',
  );
  t.ok(
    entries.some((e) => e.action === 'auth.signup' && e.actorKind === 'anonymous'),
    'the signup is there too',
  );

  // GET requests leave no rows.
  const before = entries.map((e) => e.id);
  await client.console.projects.get({ id: project.id });
  await client.console.organizations.list();
  await client.console.projects.audit({ id: project.id });
  await admin.admin.users.list();
  await admin.admin.audit.list({ action: 'console.projects.update' });
  await errorOf(client.console.projects.get({ id: UNKNOWN_UUID }));
  const after = (await admin.admin.audit.list()).entries;
  t.same(
    after.map((e) => e.id),
    before,
    'reads and failed requests added nothing',
  );
  t.notOk(
    after.some((e) => e.method === 'GET'),
    'no GET rows',
  );

  // A second project in another organization, by another user; a failed mutation.
  const other = await svc.signup();
  const { organization: orgB } = await other.client.console.organizations.create({ name: 'Other' });
  step();
  const { project: p2, apiKey: p2Key } = await other.client.console.projects.create({
    name: 'second',
    organizationId: orgB.id,
  });
  step();
  await errorOf(client.console.projects.update({ id: p2.id, name: 'not mine' }));
  await errorOf(admin.admin.users.create({ email: u.email, password: PASSWORD, role: 'customer' }));
  t.equal(
    (await admin.admin.audit.list({ action: 'admin.users.create' })).entries.length,
    0,
    'a refused mutation leaves no row',
  );

  // Filters: project, action, both, limit.
  const ofP1 = (await admin.admin.audit.list({ projectId: project.id })).entries;
  t.same(
    ofP1.map((e) => e.action),
    ['console.projects.update', 'console.projects.create'],
    'projectId filter',
  );
  const ofP2 = (await admin.admin.audit.list({ projectId: p2.id })).entries;
  t.same(
    ofP2.map((e) => e.actorId),
    [other.userId],
    "the other project's one row",
  );
  const creates = (await admin.admin.audit.list({ action: 'console.projects.create' })).entries;
  t.same(
    creates.map((e) => e.projectId),
    [p2.id, project.id],
    'action filter, newest first',
  );
  t.same(
    (await admin.admin.audit.list({ action: 'console.projects.create', projectId: project.id })).entries.map(
      (e) => e.requestId,
    ),
    [createReq],
    'both filters',
  );
  t.same((await admin.admin.audit.list({ action: 'no.such.action' })).entries, []);
  t.same((await admin.admin.audit.list({ projectId: UNKNOWN_UUID })).entries, []);
  const newest = (await admin.admin.audit.list({ limit: 1 })).entries;
  t.equal(newest.length, 1);
  t.equal(newest[0]?.projectId, p2.id, 'limit 1: the newest row');
  t.ok((await admin.admin.audit.list({ limit: 5000 })).entries.length > 5, 'a large limit is clamped, not refused');
  t.match(await errorOf(admin.admin.audit.list({ limit: 0 })), { status: 400, code: 'invalid_request' });
  t.match(await errorOf(admin.admin.audit.list({ projectId: 'not-a-uuid' })), { status: 400, code: 'invalid_request' });

  // Actors other than users.
  const { client: staff, userId: staffId } = await staffOf(svc);
  step();
  await staff.console.projects.update({ id: project.id, name: 'by staff' });
  const staffRow = (await staff.admin.audit.list({ limit: 1 })).entries[0];
  t.match(staffRow, { action: 'console.projects.update', actorKind: 'staff', actorId: staffId, projectId: project.id });
  const userCreates = (await admin.admin.audit.list({ action: 'admin.users.create' })).entries;
  t.equal(userCreates.length, 1, 'the staff user creation');
  t.match(userCreates[0], { actorKind: 'platform_admin', actorId: null, targetId: staffId, path: '/admin/v1/users' });

  // The project view: only that project's rows, for those who may see the project.
  const projectView = (await client.console.projects.audit({ id: project.id })).entries;
  t.same(
    projectView.map((e) => e.action),
    ['console.projects.update', 'console.projects.update', 'console.projects.create'],
  );
  t.ok(
    projectView.every((e) => e.projectId === project.id),
    'only rows of the project',
  );
  t.same(
    projectView.map((e) => e.id),
    (await admin.admin.audit.list({ projectId: project.id })).entries.map((e) => e.id),
    'the same rows as the admin filter',
  );
  t.same(
    (await client.console.projects.audit({ id: project.id, action: 'console.projects.create' })).entries.map(
      (e) => e.requestId,
    ),
    [createReq],
    'action filter',
  );
  t.same(
    (await client.console.projects.audit({ id: project.id, limit: 1 })).entries.map((e) => e.actorKind),
    ['staff'],
    'limit',
  );
  const viewers: [string, Client][] = [
    ['project key with project:admin', svc.client({ keyId: apiKey.keyId, secret: apiKey.secret })],
    ['organization token', svc.client({ keyId: organizationToken.tokenId, secret: organizationToken.secret })],
    ['staff token', staff],
    ['platform key', admin],
  ];
  for (const [who, c] of viewers) {
    t.same(
      (await c.console.projects.audit({ id: project.id })).entries.map((e) => e.id),
      projectView.map((e) => e.id),
      who,
    );
  }
  t.match(
    await errorOf(other.client.console.projects.audit({ id: project.id })),
    { status: 404, code: 'not_found' },
    'a non-member: 404',
  );
  t.match(
    await errorOf(svc.client({ keyId: p2Key.keyId, secret: p2Key.secret }).console.projects.audit({ id: project.id })),
    { status: 404, code: 'not_found' },
    "another project's key: 404",
  );
  t.same(
    (await svc.client({ keyId: p2Key.keyId, secret: p2Key.secret }).console.projects.audit({ id: p2.id })).entries.map(
      (e) => e.projectId,
    ),
    [p2.id],
    'that key sees its own project',
  );
  const sendOnly = await client.console.projects.apiKeys.create({ id: project.id, scopes: ['messages:send'] });
  t.match(
    await errorOf(
      svc.client({ keyId: sendOnly.keyId, secret: sendOnly.secret }).console.projects.audit({ id: project.id }),
    ),
    { status: 403, code: 'forbidden' },
    'a key without project:admin: 403',
  );
  t.match(await errorOf(client.console.projects.audit({ id: UNKNOWN_UUID })), { status: 404 });
  t.match(await errorOf(client.console.projects.audit({ id: project.id, limit: 0 })), { status: 400 });
});
