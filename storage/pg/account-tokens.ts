// Account tokens (svca_): a user's credentials. Revocation keeps the row (revoked_at) for the audit trail.
import type { Queryable } from './client.js';

export interface AccountTokenInfo {
  id: string;
  tokenId: string;
  label: string | null;
  createdAt: Date;
}

export async function insertAccountToken(
  q: Queryable,
  t: { id: string; tokenId: string; userId: string; secretSealed: string; label: string | null; now: Date },
): Promise<AccountTokenInfo> {
  await q.query(
    `INSERT INTO account_tokens (id, token_id, user_id, secret_sealed, label, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [t.id, t.tokenId, t.userId, t.secretSealed, t.label, t.now],
  );
  return { id: t.id, tokenId: t.tokenId, label: t.label, createdAt: t.now };
}

export async function listAccountTokens(q: Queryable, userId: string): Promise<AccountTokenInfo[]> {
  return q.query<AccountTokenInfo>(
    `SELECT id, token_id AS "tokenId", label, created_at AS "createdAt" FROM account_tokens
     WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at, token_id`,
    [userId],
  );
}

/** Revokes one of the user's own tokens, named by its tokenId or its database id. */
export async function revokeAccountToken(
  q: Queryable,
  userId: string,
  idOrTokenId: string,
  now: Date,
): Promise<boolean> {
  const byId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrTokenId);
  const rows = await q.query(
    `UPDATE account_tokens SET revoked_at = $3 WHERE user_id = $1 AND ${byId ? 'id = $2::uuid' : 'token_id = $2'}
     AND revoked_at IS NULL RETURNING id`,
    [userId, idOrTokenId, now],
  );
  return rows.length > 0;
}

export async function revokeAllAccountTokens(q: Queryable, userId: string, now: Date): Promise<number> {
  const rows = await q.query(
    'UPDATE account_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL RETURNING id',
    [userId, now],
  );
  return rows.length;
}

/** Revokes any user's live token, named by its tokenId or its database id (staff and platform use). */
export async function revokeAnyAccountToken(q: Queryable, idOrTokenId: string, now: Date): Promise<boolean> {
  const byId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrTokenId);
  const rows = await q.query(
    `UPDATE account_tokens SET revoked_at = $2 WHERE ${byId ? 'id = $1::uuid' : 'token_id = $1'}
     AND revoked_at IS NULL RETURNING id`,
    [idOrTokenId, now],
  );
  return rows.length > 0;
}
