// Organizations (docs/api.md §4.3) as operations: creating one with its first token, its detail with usage,
// invitations, join codes and membership changes. The caller has already checked the principal's access;
// `ownerActs` says whether it may grant or take away `owner` (an owner, the organization's token, staff, the
// platform key): an admin (members:manage) must not make itself, or a second account of its own, owner and
// gain billing:manage, whether by a role change, an invitation or a join code.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { queueNotification } from './notify.js';
import { mintToken } from './tokens.js';
import { inboxUsage, orgUsage } from './usage.js';
import type { Queryable } from '../storage/pg/client.js';
import {
  addMember,
  changeMember,
  countMemberships,
  getMemberRole,
  getOrganization,
  insertOrganization,
  listMembers,
  type Member,
  type Organization,
  type OrgRole,
} from '../storage/pg/organizations.js';
import { listTokens, type TokenInfo } from '../storage/pg/tokens.js';
import {
  findPendingInvitationForUpdate,
  insertInvitation,
  listPendingInvitations,
  markInvitationAccepted,
  type Invitation,
} from '../storage/pg/invitations.js';
import {
  findActiveJoinCode,
  getJoinCode,
  insertJoinCode,
  revokeJoinCode,
  useJoinCode,
  type JoinCode,
} from '../storage/pg/join-codes.js';
import { listProjects } from '../storage/pg/projects.js';

/** How long an invitation link and a join code stay valid. docs/api.md leaves it open; a week. */
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

/** The organization an access refers to (it was just checked to exist). */
async function loadOrg(q: Queryable, id: string): Promise<Organization> {
  const org = await getOrganization(q, id);
  if (!org) throw fail('not_found', 'No such organization.');
  return org;
}

/** A user's first organization, with the user as owner and a first organization token (its secret once). */
export async function createOrganization(
  deps: CoreDeps,
  c: { userId: string; name: string; now: Date },
): Promise<{ organization: Organization; token: TokenInfo & { secret: string } }> {
  const { db, sealer } = deps.storage;
  const already = () =>
    fail('already_in_organization', 'You already belong to an organization; join others with a join code.');
  return db.tx(async (q) => {
    if ((await countMemberships(q, c.userId)) > 0) throw already();
    const organization = await insertOrganization(q, { id: randomUUID(), name: c.name, ownerId: c.userId, now: c.now });
    if (!organization) throw already();
    const token = await mintToken(q, sealer, 'organization', {
      ownerId: organization.id,
      label: 'default',
      now: c.now,
    });
    return { organization, token };
  });
}

/** The organization with its members, projects, tokens, pending invitations and usage. */
export async function organizationDetail(deps: CoreDeps, organizationId: string, now: Date) {
  const { db } = deps.storage;
  const [organization, members, projects, tokens, invitations] = await Promise.all([
    loadOrg(db, organizationId),
    listMembers(db, organizationId),
    listProjects(db, [organizationId]),
    listTokens(db, 'organization', organizationId),
    listPendingInvitations(db, organizationId, now),
  ]);
  return {
    organization,
    members,
    projects,
    tokens,
    invitations,
    usage: await orgUsage(deps, organization, now),
    inboxUsage: await inboxUsage(deps, organization, now),
  };
}

/**
 * Invites an email address into the organization: the invitation and its mail (through the outbox) in one
 * transaction. `acceptUrlOf` makes the link of the one-time token; the link is returned too.
 */
export async function invite(
  deps: CoreDeps,
  i: {
    organizationId: string;
    email: string;
    role: OrgRole;
    invitedBy: string | null;
    ownerActs: boolean;
    acceptUrlOf: (token: string) => string;
    now: Date;
  },
): Promise<{ invitation: Invitation; acceptUrl: string }> {
  if (i.role === 'owner' && !i.ownerActs) throw fail('forbidden', 'Only an owner can invite an owner.');
  const token = randomBytes(32).toString('base64url');
  const acceptUrl = i.acceptUrlOf(token);
  const invitation = await deps.storage.db.tx(async (q) => {
    const org = await loadOrg(q, i.organizationId);
    const inv = await insertInvitation(q, {
      id: randomUUID(),
      organizationId: i.organizationId,
      email: i.email,
      role: i.role,
      tokenHash: sha256(token),
      invitedBy: i.invitedBy,
      now: i.now,
      expiresAt: new Date(i.now.getTime() + INVITATION_TTL_MS),
    });
    await queueNotification(q, deps, {
      kind: 'invitation',
      to: i.email,
      now: i.now,
      subject: `You are invited to join ${org.name}`,
      text:
        `You have been invited to join the organization "${org.name}" as ${i.role}.\n\n` +
        `To accept, sign in (or sign up) with this email address and open this link within 7 days:\n\n${acceptUrl}\n`,
    });
    return inv;
  });
  return { invitation, acceptUrl };
}

/** A membership the user gained, and what gave it (an invitation or a join code). */
export interface Joined {
  organization: Organization;
  role: OrgRole;
  /** The invitation or join code used. */
  via: string;
}

/** Accepts an invitation sent to the user's own email address. */
export async function acceptInvitation(
  deps: CoreDeps,
  a: { userId: string; email: string; token: string; now: Date },
): Promise<Joined> {
  return deps.storage.db.tx(async (q) => {
    const inv = await findPendingInvitationForUpdate(q, sha256(a.token), a.now);
    if (!inv) throw fail('unauthorized', 'The invitation is invalid or expired.');
    if (inv.email.toLowerCase() !== a.email.toLowerCase()) {
      throw fail('forbidden', 'This invitation was sent to another email address.');
    }
    if (!(await addMember(q, inv.organizationId, a.userId, inv.role, a.now))) {
      throw fail('conflict', 'You are already a member of this organization.');
    }
    await markInvitationAccepted(q, inv.id, a.userId, a.now);
    return { organization: await loadOrg(q, inv.organizationId), role: inv.role, via: inv.id };
  });
}

/** A join code for the role; the code itself is returned this once (only its hash is kept). */
export async function createJoinCode(
  deps: CoreDeps,
  c: { organizationId: string; role: OrgRole; createdBy: string | null; ownerActs: boolean; now: Date },
): Promise<{ joinCode: JoinCode; code: string }> {
  if (c.role === 'owner' && !c.ownerActs) throw fail('forbidden', 'Only an owner can make an owner join code.');
  const code = newJoinCode();
  const joinCode = await insertJoinCode(deps.storage.db, {
    id: randomUUID(),
    organizationId: c.organizationId,
    codeHash: sha256(code),
    role: c.role,
    createdBy: c.createdBy,
    now: c.now,
    expiresAt: new Date(c.now.getTime() + JOIN_CODE_TTL_MS),
  });
  return { joinCode, code };
}

/** Revokes a join code that was not used (409 for a used one). */
export async function withdrawJoinCode(deps: CoreDeps, organizationId: string, id: string, now: Date): Promise<void> {
  const { db } = deps.storage;
  const code = await getJoinCode(db, organizationId, id, now);
  if (!code) throw fail('not_found', 'No such join code.');
  if (code.status === 'used') throw fail('conflict', 'This join code was already used.');
  await revokeJoinCode(db, code.id, now);
}

/** Joins the organization of an active join code; exactly one of concurrent redemptions uses it. */
export async function joinWithCode(deps: CoreDeps, j: { userId: string; code: string; now: Date }): Promise<Joined> {
  const invalid = () => fail('unauthorized', 'The join code is invalid, used or expired.');
  return deps.storage.db.tx(async (q) => {
    const code = await findActiveJoinCode(q, sha256(normalizeCode(j.code)), j.now);
    if (!code) throw invalid();
    if (await getMemberRole(q, code.organizationId, j.userId))
      throw fail('conflict', 'You are already a member of this organization.');
    // One UPDATE decides between concurrent redemptions: exactly one uses the code.
    if (!(await useJoinCode(q, code.id, j.userId, j.now))) throw invalid();
    if (!(await addMember(q, code.organizationId, j.userId, code.role, j.now))) {
      throw fail('conflict', 'You are already a member of this organization.');
    }
    return { organization: await loadOrg(q, code.organizationId), role: code.role, via: code.id };
  });
}

/** Changes a member's role; the only owner is never demoted. */
export async function changeMemberRole(
  deps: CoreDeps,
  c: { organizationId: string; userId: string; role: OrgRole; ownerActs: boolean },
): Promise<Member> {
  return deps.storage.db.tx(async (q) => {
    const current = await getMemberRole(q, c.organizationId, c.userId);
    if (!current) throw fail('not_found', 'No such member.');
    if ((current === 'owner' || c.role === 'owner') && !c.ownerActs) {
      throw fail('forbidden', 'Only an owner can grant or take away the owner role.');
    }
    const outcome = await changeMember(q, c.organizationId, c.userId, { role: c.role });
    if (outcome === 'not_found') throw fail('not_found', 'No such member.');
    if (outcome === 'last_owner') throw fail('conflict', 'The only owner cannot be demoted.');
    const member = (await listMembers(q, c.organizationId)).find((m) => m.userId === c.userId);
    if (!member) throw fail('not_found', 'No such member.');
    return member;
  });
}

/** Removes a member; the only owner is never removed. */
export async function removeMember(
  deps: CoreDeps,
  r: { organizationId: string; userId: string; ownerActs: boolean },
): Promise<void> {
  await deps.storage.db.tx(async (q) => {
    const current = await getMemberRole(q, r.organizationId, r.userId);
    if (!current) throw fail('not_found', 'No such member.');
    if (current === 'owner' && !r.ownerActs) throw fail('forbidden', 'Only an owner can remove an owner.');
    const outcome = await changeMember(q, r.organizationId, r.userId, { remove: true });
    if (outcome === 'not_found') throw fail('not_found', 'No such member.');
    if (outcome === 'last_owner') throw fail('conflict', 'The only owner cannot be removed.');
  });
}
