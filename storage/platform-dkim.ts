// The platform DKIM keys of the notify domain (the domain of SVC_NOTIFY_FROM): every platform message (password
// resets, invitations, TLS reports) is signed with them, whether or not that domain is also a customer's sending
// domain (one rule). docs/operations.md, "Platform mail".
//
// Kept in Postgres, not under SVC_DATA_DIR: every MTA node of a deployment shares one database but each has its
// own data directory, and all of them must sign with the key whose public half the operator published once. The
// private key is sealed with the master key (which nodes share, docs/operations.md "The master key").
import type { Queryable } from './pg/client.js';
import type { Sealer } from './secrets.js';
import { dkimTxtValue, generateDkimKey, type DkimAlgorithm } from '../mail/dkim-keys.js';
import { insertPlatformKey, platformKeyRows } from './pg/platform-dkim.js';

/** Fixed selectors: one key per algorithm and domain, published once (a later rotation would add svc2…). */
export const PLATFORM_SELECTORS: Readonly<Record<DkimAlgorithm, string>> = { rsa: 'svc1', ed25519: 'svc1e' };

export interface PlatformKey {
  domain: string;
  algorithm: DkimAlgorithm;
  selector: string;
  publicKey: string;
  /** Where the TXT record goes: <selector>._domainkey.<domain>. */
  host: string;
  /** The TXT value to publish (RFC 6376 §3.6.1, RFC 8463 §4). */
  txt: string;
}

export interface PlatformSigningKey extends PlatformKey {
  privatePem: string;
}

/** The notify domain: the domain of SVC_NOTIFY_FROM, lower case. */
export const notifyDomainOf = (notifyFrom: string) => notifyFrom.slice(notifyFrom.lastIndexOf('@') + 1).toLowerCase();

const aad = (domain: string, selector: string) => `platform_dkim:${domain}:${selector}`;

const publicOf = (r: { domain: string; algorithm: DkimAlgorithm; selector: string; publicKey: string }) => ({
  domain: r.domain,
  algorithm: r.algorithm,
  selector: r.selector,
  publicKey: r.publicKey,
  host: `${r.selector}._domainkey.${r.domain}`,
  txt: dkimTxtValue(r.algorithm, r.publicKey),
});

/** The domain's platform keys as published (no private key: no master key needed); empty before the first start. */
export async function platformKeys(db: Queryable, domain: string): Promise<PlatformKey[]> {
  return (await platformKeyRows(db, domain)).map(publicOf);
}

/**
 * The domain's platform keys, RSA-2048 then Ed25519, made and stored first if missing. Two processes starting
 * together may both make one; the insert keeps the first, and both return what the table then holds.
 */
export async function ensurePlatformKeys(
  s: { db: Queryable; sealer: Sealer },
  domain: string,
  now: Date,
): Promise<PlatformSigningKey[]> {
  let rows = await platformKeyRows(s.db, domain);
  const missing = (['rsa', 'ed25519'] as const).filter((a) => !rows.some((r) => r.algorithm === a));
  if (missing.length) {
    for (const algorithm of missing) {
      const k = await generateDkimKey(algorithm);
      const selector = PLATFORM_SELECTORS[algorithm];
      const privateSealed = s.sealer.seal(k.privatePem, aad(domain, selector));
      await insertPlatformKey(s.db, { domain, algorithm, selector, privateSealed, publicKey: k.publicKey }, now);
    }
    rows = await platformKeyRows(s.db, domain);
  }
  return rows.map((r) => ({ ...publicOf(r), privatePem: s.sealer.open(r.privateSealed, aad(domain, r.selector)) }));
}
