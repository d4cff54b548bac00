// DKIM signing (RFC 6376, RFC 8463) with keys parsed once.
//
// mailauth (pinned 4.13.3: 5.x and later need Node 22) does the canonicalization, the body hash and the
// formatting of the header; we call its building blocks rather than its dkimSign() because dkimSign
// parses the PEM key on every signature (~400 µs, 60% of its time) and reports problems in
// `result.errors` instead of throwing. Here the KeyObject is cached by the caller and every problem
// throws: a message is never sent unsigned (fail closed). test/mta/dkim-sign.test.ts proves the output
// equal to mailauth's dkimSign and checks it with python3-dkim.
import { createHash, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

interface ParsedHeader {
  key: string | null;
  casedKey?: string;
  line: Buffer;
}
interface MailauthTools {
  parseHeaders(buf: Buffer): { parsed: ParsedHeader[]; original: Buffer };
  getSigningHeaderLines(parsed: ParsedHeader[], fieldNames: string): { keys: string; headers: ParsedHeader[] };
  formatSignatureHeaderLine(type: 'DKIM', values: Record<string, unknown>, folded: boolean): string;
}
interface BodyHasher {
  update(chunk: Buffer): void;
  digest(encoding: 'base64'): string;
}

const tools = require('mailauth/lib/tools.js') as MailauthTools;
const { dkimBody } = require('mailauth/lib/dkim/body/index.js') as {
  dkimBody(canon: 'relaxed' | 'simple', hashAlgo: string, maxBodyLength: false): BodyHasher;
};
const { generateCanonicalizedHeader } = require('mailauth/lib/dkim/header/index.js') as {
  generateCanonicalizedHeader(
    type: 'DKIM',
    signingHeaderLines: { keys: string; headers: ParsedHeader[] },
    opts: Record<string, unknown>,
  ): { canonicalizedHeader: Buffer; dkimHeaderOpts: Record<string, unknown> };
};

/**
 * The headers every signature covers (issue 5), and the one-click unsubscribe pair when present
 * (RFC 8058 §4 requires both signed). Names absent from a message are not listed in its h=.
 */
export const SIGNED_HEADERS =
  'From:To:Subject:Date:Message-ID:MIME-Version:Content-Type:List-Unsubscribe:List-Unsubscribe-Post';

export interface SigningKey {
  domain: string;
  selector: string;
  /** Parsed once (createPrivateKey) and cached by the caller. */
  key: KeyObject;
}

export class DkimSignError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DkimSignError';
  }
}

/** Splits a message at the blank line that ends its header (CRLF or bare LF). */
function splitMessage(raw: Buffer): { header: Buffer; body: Buffer } {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { header: raw.subarray(0, crlf + 2), body: raw.subarray(crlf + 4) };
  if (lf >= 0) return { header: raw.subarray(0, lf + 1), body: raw.subarray(lf + 2) };
  return { header: raw, body: Buffer.alloc(0) };
}

/**
 * Returns the DKIM-Signature header lines (CRLF-terminated) for `raw`, one per key, relaxed/relaxed,
 * sha256. Throws DkimSignError when there is no key or a signature cannot be made.
 */
export function dkimSignatures(raw: Buffer, keys: readonly SigningKey[], signTimeMs: number): Buffer {
  if (keys.length === 0) throw new DkimSignError('no DKIM key to sign with');
  const { header, body } = splitMessage(raw);
  const parsed = tools.parseHeaders(header).parsed;
  const hasher = dkimBody('relaxed', 'sha256', false);
  hasher.update(body);
  const bodyHash = hasher.digest('base64');
  const lines: string[] = [];
  for (const k of keys) {
    const keyType = k.key.asymmetricKeyType;
    if (keyType !== 'rsa' && keyType !== 'ed25519') throw new DkimSignError(`unsupported DKIM key type ${keyType}`);
    const algorithm = `${keyType}-sha256`;
    const signing = tools.getSigningHeaderLines(parsed, SIGNED_HEADERS);
    if (!signing.headers.some((h) => h.key === 'from')) throw new DkimSignError('message has no From header');
    const { canonicalizedHeader, dkimHeaderOpts } = generateCanonicalizedHeader('DKIM', signing, {
      signingDomain: k.domain,
      selector: k.selector,
      algorithm,
      canonicalization: 'relaxed/relaxed',
      signTime: new Date(signTimeMs),
      bodyHash,
    });
    // RFC 8463 §3: Ed25519 signs the SHA-256 of the canonicalized header (PureEdDSA over the hash).
    const signature =
      keyType === 'rsa'
        ? cryptoSign('rsa-sha256', canonicalizedHeader, k.key)
        : cryptoSign(null, createHash('sha256').update(canonicalizedHeader).digest(), k.key);
    dkimHeaderOpts.b = signature.toString('base64');
    lines.push(tools.formatSignatureHeaderLine('DKIM', dkimHeaderOpts, true));
  }
  return Buffer.from(lines.join('\r\n') + '\r\n');
}

/** The message with its DKIM-Signature headers prepended. */
export function dkimSign(raw: Buffer, keys: readonly SigningKey[], signTimeMs: number): Buffer {
  return Buffer.concat([dkimSignatures(raw, keys, signTimeMs), raw]);
}
