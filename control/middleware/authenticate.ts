// docs/api.md §5: who is calling. Checks the HMAC signature, the ±5 min timestamp window and the single-use
// nonce, then takes a token from the credential's rate-limit bucket (docs/decisions.md #7). Every
// failure is the same 401: the client is not told which part failed.
import { randomUUID, timingSafeEqual, createHash, createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError, fail } from '../errors.js';
import {
  type CredentialKind,
  type Scope,
  HEADER_ADMIN_KEY,
  HEADER_NONCE,
  HEADER_TIMESTAMP,
  stringToSign,
} from '@svc-mail/sdk';
import { networks, type Networks } from '../../mail/client-address.js';
import type { Principal } from '../principal.js';
import type { Deps } from '../deps.js';
import { credentialAad } from '../../core/tokens.js';
import { credentialLookup, findCredential, type StoredCredential } from '../../storage/pg/credentials.js';
import type { BoundedCache } from '../../storage/bounded-cache.js';
import { guardRequest, type Bucket, type GuardInput, type GuardResult } from '../../storage/pg/request-guard.js';
import { timedWait } from '../../core/deps.js';

/** docs/api.md §5.1 rule 1 and §8. */
export const SKEW_MS = 5 * 60_000;
/** docs/decisions.md #7. */
/** The platform's default bucket of every credential (docs/decisions.md #7); an organization may have its own. */
const buckets = new WeakMap<object, Bucket>();
export function defaultBucket(config: { rateLimitBurst: number; rateLimitPerSecond: number }): Bucket {
  let b = buckets.get(config);
  if (!b) buckets.set(config, (b = { burst: config.rateLimitBurst, perSecond: config.rateLimitPerSecond }));
  return b;
}

const AUTH_RE = /^SVC-HMAC-SHA256\s+Credential=([^,\s]{1,200}),\s*Signature=([^,\s]{1,200})$/;
const NONCE_RE = /^[A-Za-z0-9._~:+/=-]{8,128}$/;

const unauthorized = () => fail('unauthorized', 'Request authentication failed.');

export interface SignedRequest {
  method: string;
  /** The exact request target as sent, query string included. */
  target: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  /** The source address, for allowedCidrs. */
  ip: string;
}

// Secrets are sealed at rest; opening one costs an AES-GCM decryption, so opened secrets are kept
// (keyed by the immutable sealed value) on the storage handle.
function openSecret(deps: Deps, cred: StoredCredential): string {
  const opened = deps.storage.caches.openedSecrets;
  let secret = opened.get(cred.secretSealed);
  if (secret === undefined) {
    secret = deps.storage.sealer.open(cred.secretSealed, credentialAad(cred.kind, cred.keyId));
    opened.set(cred.secretSealed, secret);
  }
  return secret;
}

const digest = (s: string) => createHash('sha256').update(s).digest();
const sameSecret = (a: string, b: string) => timingSafeEqual(digest(a), digest(b));

function header(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? undefined : v;
}

function toPrincipal(c: StoredCredential): Principal {
  switch (c.kind) {
    case 'account_token':
      return {
        kind: c.kind,
        credentialId: c.id,
        keyId: c.keyId,
        userId: c.userId,
        userRole: c.userRole,
        email: c.userEmail,
      };
    case 'organization_token':
      return { kind: c.kind, credentialId: c.id, keyId: c.keyId, organizationId: c.organizationId };
    case 'project_api_key':
      return {
        kind: c.kind,
        credentialId: c.id,
        keyId: c.keyId,
        projectId: c.projectId,
        organizationId: c.organizationId,
        scopes: c.scopes as Scope[],
      };
  }
}

// docs/api.md §4.7: allowedCidrs restricts the source addresses of a platform-managed key.
function sourceAllowed(cidrLists: BoundedCache<Networks>, cidrs: string[], ip: string): boolean {
  if (cidrs.length === 0) return true;
  const key = cidrs.join(',');
  let list = cidrLists.get(key);
  if (!list) cidrLists.set(key, (list = networks(cidrs)));
  return list(ip);
}

/** Whether a route that accepts `accepted` admits this principal: 'ok', or the error to answer. */
function admit(accepted: readonly CredentialKind[], p: Principal): ApiError | null {
  if (accepted.includes(p.kind)) return null;
  if (p.kind === 'account_token' && accepted.includes('staff')) {
    return p.userRole === 'staff' ? null : fail('forbidden', 'This route is for platform staff.');
  }
  return unauthorized();
}

/** A request's method, target, headers and source address: what is known before its body is read. */
export type RequestHead = Omit<SignedRequest, 'rawBody'>;

/** What the head of a request proved: the platform key (complete), or a signed request still to verify. */
export type HeadCheck =
  | { kind: 'platform_admin' }
  | {
      kind: 'signed';
      keyId: string;
      sig: string;
      ts: string;
      tsMs: number;
      nonce: string;
      cred: StoredCredential;
      cached: boolean;
    };

/** How long a key id that matched no credential is answered 401 without a lookup (docs/decisions.md #7). */
const UNKNOWN_KEY_TTL_MS = 60_000;

/**
 * docs/api.md §5, the part that needs no body (issue 15 item 1): the Authorization header's form, the
 * timestamp window, the nonce's form, and a credential under the key id (a key id that matches none is
 * remembered for a minute: a repeated unknown one costs a cache miss, not a query). A request failing here is
 * answered 401 before a byte of its body is read. The platform key is checked here whole.
 */
export async function checkHead(req: RequestHead, accepted: readonly CredentialKind[], deps: Deps): Promise<HeadCheck> {
  const { clock, config } = deps.ctx;
  const m = AUTH_RE.exec(header(req.headers, 'authorization') ?? '');
  if (!m) throw unauthorized();
  const [, keyId = '', sig = ''] = m;
  const nowMs = clock.now();
  const now = new Date(nowMs);

  if (keyId === 'admin' && sig === 'bootstrap') {
    // docs/api.md §5.3: the platform key, for bootstrap and break-glass use, on the routes that list it.
    const given = header(req.headers, HEADER_ADMIN_KEY);
    if (!config.platformAdminKey || given === undefined || !sameSecret(given, config.platformAdminKey))
      throw unauthorized();
    // SVC_PLATFORM_ADMIN_CIDRS: the key works only from the operator's networks; every use is logged, with
    // where it came from (it is one static secret for the whole platform).
    if (!sourceAllowed(deps.storage.caches.cidrLists, config.platformAdminCidrs, req.ip)) {
      deps.ctx.log.warn(
        { ip: req.ip, method: req.method, target: req.target },
        'platform key refused: outside its networks',
      );
      throw unauthorized();
    }
    if (!accepted.includes('platform_admin')) throw unauthorized();
    deps.ctx.log.info({ ip: req.ip, method: req.method, target: req.target }, 'platform key used');
    checkGuard(
      await guarded(deps, {
        keyId: 'platform_admin',
        nonce: randomUUID(),
        nonceExpiresAt: new Date(nowMs + SKEW_MS),
        now,
        bucket: defaultBucket(config),
        organizationId: null,
      }),
    );
    return { kind: 'platform_admin' };
  }

  const ts = header(req.headers, HEADER_TIMESTAMP) ?? '';
  const nonce = header(req.headers, HEADER_NONCE) ?? '';
  if (!/^\d{1,16}$/.test(ts) || !NONCE_RE.test(nonce) || !/^[0-9a-f]{64}$/.test(sig)) throw unauthorized();
  const tsMs = Number(ts);
  if (Math.abs(nowMs - tsMs) > SKEW_MS) throw unauthorized();

  // Credentials by key id, so that a request costs one round trip (the guard's statement, which reads the
  // credential again and consumes nothing when it is gone or changed) instead of two.
  const cached = deps.storage.caches.credentials.get(keyId);
  if (cached) return { kind: 'signed', keyId, sig, ts, tsMs, nonce, cred: cached, cached: true };
  const unknown = deps.storage.caches.unknownKeys;
  const missUntil = unknown.get(keyId);
  if (missUntil !== undefined && missUntil > nowMs) throw unauthorized();
  const found = await findCredential(deps.storage.db, keyId, now);
  if (!found) {
    unknown.set(keyId, nowMs + UNKNOWN_KEY_TTL_MS);
    throw unauthorized();
  }
  return { kind: 'signed', keyId, sig, ts, tsMs, nonce, cred: found, cached: false };
}

/**
 * The rest, once the body is read: the signature over the body's SHA-256 (hex), the credential's kind and
 * source addresses, then one statement that consumes the nonce, takes a token from the bucket and reads the
 * credential again (docs/decisions.md #25).
 */
export async function completeAuthentication(
  head: HeadCheck,
  req: RequestHead,
  bodySha256: string,
  accepted: readonly CredentialKind[],
  deps: Deps,
): Promise<Principal> {
  if (head.kind === 'platform_admin') return { kind: 'platform_admin' };
  const { keyId, sig, ts, tsMs, nonce } = head;
  const now = new Date(deps.ctx.clock.now());
  const cache = deps.storage.caches.credentials;
  // The string to sign is the SDK's (one definition); the hashes are node:crypto's, synchronous and
  // cheaper per request than WebCrypto's promises.
  const toSign = stringToSign(req.method, req.target, ts, nonce, bodySha256);
  const signedBy = (c: StoredCredential | null) => {
    const secret = c ? openSecret(deps, c) : 'no-such-credential';
    const expected = createHmac('sha256', secret).update(toSign).digest('hex');
    return c !== null && timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(sig, 'hex'));
  };
  let cred: StoredCredential | null = head.cred;
  // A cached credential whose secret does not match is looked up again before the request fails.
  if (!signedBy(cred)) {
    if (!head.cached) throw unauthorized();
    cred = await findCredential(deps.storage.db, keyId, now);
    if (!signedBy(cred)) throw unauthorized();
  }
  const checked = cred!;
  refuseUnless(deps, accepted, checked, req.ip);
  cache.set(keyId, checked);
  // The nonce must be remembered for as long as its timestamp would still be accepted.
  const guard = await guarded(deps, {
    keyId,
    nonce,
    nonceExpiresAt: new Date(tsMs + SKEW_MS),
    now,
    bucket: defaultBucket(deps.ctx.config),
    organizationId: 'organizationId' in checked ? checked.organizationId : null,
    credential: { lookup: credentialLookup(keyId)!, secretSealed: checked.secretSealed },
  });
  // Revoked, expired or changed since it was cached: nothing was consumed, and the request fails.
  const fresh = guard.credential;
  if (!fresh || fresh.secretSealed !== checked.secretSealed) {
    cache.delete(keyId);
    throw unauthorized();
  }
  cache.set(keyId, fresh);
  refuseUnless(deps, accepted, fresh, req.ip);
  checkGuard(guard);
  return toPrincipal(fresh);
}

/** Both phases over a request whose body is already read. */
export async function authenticate(
  req: SignedRequest,
  accepted: readonly CredentialKind[],
  deps: Deps,
): Promise<Principal> {
  const head = await checkHead(req, accepted, deps);
  const bodySha256 = createHash('sha256').update(req.rawBody).digest('hex');
  return completeAuthentication(head, req, bodySha256, accepted, deps);
}

/** Throws the answer for a credential that may not call this route (or not from this address). */
function refuseUnless(deps: Deps, accepted: readonly CredentialKind[], cred: StoredCredential, ip: string): void {
  if (
    cred.kind === 'project_api_key' &&
    cred.managed === 'platform' &&
    !sourceAllowed(deps.storage.caches.cidrLists, cred.allowedCidrs, ip)
  )
    throw unauthorized();
  const refused = admit(accepted, toPrincipal(cred));
  if (refused) throw refused;
}

/** The request guard's statement (a group commit, storage/pg/request-guard.ts), its wait counted. */
const guarded = (deps: Deps, g: GuardInput) => timedWait(deps, 'guard', () => guardRequest(deps.storage, g));

function checkGuard(guard: GuardResult): void {
  if (!guard.freshNonce) throw unauthorized();
  if (!guard.allowed) {
    const retryAfter = Math.max(1, Math.ceil((1 - guard.tokens) / guard.perSecond));
    throw new ApiError(
      'rate_limited',
      'Too many requests for this credential.',
      { retryAfterSeconds: retryAfter },
      {
        'Retry-After': String(retryAfter),
      },
    );
  }
}
