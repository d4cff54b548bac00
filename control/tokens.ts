// Minting credentials: a public key id with its kind's prefix and a random secret, sealed at rest.
// The secret leaves the server exactly once, in the response to the mint.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Queryable } from '../storage/pg/client.js';
import type { Sealer } from '../storage/secrets.js';
import { insertAccountToken, type AccountTokenInfo } from '../storage/pg/account-tokens.js';

export const randomId = (prefix: string, bytes = 18) => prefix + randomBytes(bytes).toString('base64url');
export const newSecret = () => randomBytes(32).toString('base64url');

export const SECRET_WARNING = 'Store this secret now: it is shown once and cannot be retrieved.';

export async function mintAccountToken(
  q: Queryable,
  sealer: Sealer,
  t: { userId: string; label: string | null; now: Date },
): Promise<AccountTokenInfo & { secret: string }> {
  const tokenId = randomId('svca_');
  const secret = newSecret();
  const info = await insertAccountToken(q, {
    id: randomUUID(), tokenId, userId: t.userId, label: t.label, now: t.now,
    // The associated data matches what authentication opens it with: `${kind}:${keyId}`.
    secretSealed: sealer.seal(secret, `account_token:${tokenId}`),
  });
  return { ...info, secret };
}
