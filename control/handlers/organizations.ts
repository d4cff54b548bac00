// Spec §4.3 organizations.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { organizationRoutes } from '../api/organizations.js';
import { PERMISSIONS, ROLES, ROLE_PERMISSIONS, type OrgRole } from '../api/permissions.js';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail } from '../errors.js';
import { account } from './auth.js';
import { queueNotification } from '../../core/notify.js';
import { mintToken, SECRET_WARNING } from '../../core/tokens.js';
import type { Access } from '../authorize.js';
import { orgUsage, inboxUsage } from '../../core/usage.js';
import type { Queryable } from '../../storage/pg/client.js';
import type { Sealer } from '../../storage/secrets.js';
import {
  addMember,
  changeMember,
  countMemberships,
  getMemberRole,
  getOrganization,
  insertOrganization,
  listMembers,
  listOrganizationsOfUser,
  updateOrganization,
  type Organization,
  type Member,
} from '../../storage/pg/organizations.js';
import { listTokens, revokeToken, type TokenInfo } from '../../storage/pg/tokens.js';
import {
  findPendingInvitationForUpdate,
  insertInvitation,
  listPendingInvitations,
  markInvitationAccepted,
  revokeInvitation,
  type Invitation,
} from '../../storage/pg/invitations.js';
import {
  findActiveJoinCode,
  getJoinCode,
  insertJoinCode,
  listJoinCodes,
  revokeJoinCode,
  useJoinCode,
  type JoinCode,
} from '../../storage/pg/join-codes.js';
import { listProjects } from '../../storage/pg/projects.js';

/** How long an invitation link and a join code stay valid. The spec leaves it open; a week. */
export const INVITATION_TTL_MS = 7 * 24 * 3_600_000;
export const JOIN_CODE_TTL_MS = 7 * 24 * 3_600_000;

// 32 symbols without 0/O and 1/I: 8 symbols carry exactly 40 bits, and 256 % 32 == 0 keeps each
// symbol uniform when drawn from one random byte.
const CODE_ALPHABET = '23456789ABCDEFGHJKLMNPQRSTUVWXYZ';

function newJoinCode(): string {
  const s = [...randomBytes(8)].map((b) => CODE_ALPHABET[b & 31]).join('');
  return `SVC-${s.slice(0, 4)}-${s.slice(4)}`;
}
const normalizeCode = (code: string) => code.trim().toUpperCase();
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

const iso = (d: Date) => d.toISOString();
const orgJson = (o: Organization) => ({
  id: o.id,
  name: o.name,
  plan: o.plan,
  created_at: iso(o.created_at),
  updated_at: iso(o.updated_at),
});
const tokenJson = (t: TokenInfo) => ({ id: t.id, tokenId: t.tokenId, label: t.label, createdAt: iso(t.createdAt) });
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

async function mintOrgToken(q: Queryable, sealer: Sealer, organizationId: string, label: string | null, now: Date) {
  const { secret, ...info } = await mintToken(q, sealer, 'organization', { ownerId: organizationId, label, now });
  return { ...tokenJson(info), secret, warning: SECRET_WARNING };
}

/** The organization an access refers to (it was just checked to exist). */
async function loadOrg(q: Queryable, id: string): Promise<Organization> {
  const org = await getOrganization(q, id);
  if (!org) throw fail('not_found', 'No such organization.');
  return org;
}

// Granting or taking away `owner` is an owner's act: an admin (members:manage) must not be able to
// make itself (or a second account of its own) owner and gain billing:manage, whether by a role
// change, an invitation or a join code.
function mayTouchOwner(access: Access): boolean {
  return access.via !== 'member' || access.role === 'owner';
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
    const { db, sealer } = rc.deps.storage;
    const already = () =>
      fail('already_in_organization', 'You already belong to an organization; join others with a join code.');
    return db.tx(async (q) => {
      if ((await countMemberships(q, me.userId)) > 0) throw already();
      const org = await insertOrganization(q, { id: randomUUID(), name: body.name, ownerId: me.userId, now: rc.now });
      if (!org) throw already();
      rc.audit.organizationId = org.id;
      rc.audit.targetId = org.id;
      return {
        organization: orgJson(org),
        organizationToken: await mintOrgToken(q, sealer, org.id, 'default', rc.now),
      };
    });
  },

  async 'console.organizations.list'(_in, rc) {
    const me = account(rc);
    const rows = await listOrganizationsOfUser(rc.deps.storage.db, me.userId);
    return { organizations: rows.map((o) => ({ ...orgJson(o), role: o.role })) };
  },

  async 'console.organizations.get'(_in, rc) {
    const { organizationId } = granted(rc);
    const { db } = rc.deps.storage;
    const [org, members, projects, tokens, invitations] = await Promise.all([
      loadOrg(db, organizationId),
      listMembers(db, organizationId),
      listProjects(db, [organizationId]),
      listTokens(db, 'organization', organizationId),
      listPendingInvitations(db, organizationId, rc.now),
    ]);
    return {
      organization: orgJson(org),
      members: members.map(memberJson),
      projects: projects.map((p) => ({ id: p.id, name: p.name, status: p.status, created_at: iso(p.created_at) })),
      tokens: tokens.map(tokenJson),
      invitations: invitations.map(invitationJson),
      usage: await orgUsage(rc.deps, org, rc.now),
      inboxUsage: await inboxUsage(rc.deps, org, rc.now),
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
    const token = await mintOrgToken(db, sealer, granted(rc).organizationId, body.label ?? null, rc.now);
    rc.audit.targetId = token.tokenId;
    return token;
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
    const { organizationId } = access;
    const { db } = rc.deps.storage;
    const role: OrgRole = body.role ?? 'member';
    if (role === 'owner' && !mayTouchOwner(access)) throw fail('forbidden', 'Only an owner can invite an owner.');
    const token = randomBytes(32).toString('base64url');
    const acceptUrl = `${rc.deps.publicUrl()}/invitations/accept?token=${token}`;
    const invitation = await db.tx(async (q) => {
      const org = await loadOrg(q, organizationId);
      const inv = await insertInvitation(q, {
        id: randomUUID(),
        organizationId,
        email: body.email,
        role,
        tokenHash: sha256(token),
        invitedBy: rc.principal?.kind === 'account_token' ? rc.principal.userId : null,
        now: rc.now,
        expiresAt: new Date(rc.now.getTime() + INVITATION_TTL_MS),
      });
      await queueNotification(q, rc.deps, {
        kind: 'invitation',
        to: body.email,
        now: rc.now,
        subject: `You are invited to join ${org.name}`,
        text:
          `You have been invited to join the organization "${org.name}" as ${role}.\n\n` +
          `To accept, sign in (or sign up) with this email address and open this link within 7 days:\n\n${acceptUrl}\n`,
      });
      return inv;
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
    return rc.deps.storage.db.tx(async (q) => {
      const inv = await findPendingInvitationForUpdate(q, sha256(body.token), rc.now);
      if (!inv) throw fail('unauthorized', 'The invitation is invalid or expired.');
      if (inv.email.toLowerCase() !== me.email.toLowerCase()) {
        throw fail('forbidden', 'This invitation was sent to another email address.');
      }
      if (!(await addMember(q, inv.organizationId, me.userId, inv.role, rc.now))) {
        throw fail('conflict', 'You are already a member of this organization.');
      }
      await markInvitationAccepted(q, inv.id, me.userId, rc.now);
      rc.audit.organizationId = inv.organizationId;
      rc.audit.targetId = inv.id;
      return { organization: orgJson(await loadOrg(q, inv.organizationId)), role: inv.role };
    });
  },

  async 'console.organizations.joinCodes.create'({ body }, rc) {
    const access = granted(rc);
    const { organizationId } = access;
    const role: OrgRole = (ROLES as readonly string[]).includes(body.role ?? '') ? (body.role as OrgRole) : 'member';
    if (role === 'owner' && !mayTouchOwner(access))
      throw fail('forbidden', 'Only an owner can make an owner join code.');
    const code = newJoinCode();
    const joinCode = await insertJoinCode(rc.deps.storage.db, {
      id: randomUUID(),
      organizationId,
      codeHash: sha256(code),
      role,
      createdBy: rc.principal?.kind === 'account_token' ? rc.principal.userId : null,
      now: rc.now,
      expiresAt: new Date(rc.now.getTime() + JOIN_CODE_TTL_MS),
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
    const { db } = rc.deps.storage;
    const code = await getJoinCode(db, granted(rc).organizationId, params.codeId, rc.now);
    if (!code) throw fail('not_found', 'No such join code.');
    if (code.status === 'used') throw fail('conflict', 'This join code was already used.');
    await revokeJoinCode(db, code.id, rc.now);
    return { ok: true as const };
  },

  async 'console.organizations.join'({ body }, rc) {
    const me = account(rc);
    const invalid = () => fail('unauthorized', 'The join code is invalid, used or expired.');
    return rc.deps.storage.db.tx(async (q) => {
      const code = await findActiveJoinCode(q, sha256(normalizeCode(body.code)), rc.now);
      if (!code) throw invalid();
      if (await getMemberRole(q, code.organizationId, me.userId))
        throw fail('conflict', 'You are already a member of this organization.');
      // One UPDATE decides between concurrent redemptions: exactly one uses the code.
      if (!(await useJoinCode(q, code.id, me.userId, rc.now))) throw invalid();
      if (!(await addMember(q, code.organizationId, me.userId, code.role, rc.now))) {
        throw fail('conflict', 'You are already a member of this organization.');
      }
      rc.audit.organizationId = code.organizationId;
      rc.audit.targetId = code.id;
      return { organization: orgJson(await loadOrg(q, code.organizationId)), role: code.role };
    });
  },

  async 'console.organizations.members.role'({ params, body }, rc) {
    const access = granted(rc);
    return rc.deps.storage.db.tx(async (q) => {
      const current = await getMemberRole(q, access.organizationId, params.userId);
      if (!current) throw fail('not_found', 'No such member.');
      if ((current === 'owner' || body.role === 'owner') && !mayTouchOwner(access)) {
        throw fail('forbidden', 'Only an owner can grant or take away the owner role.');
      }
      const outcome = await changeMember(q, access.organizationId, params.userId, { role: body.role });
      if (outcome === 'not_found') throw fail('not_found', 'No such member.');
      if (outcome === 'last_owner') throw fail('conflict', 'The only owner cannot be demoted.');
      const member = (await listMembers(q, access.organizationId)).find((m) => m.userId === params.userId);
      if (!member) throw fail('not_found', 'No such member.');
      return { member: memberJson(member) };
    });
  },

  async 'console.organizations.members.delete'({ params }, rc) {
    const access = granted(rc);
    await rc.deps.storage.db.tx(async (q) => {
      const current = await getMemberRole(q, access.organizationId, params.userId);
      if (!current) throw fail('not_found', 'No such member.');
      if (current === 'owner' && !mayTouchOwner(access)) throw fail('forbidden', 'Only an owner can remove an owner.');
      const outcome = await changeMember(q, access.organizationId, params.userId, { remove: true });
      if (outcome === 'not_found') throw fail('not_found', 'No such member.');
      if (outcome === 'last_owner') throw fail('conflict', 'The only owner cannot be removed.');
    });
    return { ok: true as const };
  },
};
