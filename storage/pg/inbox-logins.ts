// The SQL of an inbox login (core/inbox-auth.ts): find a live inbox by its address, record a successful
// login, and the failure buckets that throttle guessing (docs/decisions.md #24), kept in the same
// `rate_limits` table as the credential buckets so that every node shares them and the control plane's
// sweep drops idle ones.
import type { Queryable } from './client.js';

export interface InboxCredentials {
  id: string;
  /** The inbox address as stored: localpart@domain. */
  address: string;
  passwordHash: string | null;
}

/**
 * The live inbox of `localpart@domain` (both compared case-insensitively, as the MX does), under a
 * verified inbound capability; null for an unknown address or a deleted inbox alike.
 */
export async function findInboxForLogin(
  q: Queryable,
  localpart: string,
  domain: string,
): Promise<InboxCredentials | null> {
  const rows = await q.query<InboxCredentials>(
    `SELECT i.id, i.localpart || '@' || c.domain AS address, i.password_hash AS "passwordHash"
     FROM inboxes i JOIN inbound_capabilities c ON c.id = i.capability_id
     WHERE lower(c.domain) = lower($2) AND lower(i.localpart) = lower($1) AND i.deleted_at IS NULL
       AND c.status = 'verified'`,
    [localpart, domain],
  );
  return rows[0] ?? null;
}

/**
 * After a successful login: the initial password is no longer shown (docs/api.md §4.5) and billing
 * starts if inbound mail has not started it (docs/decisions.md #18). False when the inbox was deleted
 * meanwhile.
 */
export async function recordInboxLogin(q: Queryable, inboxId: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    `UPDATE inboxes SET initial_password_sealed = NULL, billing_started_at = COALESCE(billing_started_at, $2)
     WHERE id = $1 AND deleted_at IS NULL RETURNING id`,
    [inboxId, now],
  );
  return rows.length > 0;
}

/** The password hash of a live inbox, or null once it is deleted: a logged-in session re-checks it. */
export async function liveInboxHash(q: Queryable, inboxId: string): Promise<string | null> {
  const rows = await q.query<{ h: string | null }>(
    "SELECT coalesce(password_hash, '') AS h FROM inboxes WHERE id = $1 AND deleted_at IS NULL",
    [inboxId],
  );
  return rows[0]?.h ?? null;
}

export interface FailureBucket {
  key: string;
  burst: number;
  perSecond: number;
}

// The bucket's tokens refilled from its last update to `now`, capped at its burst ($2, $3, $4).
const REFILLED = `least($3::float8, r.tokens
  + greatest(0, extract(epoch FROM ($2::timestamptz - r.updated_at))::float8) * $4::float8)`;

/** Whether every bucket has a token left now, without taking one: a login is tried only then. */
export async function failureBucketsOpen(q: Queryable, buckets: readonly FailureBucket[], now: Date): Promise<boolean> {
  for (const b of buckets) {
    const rows = await q.query<{ open: boolean }>(
      `SELECT ${REFILLED} >= 1 AS open FROM rate_limits r WHERE r.key = $1`,
      [b.key, now, b.burst, b.perSecond],
    );
    if (rows[0] && !rows[0].open) return false;
  }
  return true;
}

/** A failed login takes one token from each bucket (a successful one takes none, docs/decisions.md #24). */
export async function spendFailureTokens(q: Queryable, buckets: readonly FailureBucket[], now: Date): Promise<void> {
  // Key order, so that concurrent failures lock the rows in one order.
  for (const b of [...buckets].sort((x, y) => (x.key < y.key ? -1 : 1))) {
    await q.query(
      `INSERT INTO rate_limits AS r (key, tokens, allowed, updated_at) VALUES ($1, $3::float8 - 1, true, $2)
       ON CONFLICT (key) DO UPDATE SET
         tokens = greatest(0, ${REFILLED} - 1),
         allowed = ${REFILLED} >= 1,
         updated_at = greatest(excluded.updated_at, r.updated_at)`,
      [b.key, now, b.burst, b.perSecond],
    );
  }
}
