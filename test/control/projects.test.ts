// docs/api.md §4.6 projects, §4.12 whoami of a project key, §5.3 (project:admin scope), §5.4 (access by
// membership: non-members 404, roles 403), §3 (soft delete) and docs/decisions.md #1.
import t from 'tap';
import type { Client } from '@svc-mail/sdk';
import { startTestService, uniqueEmail, type SignedUp } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NO_ID = '00000000-0000-4000-8000-000000000000';

interface Org {
  owner: SignedUp;
  id: string;
  orgClient: Client;
}

async function newOrg(tag = 'org'): Promise<Org> {
  const owner = await svc.signup(uniqueEmail(`${tag}-owner`));
  const res = await owner.client.console.organizations.create({ name: `${tag} org` });
  const { tokenId, secret } = res.organizationToken;
  return { owner, id: res.organization.id, orgClient: svc.client({ keyId: tokenId, secret }) };
}

async function joined(org: Org, role: string): Promise<SignedUp> {
  const { code } = await org.owner.client.console.organizations.joinCodes.create({ id: org.id, role });
  const u = await svc.signup(uniqueEmail(role));
  await u.client.console.organizations.join({ code });
  return u;
}

async function newProject(c: Client, organizationId: string, name = 'proj') {
  const res = await c.console.projects.create({ name, organizationId });
  return { ...res, keyClient: svc.client({ keyId: res.apiKey.keyId, secret: res.apiKey.secret }) };
}

const ids = (r: { projects: { id: string }[] }) => r.projects.map((p) => p.id).sort();

t.test('create: project and its first key, which works', async (t) => {
  const org = await newOrg('create');
  const before = svc.clock.now();
  const res = await org.owner.client.console.projects.create({ name: 'Transactional', organizationId: org.id });
  const after = svc.clock.now();

  t.strictSame(Object.keys(res).sort(), ['apiKey', 'project']);
  const p = res.project;
  t.strictSame(Object.keys(p).sort(), ['created_at', 'id', 'name', 'organization_id', 'plan', 'status', 'updated_at']);
  t.match(p.id, UUID_RE);
  t.equal(p.organization_id, org.id);
  t.equal(p.name, 'Transactional');
  t.equal(p.status, 'active');
  t.equal(p.plan, 'free', "the organization's plan");
  t.match(p.created_at, ISO_RE);
  t.match(p.updated_at, ISO_RE);
  const created = Date.parse(p.created_at);
  t.ok(created >= before - 1 && created <= after + 1, 'created_at is the service clock');

  const k = res.apiKey;
  t.match(k.keyId, /^tk_[A-Za-z0-9_-]+$/);
  t.equal(k.managed, 'platform');
  t.strictSame(k.scopes, ['project:admin']);
  t.type(k.secret, 'string');
  t.ok(k.secret.length >= 32, 'the secret has real entropy');
  t.match(k.id, UUID_RE);
  t.strictSame(k.allowedCidrs, []);
  t.equal(k.rotatedFrom, null);
  t.ok(k.warning.length > 0, 'carries a warning');

  const keyClient = svc.client({ keyId: k.keyId, secret: k.secret });
  t.strictSame(await keyClient.v1.services.whoami(), {
    principal: 'project_api_key',
    projectId: p.id,
    organizationId: org.id,
    scopes: ['project:admin'],
  });
  t.strictSame(await keyClient.console.projects.me(), { project: p }, '/projects/me with the key');
  t.match(await errorOf(org.owner.client.console.projects.me()), { status: 401 }, '/projects/me needs a project key');

  // The plan follows the organization.
  await org.owner.client.console.organizations.plan({ id: org.id, plan: 'payg' });
  t.equal((await keyClient.console.projects.me()).project.plan, 'payg', 'plan reflects the organization');

  // Validation.
  t.match(await errorOf(org.owner.client.console.projects.create({ name: '', organizationId: org.id })), {
    status: 400,
    code: 'invalid_request',
  });
  t.match(
    await errorOf(org.owner.client.console.projects.create({ name: 'x' } as never)),
    { status: 400 },
    'organizationId is required',
  );
  t.match(
    await errorOf(org.owner.client.console.projects.create({ name: 'x', organizationId: NO_ID })),
    { status: 404 },
    'an unknown organization',
  );
  t.match(
    await errorOf(keyClient.console.projects.create({ name: 'x', organizationId: org.id })),
    { status: 401 },
    'a project key cannot create projects',
  );
});

t.test('list across organizations, with and without the filter', async (t) => {
  const a = await newOrg('lista');
  const b = await newOrg('listb');
  const c = await newOrg('listc');
  const pa1 = await newProject(a.owner.client, a.id, 'a1');
  const pa2 = await newProject(a.owner.client, a.id, 'a2');
  const pb = await newProject(b.owner.client, b.id, 'b1');
  const pc = await newProject(c.owner.client, c.id, 'c1');
  // The owner of A joins B.
  const { code } = await b.owner.client.console.organizations.joinCodes.create({ id: b.id, role: 'member' });
  await a.owner.client.console.organizations.join({ code });

  const all = await a.owner.client.console.projects.list();
  t.strictSame(
    ids(all),
    [pa1.project.id, pa2.project.id, pb.project.id].sort(),
    "projects of both of the caller's organizations",
  );
  t.notOk(ids(all).includes(pc.project.id), 'none of an organization the caller is not in');
  t.strictSame(
    all.projects.find((p) => p.id === pb.project.id),
    pb.project,
    'rows have the project shape',
  );

  t.strictSame(
    ids(await a.owner.client.console.projects.list({ organizationId: a.id })),
    [pa1.project.id, pa2.project.id].sort(),
    'filter: A',
  );
  t.strictSame(ids(await a.owner.client.console.projects.list({ organizationId: b.id })), [pb.project.id], 'filter: B');
  t.match(
    await errorOf(a.owner.client.console.projects.list({ organizationId: c.id })),
    { status: 404, code: 'not_found' },
    "a non-member's filter is 404",
  );
  t.match(await errorOf(a.owner.client.console.projects.list({ organizationId: NO_ID })), { status: 404 });

  t.strictSame(ids(await b.owner.client.console.projects.list()), [pb.project.id], "B's owner sees only B");
  const nobody = await svc.signup();
  t.strictSame((await nobody.client.console.projects.list()).projects, [], 'a user of no organization sees none');

  // The organization token lists its own organization's projects.
  t.strictSame(
    ids(await a.orgClient.console.projects.list()),
    [pa1.project.id, pa2.project.id].sort(),
    'the org token sees its org',
  );
  t.match(
    await errorOf(a.orgClient.console.projects.list({ organizationId: b.id })),
    { status: 404 },
    "another org's filter with an org token",
  );
});

t.test('detail, rename, soft delete', async (t) => {
  const org = await newOrg('crud');
  const c = org.owner.client;
  const p = await newProject(c, org.id, 'before');
  const other = await newProject(c, org.id, 'other');

  const d = await c.console.projects.get({ id: p.project.id });
  t.strictSame(Object.keys(d).sort(), ['apiKeys', 'domains', 'messages', 'project', 'suppressions', 'webhooks']);
  t.strictSame(d.project, p.project);
  t.equal(d.apiKeys.length, 1);
  t.match(d.apiKeys[0], { id: p.apiKey.id, keyId: p.apiKey.keyId, managed: 'platform', scopes: ['project:admin'] });
  t.notOk('secret' in d.apiKeys[0]!, 'no secret field');
  t.notOk(JSON.stringify(d).includes(p.apiKey.secret), 'no secret value in the detail');
  t.strictSame(
    (await p.keyClient.console.projects.get({ id: p.project.id })).project,
    p.project,
    'the project key reads its detail',
  );

  svc.clock.advance(1000);
  const renamed = await c.console.projects.update({ id: p.project.id, name: 'after' });
  t.equal(renamed.project.name, 'after');
  t.equal(renamed.project.id, p.project.id);
  t.ok(Date.parse(renamed.project.updated_at) > Date.parse(p.project.updated_at), 'updated_at moves');
  t.equal((await c.console.projects.get({ id: p.project.id })).project.name, 'after');
  t.equal((await p.keyClient.console.projects.me()).project.name, 'after');
  t.equal(
    (await p.keyClient.console.projects.update({ id: p.project.id, name: 'by key' })).project.name,
    'by key',
    'a project:admin key renames',
  );
  t.match(await errorOf(c.console.projects.update({ id: p.project.id, name: '' })), { status: 400 });
  t.equal(
    (await c.console.projects.get({ id: other.project.id })).project.name,
    'other',
    'the other project is untouched',
  );

  // Soft delete.
  const second = await c.console.projects.apiKeys.create({ id: p.project.id, label: 'extra' });
  t.strictSame(await c.console.projects.delete({ id: p.project.id }), { ok: true });
  t.match(
    await errorOf(c.console.projects.get({ id: p.project.id })),
    { status: 404, code: 'not_found' },
    'detail is 404',
  );
  t.notOk(ids(await c.console.projects.list()).includes(p.project.id), 'it leaves the list');
  t.notOk(
    ids(await c.console.projects.list({ organizationId: org.id })).includes(p.project.id),
    'and the filtered list',
  );
  t.strictSame(
    (await c.console.organizations.get({ id: org.id })).projects.map((x) => x.id),
    [other.project.id],
    "and the organization's detail",
  );
  t.match(
    await errorOf(p.keyClient.v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'its first key is refused',
  );
  t.match(
    await errorOf(svc.client({ keyId: second.keyId, secret: second.secret }).v1.services.whoami()),
    { status: 401 },
    'so is every key',
  );
  t.match(await errorOf(c.console.projects.update({ id: p.project.id, name: 'zombie' })), { status: 404 });
  t.match(await errorOf(c.console.projects.delete({ id: p.project.id })), { status: 404 }, 'deleting twice is 404');
  t.match(
    await errorOf(c.console.projects.apiKeys.create({ id: p.project.id })),
    { status: 404 },
    'no keys for a deleted project',
  );
  t.match(
    await other.keyClient.v1.services.whoami(),
    { projectId: other.project.id },
    "the other project's key still works",
  );

  // Deleted by its own key.
  const self = await newProject(c, org.id, 'self');
  t.strictSame(
    await self.keyClient.console.projects.delete({ id: self.project.id }),
    { ok: true },
    'a project:admin key deletes its project',
  );
  t.match(await errorOf(self.keyClient.v1.services.whoami()), { status: 401 });
  t.match(await errorOf(c.console.projects.get({ id: self.project.id })), { status: 404 });
});

t.test('a project key reaches only its own project', async (t) => {
  const org = await newOrg('keyscope');
  const a = await newProject(org.owner.client, org.id, 'A');
  const b = await newProject(org.owner.client, org.id, 'B');
  const elsewhere = await newOrg('keyscope2');
  const c = await newProject(elsewhere.owner.client, elsewhere.id, 'C');
  for (const [what, target] of [
    ['same organization', b],
    ['another organization', c],
  ] as const) {
    t.match(
      await errorOf(a.keyClient.console.projects.get({ id: target.project.id })),
      { status: 404, code: 'not_found' },
      `${what}: GET`,
    );
    t.match(
      await errorOf(a.keyClient.console.projects.update({ id: target.project.id, name: 'x' })),
      { status: 404 },
      `${what}: PATCH`,
    );
    t.match(
      await errorOf(a.keyClient.console.projects.delete({ id: target.project.id })),
      { status: 404 },
      `${what}: DELETE`,
    );
    t.match(
      await errorOf(a.keyClient.console.projects.apiKeys.list({ id: target.project.id })),
      { status: 404 },
      `${what}: list keys`,
    );
    t.match(
      await errorOf(a.keyClient.console.projects.apiKeys.create({ id: target.project.id })),
      { status: 404 },
      `${what}: mint a key`,
    );
  }
  t.equal((await org.owner.client.console.projects.get({ id: b.project.id })).project.name, 'B', 'B untouched');
  t.equal(
    (await org.owner.client.console.projects.get({ id: b.project.id })).apiKeys.length,
    1,
    'no key was minted on B',
  );
  t.match(await errorOf(a.keyClient.console.projects.list()), { status: 401 }, 'a project key does not list projects');
  t.match(
    await errorOf(a.keyClient.console.organizations.get({ id: org.id })),
    { status: 401 },
    'nor read its organization',
  );
});

t.test('an organization token manages its own organization’s projects only', async (t) => {
  const org = await newOrg('orgtok');
  const other = await newOrg('orgtok2');
  const made = await org.orgClient.console.projects.create({ name: 'by token', organizationId: org.id });
  t.equal(made.project.organization_id, org.id);
  t.match(made.apiKey, { managed: 'platform', scopes: ['project:admin'] });
  t.equal((await org.orgClient.console.projects.get({ id: made.project.id })).project.name, 'by token');
  t.equal(
    (await org.orgClient.console.projects.update({ id: made.project.id, name: 'renamed by token' })).project.name,
    'renamed by token',
  );
  const key = await org.orgClient.console.projects.apiKeys.create({ id: made.project.id, label: 'from org token' });
  t.match(key.keyId, /^tk_/);
  t.ok(ids(await org.owner.client.console.projects.list()).includes(made.project.id), 'the owner sees it');
  t.strictSame(await org.orgClient.console.projects.delete({ id: made.project.id }), { ok: true });
  t.match(await errorOf(org.owner.client.console.projects.get({ id: made.project.id })), { status: 404 }, 'deleted');

  const theirs = await newProject(other.owner.client, other.id, 'theirs');
  t.match(
    await errorOf(org.orgClient.console.projects.create({ name: 'x', organizationId: other.id })),
    { status: 404 },
    'not in another org',
  );
  t.match(await errorOf(org.orgClient.console.projects.get({ id: theirs.project.id })), { status: 404 });
  t.match(await errorOf(org.orgClient.console.projects.update({ id: theirs.project.id, name: 'x' })), { status: 404 });
  t.match(await errorOf(org.orgClient.console.projects.delete({ id: theirs.project.id })), { status: 404 });
  t.equal(
    (await other.owner.client.console.projects.get({ id: theirs.project.id })).project.name,
    'theirs',
    'untouched',
  );
});

t.test('roles: an auditor reads, a member manages, a non-member gets 404', async (t) => {
  const org = await newOrg('roles');
  const p = await newProject(org.owner.client, org.id, 'guarded');
  const auditor = await joined(org, 'auditor');
  const member = await joined(org, 'member');
  const billing = await joined(org, 'billing');

  t.strictSame(
    (await auditor.client.console.projects.get({ id: p.project.id })).project,
    p.project,
    'an auditor reads the detail',
  );
  t.ok(ids(await auditor.client.console.projects.list()).includes(p.project.id), 'and the list');
  t.match(
    await errorOf(auditor.client.console.projects.update({ id: p.project.id, name: 'nope' })),
    { status: 403, code: 'forbidden' },
    'auditor rename',
  );
  t.match(
    await errorOf(auditor.client.console.projects.delete({ id: p.project.id })),
    { status: 403, code: 'forbidden' },
    'auditor delete',
  );
  t.match(
    await errorOf(auditor.client.console.projects.create({ name: 'nope', organizationId: org.id })),
    { status: 403 },
    'auditor create',
  );
  t.match(
    await errorOf(auditor.client.console.projects.apiKeys.create({ id: p.project.id })),
    { status: 403 },
    'auditor cannot mint a key (§5.4 rule 4)',
  );
  t.match(
    await errorOf(billing.client.console.projects.update({ id: p.project.id, name: 'nope' })),
    { status: 403 },
    'billing rename',
  );
  const still = await org.owner.client.console.projects.get({ id: p.project.id });
  t.equal(still.project.name, 'guarded', 'name unchanged');
  t.equal(still.apiKeys.length, 1, 'no key minted');

  const mine = await member.client.console.projects.create({ name: 'member made', organizationId: org.id });
  t.equal(mine.project.organization_id, org.id, 'a member creates projects');
  t.equal(
    (await member.client.console.projects.update({ id: p.project.id, name: 'member renamed' })).project.name,
    'member renamed',
  );
  t.strictSame(await member.client.console.projects.delete({ id: mine.project.id }), { ok: true }, 'and deletes');

  const outsider = await svc.signup();
  t.match(
    await errorOf(outsider.client.console.projects.get({ id: p.project.id })),
    { status: 404, code: 'not_found' },
    'non-member GET',
  );
  t.match(
    await errorOf(outsider.client.console.projects.update({ id: p.project.id, name: 'x' })),
    { status: 404 },
    'non-member PATCH',
  );
  t.match(
    await errorOf(outsider.client.console.projects.delete({ id: p.project.id })),
    { status: 404 },
    'non-member DELETE',
  );
  t.match(
    await errorOf(outsider.client.console.projects.create({ name: 'x', organizationId: org.id })),
    { status: 404 },
    'non-member create',
  );
  t.match(await errorOf(org.owner.client.console.projects.get({ id: NO_ID })), { status: 404 }, 'unknown id');
  t.match(await errorOf(org.owner.client.console.projects.get({ id: 'nope' })), { status: 404 }, 'malformed id');
  t.equal(
    (await org.owner.client.console.projects.get({ id: p.project.id })).project.name,
    'member renamed',
    'the outsider changed nothing',
  );
});

t.test('a project key without project:admin gets 403 on project console routes', async (t) => {
  const org = await newOrg('noadmin');
  const p = await newProject(org.owner.client, org.id, 'scoped');
  const k = await p.keyClient.console.projects.apiKeys.create({
    id: p.project.id,
    label: 'sender',
    scopes: ['messages:send', 'messages:read'],
  });
  const sender = svc.client({ keyId: k.keyId, secret: k.secret });
  t.match(
    await sender.v1.services.whoami(),
    { principal: 'project_api_key', projectId: p.project.id, scopes: ['messages:send', 'messages:read'] },
    'the key authenticates',
  );
  t.strictSame((await sender.console.projects.me()).project, p.project, '/projects/me needs no scope');
  const calls: [string, () => Promise<unknown>][] = [
    ['GET project', () => sender.console.projects.get({ id: p.project.id })],
    ['PATCH project', () => sender.console.projects.update({ id: p.project.id, name: 'x' })],
    ['DELETE project', () => sender.console.projects.delete({ id: p.project.id })],
    ['list keys', () => sender.console.projects.apiKeys.list({ id: p.project.id })],
    ['mint key', () => sender.console.projects.apiKeys.create({ id: p.project.id, scopes: ['project:admin'] })],
    ['revoke key', () => sender.console.projects.apiKeys.delete({ id: p.project.id, keyId: p.apiKey.keyId })],
  ];
  for (const [name, call] of calls) t.match(await errorOf(call()), { status: 403, code: 'forbidden' }, name);
  const d = await org.owner.client.console.projects.get({ id: p.project.id });
  t.equal(d.project.name, 'scoped', 'nothing renamed');
  t.strictSame(d.apiKeys.map((x) => x.keyId).sort(), [p.apiKey.keyId, k.keyId].sort(), 'nothing minted or revoked');
});
