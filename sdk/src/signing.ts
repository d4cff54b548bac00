// docs/api.md §5.1 and §5.2: request signing. The string to sign is defined here once; the server
// (control/middleware/authenticate.ts) and the benchmark's signer build theirs with `stringToSign`,
// so no two parties can disagree on it. The SDK signs with WebCrypto (`globalThis.crypto.subtle`),
// which Node 20 and every browser have, hence an async `signHeaders`.

export const SCHEME = 'SVC-HMAC-SHA256';
export const HEADER_TIMESTAMP = 'x-svc-timestamp';
export const HEADER_NONCE = 'x-svc-nonce';
export const HEADER_ADMIN_KEY = 'x-svc-admin-key';

/** The five lines of docs/api.md §5.2, joined with "\n". */
export function stringToSign(
  method: string,
  target: string,
  timestamp: string,
  nonce: string,
  bodySha256Hex: string,
): string {
  return [method.toUpperCase(), target, timestamp, nonce, bodySha256Hex].join('\n');
}

export function authorizationHeader(keyId: string, sig: string): string {
  return `${SCHEME} Credential=${keyId}, Signature=${sig}`;
}

/** The three headers of a signed request, once its hex signature is known. */
export function signatureHeaders(keyId: string, sig: string, timestamp: string, nonce: string): Record<string, string> {
  return { authorization: authorizationHeader(keyId, sig), [HEADER_TIMESTAMP]: timestamp, [HEADER_NONCE]: nonce };
}

/** The headers of a request made with the platform key (docs/api.md §5.3): no signature, the key itself. */
export function adminHeaders(adminKey: string): Record<string, string> {
  return { authorization: `${SCHEME} Credential=admin, Signature=bootstrap`, [HEADER_ADMIN_KEY]: adminKey };
}

const utf8 = new TextEncoder();
const bytes = (data: string | Uint8Array): Uint8Array<ArrayBuffer> =>
  typeof data === 'string' ? utf8.encode(data) : new Uint8Array(data);
const hex = (buf: ArrayBuffer) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');

export async function sha256Hex(body: string | Uint8Array): Promise<string> {
  return hex(await crypto.subtle.digest('SHA-256', bytes(body)));
}

/** WebCrypto's CryptoKey, named so because Node's type declarations have no global of that name. */
export type HmacKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

/** An HMAC-SHA-256 key for `secret`; importing it once per credential saves the work on every request. */
export function hmacKey(secret: string): Promise<HmacKey> {
  return crypto.subtle.importKey('raw', bytes(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

/** The hex HMAC-SHA-256 of `toSign`, the Signature of the Authorization header. */
export async function signature(secret: string | HmacKey, toSign: string): Promise<string> {
  const key = typeof secret === 'string' ? await hmacKey(secret) : secret;
  return hex(await crypto.subtle.sign('HMAC', key, bytes(toSign)));
}

export interface SignInput {
  method: string;
  /** The request target as sent: path and query string. */
  target: string;
  body: string;
  keyId: string;
  /** The secret, or its key from `hmacKey`. */
  secret: string | HmacKey;
  /** Milliseconds since the epoch, as a decimal string; now by default. */
  timestamp?: string;
  /** Single use; a random UUID by default. */
  nonce?: string;
}

/** What signs one request: `signHeaders` by default; a caller may bring a faster one (ClientOptions.sign). */
export type Signer = (s: SignInput) => Record<string, string> | Promise<Record<string, string>>;

/** The headers of docs/api.md §5.1 for one request. */
export async function signHeaders(s: SignInput): Promise<Record<string, string>> {
  const timestamp = s.timestamp ?? String(Date.now());
  const nonce = s.nonce ?? crypto.randomUUID();
  const toSign = stringToSign(s.method, s.target, timestamp, nonce, await sha256Hex(s.body));
  return signatureHeaders(s.keyId, await signature(s.secret, toSign), timestamp, nonce);
}
