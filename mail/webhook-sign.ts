// Standard Webhooks signing (https://www.standardwebhooks.com, docs/decisions.md #5): the secret is
// `whsec_` + base64 of a random key; each request carries `webhook-id`, `webhook-timestamp` (Unix
// seconds) and `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';
/** 32 random bytes: the output size of SHA-256, as RFC 2104 §3 recommends for an HMAC key. */
const KEY_BYTES = 32;

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(KEY_BYTES).toString('base64');
}

/** The `webhook-signature` header of one request. */
export function signWebhook(secret: string, id: string, timestampS: number, body: string): string {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('a webhook secret starts with whsec_');
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampS}.${body}`).digest('base64')}`;
}

/** The headers of one attempt: the id is the same on every retry of a delivery (receivers dedupe by it). */
export function webhookHeaders(secret: string, id: string, timestampS: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': signWebhook(secret, id, timestampS, body),
  };
}
