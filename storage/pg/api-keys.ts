// Project API keys: platform-managed (tk_, rotatable, CIDR-restrictable) and local (svc_).
import type { Queryable } from './client.js';

export type Managed = 'platform' | 'local';

export interface ApiKey {
  id: string;
  keyId: string;
  projectId: string;
  label: string | null;
  scopes: string[];
  managed: Managed;
  allowedCidrs: string[];
  rotatedFrom: string | null;
  createdAt: Date;
  expiresAt: Date | null;
}

const COLS = `id, key_id AS "keyId", project_id AS "projectId", label, scopes, managed, allowed_cidrs AS "allowedCidrs",
  rotated_from AS "rotatedFrom", created_at AS "createdAt", expires_at AS "expiresAt"`;
const LIVE = `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`;

export async function insertApiKey(
  q: Queryable,
  k: {
    id: string;
    keyId: string;
    projectId: string;
    secretSealed: string;
    label: string | null;
    scopes: string[];
    managed: Managed;
    allowedCidrs: string[];
    rotatedFrom?: string | null;
    now: Date;
  },
): Promise<ApiKey> {
  const rows = await q.query<ApiKey>(
    `INSERT INTO api_keys
       (id, key_id, project_id, secret_sealed, label, scopes, managed, allowed_cidrs, rotated_from, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${COLS}`,
    [
      k.id,
      k.keyId,
      k.projectId,
      k.secretSealed,
      k.label,
      k.scopes,
      k.managed,
      k.allowedCidrs,
      k.rotatedFrom ?? null,
      k.now,
    ],
  );
  return rows[0] as ApiKey;
}

export async function listApiKeys(q: Queryable, projectId: string, now: Date): Promise<ApiKey[]> {
  return q.query<ApiKey>(`SELECT ${COLS} FROM api_keys WHERE project_id = $1 AND ${LIVE} ORDER BY created_at, key_id`, [
    projectId,
    now,
  ]);
}

/** A live key of the project, named by its key id (tk_/svc_) or its database id. */
export async function findApiKey(
  q: Queryable,
  projectId: string,
  idOrKeyId: string,
  now: Date,
): Promise<ApiKey | null> {
  const rows = await q.query<ApiKey>(
    `SELECT ${COLS} FROM api_keys WHERE project_id = $1 AND ${LIVE} AND (key_id = $3 OR id::text = $3)`,
    [projectId, now, idOrKeyId],
  );
  return rows[0] ?? null;
}

export async function renameApiKey(q: Queryable, id: string, label: string | null): Promise<void> {
  await q.query('UPDATE api_keys SET label = $2 WHERE id = $1', [id, label]);
}

/** Starts the grace window of a rotated key; it stops working at expiresAt. */
export async function expireApiKey(q: Queryable, id: string, expiresAt: Date): Promise<void> {
  await q.query('UPDATE api_keys SET expires_at = least(coalesce(expires_at, $2), $2) WHERE id = $1', [id, expiresAt]);
}

export async function revokeApiKey(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query('UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL', [id, now]);
}
