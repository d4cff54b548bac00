// Organizations and their members; the one-round-trip access lookups authorization relies on.
import type { Queryable } from './client.js';
import { isUuid } from '../../mail/uuid.js';

export type OrgRole = 'owner' | 'admin' | 'member' | 'auditor' | 'billing';
export type Plan = 'free' | 'payg';

export interface Organization {
  id: string;
  name: string;
  plan: Plan;
  created_at: Date;
  updated_at: Date;
}

export interface Member {
  userId: string;
  email: string;
  role: OrgRole;
  joinedAt: Date;
}

const ORG = 'o.id, o.name, o.plan, o.created_at, o.updated_at';

/** Creates the organization with its creator as sole owner; null when the creator already made one. */
export async function insertOrganization(
  q: Queryable,
  o: { id: string; name: string; ownerId: string; now: Date },
): Promise<Organization | null> {
  const rows = await q.query<Organization>(
    `INSERT INTO organizations AS o (id, name, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
     ON CONFLICT DO NOTHING RETURNING ${ORG}`,
    [o.id, o.name, o.ownerId, o.now],
  );
  const org = rows[0];
  if (!org) return null;
  await q.query(
    `INSERT INTO organization_members (organization_id, user_id, role, created_at) VALUES ($1, $2, 'owner', $3)`,
    [o.id, o.ownerId, o.now],
  );
  return org;
}

export async function countMemberships(q: Queryable, userId: string): Promise<number> {
  const rows = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM organization_members WHERE user_id = $1', [
    userId,
  ]);
  return rows[0]?.n ?? 0;
}

export async function getOrganization(q: Queryable, id: string): Promise<Organization | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<Organization>(`SELECT ${ORG} FROM organizations o WHERE o.id = $1`, [id]);
  return rows[0] ?? null;
}

export async function listOrganizationsOfUser(
  q: Queryable,
  userId: string,
): Promise<(Organization & { role: OrgRole })[]> {
  return q.query(
    `SELECT ${ORG}, m.role FROM organizations o JOIN organization_members m ON m.organization_id = o.id
     WHERE m.user_id = $1 ORDER BY o.created_at, o.id`,
    [userId],
  );
}

export async function updateOrganization(
  q: Queryable,
  id: string,
  change: { name?: string; plan?: Plan },
  now: Date,
): Promise<Organization | null> {
  const rows = await q.query<Organization>(
    `UPDATE organizations o SET name = coalesce($2, name), plan = coalesce($3, plan), updated_at = $4
     WHERE o.id = $1 RETURNING ${ORG}`,
    [id, change.name ?? null, change.plan ?? null, now],
  );
  return rows[0] ?? null;
}

export async function listMembers(q: Queryable, orgId: string): Promise<Member[]> {
  return q.query<Member>(
    `SELECT m.user_id AS "userId", u.email, m.role, m.created_at AS "joinedAt" FROM organization_members m
     JOIN users u ON u.id = m.user_id WHERE m.organization_id = $1 ORDER BY m.created_at, u.email`,
    [orgId],
  );
}

export async function getMemberRole(q: Queryable, orgId: string, userId: string): Promise<OrgRole | null> {
  if (!isUuid(orgId) || !isUuid(userId)) return null;
  const rows = await q.query<{ role: OrgRole }>(
    'SELECT role FROM organization_members WHERE organization_id = $1 AND user_id = $2',
    [orgId, userId],
  );
  return rows[0]?.role ?? null;
}

/** Adds a member; false when the user already belongs to the organization. */
export async function addMember(
  q: Queryable,
  orgId: string,
  userId: string,
  role: OrgRole,
  now: Date,
): Promise<boolean> {
  const rows = await q.query(
    `INSERT INTO organization_members (organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING RETURNING user_id`,
    [orgId, userId, role, now],
  );
  return rows.length > 0;
}

/**
 * Changes a member's role or removes the member, refusing (with 'last_owner') to leave the
 * organization without an owner. The owners are locked first, so two concurrent demotions of the
 * last two owners cannot both pass.
 */
export async function changeMember(
  q: Queryable,
  orgId: string,
  userId: string,
  change: { role: OrgRole } | { remove: true },
): Promise<'ok' | 'not_found' | 'last_owner'> {
  const owners = await q.query<{ user_id: string }>(
    `SELECT user_id FROM organization_members WHERE organization_id = $1 AND role = 'owner' FOR UPDATE`,
    [orgId],
  );
  const current = await getMemberRole(q, orgId, userId);
  if (!current) return 'not_found';
  const losesOwner = current === 'owner' && ('remove' in change || change.role !== 'owner');
  if (losesOwner && owners.length <= 1) return 'last_owner';
  if ('remove' in change) {
    await q.query('DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2', [orgId, userId]);
  } else {
    await q.query('UPDATE organization_members SET role = $3 WHERE organization_id = $1 AND user_id = $2', [
      orgId,
      userId,
      change.role,
    ]);
  }
  return 'ok';
}

/** Organization existence plus the caller's role in it, in one round trip. */
export async function orgAccessRow(
  q: Queryable,
  orgId: string,
  userId: string | null,
): Promise<{ id: string; role: OrgRole | null } | null> {
  if (!isUuid(orgId)) return null;
  const rows = await q.query<{ id: string; role: OrgRole | null }>(
    `SELECT o.id, m.role FROM organizations o
     LEFT JOIN organization_members m ON m.organization_id = o.id AND m.user_id = $2
     WHERE o.id = $1`,
    [orgId, userId],
  );
  return rows[0] ?? null;
}

/** A live project, its organization and the caller's role there, in one round trip. */
export async function projectAccessRow(
  q: Queryable,
  projectId: string,
  userId: string | null,
): Promise<{ id: string; organization_id: string; role: OrgRole | null } | null> {
  if (!isUuid(projectId)) return null;
  const rows = await q.query<{ id: string; organization_id: string; role: OrgRole | null }>(
    `SELECT p.id, p.organization_id, m.role FROM projects p
     LEFT JOIN organization_members m ON m.organization_id = p.organization_id AND m.user_id = $2
     WHERE p.id = $1 AND p.deleted_at IS NULL`,
    [projectId, userId],
  );
  return rows[0] ?? null;
}

/** An organization's own request rate limit (migration 0018); null fields: the platform's defaults. */
export interface OrganizationRateLimit {
  burst: number | null;
  perSecond: number | null;
}

export async function organizationRateLimit(q: Queryable, id: string): Promise<OrganizationRateLimit | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<OrganizationRateLimit>(
    `SELECT rate_limit_burst AS burst, rate_limit_per_second AS "perSecond" FROM organizations WHERE id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

/** Sets (or, with nulls, clears) an organization's own rate limit; null when there is no such organization. */
export async function setOrganizationRateLimit(
  q: Queryable,
  id: string,
  limit: OrganizationRateLimit,
  now: Date,
): Promise<OrganizationRateLimit | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<OrganizationRateLimit>(
    `UPDATE organizations SET rate_limit_burst = $2, rate_limit_per_second = $3, updated_at = $4 WHERE id = $1
     RETURNING rate_limit_burst AS burst, rate_limit_per_second AS "perSecond"`,
    [id, limit.burst, limit.perSecond, now],
  );
  return rows[0] ?? null;
}
