// Credential lookup for request authentication: the key id's prefix names the table it lives in.
// Adding a credential kind is one more entry in `lookups`. Each lookup is a query over a key id and
// an instant (SQL expressions) and a row mapper, so that request-guard.ts can run the same lookup
// inside its statement, for one request or a batch, and re-check a cached credential without a
// round trip of its own.
import type { Queryable } from './client.js';
import type { UserRole } from './users.js';
import type { Managed } from './api-keys.js';

interface Common {
  id: string;
  keyId: string;
  secretSealed: string;
}

export type StoredCredential =
  | (Common & { kind: 'account_token'; userId: string; userRole: UserRole; userEmail: string })
  | (Common & { kind: 'organization_token'; organizationId: string })
  | (Common & {
      kind: 'project_api_key';
      projectId: string;
      organizationId: string;
      scopes: string[];
      managed: Managed;
      allowedCidrs: string[];
    });

export interface CredentialLookup {
  /** Selects at most one row for the key id `key` (a text expression) at `now` (a timestamptz one). */
  sql(key: string, now: string): string;
  map(row: Record<string, unknown>, keyId: string): StoredCredential;
}

const accountToken: CredentialLookup = {
  sql: (
    key,
  ) => `SELECT t.id, t.secret_sealed, t.user_id, u.role, u.email FROM account_tokens t JOIN users u ON u.id = t.user_id
        WHERE t.token_id = ${key} AND t.revoked_at IS NULL`,
  map: (r, keyId) => ({
    kind: 'account_token',
    id: r.id as string,
    keyId,
    secretSealed: r.secret_sealed as string,
    userId: r.user_id as string,
    userRole: r.role as UserRole,
    userEmail: r.email as string,
  }),
};

const organizationToken: CredentialLookup = {
  sql: (key) =>
    `SELECT id, secret_sealed, organization_id FROM organization_tokens WHERE token_id = ${key} AND revoked_at IS NULL`,
  map: (r, keyId) => ({
    kind: 'organization_token',
    id: r.id as string,
    keyId,
    secretSealed: r.secret_sealed as string,
    organizationId: r.organization_id as string,
  }),
};

// A key of a deleted project, a revoked key and a rotated key past its grace window all fail here.
const projectKey: CredentialLookup = {
  sql: (
    key,
    now,
  ) => `SELECT k.id, k.secret_sealed, k.project_id, p.organization_id, k.scopes, k.managed, k.allowed_cidrs
        FROM api_keys k JOIN projects p ON p.id = k.project_id
        WHERE k.key_id = ${key} AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ${now})
          AND p.deleted_at IS NULL`,
  map: (r, keyId) => ({
    kind: 'project_api_key',
    id: r.id as string,
    keyId,
    secretSealed: r.secret_sealed as string,
    projectId: r.project_id as string,
    organizationId: r.organization_id as string,
    scopes: r.scopes as string[],
    managed: r.managed as Managed,
    allowedCidrs: r.allowed_cidrs as string[],
  }),
};

const lookups: [prefix: string, lookup: CredentialLookup][] = [
  ['svca_', accountToken],
  ['svco_', organizationToken],
  ['tk_', projectKey],
  ['svc_', projectKey],
];

/** The lookup for a key id, or null when its prefix names no credential kind. */
export function credentialLookup(keyId: string): CredentialLookup | null {
  for (const [prefix, lookup] of lookups) if (keyId.startsWith(prefix)) return lookup;
  return null;
}

export async function findCredential(q: Queryable, keyId: string, now: Date): Promise<StoredCredential | null> {
  const lookup = credentialLookup(keyId);
  if (!lookup) return null;
  const sql = lookup.sql('$1::text', '$2::timestamptz');
  const rows = await q.query<Record<string, unknown>>(sql, sql.includes('$2') ? [keyId, now] : [keyId]);
  return rows[0] ? lookup.map(rows[0], keyId) : null;
}
