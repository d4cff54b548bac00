// docs/api.md §4.3 organizations (members, tokens, invitations, join codes, plan), §3 (join code and
// invitation states), §4.12 whoami of an organization token, §5.4 (non-members get 404, roles 403),
// §5.5 (roles; the last owner can never be demoted or removed), §7, §8 and docs/decisions.md #1.
import t from 'tap';
import { createHash } from 'node:crypto';
import { SvcError, type Client } from '@svc-mail/sdk';
import { listNotifications, type OutboxRow } from '../../storage/pg/notification-outbox.js';
import { INVITATION_TTL_MS, JOIN_CODE_TTL_MS } from '../../core/organizations.js';
import { startTestService, uniqueEmail, type SignedUp } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);

const MINUTE = 60_000;
const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CODE_SYMBOL = '[23456789ABCDEFGHJKLMNPQRSTUVWXYZ]';
const CODE_RE = new RegExp(`^SVC-${CODE_SYMBOL}{4}-${CODE_SYMBOL}{4}$`);
const NO_ORG = '00000000-0000-4000-8000-000000000000';

/** The status a call ended with: 200 or the SvcError status. */
async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    if (err instanceof SvcError) return err.status;
    throw err;
  }
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const outbox = (recipient: string) => listNotifications(svc.running.storage.db, { recipient });
const openBody = (row: OutboxRow) => svc.running.storage.sealer.open(row.bodySealed, `notification_outbox:${row.id}`);
const tokenOf = (acceptUrl: string) => new URL(acceptUrl).searchParams.get('token') ?? '';

interface Org {
  owner: SignedUp;
  id: string;
  name: string;
  orgToken: { tokenId: string; secret: string };
  orgClient: Client;
}

async function newOrg(tag = 'org'): Promise<Org> {
  const owner = await svc.signup(uniqueEmail(`${tag}-owner`));
  const name = `${tag} ${owner.userId.slice(0, 8)}`;
  const res = await owner.client.console.organizations.create({ name });
  const { tokenId, secret } = res.organizationToken;
  return {
    owner,
    id: res.organization.id,
    name,
    orgToken: { tokenId, secret },
    orgClient: svc.client({ keyId: tokenId, secret }),
  };
}

/** A new user who joined `org` with a join code of `role`. */
async function joined(org: Org, role: string, tag = role): Promise<SignedUp> {
  const { code } = await org.owner.client.console.organizations.joinCodes.create({ id: org.id, role });
  const u = await svc.signup(uniqueEmail(tag));
  await u.client.console.organizations.join({ code });
  return u;
}

const membersOf = async (org: Org) =>
  new Map((await org.owner.client.console.organizations.get({ id: org.id })).members.map((m) => [m.userId, m.role]));
const codeStatus = async (org: Org, codeId: string) =>
  (await org.owner.client.console.organizations.joinCodes.list({ id: org.id })).joinCodes.find((c) => c.id === codeId)
    ?.status;
const pendingIds = async (org: Org) =>
  (await org.owner.client.console.organizations.invitations.list({ id: org.id })).invitations.map((i) => i.id);

t.test('roles metadata is public', async (t) => {
  const res = await fetch(`${svc.url}/console/v1/organizations/roles`);
  t.equal(res.status, 200, 'an unsigned request is answered');
  const body = (await res.json()) as { roles: { role: string; permissions: string[] }[]; permissions: string[] };
  t.same(
    body.roles.map((r) => r.role),
    ['owner', 'admin', 'member', 'auditor', 'billing'],
  );
  t.equal(body.permissions.length, 7, 'seven permission keys');
  const viaSdk = await svc.client().console.organizations.roles();
  t.strictSame(viaSdk, body, 'the SDK without a credential gets the same answer');
});

t.test('create: organization, organization token, sole owner', async (t) => {
  const owner = await svc.signup(uniqueEmail('create'));
  const before = svc.clock.now();
  const res = await owner.client.console.organizations.create({ name: 'Acme Mail' });
  const after = svc.clock.now();

  t.strictSame(Object.keys(res).sort(), ['organization', 'organizationToken']);
  const org = res.organization;
  t.strictSame(Object.keys(org).sort(), ['created_at', 'id', 'name', 'plan', 'updated_at']);
  t.match(org.id, UUID_RE);
  t.equal(org.name, 'Acme Mail');
  t.equal(org.plan, 'free', 'a new organization is on the free plan');
  t.match(org.created_at, ISO_RE);
  t.match(org.updated_at, ISO_RE);
  const created = Date.parse(org.created_at);
  t.ok(created >= before - 1 && created <= after + 1, 'created_at is the service clock');

  const tok = res.organizationToken;
  t.match(tok.tokenId, /^svco_[A-Za-z0-9_-]+$/);
  t.type(tok.secret, 'string');
  t.ok(tok.secret.length >= 32, 'the secret has real entropy');
  t.match(tok.id, UUID_RE);
  t.match(tok.createdAt, ISO_RE);
  t.ok(tok.warning.length > 0, 'carries a warning');

  // The organization token authenticates as the organization.
  const orgClient = svc.client({ keyId: tok.tokenId, secret: tok.secret });
  t.strictSame(await orgClient.v1.services.whoami(), {
    principal: 'organization_token',
    organizationId: org.id,
    organization: { id: org.id, name: 'Acme Mail', plan: 'free' },
  });
  // The account token now lists the organization.
  t.strictSame(await owner.client.v1.services.whoami(), {
    principal: 'account_token',
    userId: owner.userId,
    role: 'customer',
    organizations: [{ id: org.id, name: 'Acme Mail', plan: 'free' }],
  });

  const detail = await owner.client.console.organizations.get({ id: org.id });
  t.equal(detail.members.length, 1, 'exactly one member');
  t.match(
    detail.members[0],
    { userId: owner.userId, email: owner.email, role: 'owner' },
    'the creator is the sole owner',
  );
  t.strictSame(
    detail.tokens.map((x) => x.tokenId),
    [tok.tokenId],
    'the minted token is listed',
  );
  t.notOk(JSON.stringify(detail).includes(tok.secret), 'the detail never carries the token secret');

  const list = await owner.client.console.organizations.list();
  t.strictSame(list.organizations, [{ ...org, role: 'owner' }], 'list shows the organization with the caller role');

  // A second organization by the same user.
  const again = await errorOf(owner.client.console.organizations.create({ name: 'Second' }));
  t.match(again, { status: 409, code: 'already_in_organization' });
  t.equal((await owner.client.console.organizations.list()).organizations.length, 1, 'no second organization was made');

  // The route needs an account token.
  t.match(await errorOf(orgClient.console.organizations.create({ name: 'By token' })), { status: 401 });
  t.match(await errorOf(svc.client().console.organizations.create({ name: 'Unsigned' })), { status: 401 });
  t.match(
    await errorOf(owner.client.console.organizations.create({ name: '' })),
    { status: 400, code: 'invalid_request' },
    'an empty name is 400',
  );
});

t.test('a user who joined another organization cannot create one; list shows each role', async (t) => {
  const org = await newOrg('joinfirst');
  const u = await joined(org, 'auditor', 'joiner');
  const e = await errorOf(u.client.console.organizations.create({ name: 'Mine' }));
  t.match(e, { status: 409, code: 'already_in_organization' });
  const list = await u.client.console.organizations.list();
  t.strictSame(
    list.organizations.map((o) => [o.id, o.role]),
    [[org.id, 'auditor']],
    'the list shows the joined org with role auditor',
  );

  // The owner of one organization may join others with a code; the list carries both roles.
  const other = await newOrg('second');
  const { code } = await org.owner.client.console.organizations.joinCodes.create({ id: org.id, role: 'admin' });
  await other.owner.client.console.organizations.join({ code });
  const both = await other.owner.client.console.organizations.list();
  t.strictSame(
    both.organizations.map((o) => [o.id, o.role]).sort(),
    [
      [org.id, 'admin'],
      [other.id, 'owner'],
    ].sort(),
    'one row per organization with its own role',
  );
});

t.test('detail: members, projects, tokens, invitations, usage and inboxUsage; plan; rename', async (t) => {
  const org = await newOrg('detail');
  const c = org.owner.client;
  const project = await c.console.projects.create({ name: 'p1', organizationId: org.id });
  const inv = await c.console.organizations.invitations.create({ id: org.id, email: uniqueEmail('pending') });

  const d = await c.console.organizations.get({ id: org.id });
  t.strictSame(Object.keys(d).sort(), [
    'inboxUsage',
    'invitations',
    'members',
    'organization',
    'projects',
    'tokens',
    'usage',
  ]);
  t.equal(d.organization.id, org.id);
  t.equal(d.organization.name, org.name);
  t.strictSame(
    d.projects.map((p) => [p.id, p.name, p.status]),
    [[project.project.id, 'p1', 'active']],
  );
  t.strictSame(
    d.invitations.map((i) => i.id),
    [inv.invitation.id],
    'the pending invitation is listed',
  );
  t.strictSame(d.usage, { tier: 'free', dailyLimit: 500, usedToday: 0, remaining: 500, overageToday: 0 });
  const now = new Date(svc.clock.now());
  const monthStart = `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}-01`;
  t.match(d.inboxUsage.monthStart, /^\d{4}-\d{2}-01$/);
  t.strictSame(d.inboxUsage, {
    activeInboxes: 0,
    billedCents: 0,
    storageOverageGb: 0,
    storageBilledCents: 0,
    totalBilledCents: 0,
    monthStart,
  });

  // The organization token reads the same detail.
  t.strictSame(
    (await org.orgClient.console.organizations.get({ id: org.id })).organization,
    d.organization,
    'the org token reads the detail',
  );

  // Plan: payg lifts the cap.
  const paid = await c.console.organizations.plan({ id: org.id, plan: 'payg' });
  t.equal(paid.organization.plan, 'payg');
  const d2 = await c.console.organizations.get({ id: org.id });
  t.equal(d2.organization.plan, 'payg');
  t.equal(d2.usage.tier, 'payg');
  t.strictSame(d2.usage, { tier: 'payg', dailyLimit: null, usedToday: 0, remaining: null, overageToday: 0 });
  t.match(await org.orgClient.v1.services.whoami(), { organization: { plan: 'payg' } }, 'whoami shows the new plan');
  t.match(await errorOf(c.console.organizations.plan({ id: org.id, plan: 'gold' as never })), {
    status: 400,
    code: 'invalid_request',
  });
  t.equal(
    (await c.console.organizations.plan({ id: org.id, plan: 'free' })).organization.plan,
    'free',
    'and back to free',
  );

  // Rename.
  svc.clock.advance(1000);
  const renamed = await c.console.organizations.update({ id: org.id, name: 'Renamed Co' });
  t.equal(renamed.organization.name, 'Renamed Co');
  t.ok(Date.parse(renamed.organization.updated_at) > Date.parse(d.organization.updated_at), 'updated_at moves');
  t.equal(renamed.organization.created_at, d.organization.created_at, 'created_at does not');
  t.equal((await c.console.organizations.get({ id: org.id })).organization.name, 'Renamed Co');
  t.match(await org.orgClient.v1.services.whoami(), { organization: { name: 'Renamed Co' } });
  t.match((await c.console.organizations.list()).organizations, [{ id: org.id, name: 'Renamed Co', role: 'owner' }]);
  t.equal(
    (await org.orgClient.console.organizations.update({ id: org.id, name: 'By token' })).organization.name,
    'By token',
    'the org token may rename',
  );
});

t.test('organization tokens: create, list without secrets, revoke', async (t) => {
  const org = await newOrg('tokens');
  const c = org.owner.client;
  const minted = await c.console.organizations.tokens.create({ id: org.id, label: 'ci deploy' });
  t.strictSame(Object.keys(minted).sort(), ['createdAt', 'id', 'label', 'secret', 'tokenId', 'warning']);
  t.match(minted.tokenId, /^svco_/);
  t.not(minted.tokenId, org.orgToken.tokenId);
  t.equal(minted.label, 'ci deploy');
  const mintedClient = svc.client({ keyId: minted.tokenId, secret: minted.secret });
  t.match(await mintedClient.v1.services.whoami(), { principal: 'organization_token', organizationId: org.id });

  const byToken = await org.orgClient.console.organizations.tokens.create({ id: org.id });
  t.equal(byToken.label, null, 'the org token can mint another; no label is null');

  const list = await c.console.organizations.tokens.list({ id: org.id });
  t.strictSame(
    list.tokens.map((x) => x.tokenId).sort(),
    [org.orgToken.tokenId, minted.tokenId, byToken.tokenId].sort(),
  );
  for (const row of list.tokens)
    t.strictSame(Object.keys(row).sort(), ['createdAt', 'id', 'label', 'tokenId'], `no secret field on ${row.tokenId}`);
  const raw = JSON.stringify(list);
  for (const s of [org.orgToken.secret, minted.secret, byToken.secret])
    t.notOk(raw.includes(s), 'no secret value in the list');
  t.equal(
    list.tokens.find((x) => x.tokenId === org.orgToken.tokenId)?.label,
    'default',
    'the creation token is labelled default',
  );

  // Revoke by tokenId, and by database id.
  t.strictSame(await c.console.organizations.tokens.delete({ id: org.id, tokenId: minted.tokenId }), { ok: true });
  t.match(
    await errorOf(mintedClient.v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'the revoked token is refused',
  );
  t.strictSame(
    await c.console.organizations.tokens.delete({ id: org.id, tokenId: byToken.id }),
    { ok: true },
    'revoke by database id',
  );
  t.match(await errorOf(svc.client({ keyId: byToken.tokenId, secret: byToken.secret }).v1.services.whoami()), {
    status: 401,
  });
  t.strictSame(
    (await c.console.organizations.tokens.list({ id: org.id })).tokens.map((x) => x.tokenId),
    [org.orgToken.tokenId],
    'revoked tokens leave the list',
  );
  t.match(await org.orgClient.v1.services.whoami(), { organizationId: org.id }, 'the other token keeps working');
  t.match(
    await errorOf(c.console.organizations.tokens.delete({ id: org.id, tokenId: minted.tokenId })),
    { status: 404 },
    'revoking twice is 404',
  );
  t.match(await errorOf(c.console.organizations.tokens.delete({ id: org.id, tokenId: 'svco_nope' })), { status: 404 });

  // A member without tokens:manage reads but cannot mint.
  const member = await joined(org, 'member');
  t.equal(
    (await member.client.console.organizations.tokens.list({ id: org.id })).tokens.length,
    1,
    'a member lists tokens',
  );
  t.match(await errorOf(member.client.console.organizations.tokens.create({ id: org.id })), {
    status: 403,
    code: 'forbidden',
  });
  t.match(
    await errorOf(member.client.console.organizations.tokens.delete({ id: org.id, tokenId: org.orgToken.tokenId })),
    { status: 403 },
  );
  t.match(await org.orgClient.v1.services.whoami(), { organizationId: org.id }, 'the refused revoke changed nothing');
});

t.test('invitations: create, mail, accept case-insensitively, single use', async (t) => {
  const org = await newOrg('invite');
  const c = org.owner.client;
  const invitee = uniqueEmail('invitee');
  const mixedCase = invitee.toUpperCase();
  t.not(mixedCase, invitee);

  const before = svc.clock.now();
  const res = await c.console.organizations.invitations.create({ id: org.id, email: mixedCase, role: 'admin' });
  t.strictSame(Object.keys(res).sort(), ['acceptUrl', 'emailed', 'invitation']);
  t.equal(res.emailed, true);
  t.match(res.invitation, { organizationId: org.id, role: 'admin' });
  t.equal(res.invitation.email.toLowerCase(), invitee, 'the invited address');
  t.match(res.invitation.id, UUID_RE);
  const ttl = Date.parse(res.invitation.expiresAt) - Date.parse(res.invitation.createdAt);
  t.equal(ttl, INVITATION_TTL_MS, 'valid for 7 days');
  t.ok(Date.parse(res.invitation.createdAt) >= before - 1, 'createdAt is the service clock');

  const url = new URL(res.acceptUrl);
  t.equal(url.origin, svc.running.publicUrl, 'built on the public URL');
  t.equal(url.pathname, '/invitations/accept');
  const token = tokenOf(res.acceptUrl);
  t.ok(token.length >= 32, 'the token has real entropy');

  const rows = await outbox(invitee);
  t.equal(rows.length, 1, 'exactly one mail to the invitee');
  t.equal(rows[0]?.kind, 'invitation');
  t.equal(rows[0]?.recipient.toLowerCase(), invitee);
  t.ok(openBody(rows[0]!).includes(res.acceptUrl), 'the mail carries the accept link');
  t.notOk(rows[0]!.bodySealed.includes(token), 'the stored body is sealed');

  t.strictSame(await pendingIds(org), [res.invitation.id], 'pending');

  // Someone else cannot accept it.
  const stranger = await svc.signup(uniqueEmail('stranger'));
  t.match(await errorOf(stranger.client.console.organizations.invitations.accept({ token })), {
    status: 403,
    code: 'forbidden',
  });
  t.notOk((await membersOf(org)).has(stranger.userId), 'the stranger did not join');
  t.strictSame(await pendingIds(org), [res.invitation.id], 'still pending after a refused accept');

  // Garbage tokens.
  for (const bad of ['garbage', token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A')]) {
    t.match(
      await errorOf(stranger.client.console.organizations.invitations.accept({ token: bad })),
      { status: 401, code: 'unauthorized' },
      `token ${bad.slice(0, 8)}…`,
    );
  }

  // The invitee (lower-case signup) accepts.
  const u = await svc.signup(invitee);
  const accepted = await u.client.console.organizations.invitations.accept({ token });
  t.match(accepted, { organization: { id: org.id }, role: 'admin' });
  t.equal((await membersOf(org)).get(u.userId), 'admin', 'member with the invited role');
  t.match((await u.client.console.organizations.list()).organizations, [{ id: org.id, role: 'admin' }]);
  t.strictSame(await pendingIds(org), [], 'no longer pending');
  t.strictSame((await c.console.organizations.get({ id: org.id })).invitations, [], 'nor in the detail');
  t.match(
    await errorOf(u.client.console.organizations.invitations.accept({ token })),
    { status: 401 },
    'accepting again is 401',
  );

  // Role defaults to member.
  const plain = uniqueEmail('plain');
  const r2 = await c.console.organizations.invitations.create({ id: org.id, email: plain });
  t.equal(r2.invitation.role, 'member');
  const u2 = await svc.signup(plain.toUpperCase().replace('@EXAMPLE.TEST', '@example.test'));
  t.equal(
    (await u2.client.console.organizations.invitations.accept({ token: tokenOf(r2.acceptUrl) })).role,
    'member',
    'an upper-case signup accepts too',
  );
  t.equal((await membersOf(org)).get(u2.userId), 'member');

  // Who may invite.
  t.match(
    await errorOf(u2.client.console.organizations.invitations.create({ id: org.id, email: uniqueEmail('x') })),
    { status: 403, code: 'forbidden' },
    'a member cannot invite',
  );
  const byAdmin = await u.client.console.organizations.invitations.create({
    id: org.id,
    email: uniqueEmail('fromadmin'),
  });
  t.equal(byAdmin.emailed, true, 'an admin can invite');
  const byToken = await org.orgClient.console.organizations.invitations.create({
    id: org.id,
    email: uniqueEmail('fromtoken'),
    role: 'auditor',
  });
  t.equal(byToken.invitation.role, 'auditor', 'the org token can invite');
  t.match(await errorOf(c.console.organizations.invitations.create({ id: org.id, email: 'not an email' })), {
    status: 400,
  });
  t.match(
    await errorOf(
      c.console.organizations.invitations.create({ id: org.id, email: uniqueEmail('r'), role: 'god' as never }),
    ),
    { status: 400 },
  );
});

t.test('invitations: revoke', async (t) => {
  const org = await newOrg('invrevoke');
  const c = org.owner.client;
  const email = uniqueEmail('revoked');
  const inv = await c.console.organizations.invitations.create({ id: org.id, email });
  const keep = await c.console.organizations.invitations.create({ id: org.id, email: uniqueEmail('kept') });
  t.strictSame(await c.console.organizations.invitations.delete({ id: org.id, invitationId: inv.invitation.id }), {
    ok: true,
  });
  t.strictSame(await pendingIds(org), [keep.invitation.id], 'the revoked one is no longer pending');
  const u = await svc.signup(email);
  t.match(await errorOf(u.client.console.organizations.invitations.accept({ token: tokenOf(inv.acceptUrl) })), {
    status: 401,
    code: 'unauthorized',
  });
  t.notOk((await membersOf(org)).has(u.userId));
  t.match(
    await errorOf(c.console.organizations.invitations.delete({ id: org.id, invitationId: inv.invitation.id })),
    { status: 404 },
    'revoking twice is 404',
  );
  const member = await joined(org, 'member');
  t.match(
    await errorOf(
      member.client.console.organizations.invitations.delete({ id: org.id, invitationId: keep.invitation.id }),
    ),
    { status: 403 },
    'a member cannot revoke',
  );
  t.strictSame(await pendingIds(org), [keep.invitation.id]);
});

t.test('join codes: create, list without codes, redeem, single use, revoke', async (t) => {
  const org = await newOrg('codes');
  const c = org.owner.client;
  const res = await c.console.organizations.joinCodes.create({ id: org.id });
  t.strictSame(Object.keys(res).sort(), ['code', 'joinCode', 'warning']);
  t.match(res.code, CODE_RE);
  t.ok(res.warning.length > 0);
  t.match(res.joinCode, { role: 'member', status: 'active', usedAt: null });
  t.equal(
    Date.parse(res.joinCode.expiresAt) - Date.parse(res.joinCode.createdAt),
    JOIN_CODE_TTL_MS,
    'valid for 7 days',
  );

  // Codes are random.
  const more = await Promise.all(
    [1, 2, 3].map(() => c.console.organizations.joinCodes.create({ id: org.id, role: 'auditor' })),
  );
  t.equal(new Set([res.code, ...more.map((m) => m.code)]).size, 4, 'four distinct codes');
  for (const m of more) t.match(m.code, CODE_RE);

  const list = await c.console.organizations.joinCodes.list({ id: org.id });
  t.strictSame(
    list.joinCodes.map((j) => j.status),
    ['active', 'active', 'active', 'active'],
  );
  t.strictSame(Object.keys(list.joinCodes[0]!).sort(), ['createdAt', 'expiresAt', 'id', 'role', 'status', 'usedAt']);
  const raw = JSON.stringify(list);
  for (const code of [res.code, ...more.map((m) => m.code)]) {
    t.notOk(raw.includes(code), 'the list never shows a code');
    t.notOk(raw.includes(code.slice(4)), 'nor its random part');
    t.notOk(raw.includes(sha256(code)), 'nor its hash');
  }
  t.notOk(JSON.stringify(await c.console.organizations.get({ id: org.id })).includes(res.code), 'nor does the detail');

  // Redeem, lower-cased.
  const u = await svc.signup(uniqueEmail('redeem'));
  const joinedRes = await u.client.console.organizations.join({ code: res.code.toLowerCase() });
  t.match(joinedRes, { organization: { id: org.id, name: org.name }, role: 'member' });
  t.equal((await membersOf(org)).get(u.userId), 'member');
  const used = (await c.console.organizations.joinCodes.list({ id: org.id })).joinCodes.find(
    (j) => j.id === res.joinCode.id,
  );
  t.equal(used?.status, 'used');
  t.match(used?.usedAt, ISO_RE, 'usedAt is set');

  // Used: another user cannot redeem it; revoking it is 409.
  const v = await svc.signup(uniqueEmail('late'));
  t.match(
    await errorOf(v.client.console.organizations.join({ code: res.code })),
    { status: 401, code: 'unauthorized' },
    'a used code is 401',
  );
  t.notOk((await membersOf(org)).has(v.userId));
  t.match(await errorOf(c.console.organizations.joinCodes.delete({ id: org.id, codeId: res.joinCode.id })), {
    status: 409,
    code: 'conflict',
  });
  t.equal(await codeStatus(org, res.joinCode.id), 'used', 'still used');

  // Revoke an active one.
  const [toRevoke, toUse] = more;
  t.strictSame(await c.console.organizations.joinCodes.delete({ id: org.id, codeId: toRevoke!.joinCode.id }), {
    ok: true,
  });
  t.equal(await codeStatus(org, toRevoke!.joinCode.id), 'revoked');
  t.match(
    await errorOf(v.client.console.organizations.join({ code: toRevoke!.code })),
    { status: 401 },
    'a revoked code is 401',
  );
  t.notOk((await membersOf(org)).has(v.userId));

  // Role carried by the code; an existing member gets 409 and the code stays active.
  t.match(
    await errorOf(u.client.console.organizations.join({ code: toUse!.code })),
    { status: 409, code: 'conflict' },
    'already a member',
  );
  t.match(await errorOf(c.console.organizations.join({ code: toUse!.code })), { status: 409 }, 'the owner too');
  t.equal(await codeStatus(org, toUse!.joinCode.id), 'active', 'a refused redemption does not use the code');
  t.match(
    await v.client.console.organizations.join({ code: ` ${toUse!.code} ` }),
    { role: 'auditor' },
    'role auditor joins as auditor',
  );
  t.equal((await membersOf(org)).get(v.userId), 'auditor');

  // Garbage and unknown codes.
  for (const code of ['garbage', 'SVC-2222-2222', '']) {
    const e = await errorOf(v.client.console.organizations.join({ code }));
    t.equal(e.status, code === '' ? 400 : 401, `code ${JSON.stringify(code)}`);
  }
  t.match(await errorOf(c.console.organizations.joinCodes.delete({ id: org.id, codeId: NO_ORG })), { status: 404 });

  // Who may make codes: members:manage.
  const auditorCodes = await errorOf(v.client.console.organizations.joinCodes.create({ id: org.id }));
  t.match(auditorCodes, { status: 403, code: 'forbidden' }, 'an auditor cannot make codes');
  t.match(
    await errorOf(u.client.console.organizations.joinCodes.delete({ id: org.id, codeId: more[2]!.joinCode.id })),
    { status: 403 },
    'a member cannot revoke',
  );
  t.equal(
    (await v.client.console.organizations.joinCodes.list({ id: org.id })).joinCodes.length,
    4,
    'an auditor reads the list',
  );
  const viaToken = await org.orgClient.console.organizations.joinCodes.create({ id: org.id, role: 'billing' });
  t.equal(viaToken.joinCode.role, 'billing', 'the org token makes codes');
});

t.test('join codes: the role text', async (t) => {
  const org = await newOrg('coderole');
  const cases: [string | undefined, string][] = [
    ['auditor', 'auditor'],
    ['admin', 'admin'],
    ['billing', 'billing'],
    ['superuser', 'member'],
    [undefined, 'member'],
  ];
  for (const [given, expected] of cases) {
    const r = await org.owner.client.console.organizations.joinCodes.create(
      given === undefined ? { id: org.id } : { id: org.id, role: given },
    );
    t.equal(r.joinCode.role, expected, `role ${JSON.stringify(given)} makes a ${expected} code`);
    const u = await svc.signup(uniqueEmail('role'));
    t.equal((await u.client.console.organizations.join({ code: r.code })).role, expected);
    t.equal((await membersOf(org)).get(u.userId), expected, `and joins as ${expected}`);
  }
});

t.test('join codes: two users redeem one code at once; exactly one wins', async (t) => {
  const org = await newOrg('race');
  for (let round = 0; round < 3; round++) {
    const { code, joinCode } = await org.owner.client.console.organizations.joinCodes.create({ id: org.id });
    const a = await svc.signup(uniqueEmail('racer-a'));
    const b = await svc.signup(uniqueEmail('racer-b'));
    const statuses = await Promise.all([a, b].map((u) => statusOf(u.client.console.organizations.join({ code }))));
    t.strictSame([...statuses].sort(), [200, 401], `round ${round}: one 200 and one 401 (got ${statuses})`);
    const members = await membersOf(org);
    t.equal([a, b].filter((u) => members.has(u.userId)).length, 1, 'exactly one joined');
    t.equal(await codeStatus(org, joinCode.id), 'used');
  }
});

t.test('concurrency: one organization per creator, one membership per user, at least one owner', async (t) => {
  // Two creates by one user at once: exactly one organization.
  const u = await svc.signup(uniqueEmail('double'));
  const creates = await Promise.all(
    ['one', 'two'].map((name) => statusOf(u.client.console.organizations.create({ name }))),
  );
  t.strictSame([...creates].sort(), [200, 409], `one 200 and one 409 (got ${creates})`);
  t.equal((await u.client.console.organizations.list()).organizations.length, 1, 'one organization');

  // One user redeems two codes of the same organization at once: one joins, the other code stays active.
  const org = await newOrg('twocodes');
  const c1 = await org.owner.client.console.organizations.joinCodes.create({ id: org.id });
  const c2 = await org.owner.client.console.organizations.joinCodes.create({ id: org.id });
  const j = await svc.signup(uniqueEmail('twocodes'));
  const joins = await Promise.all([c1, c2].map((c) => statusOf(j.client.console.organizations.join({ code: c.code }))));
  t.strictSame([...joins].sort(), [200, 409], `one 200 and one 409 (got ${joins})`);
  const statuses = [await codeStatus(org, c1.joinCode.id), await codeStatus(org, c2.joinCode.id)];
  t.strictSame([...statuses].sort(), ['active', 'used'], 'the refused redemption did not use its code');

  // Both owners demoted at once (through the org token, which may touch owners): one stays owner.
  const second = await joined(org, 'owner', 'coowner');
  const demotions = await Promise.all(
    [second.userId, org.owner.userId].map((userId) =>
      statusOf(org.orgClient.console.organizations.members.role({ id: org.id, userId, role: 'member' })),
    ),
  );
  t.strictSame([...demotions].sort(), [200, 409], `one 200 and one 409 (got ${demotions})`);
  const owners = [...(await membersOf(org)).values()].filter((r) => r === 'owner');
  t.equal(owners.length, 1, 'exactly one owner remains');
});

t.test('members: role changes and removal; the last owner stays', async (t) => {
  const org = await newOrg('members');
  const c = org.owner.client;
  const admin = await joined(org, 'admin');
  const m = await joined(org, 'member');
  const aud = await joined(org, 'auditor');
  const O = org.owner.userId;

  // The only owner.
  t.match(
    await errorOf(c.console.organizations.members.role({ id: org.id, userId: O, role: 'admin' })),
    { status: 409, code: 'conflict' },
    'demoting the only owner',
  );
  t.match(
    await errorOf(c.console.organizations.members.delete({ id: org.id, userId: O })),
    { status: 409, code: 'conflict' },
    'removing the only owner',
  );
  t.match(
    await errorOf(org.orgClient.console.organizations.members.role({ id: org.id, userId: O, role: 'member' })),
    { status: 409 },
    'also through the org token',
  );
  t.equal((await membersOf(org)).get(O), 'owner', 'still owner');
  // Setting owner on the only owner is not a demotion.
  t.match(await c.console.organizations.members.role({ id: org.id, userId: O, role: 'owner' }), {
    member: { userId: O, role: 'owner' },
  });

  // An admin cannot grant or take away owner, but moves member and auditor.
  t.match(
    await errorOf(admin.client.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'owner' })),
    { status: 403, code: 'forbidden' },
    'admin cannot grant owner',
  );
  t.match(
    await errorOf(admin.client.console.organizations.members.role({ id: org.id, userId: admin.userId, role: 'owner' })),
    { status: 403 },
    'nor to itself',
  );
  t.match(
    await errorOf(admin.client.console.organizations.members.role({ id: org.id, userId: O, role: 'admin' })),
    { status: 403 },
    'admin cannot demote an owner',
  );
  t.match(
    await errorOf(admin.client.console.organizations.members.delete({ id: org.id, userId: O })),
    { status: 403 },
    'admin cannot remove an owner',
  );
  t.equal((await membersOf(org)).get(m.userId), 'member');
  t.equal((await membersOf(org)).get(admin.userId), 'admin');
  const toAud = await admin.client.console.organizations.members.role({
    id: org.id,
    userId: m.userId,
    role: 'auditor',
  });
  t.strictSame(Object.keys(toAud.member).sort(), ['email', 'joinedAt', 'role', 'userId']);
  t.match(toAud.member, { userId: m.userId, email: m.email, role: 'auditor' }, 'admin: member → auditor');
  t.equal((await membersOf(org)).get(m.userId), 'auditor');
  t.match(
    await admin.client.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'member' }),
    { member: { role: 'member' } },
    'admin: auditor → member',
  );
  t.equal((await membersOf(org)).get(m.userId), 'member');

  // Roles without members:manage.
  t.match(
    await errorOf(aud.client.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'admin' })),
    { status: 403 },
    'auditor cannot change roles',
  );
  t.match(
    await errorOf(m.client.console.organizations.members.delete({ id: org.id, userId: aud.userId })),
    { status: 403 },
    'member cannot remove',
  );

  // Owner promotes; with two owners one can be demoted.
  t.match(
    await c.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'owner' }),
    { member: { role: 'owner' } },
    'owner promotes to owner',
  );
  t.equal((await membersOf(org)).get(m.userId), 'owner');
  t.match(
    await m.client.console.organizations.members.role({ id: org.id, userId: O, role: 'admin' }),
    { member: { userId: O, role: 'admin' } },
    'with two owners one can be demoted',
  );
  t.match(
    await errorOf(m.client.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'member' })),
    { status: 409 },
    'now m is the only owner',
  );
  t.match(
    await m.client.console.organizations.members.role({ id: org.id, userId: O, role: 'owner' }),
    { member: { role: 'owner' } },
    'promote back',
  );
  t.match(
    await c.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'member' }),
    { member: { role: 'member' } },
    'and demote m again',
  );
  const roles = await membersOf(org);
  t.strictSame([...roles.values()].filter((r) => r === 'owner').length, 1, 'one owner in the end');

  // Unknown member, invalid role.
  t.match(await errorOf(c.console.organizations.members.role({ id: org.id, userId: NO_ORG, role: 'member' })), {
    status: 404,
  });
  t.match(
    await errorOf(c.console.organizations.members.role({ id: org.id, userId: m.userId, role: 'king' as never })),
    { status: 400 },
  );

  // Removal: the removed member loses access (404, not 403).
  t.strictSame(
    await admin.client.console.organizations.members.delete({ id: org.id, userId: aud.userId }),
    { ok: true },
    'admin removes an auditor',
  );
  t.notOk((await membersOf(org)).has(aud.userId));
  t.match(
    await errorOf(aud.client.console.organizations.get({ id: org.id })),
    { status: 404, code: 'not_found' },
    'the removed member gets 404',
  );
  t.strictSame((await aud.client.console.organizations.list()).organizations, [], 'and no longer lists it');
  t.match(
    await errorOf(c.console.organizations.members.delete({ id: org.id, userId: aud.userId })),
    { status: 404 },
    'removing twice is 404',
  );
});

t.test('members:manage must not let an admin mint owners through invitations or join codes', async (t) => {
  // An admin (members:manage) must not gain billing:manage by making a second account of its own
  // owner: not by a role change, an invitation or a join code.
  const org = await newOrg('escalate');
  const admin = await joined(org, 'admin');

  const second = uniqueEmail('admin-alt');
  const inv = await admin.client.console.organizations.invitations
    .create({ id: org.id, email: second, role: 'owner' })
    .then(
      (r) => r,
      (e: unknown) => e as SvcError,
    );
  t.equal(inv instanceof SvcError ? inv.status : 200, 403, 'an admin cannot invite an owner');
  if (!(inv instanceof SvcError)) {
    const alt = await svc.signup(second);
    await alt.client.console.organizations.invitations.accept({ token: tokenOf(inv.acceptUrl) });
    t.not((await membersOf(org)).get(alt.userId), 'owner', 'the invitation did not make an owner');
  }

  const code = await admin.client.console.organizations.joinCodes.create({ id: org.id, role: 'owner' }).then(
    (r) => r,
    (e: unknown) => e as SvcError,
  );
  const codeRefused = code instanceof SvcError ? code.status === 403 : code.joinCode.role !== 'owner';
  t.ok(codeRefused, 'an admin cannot make an owner join code (403, or the role is not owner)');
  if (!(code instanceof SvcError)) {
    const alt = await svc.signup(uniqueEmail('admin-alt2'));
    await alt.client.console.organizations.join({ code: code.code });
    t.not((await membersOf(org)).get(alt.userId), 'owner', 'the join code did not make an owner');
  }

  // The owner may.
  const ownerCode = await org.owner.client.console.organizations.joinCodes.create({ id: org.id, role: 'owner' });
  t.equal(ownerCode.joinCode.role, 'owner', 'an owner can make an owner code');
  const ownerInv = await org.owner.client.console.organizations.invitations.create({
    id: org.id,
    email: uniqueEmail('co-owner'),
    role: 'owner',
  });
  t.equal(ownerInv.invitation.role, 'owner', 'an owner can invite an owner');
});

t.test('non-members get 404 on every organization route, never 403', async (t) => {
  const org = await newOrg('private');
  const c = org.owner.client;
  const member = await joined(org, 'member');
  const tok = await c.console.organizations.tokens.create({ id: org.id, label: 'x' });
  const inv = await c.console.organizations.invitations.create({ id: org.id, email: uniqueEmail('pend') });
  const jc = await c.console.organizations.joinCodes.create({ id: org.id });

  const outsider = await svc.signup(uniqueEmail('outsider'));
  const otherOrg = await newOrg('neighbour');
  const callers: [string, Client][] = [
    ['a user of no organization', outsider.client],
    ['the owner of another org', otherOrg.owner.client],
    ["another org's token", otherOrg.orgClient],
  ];
  for (const [who, x] of callers) {
    const o = x.console.organizations;
    const calls: [string, () => Promise<unknown>][] = [
      ['GET org', () => o.get({ id: org.id })],
      ['PATCH org', () => o.update({ id: org.id, name: 'pwned' })],
      ['POST plan', () => o.plan({ id: org.id, plan: 'payg' })],
      ['GET tokens', () => o.tokens.list({ id: org.id })],
      ['POST tokens', () => o.tokens.create({ id: org.id })],
      ['DELETE token', () => o.tokens.delete({ id: org.id, tokenId: tok.tokenId })],
      ['GET invitations', () => o.invitations.list({ id: org.id })],
      ['POST invitations', () => o.invitations.create({ id: org.id, email: uniqueEmail('evil') })],
      ['DELETE invitation', () => o.invitations.delete({ id: org.id, invitationId: inv.invitation.id })],
      ['GET join codes', () => o.joinCodes.list({ id: org.id })],
      ['POST join codes', () => o.joinCodes.create({ id: org.id, role: 'owner' })],
      ['DELETE join code', () => o.joinCodes.delete({ id: org.id, codeId: jc.joinCode.id })],
      ['POST member role', () => o.members.role({ id: org.id, userId: member.userId, role: 'owner' })],
      ['DELETE member', () => o.members.delete({ id: org.id, userId: member.userId })],
    ];
    for (const [name, call] of calls) {
      t.match(await errorOf(call()), { status: 404, code: 'not_found' }, `${who}: ${name}`);
    }
  }
  // A missing organization answers the same.
  t.match(
    await errorOf(c.console.organizations.get({ id: NO_ORG })),
    { status: 404, code: 'not_found' },
    'an unknown id',
  );
  t.match(await errorOf(c.console.organizations.get({ id: 'not-a-uuid' })), { status: 404 }, 'a malformed id');

  // Nothing changed.
  const d = await c.console.organizations.get({ id: org.id });
  t.equal(d.organization.name, org.name);
  t.equal(d.organization.plan, 'free');
  t.equal(d.members.find((x) => x.userId === member.userId)?.role, 'member');
  t.strictSame(
    d.invitations.map((i) => i.id),
    [inv.invitation.id],
  );
  t.equal(d.tokens.length, 2);
  t.equal(await codeStatus(org, jc.joinCode.id), 'active');
});

// These move the service clock forward by a week; they come last.
t.test('invitations and join codes expire after 7 days', async (t) => {
  const org = await newOrg('expiry');
  const c = org.owner.client;
  const early = uniqueEmail('early');
  const late = uniqueEmail('late');
  const invEarly = await c.console.organizations.invitations.create({ id: org.id, email: early, role: 'auditor' });
  const invLate = await c.console.organizations.invitations.create({ id: org.id, email: late });
  const codeEarly = await c.console.organizations.joinCodes.create({ id: org.id, role: 'auditor' });
  const codeLate = await c.console.organizations.joinCodes.create({ id: org.id });
  const uEarly = await svc.signup(early);
  const uLate = await svc.signup(late);
  const j1 = await svc.signup(uniqueEmail('code-early'));
  const j2 = await svc.signup(uniqueEmail('code-late'));

  svc.clock.advance(INVITATION_TTL_MS - MINUTE);
  t.equal(await codeStatus(org, codeLate.joinCode.id), 'active', 'a code is active a minute before expiry');
  t.strictSame(
    (await pendingIds(org)).sort(),
    [invEarly.invitation.id, invLate.invitation.id].sort(),
    'both invitations pending a minute before',
  );
  t.match(
    await uEarly.client.console.organizations.invitations.accept({ token: tokenOf(invEarly.acceptUrl) }),
    { role: 'auditor' },
    'accept works just before 7 days',
  );
  t.match(
    await j1.client.console.organizations.join({ code: codeEarly.code }),
    { role: 'auditor' },
    'redeem works just before 7 days',
  );

  svc.clock.advance(2 * MINUTE);
  t.strictSame(await pendingIds(org), [], 'an expired invitation is not pending');
  t.strictSame((await c.console.organizations.get({ id: org.id })).invitations, [], 'nor in the detail');
  t.match(
    await errorOf(uLate.client.console.organizations.invitations.accept({ token: tokenOf(invLate.acceptUrl) })),
    { status: 401, code: 'unauthorized' },
    'accept past 7 days is 401',
  );
  t.notOk((await membersOf(org)).has(uLate.userId));

  t.equal(await codeStatus(org, codeLate.joinCode.id), 'expired', 'the code is expired');
  t.equal(await codeStatus(org, codeEarly.joinCode.id), 'used', 'a used code stays used');
  t.match(
    await errorOf(j2.client.console.organizations.join({ code: codeLate.code })),
    { status: 401, code: 'unauthorized' },
    'redeem past 7 days is 401',
  );
  t.notOk((await membersOf(org)).has(j2.userId));
});

t.test('the platform key acts on any organization', async (t) => {
  const org = await newOrg('platform');
  const admin = svc.admin();
  const detail = await admin.console.organizations.get({ id: org.id });
  t.equal(detail.organization.id, org.id, 'reads the detail');
  t.equal(
    (await admin.console.organizations.update({ id: org.id, name: 'Renamed by operator' })).organization.name,
    'Renamed by operator',
    'renames',
  );
  t.equal(
    (await admin.console.organizations.plan({ id: org.id, plan: 'payg' })).organization.plan,
    'payg',
    'changes the plan',
  );
  const { project, apiKey } = await admin.console.projects.create({ name: 'operator project', organizationId: org.id });
  t.equal(project.organization_id, org.id, 'creates a project in it');
  t.match(apiKey.keyId, /^tk_/);
  const minted = await admin.console.organizations.tokens.create({ id: org.id, label: 'break-glass' });
  t.match(await svc.client({ keyId: minted.tokenId, secret: minted.secret }).v1.services.whoami(), {
    principal: 'organization_token',
    organizationId: org.id,
  });
  t.same(
    await admin.console.organizations.tokens.delete({ id: org.id, tokenId: minted.tokenId }),
    { ok: true },
    'revokes a token',
  );
  const e = await errorOf(admin.console.organizations.get({ id: '00000000-0000-4000-8000-000000000000' }));
  t.equal(e.status, 404, 'an unknown organization is still 404');
});
