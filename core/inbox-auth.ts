// Logging in to an inbox (IMAP LOGIN and AUTHENTICATE PLAIN, and the webmail): the inbox address and its
// password. An unknown address, a deleted inbox and a wrong password are one outcome, reached through
// the same password check (a dummy hash when there is no inbox), so neither the answer nor the work
// tells them apart. Failures are throttled per address and per client address with the buckets of the
// public auth routes (docs/decisions.md #24); a success spends nothing and starts the inbox's billing
// (docs/decisions.md #18).
import { createHash } from 'node:crypto';
import type { CoreDeps } from './deps.js';
import { unusableHash, verifyPassword } from './passwords.js';
import { findInboxForLogin, recordInboxLogin } from '../storage/pg/inbox-logins.js';
import { returnThrottles, takeThrottles, type Throttle } from '../storage/pg/throttles.js';
import { clientKey } from '../mail/client-address.js';

/** Who logged in to an inbox. `credential` changes when the password does (a session re-checks it). */
export interface InboxPrincipal {
  inboxId: string;
  address: string;
  credential: string;
}

export type InboxLoginResult =
  | { kind: 'ok'; principal: InboxPrincipal }
  /** Wrong password, unknown address or deleted inbox: deliberately one case. */
  | { kind: 'failed' }
  /** Too many failures lately for this address or client address; nothing was checked. */
  | { kind: 'throttled' };

/** docs/decisions.md #24: failed logins per account burst 10, then 1 per 30 s; per client address 60, then 1/s. */
export const ACCOUNT_FAILURES = { burst: 10, perSecond: 1 / 30 };
export const CLIENT_FAILURES = { burst: 60, perSecond: 1 };

/** Addresses are compared in lower case, so `Alice@X` and `alice@x` share a bucket. */
export function failureBuckets(address: string, ip: string): Throttle[] {
  return [
    { key: `imap-login:${address.trim().toLowerCase()}`, ...ACCOUNT_FAILURES },
    { key: `imap-ip:${clientKey(ip)}`, ...CLIENT_FAILURES },
  ];
}

/** `local@domain` split at its last "@"; null when it is not an address. */
function splitAddress(address: string): { localpart: string; domain: string } | null {
  const a = address.trim();
  const at = a.lastIndexOf('@');
  if (at <= 0 || at === a.length - 1 || a.length > 320) return null;
  return { localpart: a.slice(0, at), domain: a.slice(at + 1) };
}

/** The fingerprint a session keeps of the password it logged in with (never the hash itself). */
export function credentialOf(passwordHash: string): string {
  return createHash('sha256').update(passwordHash).digest('base64url').slice(0, 16);
}

export async function inboxLogin(
  deps: CoreDeps,
  a: { address: string; password: string; ip: string; now: Date; passwordLogN?: number },
): Promise<InboxLoginResult> {
  const { db } = deps.storage;
  const buckets = failureBuckets(a.address, a.ip);
  // Taken before the password is checked and given back on success (storage/pg/throttles.ts takeThrottles).
  if ((await takeThrottles(db, buckets, a.now)) > 0) return { kind: 'throttled' };
  const parts = splitAddress(a.address);
  const found = parts ? await findInboxForLogin(db, parts.localpart, parts.domain) : null;
  // Verify against a dummy hash when there is no inbox (or no password), so timing does not tell.
  const hash = found?.passwordHash ?? unusableHash(a.passwordLogN);
  const ok = (await verifyPassword(a.password, hash)) && found !== null && found.passwordHash !== null;
  if (ok && found && found.passwordHash && (await recordInboxLogin(db, found.id, a.now))) {
    await returnThrottles(db, buckets, a.now);
    return {
      kind: 'ok',
      principal: { inboxId: found.id, address: found.address, credential: credentialOf(found.passwordHash) },
    };
  }
  return { kind: 'failed' };
}
