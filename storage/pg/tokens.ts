// Account tokens (svca_, a user's credentials) and organization tokens (svco_, credentials that act as
// the organization): two tables of one shape, told apart by the kind. Revocation keeps the row
// (revoked_at) for the audit trail.
import type { Queryable } from './client.js';
import { isUuid } from '../../mail/uuid.js';

export type TokenKind = 'account' | 'organization';

// The table and its owner column per kind: constants, never input.
const TABLE = {
  account: { table: 'account_tokens', owner: 'user_id' },
  organization: { table: 'organization_tokens', owner: 'organization_id' },
} as const;

export interface TokenInfo {
  id: string;
  tokenId: string;
  label: string | null;
  createdAt: Date;
}

export async function insertToken(
  q: Queryable,
  kind: TokenKind,
  t: { id: string; tokenId: string; ownerId: string; secretSealed: string; label: string | null; now: Date },
): Promise<TokenInfo> {
  const { table, owner } = TABLE[kind];
  await q.query(
    `INSERT INTO ${table} (id, token_id, ${owner}, secret_sealed, label, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [t.id, t.tokenId, t.ownerId, t.secretSealed, t.label, t.now],
  );
  return { id: t.id, tokenId: t.tokenId, label: t.label, createdAt: t.now };
}

/** The owner's live tokens, oldest first. */
export async function listTokens(q: Queryable, kind: TokenKind, ownerId: string): Promise<TokenInfo[]> {
  const { table, owner } = TABLE[kind];
  return q.query<TokenInfo>(
    `SELECT id, token_id AS "tokenId", label, created_at AS "createdAt" FROM ${table}
     WHERE ${owner} = $1 AND revoked_at IS NULL ORDER BY created_at, token_id`,
    [ownerId],
  );
}

/**
 * Revokes one live token, named by its tokenId or its database id: of the owner, or of any owner when
 * `ownerId` is null (staff and platform use). False when there is no such live token.
 */
export async function revokeToken(
  q: Queryable,
  kind: TokenKind,
  ownerId: string | null,
  idOrTokenId: string,
  now: Date,
): Promise<boolean> {
  const { table, owner } = TABLE[kind];
  const which = isUuid(idOrTokenId) ? 'id = $1::uuid' : 'token_id = $1';
  const rows = await q.query(
    `UPDATE ${table} SET revoked_at = $2 WHERE ${which} ${ownerId === null ? '' : `AND ${owner} = $3`}
     AND revoked_at IS NULL RETURNING id`,
    ownerId === null ? [idOrTokenId, now] : [idOrTokenId, now, ownerId],
  );
  return rows.length > 0;
}

/** Revokes every live token of the owner (a password reset ends a user's sessions); how many. */
export async function revokeAllTokens(q: Queryable, kind: TokenKind, ownerId: string, now: Date): Promise<number> {
  const { table, owner } = TABLE[kind];
  const rows = await q.query(
    `UPDATE ${table} SET revoked_at = $2 WHERE ${owner} = $1 AND revoked_at IS NULL RETURNING id`,
    [ownerId, now],
  );
  return rows.length;
}
