// The SQL of an inbox login (core/inbox-auth.ts): find a live inbox by its address and record a successful
// login. The failure buckets that throttle guessing are storage/pg/throttles.ts.
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
