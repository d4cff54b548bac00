// Minting credentials: a public key id with its kind's prefix and a random secret, sealed at rest.
// The secret leaves the server exactly once, in the response to the mint.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Queryable } from '../storage/pg/client.js';
import type { Sealer } from '../storage/secrets.js';
import type { StoredCredential } from '../storage/pg/credentials.js';
import { insertToken, type TokenInfo, type TokenKind } from '../storage/pg/tokens.js';

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

const PREFIX = { account: 'svca_', organization: 'svco_' } as const;
const CREDENTIAL_KIND = { account: 'account_token', organization: 'organization_token' } as const;

/** A new account or organization token of `ownerId` (the user or the organization), with its secret. */
export async function mintToken(
  q: Queryable,
  sealer: Sealer,
  kind: TokenKind,
  t: { ownerId: string; label: string | null; now: Date },
): Promise<TokenInfo & { secret: string }> {
  const tokenId = randomId(PREFIX[kind]);
  const { secret, sealed } = newCredentialSecret(sealer, CREDENTIAL_KIND[kind], tokenId);
  const info = await insertToken(q, kind, {
    id: randomUUID(),
    tokenId,
    ownerId: t.ownerId,
    label: t.label,
    now: t.now,
    secretSealed: sealed,
  });
  return { ...info, secret };
}

export const mintAccountToken = (
  q: Queryable,
  sealer: Sealer,
  t: { userId: string; label: string | null; now: Date },
) => mintToken(q, sealer, 'account', { ownerId: t.userId, label: t.label, now: t.now });
