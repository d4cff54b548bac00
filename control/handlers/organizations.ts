// docs/api.md §4.3 organizations: HTTP shapes around core/organizations.ts.
import type { organizationRoutes } from '@svc-mail/sdk';
import { PERMISSIONS, ROLES, ROLE_PERMISSIONS, type OrgRole } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail } from '../errors.js';
import { account } from './auth.js';
import { mintToken, SECRET_WARNING } from '../../core/tokens.js';
import type { Access } from '../authorize.js';
import {
  acceptInvitation,
  changeMemberRole,
  createJoinCode,
  createOrganization,
  invite,
  joinWithCode,
  organizationDetail,
  removeMember,
  withdrawJoinCode,
  type Joined,
} from '../../core/organizations.js';
import {
  listOrganizationsOfUser,
  updateOrganization,
  type Organization,
  type Member,
} from '../../storage/pg/organizations.js';
import { listTokens, revokeToken, type TokenInfo } from '../../storage/pg/tokens.js';
import { listPendingInvitations, revokeInvitation, type Invitation } from '../../storage/pg/invitations.js';
import { listJoinCodes, type JoinCode } from '../../storage/pg/join-codes.js';

const iso = (d: Date) => d.toISOString();
const orgJson = (o: Organization) => ({
  id: o.id,
  name: o.name,
  plan: o.plan,
  created_at: iso(o.created_at),
  updated_at: iso(o.updated_at),
});
const tokenJson = (t: TokenInfo) => ({ id: t.id, tokenId: t.tokenId, label: t.label, createdAt: iso(t.createdAt) });
const mintedJson = ({ secret, ...info }: TokenInfo & { secret: string }) => ({
  ...tokenJson(info),
  secret,
  warning: SECRET_WARNING,
});
const memberJson = (m: Member) => ({ userId: m.userId, email: m.email, role: m.role, joinedAt: iso(m.joinedAt) });
const invitationJson = (i: Invitation) => ({
  id: i.id,
  organizationId: i.organizationId,
  email: i.email,
  role: i.role,
  createdAt: iso(i.createdAt),
  expiresAt: iso(i.expiresAt),
});
const joinCodeJson = (c: JoinCode) => ({
  id: c.id,
  role: c.role,
  status: c.status,
  createdAt: iso(c.createdAt),
  expiresAt: iso(c.expiresAt),
  usedAt: c.usedAt ? iso(c.usedAt) : null,
});

/** The access the route table's target check granted; present on every {id} route. */
function granted(rc: RequestCtx): Access {
  if (!rc.access) throw new Error('route without a target reached an organization handler');
  return rc.access;
}

// Granting or taking away `owner` is an owner's act (core/organizations.ts): a member must be an owner.
const ownerActs = (access: Access): boolean => access.via !== 'member' || access.role === 'owner';

const userOf = (rc: RequestCtx) => (rc.principal?.kind === 'account_token' ? rc.principal.userId : null);

function joinedJson(rc: RequestCtx, j: Joined) {
  rc.audit.organizationId = j.organization.id;
  rc.audit.targetId = j.via;
  return { organization: orgJson(j.organization), role: j.role };
}

export const organizationHandlers: Handlers<typeof organizationRoutes> = {
  async 'console.organizations.roles'() {
    return {
      roles: ROLES.map((role) => ({ role, permissions: [...ROLE_PERMISSIONS[role]] })),
      permissions: [...PERMISSIONS],
    };
  },

  async 'console.organizations.create'({ body }, rc) {
    const me = account(rc);
    const { organization, token } = await createOrganization(rc.deps, {
      userId: me.userId,
      name: body.name,
      now: rc.now,
    });
    rc.audit.organizationId = organization.id;
    rc.audit.targetId = organization.id;
    return { organization: orgJson(organization), organizationToken: mintedJson(token) };
  },

  async 'console.organizations.list'(_in, rc) {
    const me = account(rc);
    const rows = await listOrganizationsOfUser(rc.deps.storage.db, me.userId);
    return { organizations: rows.map((o) => ({ ...orgJson(o), role: o.role })) };
  },

  async 'console.organizations.get'(_in, rc) {
    const d = await organizationDetail(rc.deps, granted(rc).organizationId, rc.now);
    return {
      organization: orgJson(d.organization),
      members: d.members.map(memberJson),
      projects: d.projects.map((p) => ({ id: p.id, name: p.name, status: p.status, created_at: iso(p.created_at) })),
      tokens: d.tokens.map(tokenJson),
      invitations: d.invitations.map(invitationJson),
      usage: d.usage,
      inboxUsage: d.inboxUsage,
    };
  },

  async 'console.organizations.update'({ body }, rc) {
    const org = await updateOrganization(rc.deps.storage.db, granted(rc).organizationId, { name: body.name }, rc.now);
    if (!org) throw fail('not_found', 'No such organization.');
    return { organization: orgJson(org) };
  },

  async 'console.organizations.plan'({ body }, rc) {
    const org = await updateOrganization(rc.deps.storage.db, granted(rc).organizationId, { plan: body.plan }, rc.now);
    if (!org) throw fail('not_found', 'No such organization.');
    return { organization: orgJson(org) };
  },

  async 'console.organizations.tokens.create'({ body }, rc) {
    const { db, sealer } = rc.deps.storage;
    const token = await mintToken(db, sealer, 'organization', {
      ownerId: granted(rc).organizationId,
      label: body.label ?? null,
      now: rc.now,
    });
    rc.audit.targetId = token.tokenId;
    return mintedJson(token);
  },

  async 'console.organizations.tokens.list'(_in, rc) {
    return {
      tokens: (await listTokens(rc.deps.storage.db, 'organization', granted(rc).organizationId)).map(tokenJson),
    };
  },

  async 'console.organizations.tokens.delete'({ params }, rc) {
    if (!(await revokeToken(rc.deps.storage.db, 'organization', granted(rc).organizationId, params.tokenId, rc.now))) {
      throw fail('not_found', 'No such organization token.');
    }
    return { ok: true as const };
  },

  async 'console.organizations.invitations.create'({ body }, rc) {
    const access = granted(rc);
    const { invitation, acceptUrl } = await invite(rc.deps, {
      organizationId: access.organizationId,
      email: body.email,
      role: body.role ?? 'member',
      invitedBy: userOf(rc),
      ownerActs: ownerActs(access),
      acceptUrlOf: (token) => `${rc.deps.publicUrl()}/invitations/accept?token=${token}`,
      now: rc.now,
    });
    rc.audit.targetId = invitation.id;
    // `emailed`: the mail is durably queued for delivery by the MTA.
    return { invitation: invitationJson(invitation), acceptUrl, emailed: true };
  },

  async 'console.organizations.invitations.list'(_in, rc) {
    return {
      invitations: (await listPendingInvitations(rc.deps.storage.db, granted(rc).organizationId, rc.now)).map(
        invitationJson,
      ),
    };
  },

  async 'console.organizations.invitations.delete'({ params }, rc) {
    if (!(await revokeInvitation(rc.deps.storage.db, granted(rc).organizationId, params.invitationId, rc.now))) {
      throw fail('not_found', 'No such pending invitation.');
    }
    return { ok: true as const };
  },

  async 'console.organizations.invitations.accept'({ body }, rc) {
    const me = account(rc);
    return joinedJson(
      rc,
      await acceptInvitation(rc.deps, { userId: me.userId, email: me.email, token: body.token, now: rc.now }),
    );
  },

  async 'console.organizations.joinCodes.create'({ body }, rc) {
    const access = granted(rc);
    const role: OrgRole = (ROLES as readonly string[]).includes(body.role ?? '') ? (body.role as OrgRole) : 'member';
    const { joinCode, code } = await createJoinCode(rc.deps, {
      organizationId: access.organizationId,
      role,
      createdBy: userOf(rc),
      ownerActs: ownerActs(access),
      now: rc.now,
    });
    rc.audit.targetId = joinCode.id;
    return {
      joinCode: joinCodeJson(joinCode),
      code,
      warning: 'Share this code now: it is shown once and cannot be retrieved.',
    };
  },

  async 'console.organizations.joinCodes.list'(_in, rc) {
    return {
      joinCodes: (await listJoinCodes(rc.deps.storage.db, granted(rc).organizationId, rc.now)).map(joinCodeJson),
    };
  },

  async 'console.organizations.joinCodes.delete'({ params }, rc) {
    await withdrawJoinCode(rc.deps, granted(rc).organizationId, params.codeId, rc.now);
    return { ok: true as const };
  },

  async 'console.organizations.join'({ body }, rc) {
    const me = account(rc);
    return joinedJson(rc, await joinWithCode(rc.deps, { userId: me.userId, code: body.code, now: rc.now }));
  },

  async 'console.organizations.members.role'({ params, body }, rc) {
    const access = granted(rc);
    const member = await changeMemberRole(rc.deps, {
      organizationId: access.organizationId,
      userId: params.userId,
      role: body.role,
      ownerActs: ownerActs(access),
    });
    return { member: memberJson(member) };
  },

  async 'console.organizations.members.delete'({ params }, rc) {
    const access = granted(rc);
    await removeMember(rc.deps, {
      organizationId: access.organizationId,
      userId: params.userId,
      ownerActs: ownerActs(access),
    });
    return { ok: true as const };
  },
};
