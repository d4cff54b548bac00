// Join codes: shown once in plaintext, kept as hashes; status derived from used/revoked/expiry.
import type { Queryable } from './client.js';
import type { OrgRole } from './organizations.js';

export type JoinCodeStatus = 'active' | 'used' | 'expired' | 'revoked';

export interface JoinCode {
  id: string;
  organizationId: string;
  role: OrgRole;
  status: JoinCodeStatus;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

const COLS = `id, organization_id AS "organizationId", role, created_at AS "createdAt", expires_at AS "expiresAt",
  used_at AS "usedAt",
  CASE WHEN used_at IS NOT NULL THEN 'used' WHEN revoked_at IS NOT NULL THEN 'revoked'
       WHEN expires_at <= $2 THEN 'expired' ELSE 'active' END AS status`;

export async function insertJoinCode(
  q: Queryable,
  c: {
    id: string;
    organizationId: string;
    codeHash: string;
    role: OrgRole;
    createdBy: string | null;
    now: Date;
    expiresAt: Date;
  },
): Promise<JoinCode> {
  await q.query(
    `INSERT INTO join_codes (id, organization_id, code_hash, role, created_by, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [c.id, c.organizationId, c.codeHash, c.role, c.createdBy, c.now, c.expiresAt],
  );
  return {
    id: c.id,
    organizationId: c.organizationId,
    role: c.role,
    status: 'active',
    createdAt: c.now,
    expiresAt: c.expiresAt,
    usedAt: null,
  };
}

export async function listJoinCodes(q: Queryable, organizationId: string, now: Date): Promise<JoinCode[]> {
  return q.query<JoinCode>(`SELECT ${COLS} FROM join_codes WHERE organization_id = $1 ORDER BY created_at, id`, [
    organizationId,
    now,
  ]);
}

export async function getJoinCode(
  q: Queryable,
  organizationId: string,
  id: string,
  now: Date,
): Promise<JoinCode | null> {
  const rows = await q.query<JoinCode>(`SELECT ${COLS} FROM join_codes WHERE organization_id = $1 AND id::text = $3`, [
    organizationId,
    now,
    id,
  ]);
  return rows[0] ?? null;
}

export async function revokeJoinCode(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query('UPDATE join_codes SET revoked_at = $2 WHERE id = $1 AND used_at IS NULL AND revoked_at IS NULL', [
    id,
    now,
  ]);
}

/** The active code a hash names, or null (unknown, used, revoked or expired). */
export async function findActiveJoinCode(q: Queryable, codeHash: string, now: Date): Promise<JoinCode | null> {
  const rows = await q.query<JoinCode>(
    `SELECT ${COLS} FROM join_codes
     WHERE code_hash = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2`,
    [codeHash, now],
  );
  return rows[0] ?? null;
}

/** Uses the code; false when another redemption got there first. One UPDATE, so exactly one wins. */
export async function useJoinCode(q: Queryable, id: string, userId: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    `UPDATE join_codes SET used_at = $3, used_by = $2
     WHERE id = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $3 RETURNING id`,
    [id, userId, now],
  );
  return rows.length > 0;
}
