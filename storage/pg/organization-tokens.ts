// Organization tokens (svco_): credentials that act as the organization.
import type { Queryable } from './client.js';

export interface OrgTokenInfo {
  id: string;
  tokenId: string;
  label: string | null;
  createdAt: Date;
}

export async function insertOrgToken(
  q: Queryable,
  t: { id: string; tokenId: string; organizationId: string; secretSealed: string; label: string | null; now: Date },
): Promise<OrgTokenInfo> {
  await q.query(
    `INSERT INTO organization_tokens (id, token_id, organization_id, secret_sealed, label, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [t.id, t.tokenId, t.organizationId, t.secretSealed, t.label, t.now],
  );
  return { id: t.id, tokenId: t.tokenId, label: t.label, createdAt: t.now };
}

export async function listOrgTokens(q: Queryable, organizationId: string): Promise<OrgTokenInfo[]> {
  return q.query<OrgTokenInfo>(
    `SELECT id, token_id AS "tokenId", label, created_at AS "createdAt" FROM organization_tokens
     WHERE organization_id = $1 AND revoked_at IS NULL ORDER BY created_at, token_id`,
    [organizationId],
  );
}

/** Revokes by tokenId or id, within the organization. */
export async function revokeOrgToken(
  q: Queryable,
  organizationId: string,
  idOrTokenId: string,
  now: Date,
): Promise<boolean> {
  const rows = await q.query(
    `UPDATE organization_tokens SET revoked_at = $3
     WHERE organization_id = $1 AND (token_id = $2 OR id::text = $2) AND revoked_at IS NULL RETURNING id`,
    [organizationId, idOrTokenId, now],
  );
  return rows.length > 0;
}
