// Minting credentials: a public key id with its kind's prefix and a random secret, sealed at rest.
// The secret leaves the server exactly once, in the response to the mint.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Queryable } from '../storage/pg/client.js';
import type { Sealer } from '../storage/secrets.js';
import type { StoredCredential } from '../storage/pg/credentials.js';
import { insertAccountToken, type AccountTokenInfo } from '../storage/pg/account-tokens.js';

export const randomId = (prefix: string, bytes = 18) => prefix + randomBytes(bytes).toString('base64url');

export const SECRET_WARNING = 'Store this secret now: it is shown once and cannot be retrieved.';

/** The associated data a credential's secret is sealed with: binds it to its kind and key id. */
export const credentialAad = (kind: StoredCredential['kind'], keyId: string) => `${kind}:${keyId}`;

export function newCredentialSecret(
  sealer: Sealer,
  kind: StoredCredential['kind'],
  keyId: string,
): { secret: string; sealed: string } {
  const secret = randomBytes(32).toString('base64url');
  return { secret, sealed: sealer.seal(secret, credentialAad(kind, keyId)) };
}

export async function mintAccountToken(
  q: Queryable,
  sealer: Sealer,
  t: { userId: string; label: string | null; now: Date },
): Promise<AccountTokenInfo & { secret: string }> {
  const tokenId = randomId('svca_');
  const { secret, sealed } = newCredentialSecret(sealer, 'account_token', tokenId);
  const info = await insertAccountToken(q, {
    id: randomUUID(),
    tokenId,
    userId: t.userId,
    label: t.label,
    now: t.now,
    secretSealed: sealed,
  });
  return { ...info, secret };
}
