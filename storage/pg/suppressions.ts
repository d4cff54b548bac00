// Suppressions (docs/api.md §2.2, §6 rule 4): per project, one row per address, the address stored with
// its domain in lower case. sendEmail reads them (storage/pg/messages.ts), the MTA adds bounce and
// complaint rows, the data layer (docs/api.md §4.1 rule 3) and the console (§4.9) add and lift them;
// row-scoped reads are the data layer's (storage/pg/data-layer.ts).
import { pagedRows, type Paged, type PageRequest } from './cursor.js';
import type { Queryable } from './client.js';
import { isUuid } from '../../mail/uuid.js';

export interface SuppressionRecord {
  id: string;
  projectId: string;
  address: string;
  reason: string;
  detail: string | null;
  createdAt: Date;
}

const COLUMNS = `id, project_id AS "projectId", address, reason, detail, created_at AS "createdAt"`;

/**
 * Adds a suppression; the address must already be normalized. When the project already suppresses
 * the address nothing changes, and the id of the row already there is returned (null if it was
 * lifted in the meantime).
 */
export async function insertSuppression(
  q: Queryable,
  s: { projectId: string; address: string; reason: string; detail: string | null; now: Date },
): Promise<{ inserted: true; id: string } | { inserted: false; id: string | null }> {
  const rows = await q.query<{ id: string }>(
    `INSERT INTO suppressions (project_id, address, reason, detail, created_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (project_id, address) DO NOTHING RETURNING id`,
    [s.projectId, s.address, s.reason, s.detail, s.now],
  );
  if (rows[0]) return { inserted: true, id: rows[0].id };
  const existing = await q.query<{ id: string }>('SELECT id FROM suppressions WHERE project_id = $1 AND address = $2', [
    s.projectId,
    s.address,
  ]);
  return { inserted: false, id: existing[0]?.id ?? null };
}

/** Lifts a suppression by its id; false when there is none. */
export async function deleteSuppression(q: Queryable, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  return (await q.query('DELETE FROM suppressions WHERE id = $1 RETURNING id', [id])).length > 0;
}

/** A project's newest suppressions, at most `limit`. */
export async function listRecentSuppressions(
  q: Queryable,
  projectId: string,
  limit: number,
): Promise<SuppressionRecord[]> {
  return q.query<SuppressionRecord>(
    `SELECT ${COLUMNS} FROM suppressions WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`,
    [projectId, limit],
  );
}

/** One suppression of a project by id, or null. */
export async function getSuppression(q: Queryable, projectId: string, id: string): Promise<SuppressionRecord | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<SuppressionRecord>(
    `SELECT ${COLUMNS} FROM suppressions WHERE project_id = $1 AND id = $2`,
    [projectId, id],
  );
  return rows[0] ?? null;
}

/** A project's suppressions, newest first, at most `limit`; with `address` (normalized), only that one. */
export async function listSuppressions(
  q: Queryable,
  f: { projectId: string; address: string | null },
  page: PageRequest,
): Promise<Paged<SuppressionRecord> | 'bad_cursor'> {
  return pagedRows<SuppressionRecord & Record<string, unknown>>(
    q,
    {
      select: COLUMNS,
      from: 'suppressions',
      where: 'project_id = $1 AND ($2::text IS NULL OR address = $2)',
      order: 'created_at DESC, id DESC',
    },
    [f.projectId, f.address],
    page,
  );
}

/** Lifts the project's suppression of an address (normalized); false when there is none. */
export async function deleteSuppressionByAddress(q: Queryable, projectId: string, address: string): Promise<boolean> {
  return (
    (
      await q.query('DELETE FROM suppressions WHERE project_id = $1 AND address = $2 RETURNING id', [
        projectId,
        address,
      ])
    ).length > 0
  );
}
