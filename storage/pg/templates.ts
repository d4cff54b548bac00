// Templates (docs/api.md §4.13): an organization's templates and every version each has had. Who may see
// or change which template is the handler's decision (control/handlers/templates.ts); these queries
// only keep a write to the owning organization (`organization_id = $n` in every write).
//
// Each write is one statement: the template row and its version row are written together by a
// data-modifying CTE, so no version is ever missing and two concurrent updates get distinct version
// numbers (the UPDATE's row lock orders them).
import { pagedRows, type Paged, type PageRequest } from './cursor.js';
import type { Db, Queryable } from './client.js';
import { batched } from './batch.js';
import { isUuid } from '../../mail/uuid.js';

export interface TemplateVariable {
  name: string;
  default?: string;
}

export interface TemplateRecord {
  id: string;
  organizationId: string;
  name: string;
  subject: string;
  html: string | null;
  text: string | null;
  variables: TemplateVariable[];
  isPublic: boolean;
  version: number;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = `id, organization_id AS "organizationId", name, subject, html, text, variables, is_public AS "isPublic",
  version, created_by AS "createdBy", created_at AS "createdAt", updated_at AS "updatedAt"`;

// The version row of a template row just written (t: the CTE holding it); `actor` is the writer.
const VERSION_OF = (actor: string) => `INSERT INTO template_versions
  (template_id, version, name, subject, html, text, variables, is_public, created_by, created_at)
  SELECT id, version, name, subject, html, text, variables, is_public, ${actor}, updated_at FROM t`;

/** Postgres check_violation: the table's CHECK (html IS NOT NULL OR text IS NOT NULL) refused the row. */
export const PG_CHECK_VIOLATION = '23514';

export async function insertTemplate(
  q: Queryable,
  t: {
    id: string;
    organizationId: string;
    name: string;
    subject: string;
    html: string | null;
    text: string | null;
    variables: TemplateVariable[];
    isPublic: boolean;
    createdBy: string | null;
    now: Date;
  },
): Promise<TemplateRecord> {
  const rows = await q.query<TemplateRecord>(
    `WITH t AS (
       INSERT INTO templates (id, organization_id, name, subject, html, text, variables, is_public, version, created_by,
         created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, 1, $9, $10, $10) RETURNING *
     ), v AS (${VERSION_OF('t.created_by')})
     SELECT ${COLUMNS} FROM t`,
    [
      t.id,
      t.organizationId,
      t.name,
      t.subject,
      t.html,
      t.text,
      JSON.stringify(t.variables),
      t.isPublic,
      t.createdBy,
      t.now,
    ],
  );
  return rows[0] as TemplateRecord;
}

/** A template by id, whoever owns it; null for an unknown id or one that is no UUID. */
export async function getTemplate(q: Queryable, id: string): Promise<TemplateRecord | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<TemplateRecord>(`SELECT ${COLUMNS} FROM templates WHERE id = $1`, [id]);
  return rows[0] ?? null;
}

/** getTemplate, for the sends that name a template: storage/caches.ts keeps one per storage handle. */
export type TemplateReads = (id: string) => Promise<TemplateRecord | null>;

/**
 * Concurrent sends' reads of their templates share a statement (storage/pg/batch.ts), as their accepting statements
 * do: a read a send was one more round trip each, and sends with a template went at about two thirds of the rate of
 * those without (docs/decisions.md #92). Read anew each time, never cached: an update shows in the next send.
 */
export function templateReads(db: Db): TemplateReads {
  const many = async (ids: string[]) => {
    const rows = await db.query<TemplateRecord>(`SELECT ${COLUMNS} FROM templates WHERE id = ANY($1::uuid[])`, [ids]);
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.map((id) => byId.get(id) ?? null);
  };
  const read = batched<string, TemplateRecord | null>(many, async (id) => (await many([id]))[0]!, {
    max: 256,
    inFlight: 1,
  });
  return (id) => (isUuid(id) ? read(id) : Promise.resolve(null));
}

/** The organization's own templates, newest first. */
export async function listTemplates(
  q: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Paged<TemplateRecord> | 'bad_cursor'> {
  return pagedRows<TemplateRecord & Record<string, unknown>>(
    q,
    { select: COLUMNS, from: 'templates', where: 'organization_id = $1', order: 'created_at DESC, id DESC' },
    [organizationId],
    page,
  );
}

/** Every public template of every organization, newest first. */
export async function listPublicTemplates(
  q: Queryable,
  page: PageRequest,
): Promise<Paged<TemplateRecord> | 'bad_cursor'> {
  return pagedRows<TemplateRecord & Record<string, unknown>>(
    q,
    { select: COLUMNS, from: 'templates', where: 'is_public', order: 'created_at DESC, id DESC' },
    [],
    page,
  );
}

/** Fields an update changes; an absent field keeps its value, html or text null clears that part. */
export interface TemplatePatch {
  name?: string;
  subject?: string;
  html?: string | null;
  text?: string | null;
  variables?: TemplateVariable[];
  isPublic?: boolean;
}

/**
 * Applies the patch as version n+1 and records that version; null when the organization owns no
 * template of this id. Throws a check violation (PG_CHECK_VIOLATION) when it would clear both html and text.
 */
export async function updateTemplate(
  q: Queryable,
  u: { id: string; organizationId: string; patch: TemplatePatch; updatedBy: string | null; now: Date },
): Promise<TemplateRecord | null> {
  if (!isUuid(u.id)) return null;
  const p = u.patch;
  const set = (given: boolean, v: unknown) => [given, v ?? null];
  const rows = await q.query<TemplateRecord>(
    `WITH t AS (
       UPDATE templates SET
         name = CASE WHEN $3 THEN $4 ELSE name END,
         subject = CASE WHEN $5 THEN $6 ELSE subject END,
         html = CASE WHEN $7 THEN $8 ELSE html END,
         text = CASE WHEN $9 THEN $10 ELSE text END,
         variables = CASE WHEN $11 THEN $12::jsonb ELSE variables END,
         is_public = CASE WHEN $13 THEN $14::boolean ELSE is_public END,
         version = version + 1,
         updated_at = $15
       WHERE id = $1 AND organization_id = $2 RETURNING *
     ), v AS (${VERSION_OF('$16::uuid')})
     SELECT ${COLUMNS} FROM t`,
    [
      u.id,
      u.organizationId,
      ...set(p.name !== undefined, p.name),
      ...set(p.subject !== undefined, p.subject),
      ...set(p.html !== undefined, p.html),
      ...set(p.text !== undefined, p.text),
      ...set(p.variables !== undefined, p.variables === undefined ? null : JSON.stringify(p.variables)),
      ...set(p.isPublic !== undefined, p.isPublic),
      u.now,
      u.updatedBy,
    ],
  );
  return rows[0] ?? null;
}

/** Deletes the organization's template and its versions; false when it owns no template of this id. */
export async function deleteTemplate(q: Queryable, id: string, organizationId: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  return (
    (await q.query('DELETE FROM templates WHERE id = $1 AND organization_id = $2 RETURNING id', [id, organizationId]))
      .length > 0
  );
}
