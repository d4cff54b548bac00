// The DKIM keys of outbound capabilities, opened (sealed at rest) and parsed into KeyObjects once,
// then cached: issue 5 measured key parsing at 60% of a signature's cost when done per message.
import { createPrivateKey } from 'node:crypto';
import type { Queryable } from '../../storage/pg/client.js';
import type { Sealer } from '../../storage/secrets.js';
import { capabilityKeys } from '../../storage/pg/deliveries.js';
import type { SigningKey } from '../../mail/dkim-sign.js';

const TTL_MS = 5 * 60_000;

export function createKeyCache(db: Queryable, sealer: Sealer, now: () => number = Date.now) {
  const cache = new Map<string, { at: number; keys: Promise<SigningKey[] | null> }>();

  async function load(outboundId: string): Promise<SigningKey[] | null> {
    const row = await capabilityKeys(db, outboundId);
    if (!row) return null;
    const open = (k: { selector: string; sealed: string }): SigningKey => ({
      domain: row.domain,
      selector: k.selector,
      key: createPrivateKey(sealer.open(k.sealed, `dkim:${outboundId}:${k.selector}`)),
    });
    // RSA first: a verifier that knows only RSA (most of them still) meets the signature it can check first.
    return [open(row.rsa), ...(row.ed25519 ? [open(row.ed25519)] : [])];
  }

  return {
    /** The capability's keys; null when the capability no longer exists. Throws when a key does not open. */
    get(outboundId: string): Promise<SigningKey[] | null> {
      const hit = cache.get(outboundId);
      if (hit && now() - hit.at < TTL_MS) return hit.keys;
      const keys = load(outboundId);
      cache.set(outboundId, { at: now(), keys });
      // A failed load is not cached: the next message tries again.
      keys.catch(() => cache.delete(outboundId));
      return keys;
    },
  };
}
