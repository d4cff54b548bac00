// DKIM key pairs for outbound capabilities: RSA-2048 by default, Ed25519 as a second signature on
// request (RFC 8463). Pure crypto; the private key is sealed by the caller before it is stored.
import { generateKeyPair, randomBytes, createPublicKey } from 'node:crypto';
import { promisify } from 'node:util';

const generate = promisify(generateKeyPair);

export type DkimAlgorithm = 'rsa' | 'ed25519';

export interface DkimKey {
  algorithm: DkimAlgorithm;
  /** Unique per key, so a capability's key can rotate by publishing a new selector beside the old. */
  selector: string;
  privatePem: string;
  /** The p= value of the TXT record. */
  publicKey: string;
}

export function newSelector(algorithm: DkimAlgorithm): string {
  return `svc${algorithm === 'rsa' ? 'r' : 'e'}${randomBytes(5).toString('hex')}`;
}

export async function generateDkimKey(algorithm: DkimAlgorithm): Promise<DkimKey> {
  const pair = algorithm === 'rsa' ? await generate('rsa', { modulusLength: 2048 }) : await generate('ed25519');
  const privatePem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  return { algorithm, selector: newSelector(algorithm), privatePem, publicKey: publicKeyValue(algorithm, privatePem) };
}

/**
 * RFC 6376 §3.6.1: for k=rsa, p= is the base64 of the DER SubjectPublicKeyInfo. RFC 8463 §4: for
 * k=ed25519, p= is the base64 of the raw 32-byte public key (the last 32 bytes of its SPKI).
 */
export function publicKeyValue(algorithm: DkimAlgorithm, privatePem: string): string {
  const der = createPublicKey(privatePem).export({ type: 'spki', format: 'der' });
  return (algorithm === 'rsa' ? der : der.subarray(der.length - 32)).toString('base64');
}

/** The TXT value to publish at <selector>._domainkey.<domain>. */
export const dkimTxtValue = (algorithm: DkimAlgorithm, publicKey: string) => `v=DKIM1; k=${algorithm}; p=${publicKey}`;

/** The p= tag of a published DKIM record (tags per RFC 6376 §3.2; whitespace inside is ignored). */
export function publishedKey(txt: string): string | null {
  for (const tag of txt.split(';')) {
    const eq = tag.indexOf('=');
    if (eq > 0 && tag.slice(0, eq).trim() === 'p') return tag.slice(eq + 1).replace(/\s+/g, '');
  }
  return null;
}
