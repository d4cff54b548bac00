// Spec §5.2 request signing, shared by the server and the SDK so the two cannot disagree.
import { createHash, createHmac } from 'node:crypto';

export const SCHEME = 'SVC-HMAC-SHA256';
export const HEADER_TIMESTAMP = 'x-svc-timestamp';
export const HEADER_NONCE = 'x-svc-nonce';
export const HEADER_ADMIN_KEY = 'x-svc-admin-key';

export const sha256Hex = (body: string | Uint8Array): string => createHash('sha256').update(body).digest('hex');

/** The five lines of spec §5.2, joined with "\n". */
export function stringToSign(
  method: string,
  target: string,
  timestamp: string,
  nonce: string,
  bodySha256Hex: string,
): string {
  return [method.toUpperCase(), target, timestamp, nonce, bodySha256Hex].join('\n');
}

export function signature(secret: string, toSign: string): string {
  return createHmac('sha256', secret).update(toSign).digest('hex');
}

export function authorizationHeader(keyId: string, sig: string): string {
  return `${SCHEME} Credential=${keyId}, Signature=${sig}`;
}
