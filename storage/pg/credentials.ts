// Credential lookup for request authentication: the key id's prefix names the table it lives in.
// Adding a credential kind (org tokens svco_, project keys svc_/tk_) is one more entry in `lookups`.
import type { Queryable } from './client.js';
import type { UserRole } from './users.js';

export type StoredCredential = {
  kind: 'account_token';
  id: string;
  keyId: string;
  secretSealed: string;
  userId: string;
  userRole: UserRole;
  userEmail: string;
};

type Lookup = (q: Queryable, keyId: string) => Promise<StoredCredential | null>;

const accountToken: Lookup = async (q, keyId) => {
  const rows = await q.query<{ id: string; secret_sealed: string; user_id: string; role: UserRole; email: string }>(
    `SELECT t.id, t.secret_sealed, t.user_id, u.role, u.email FROM account_tokens t JOIN users u ON u.id = t.user_id
     WHERE t.token_id = $1 AND t.revoked_at IS NULL`,
    [keyId],
  );
  const r = rows[0];
  return r ? { kind: 'account_token', id: r.id, keyId, secretSealed: r.secret_sealed, userId: r.user_id, userRole: r.role, userEmail: r.email } : null;
};

const lookups: [prefix: string, lookup: Lookup][] = [['svca_', accountToken]];

export async function findCredential(q: Queryable, keyId: string): Promise<StoredCredential | null> {
  for (const [prefix, lookup] of lookups) if (keyId.startsWith(prefix)) return lookup(q, keyId);
  return null;
}
