// The DKIM keys of outbound capabilities, opened (sealed at rest) and parsed into KeyObjects once,
// then cached: issue 5 measured key parsing at 60% of a signature's cost when done per message.
//
// A rotation (docs/api.md §4.5) changes a capability's keys from the control plane, which may be another
// process: so no in-process event, but the row's dkim_version, read at most once a second per capability
// (a one-integer primary-key read), and the keys opened again only when it moved.
import { createPrivateKey } from 'node:crypto';
import type { Queryable } from '../../storage/pg/client.js';
import type { Sealer } from '../../storage/secrets.js';
import { capabilityKeyVersion, capabilityKeys } from '../../storage/pg/deliveries.js';
import type { SigningKey } from '../../mail/dkim-sign.js';

/** How long keys are used without asking whether the capability's dkim_version moved. */
export const KEY_CHECK_MS = 1_000;

interface Loaded {
  version: number;
  keys: SigningKey[];
}

export function createKeyCache(db: Queryable, sealer: Sealer, now: () => number = Date.now) {
  const cache = new Map<string, { at: number; state: Promise<Loaded | null> }>();

  async function load(outboundId: string): Promise<Loaded | null> {
    const row = await capabilityKeys(db, outboundId);
    if (!row) return null;
    const open = (k: { selector: string; sealed: string }): SigningKey => ({
      domain: row.domain,
      selector: k.selector,
      key: createPrivateKey(sealer.open(k.sealed, `dkim:${outboundId}:${k.selector}`)),
    });
    // RSA first: a verifier that knows only RSA (most of them still) meets the signature it can check first.
    return { version: row.version, keys: [open(row.rsa), ...(row.ed25519 ? [open(row.ed25519)] : [])] };
  }

  /** The keys held, when the row still has their version; else the keys opened afresh. */
  async function refresh(outboundId: string, held: Promise<Loaded | null>): Promise<Loaded | null> {
    const old = await held;
    if (old) {
      const version = await capabilityKeyVersion(db, outboundId);
      if (version === null) return null;
      if (version === old.version) return old;
    }
    return load(outboundId);
  }

  return {
    /** The capability's keys; null when the capability no longer exists. Throws when a key does not open. */
    get(outboundId: string): Promise<SigningKey[] | null> {
      const hit = cache.get(outboundId);
      if (hit && now() - hit.at < KEY_CHECK_MS) return hit.state.then((s) => s?.keys ?? null);
      // Callers meanwhile wait on this one check rather than each asking the database.
      const entry = { at: now(), state: hit ? refresh(outboundId, hit.state) : load(outboundId) };
      cache.set(outboundId, entry);
      // A failed load or check is not cached: the next message tries again.
      entry.state.catch(() => {
        if (cache.get(outboundId) === entry) cache.delete(outboundId);
      });
      return entry.state.then((s) => s?.keys ?? null);
    },
  };
}
