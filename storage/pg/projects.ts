// Projects: owned by an organization; soft-deleted so history stays while they leave every list.
import type { Queryable } from './client.js';
import type { Plan } from './organizations.js';
import { isUuid } from '../../mail/uuid.js';

export interface Project {
  id: string;
  organization_id: string;
  name: string;
  status: 'active';
  plan: Plan;
  created_at: Date;
  updated_at: Date;
}

// `status` and `plan` are derived: a listed project is active, and its plan is its organization's.
const COLS = `p.id, p.organization_id, p.name, 'active' AS status, o.plan, p.created_at, p.updated_at`;
const FROM = `projects p JOIN organizations o ON o.id = p.organization_id`;

export async function insertProject(
  q: Queryable,
  p: { id: string; organizationId: string; name: string; createdBy: string | null; now: Date },
): Promise<Project> {
  await q.query(
    `INSERT INTO projects (id, organization_id, name, created_by, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $5)`,
    [p.id, p.organizationId, p.name, p.createdBy, p.now],
  );
  return (await getProject(q, p.id)) as Project;
}

export async function getProject(q: Queryable, id: string): Promise<Project | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<Project>(`SELECT ${COLS} FROM ${FROM} WHERE p.id = $1 AND p.deleted_at IS NULL`, [id]);
  return rows[0] ?? null;
}

/** Live projects of the given organizations (null: of every organization). */
export async function listProjects(q: Queryable, organizationIds: string[] | null): Promise<Project[]> {
  return q.query<Project>(
    `SELECT ${COLS} FROM ${FROM}
     WHERE p.deleted_at IS NULL AND ($1::uuid[] IS NULL OR p.organization_id = ANY($1::uuid[]))
     ORDER BY p.created_at, p.id`,
    [organizationIds],
  );
}

/** Live projects in organizations the user belongs to. */
export async function listProjectsOfUser(q: Queryable, userId: string): Promise<Project[]> {
  return q.query<Project>(
    `SELECT ${COLS} FROM ${FROM} JOIN organization_members m ON m.organization_id = p.organization_id AND m.user_id = $1
     WHERE p.deleted_at IS NULL ORDER BY p.created_at, p.id`,
    [userId],
  );
}

export async function renameProject(q: Queryable, id: string, name: string, now: Date): Promise<Project | null> {
  await q.query('UPDATE projects SET name = $2, updated_at = $3 WHERE id = $1 AND deleted_at IS NULL', [id, name, now]);
  return getProject(q, id);
}

export async function softDeleteProject(q: Queryable, id: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    'UPDATE projects SET deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL RETURNING id',
    [id, now],
  );
  return rows.length > 0;
}
