// Password reset tokens: single use, expiring; stored as SHA-256 hashes only.
import type { Queryable } from './client.js';

export async function insertPasswordReset(
  q: Queryable,
  r: { id: string; userId: string; tokenHash: string; expiresAt: Date; now: Date },
): Promise<void> {
  await q.query(
    'INSERT INTO password_resets (id, user_id, token_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)',
    [r.id, r.userId, r.tokenHash, r.expiresAt, r.now],
  );
}

/** Whether the token is known, unused and unexpired now (a peek; consumePasswordReset decides). */
export async function livePasswordReset(q: Queryable, tokenHash: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    'SELECT 1 FROM password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2',
    [tokenHash, now],
  );
  return rows.length > 0;
}

/** Marks the token used and returns its user, or null when unknown, used or expired. Race-safe: one UPDATE. */
export async function consumePasswordReset(q: Queryable, tokenHash: string, now: Date): Promise<string | null> {
  const rows = await q.query<{ user_id: string }>(
    `UPDATE password_resets SET used_at = $2
     WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING user_id`,
    [tokenHash, now],
  );
  return rows[0]?.user_id ?? null;
}

/** Retires every outstanding reset link of the user (after a reset, older links must not work). */
export async function retirePasswordResets(q: Queryable, userId: string, now: Date): Promise<void> {
  await q.query('UPDATE password_resets SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL', [userId, now]);
}
