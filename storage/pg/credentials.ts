// Credential lookup for request authentication: the key id's prefix names the table it lives in.
// Adding a credential kind is one more entry in `lookups`.
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
  | (Common & { kind: 'project_api_key'; projectId: string; organizationId: string; scopes: string[]; managed: Managed; allowedCidrs: string[] });

type Lookup = (q: Queryable, keyId: string, now: Date) => Promise<StoredCredential | null>;

const accountToken: Lookup = async (q, keyId) => {
  const rows = await q.query<{ id: string; secret_sealed: string; user_id: string; role: UserRole; email: string }>(
    `SELECT t.id, t.secret_sealed, t.user_id, u.role, u.email FROM account_tokens t JOIN users u ON u.id = t.user_id
     WHERE t.token_id = $1 AND t.revoked_at IS NULL`,
    [keyId],
  );
  const r = rows[0];
  return r ? { kind: 'account_token', id: r.id, keyId, secretSealed: r.secret_sealed, userId: r.user_id, userRole: r.role, userEmail: r.email } : null;
};

const organizationToken: Lookup = async (q, keyId) => {
  const rows = await q.query<{ id: string; secret_sealed: string; organization_id: string }>(
    `SELECT id, secret_sealed, organization_id FROM organization_tokens WHERE token_id = $1 AND revoked_at IS NULL`,
    [keyId],
  );
  const r = rows[0];
  return r ? { kind: 'organization_token', id: r.id, keyId, secretSealed: r.secret_sealed, organizationId: r.organization_id } : null;
};

// A key of a deleted project, a revoked key and a rotated key past its grace window all fail here.
const projectKey: Lookup = async (q, keyId, now) => {
  const rows = await q.query<{ id: string; secret_sealed: string; project_id: string; organization_id: string; scopes: string[]; managed: Managed; allowed_cidrs: string[] }>(
    `SELECT k.id, k.secret_sealed, k.project_id, p.organization_id, k.scopes, k.managed, k.allowed_cidrs
     FROM api_keys k JOIN projects p ON p.id = k.project_id
     WHERE k.key_id = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $2) AND p.deleted_at IS NULL`,
    [keyId, now],
  );
  const r = rows[0];
  return r
    ? { kind: 'project_api_key', id: r.id, keyId, secretSealed: r.secret_sealed, projectId: r.project_id, organizationId: r.organization_id,
        scopes: r.scopes, managed: r.managed, allowedCidrs: r.allowed_cidrs }
    : null;
};

const lookups: [prefix: string, lookup: Lookup][] = [
  ['svca_', accountToken],
  ['svco_', organizationToken],
  ['tk_', projectKey],
  ['svc_', projectKey],
];

export async function findCredential(q: Queryable, keyId: string, now: Date): Promise<StoredCredential | null> {
  for (const [prefix, lookup] of lookups) if (keyId.startsWith(prefix)) return lookup(q, keyId, now);
  return null;
}
