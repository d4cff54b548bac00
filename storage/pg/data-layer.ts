// The data layer's SQL (docs/api.md §4.1): row-scoped reads of any table the registry in
// sdk/src/api/data-layer.ts names, and the writes that take more than one statement.
//
// Visibility is decided here, in the WHERE clause, from who is reading (a Viewer) and whose rows a
// table holds (its Owner): a row the caller may not see is never fetched, so it can neither be
// listed nor got, updated or deleted by id. Table and column names come from the registry (code,
// never a request) and are still checked to be plain identifiers before they reach SQL.
import { RECIPIENTS_JSON } from './recipients.js';
import type { Owner, OwnerColumn } from '@svc-mail/sdk';
import { afterCursor, decodeCursor, isBadCursorValue, keyColumns, keyOrder, pageOf } from './cursor.js';
import type { Queryable } from './client.js';
import { isPgError, PG_UNIQUE_VIOLATION } from './client.js';
import { isUuid } from '../../mail/uuid.js';

/** Who is reading, as far as row visibility goes (docs/api.md §4.1 rule 1). */
export type Viewer =
  /** Staff and the platform key: every row. */
  | { kind: 'all' }
  /** A customer's account token: rows of its organizations and their projects, its own user rows. */
  | { kind: 'user'; userId: string; keyId: string }
  | { kind: 'organization'; organizationId: string; keyId: string }
  | { kind: 'project'; projectId: string; keyId: string };

// Whose rows a table holds (Owner) is declared with the registry of tables, in the SDK package.
export type { Owner, OwnerColumn };

/** What a read needs to know about a table: the registry's entry, as storage sees it. */
export interface TableRead {
  table: string;
  /** The allowlist: exactly these columns are selected. */
  columns: readonly string[];
  owner: Owner;
}

export type Row = Record<string, unknown>;

/** Where a table's SQL is more than `SELECT t.<column>`; most tables need no entry here. */
interface TableSql {
  /** Columns not stored as they are returned. */
  computed?: Record<string, string>;
  /** What `get?id=` matches (default: the uuid primary key t.id). */
  key?: { expr: string; uuid: boolean };
  /** Row order of list (default: oldest first). */
  order?: string;
  /** How a list filter's value (the parameter given) matches, where not `<column> = <value>`. */
  match?: Record<string, (param: string) => string>;
}

const TABLE_SQL: Record<string, TableSql> = {
  // As the console shows a project: always `active` while listed, with its organization's plan.
  projects: {
    computed: { status: `'active'`, plan: `(SELECT o.plan FROM organizations o WHERE o.id = t.organization_id)` },
  },
  // A membership has no id of its own: it is named by its two keys, `<organization_id>:<user_id>`.
  organization_members: {
    computed: { id: `t.organization_id::text || ':' || t.user_id::text` },
    key: { expr: `t.organization_id::text || ':' || t.user_id::text`, uuid: false },
    order: 't.created_at, t.organization_id, t.user_id',
  },
  // A bucket is named by the key id of its credential (storage/pg/request-guard.ts).
  rate_limits: { key: { expr: 't.key', uuid: false }, order: 't.key' },
  // Newest first, like every view of a log.
  audit_log: { order: 't.seq DESC' },
  // docs/decisions.md #4: the row of /v1/messages/get, in camelCase; newest first, as every view of
  // messages (served by messages_project_idx).
  messages: {
    computed: {
      projectId: 't.project_id',
      from: 't.from_header',
      to: 't.to_address',
      recipients: RECIPIENTS_JSON('t'),
      messageId: 't.message_id_header',
      tags: `coalesce(t.tags, '[]'::jsonb)`,
      metadata: `coalesce(t.metadata, '{}'::jsonb)`,
      scheduledAt: 't.scheduled_at',
      createdAt: 't.created_at',
      updatedAt: 't.updated_at',
    },
    order: 't.created_at DESC, t.id DESC',
  },
  message_events: { order: 't.seq DESC' },
  // A key is named by its project and itself, `<project_id>:<key>` (its primary key).
  idempotency_keys: {
    computed: { id: `t.project_id::text || ':' || t.key` },
    key: { expr: `t.project_id::text || ':' || t.key`, uuid: false },
    order: 't.created_at, t.project_id, t.key',
  },
  // Newest first, like every log; attempts of one event in reverse order of attempt.
  webhook_deliveries: { order: 't.created_at DESC, t.attempt DESC, t.id DESC' },
  // Addresses are stored with the domain in lower case (control/compose.ts normalizeMailbox); a
  // filter matches the value given with its domain (after the last @) lower-cased the same way.
  suppressions: {
    match: {
      address: (v) =>
        `t.address = (substring(${v} from '^(.*)@[^@]*$') || '@' || lower(substring(${v} from '@([^@]*)$')))`,
    },
  },
};

const IDENT = /^[a-z_][a-z0-9_]*$/;
function ident(name: string): string {
  if (!IDENT.test(name)) throw new Error(`data layer: ${JSON.stringify(name)} is not a plain identifier`);
  return name;
}
/** A returned field's name: a plain identifier, or camelCase where the row is (messages); always quoted. */
const FIELD = /^[A-Za-z_][A-Za-z0-9_]*$/;
function field(name: string): string {
  if (!FIELD.test(name)) throw new Error(`data layer: ${JSON.stringify(name)} is not a plain field name`);
  return `"${name}"`;
}

/** Positional parameters collected while a statement is built. */
class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

/** Ids of the live projects the viewer sees (soft-deleted projects are seen by nobody). */
function visibleProjects(v: Viewer, p: Params): string {
  switch (v.kind) {
    case 'all':
      return 'SELECT vp.id FROM projects vp WHERE vp.deleted_at IS NULL';
    case 'user':
      return `SELECT vp.id FROM projects vp JOIN organization_members vm ON vm.organization_id = vp.organization_id
              WHERE vm.user_id = ${p.add(v.userId)} AND vp.deleted_at IS NULL`;
    case 'organization':
      return `SELECT vp.id FROM projects vp
              WHERE vp.organization_id = ${p.add(v.organizationId)} AND vp.deleted_at IS NULL`;
    case 'project':
      return `SELECT vp.id FROM projects vp WHERE vp.id = ${p.add(v.projectId)} AND vp.deleted_at IS NULL`;
  }
}

function ownerPredicate(o: OwnerColumn, v: Viewer, p: Params): string {
  if ('project' in o) return `t.${ident(o.project)} IN (${visibleProjects(v, p)})`;
  if (v.kind === 'all') return 'true';
  if ('organization' in o) {
    const c = `t.${ident(o.organization)}`;
    switch (v.kind) {
      case 'user':
        return `${c} IN (SELECT vm.organization_id FROM organization_members vm WHERE vm.user_id = ${p.add(v.userId)})`;
      case 'organization':
        return `${c} = ${p.add(v.organizationId)}`;
      case 'project':
        // A project key sees its project's rows, not its organization's (docs/api.md §4.1 rule 1).
        return 'false';
    }
  }
  if ('user' in o) return v.kind === 'user' ? `t.${ident(o.user)} = ${p.add(v.userId)}` : 'false';
  return `t.${ident(o.credential)} = ${p.add(v.keyId)}`;
}

const ownerColumns = (owner: Owner): readonly OwnerColumn[] => (Array.isArray(owner) ? owner : [owner as OwnerColumn]);

function visible(owner: Owner, v: Viewer, p: Params): string {
  return ownerColumns(owner)
    .map((o) => `(${ownerPredicate(o, v, p)})`)
    .join(' OR ');
}

/** The SQL of a returned field. */
function fieldExpr(table: string, name: string): string {
  return TABLE_SQL[table]?.computed?.[name] ?? `t.${ident(name)}`;
}

function selectList(t: TableRead): string {
  return t.columns.map((c) => `${fieldExpr(t.table, c)} AS ${field(c)}`).join(', ');
}

/** Whether the viewer sees this (live) project. */
async function projectVisible(q: Queryable, v: Viewer, projectId: string): Promise<boolean> {
  if (!isUuid(projectId)) return false;
  const p = new Params();
  const match = p.add(projectId);
  const rows = await q.query(`SELECT 1 WHERE ${match}::uuid IN (${visibleProjects(v, p)})`, p.values);
  return rows.length > 0;
}

/**
 * The rows of a table the viewer may see, in the table's order, at most `limit`, optionally only
 * those whose fields equal `filters` (fields of the row, values checked by the route's schema).
 * null when a filter names a project the viewer does not see (the caller answers 404, as for any
 * project it names).
 */
export async function listRows(
  q: Queryable,
  t: TableRead,
  v: Viewer,
  limit: number,
  filters: Row = {},
  cursor: string | null = null,
): Promise<{ rows: Row[]; nextCursor: string | null } | 'bad_cursor' | null> {
  const p = new Params();
  const where = [`(${visible(t.owner, v, p)})`];
  const projectExprs = ownerColumns(t.owner).flatMap((o) => ('project' in o ? [`t.${ident(o.project)}`] : []));
  for (const [name, value] of Object.entries(filters)) {
    if (value === undefined) continue;
    if (!t.columns.includes(name))
      throw new Error(`data layer: ${t.table} has no field ${JSON.stringify(name)} to filter on`);
    const expr = fieldExpr(t.table, name);
    if (projectExprs.includes(expr) && !(await projectVisible(q, v, String(value)))) return null;
    const match = TABLE_SQL[t.table]?.match?.[name];
    const param = p.add(value);
    where.push(match ? match(param) : `${expr} = ${param}`);
  }
  const order = TABLE_SQL[t.table]?.order ?? 't.created_at, t.id';
  const key = keyOrder(order);
  if (cursor !== null) {
    const after = decodeCursor(cursor, key);
    if (!after) return 'bad_cursor';
    where.push(afterCursor(key, after, (x) => p.add(x)));
  }
  let rows: Row[];
  try {
    rows = await q.query<Row>(
      `SELECT ${selectList(t)}, ${keyColumns(key)} FROM ${ident(t.table)} t WHERE ${where.join(' AND ')}
       ORDER BY ${order} LIMIT ${p.add(limit + 1)}`,
      p.values,
    );
  } catch (err) {
    if (cursor !== null && isBadCursorValue(err)) return 'bad_cursor';
    throw err;
  }
  return pageOf(rows, key, limit);
}

/** One row by its id, or null when there is none the viewer may see. */
export async function getRow(q: Queryable, t: TableRead, v: Viewer, id: string): Promise<Row | null> {
  const key = TABLE_SQL[t.table]?.key ?? { expr: 't.id', uuid: true };
  if (key.uuid && !isUuid(id)) return null;
  const p = new Params();
  const match = `${key.expr} = ${p.add(id)}`;
  const rows = await q.query<Row>(
    `SELECT ${selectList(t)} FROM ${ident(t.table)} t WHERE ${match} AND (${visible(t.owner, v, p)})`,
    p.values,
  );
  return rows[0] ?? null;
}

/**
 * docs/api.md §4.1 rule 4: a user's own email change. Any textual change is a new address, since a local
 * part may be case-sensitive (RFC 5321 §2.4), so it resets email_verified_at; the same address
 * keeps it. 'taken' when another user has the address (compared case-insensitively, as signup does).
 */
export async function updateUserEmail(
  q: Queryable,
  userId: string,
  email: string,
  now: Date,
): Promise<'ok' | 'taken' | 'not_found'> {
  const taken = await q.query('SELECT 1 FROM users WHERE lower(email) = lower($2) AND id <> $1', [userId, email]);
  if (taken.length) return 'taken';
  try {
    const rows = await q.query(
      `UPDATE users SET email = $2, email_verified_at = CASE WHEN email = $2 THEN email_verified_at END, updated_at = $3
       WHERE id = $1 RETURNING id`,
      [userId, email, now],
    );
    return rows.length ? 'ok' : 'not_found';
  } catch (err) {
    // Another user took the address between the check and the update.
    if (isPgError(err, PG_UNIQUE_VIOLATION)) return 'taken';
    throw err;
  }
}

/** docs/api.md §4.1 rule 5: whether any of the projects has sent mail (any message accepted for sending). */
export async function projectsHaveSentMail(q: Queryable, projectIds: readonly string[]): Promise<boolean> {
  if (projectIds.length === 0) return false;
  const rows = await q.query(
    "SELECT 1 FROM messages WHERE project_id = ANY($1::uuid[]) AND status <> 'suppressed' LIMIT 1",
    [projectIds],
  );
  return rows.length > 0;
}

export type UserDeletion =
  | { ok: true; organizationIds: string[]; projectIds: string[] }
  | { ok: false; reason: 'not_found' }
  /** The user is the only owner of an organization with other members: deleting would leave it ownerless. */
  | { ok: false; reason: 'only_owner'; organizationId: string }
  | { ok: false; reason: 'sent_mail' };

/**
 * docs/api.md §4.1 rule 5: the irreversible self delete. Run it inside a transaction. Deletes every
 * organization in which the user is the only member (the foreign keys take its projects, keys,
 * tokens, invitations and join codes with it), then the user (taking its account tokens,
 * memberships and reset tokens). Refuses, changing nothing, when the user is the only owner of an
 * organization that has other members, or when a project to be deleted has sent mail.
 */
export async function deleteUserCascade(q: Queryable, userId: string): Promise<UserDeletion> {
  if (!isUuid(userId)) return { ok: false, reason: 'not_found' };
  const user = await q.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [userId]);
  if (!user.length) return { ok: false, reason: 'not_found' };
  // Lock every membership of every organization the user is in, in one order: of two members
  // deleting themselves at once, the second then counts the first as gone instead of both leaving
  // an organization without members (or without an owner).
  await q.query(
    `SELECT 1 FROM organization_members
     WHERE organization_id IN (SELECT organization_id FROM organization_members WHERE user_id = $1)
     ORDER BY organization_id, user_id FOR UPDATE`,
    [userId],
  );
  const orgs = await q.query<{ organization_id: string; role: string; members: number; owners: number }>(
    `SELECT m.organization_id, m.role,
       (SELECT count(*)::int FROM organization_members x WHERE x.organization_id = m.organization_id) AS members,
       (SELECT count(*)::int FROM organization_members x
         WHERE x.organization_id = m.organization_id AND x.role = 'owner') AS owners
     FROM organization_members m WHERE m.user_id = $1 ORDER BY m.organization_id`,
    [userId],
  );
  const blocked = orgs.find((o) => o.members > 1 && o.role === 'owner' && o.owners === 1);
  if (blocked) return { ok: false, reason: 'only_owner', organizationId: blocked.organization_id };

  const organizationIds = orgs.filter((o) => o.members === 1).map((o) => o.organization_id);
  // Soft-deleted projects go too: the organization row they hang on is deleted.
  const projects = await q.query<{ id: string }>('SELECT id FROM projects WHERE organization_id = ANY($1::uuid[])', [
    organizationIds,
  ]);
  const projectIds = projects.map((p) => p.id);
  if (await projectsHaveSentMail(q, projectIds)) return { ok: false, reason: 'sent_mail' };

  await q.query('DELETE FROM organizations WHERE id = ANY($1::uuid[])', [organizationIds]);
  await q.query('DELETE FROM users WHERE id = $1', [userId]);
  return { ok: true, organizationIds, projectIds };
}
