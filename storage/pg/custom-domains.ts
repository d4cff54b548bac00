// Custom webmail domains (migration 0004): rows scoped to their organization, and the one indexed
// lookup behind the public allow check.
import { isPgError, PG_UNIQUE_VIOLATION, type Queryable } from './client.js';

export type CustomDomainStatus = 'pending' | 'verified' | 'disabled';

export interface CustomDomain {
  id: string;
  organizationId: string;
  domain: string;
  status: CustomDomainStatus;
  verifiedAt: Date | null;
  lastVerifyAttempt: Date | null;
  createdAt: Date;
}

const COLS = `id, organization_id AS "organizationId", domain, status, verified_at AS "verifiedAt",
  last_verify_attempt AS "lastVerifyAttempt", created_at AS "createdAt"`;

/**
 * Registers a (normalized) domain for an organization; 'taken' when any organization already has it.
 * The UNIQUE constraint decides, so two concurrent registrations cannot both succeed. Run it outside
 * a transaction (or as its last statement): a unique violation aborts the transaction it is in.
 */
export async function insertCustomDomain(
  q: Queryable,
  d: { id: string; organizationId: string; domain: string; now: Date },
): Promise<CustomDomain | 'taken'> {
  try {
    const rows = await q.query<CustomDomain>(
      `INSERT INTO custom_domains (id, organization_id, domain, status, created_at)
       VALUES ($1, $2, $3, 'pending', $4) RETURNING ${COLS}`,
      [d.id, d.organizationId, d.domain, d.now],
    );
    return rows[0] as CustomDomain;
  } catch (err) {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) return 'taken';
    throw err;
  }
}

export async function listCustomDomains(q: Queryable, organizationId: string): Promise<CustomDomain[]> {
  return q.query<CustomDomain>(
    `SELECT ${COLS} FROM custom_domains WHERE organization_id = $1 ORDER BY created_at, id`,
    [organizationId],
  );
}

// Ids arrive from the path as text: comparing id::text keeps a malformed id a plain "not found".
export async function getCustomDomain(q: Queryable, organizationId: string, id: string): Promise<CustomDomain | null> {
  const rows = await q.query<CustomDomain>(
    `SELECT ${COLS} FROM custom_domains WHERE organization_id = $1 AND id::text = $2`,
    [organizationId, id],
  );
  return rows[0] ?? null;
}

/**
 * Records a verify call (docs/api.md §3: `last_verify_attempt` is updated on every call) and returns the
 * row, or null when the organization has no such domain. Its own statement, committed before any
 * DNS lookup, so a failing verification does not undo it.
 */
export async function recordVerifyAttempt(
  q: Queryable,
  organizationId: string,
  id: string,
  now: Date,
): Promise<CustomDomain | null> {
  const rows = await q.query<CustomDomain>(
    `UPDATE custom_domains SET last_verify_attempt = $3 WHERE organization_id = $1 AND id::text = $2 RETURNING ${COLS}`,
    [organizationId, id, now],
  );
  return rows[0] ?? null;
}

/**
 * pending → verified. `verified_at` is when the domain became verified: a later verification that
 * passes again keeps it. Never moves a disabled domain. Null when the row is gone (or disabled).
 */
export async function markCustomDomainVerified(q: Queryable, id: string, now: Date): Promise<CustomDomain | null> {
  const rows = await q.query<CustomDomain>(
    `UPDATE custom_domains SET status = 'verified', verified_at = COALESCE(verified_at, $2)
      WHERE id = $1 AND status IN ('pending', 'verified') RETURNING ${COLS}`,
    [id, now],
  );
  return rows[0] ?? null;
}

export async function deleteCustomDomain(q: Queryable, organizationId: string, id: string): Promise<boolean> {
  const rows = await q.query(`DELETE FROM custom_domains WHERE organization_id = $1 AND id::text = $2 RETURNING id`, [
    organizationId,
    id,
  ]);
  return rows.length > 0;
}

/** The allow check (docs/api.md §4.12): one lookup on the unique index of `domain`. */
export async function isVerifiedCustomDomain(q: Queryable, domain: string): Promise<boolean> {
  const rows = await q.query(`SELECT 1 FROM custom_domains WHERE domain = $1 AND status = 'verified'`, [domain]);
  return rows.length > 0;
}
