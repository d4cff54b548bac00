// DKIM signing (RFC 6376, RFC 8463) with keys parsed once.
//
// mailauth (pinned 7.1.0) parses the header and picks the signed fields. The relaxed body hash (below) and the
// header canonicalization and formatting (mail/dkim-header.ts) are ours for the input we make, and mailauth's for
// any other, byte for byte the same. We call its building blocks (lib/tools.js, lib/dkim/body, lib/dkim/header:
// internals, so a new release is checked against test/mail/dkim-sign.test.ts and dkim-header.test.ts before the
// pin moves) rather than its public dkimSign(), which in 7.1.0 still takes the key as PEM text and parses it on
// every signature (~400 µs, 60% of its time, as measured on 4.13.3), is async, reports problems in
// `result.errors` instead of throwing, and cannot oversign (its headerList signs only the fields present). Here
// the KeyObject is cached by the caller and every problem is an error (a rejection): a message is never sent
// unsigned (fail closed). test/mail/dkim-sign.test.ts has every signature checked by mailauth's verifier and by
// python3-dkim.
import { createHash, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import { canonicalSignatureField, plainTagValue, relaxedField, signatureField, signatureTags } from './dkim-header.js';
import { STRING_CHUNK, WHOLE_STRING } from './string-chunks.js';

const require = createRequire(import.meta.url);

/**
 * crypto.sign with a callback: the signature is made on libuv's thread pool, not on the event loop (docs/decisions.md
 * #75). An RSA-2048 signature is ~0.25 ms of CPU, half of what the MTA spends on a 1 kB message; on the event loop it
 * held up every session of the process meanwhile. Only where the process may run on more than one core (its CPU
 * affinity, as `taskset` or systemd's CPUAffinity sets it): on one, the pool's thread only takes turns with the event
 * loop, and the hand-over cost more than it freed.
 */
const signOffLoop = availableParallelism() > 1 ? promisify(cryptoSign) : undefined;

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
 * Fields that every signature covers one time more than the message has them, absent ones included
 * (RFC 6376 §5.4.2, §8.15): a copy with one more From, Subject or Reply-To prepended, which a reader's
 * client would show instead of ours, no longer verifies. The unsubscribe pair is among them (RFC 8058 §4
 * requires both signed).
 */
export const OVERSIGNED_HEADERS = [
  'From',
  'To',
  'Cc',
  'Subject',
  'Date',
  'Message-ID',
  'Reply-To',
  'In-Reply-To',
  'References',
  'Content-Type',
  'Content-Transfer-Encoding',
  'MIME-Version',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
  'Feedback-ID',
] as const;

/** The fields signed where present: the oversigned ones (Feedback-ID: Google's feedback loop wants it signed). */
export const SIGNED_HEADERS = OVERSIGNED_HEADERS.join(':');

const OVERSIGNED_NAMES = OVERSIGNED_HEADERS.join(': ');

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
  // A blank line of bare LFs counts only before the CRLF one: look for it in the header alone, not through the
  // whole body, which (CRLF text) has none.
  const lf = (crlf >= 0 ? raw.subarray(0, crlf + 1) : raw).indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { header: raw.subarray(0, crlf + 2), body: raw.subarray(crlf + 4) };
  if (lf >= 0) return { header: raw.subarray(0, lf + 1), body: raw.subarray(lf + 2) };
  return { header: raw, body: Buffer.alloc(0) };
}

const CRLFS = Buffer.from('\r\n'.repeat(64));
/** A space that relaxed canonicalization squeezes (before another) or drops (before the line's CR). */
const SPACE_TO_SQUEEZE = / [ \r]/;
const LONE_CR_LF = /\r(?!\n)|(?<!\r)\n/;

/**
 * The relaxed body hash (RFC 6376 §3.4.4, sha256, base64) in one pass over the body: a line with no tab, no
 * two spaces in a row and no space at its end is already canonical, so runs of such lines are hashed as they
 * stand, and only the others are rewritten (whitespace runs to one space, none at the end of a line); empty
 * lines are held back until a line with content follows them (the ones at the end are not hashed). For a
 * body of CRLF lines, which is all compose makes; any other (a bare CR or LF, no CRLF at the end) goes to
 * mailauth's canonicalization. test/mail/dkim-sign.test.ts compares the two on random bodies.
 */
export function relaxedBodyHash(body: Buffer): string {
  return bodyHashOf(body).hash;
}

/**
 * relaxedBodyHash, and whether the body is known to hold CR and LF only as CRLF pairs (false: not known). `crlfKnown`:
 * the caller knows that already (SpoolEntry.crlfOnly), and the look for a lone CR or LF is not made again.
 */
function bodyHashOf(body: Buffer, crlfKnown = false): { hash: string; crlfOnly: boolean } {
  const len = body.length;
  if (len > 0 && (body[len - 2] !== 0x0d || body[len - 1] !== 0x0a)) return notCrlf(body);
  const hash = createHash('sha256');
  // The scans run on a latin1 copy of the octets (one character per octet), whose matching is V8's own: of the whole
  // body, or of a body over WHOLE_STRING octets a chunk of whole lines at a time (mail/string-chunks.ts).
  const ends = len > WHOLE_STRING ? chunkEnds(body) : null;
  const text = ends ? undefined : body.toString('latin1');
  // The common body: CRLF lines canonical as they stand, but for the empty ones at the end. Three scans (a tab, a
  // space before a space or a line end, a CR or LF alone, which a caller that knows skips) and one hash update,
  // cheaper than the loop below: a composed 100 kB body (quoted-printable, 80-octet lines of words) in ~135 µs, ~60
  // of them the hash (README, Benchmarks: the twenty-first set's machine).
  if (ends ? canonicalChunks(body, ends, crlfKnown) : canonicalAsItStands(text!, crlfKnown)) {
    // The body ends in a CRLF (above): each CRLF before one at the end is an empty line there.
    let end = len;
    while (end >= 4 && body[end - 3] === 0x0a && body[end - 4] === 0x0d) end -= 2;
    // Nothing but empty lines: nothing is hashed.
    if (end === 2) end = 0;
    return { hash: hash.update(body.subarray(0, end)).digest('base64'), crlfOnly: true };
  }
  // Lines to rewrite: the loop below, over the whole body's text or a chunk of whole lines at a time. Positions in
  // `chunk` are the chunk's own; in `body`, `from` more.
  let runStart = 0;
  let runEnd = 0;
  let pendingEmpty = 0;
  const flushRun = () => {
    if (runEnd > runStart) hash.update(body.subarray(runStart, runEnd));
  };
  const flushEmpty = () => {
    for (; pendingEmpty > 0; pendingEmpty -= 64) hash.update(CRLFS.subarray(0, Math.min(pendingEmpty, 64) * 2));
    pendingEmpty = 0;
  };
  const loopEnds = ends ?? [len];
  for (let i = 0, from = 0; i < loopEnds.length; from = loopEnds[i++]!) {
    const chunk = text ?? body.toString('latin1', from, loopEnds[i]);
    const n = chunk.length;
    // The next tab and double space at or after the current line: each found once, so O(length) (Buffer#indexOf
    // costs more per call than a line).
    let tab = -2;
    let double = -2;
    let ls = 0;
    while (ls < n) {
      const cr = chunk.indexOf('\r', ls);
      const lf = chunk.indexOf('\n', ls);
      if (cr < 0 || lf !== cr + 1) return notCrlf(body);
      if (tab !== -1 && tab < ls) tab = chunk.indexOf('\t', ls);
      if (double !== -1 && double < ls) double = chunk.indexOf('  ', ls);
      const clean =
        (tab < 0 || tab >= cr) && (double < 0 || double >= cr) && (cr === ls || chunk.charCodeAt(cr - 1) !== 0x20);
      if (clean && cr > ls) {
        if (pendingEmpty) {
          flushRun();
          flushEmpty();
          runStart = from + ls;
        } else if (runEnd !== from + ls) {
          flushRun();
          runStart = from + ls;
        }
        runEnd = from + cr + 2;
      } else if (clean) {
        pendingEmpty++;
      } else {
        const line = canonicalLine(body, from + ls, from + cr);
        if (line.length === 0) pendingEmpty++;
        else {
          flushRun();
          flushEmpty();
          hash.update(line);
          hash.update(CRLFS.subarray(0, 2));
          runStart = runEnd = from + cr + 2;
        }
      }
      ls = cr + 2;
    }
  }
  flushRun();
  return { hash: hash.digest('base64'), crlfOnly: true };
}

/** Whether the CRLF lines of `text` are canonical as they stand (bodyHashOf's three scans). */
function canonicalAsItStands(text: string, crlfKnown: boolean): boolean {
  return !text.includes('\t') && !SPACE_TO_SQUEEZE.test(text) && (crlfKnown || crlfPairsOnly(text));
}

/** canonicalAsItStands of a body, a chunk of lines at a time (`ends`, from chunkEnds). */
function canonicalChunks(body: Buffer, ends: readonly number[], crlfKnown: boolean): boolean {
  let from = 0;
  for (const end of ends) {
    if (!canonicalAsItStands(body.toString('latin1', from, end), crlfKnown)) return false;
    from = end;
  }
  return true;
}

/**
 * Where the chunks of `body` end when its scans take about STRING_CHUNK octets at a time: each just after an LF, or at
 * the body's end, so that no line, and no space before a line's CR, spans two chunks (a line longer than a chunk is
 * a chunk of its own).
 */
function chunkEnds(body: Buffer): number[] {
  const len = body.length;
  const ends: number[] = [];
  for (let from = 0; from < len;) {
    let end = len;
    if (len - from > STRING_CHUNK) {
      const lf = body.lastIndexOf(0x0a, from + STRING_CHUNK - 1);
      end = lf >= from ? lf + 1 : body.indexOf(0x0a, from + STRING_CHUNK) + 1 || len;
    }
    ends.push(end);
    from = end;
  }
  return ends;
}

/**
 * Whether every CR in `text` is followed by an LF and every LF follows a CR. Two of V8's indexOf a line: a composed
 * 100 kB body (quoted-printable, two lines in 80 octets) in ~37 µs, where LONE_CR_LF's lookarounds, which stop at
 * every CR and LF, take ~80. Lines of a few octets cost more a line than the regex (100 kB of empty lines: ~0.66
 * ms against ~0.3); mail's lines are longer.
 */
function crlfPairsOnly(text: string): boolean {
  for (let i = 0; ;) {
    const cr = text.indexOf('\r', i);
    const lf = text.indexOf('\n', i);
    if (cr < 0) return lf < 0;
    if (lf !== cr + 1) return false;
    i = lf + 1;
  }
}

/** RFC 6376 §3.4.4 (b) and (c) for one line's content: whitespace runs as one space, none at the end. */
function canonicalLine(body: Buffer, from: number, to: number): Buffer {
  const out = Buffer.allocUnsafe(to - from);
  let o = 0;
  let space = false;
  for (let i = from; i < to; i++) {
    const c = body[i] as number;
    if (c === 0x20 || c === 0x09) space = true;
    else {
      if (space) out[o++] = 0x20;
      space = false;
      out[o++] = c;
    }
  }
  return out.subarray(0, o);
}

/** A body that is not all CRLF lines: mailauth's canonicalization. */
function notCrlf(body: Buffer): { hash: string; crlfOnly: false } {
  const hasher = dkimBody('relaxed', 'sha256', false);
  hasher.update(body);
  return { hash: hasher.digest('base64'), crlfOnly: false };
}

export interface Signatures {
  /** The DKIM-Signature header lines, CRLF-terminated, one per key. */
  fields: Buffer;
  /**
   * Whether the fields and the message hold CR and LF only as CRLF pairs, as the body hash found them (false: not
   * known): what the message's DATA transparency may then skip looking for (mail/smtp-data.ts, markCrlfOnly).
   */
  crlfOnly: boolean;
}

/**
 * The DKIM-Signature header lines for `raw`, relaxed/relaxed, sha256. Rejects with DkimSignError when there is no key
 * or a signature cannot be made. The body hash and the canonical fields are made on the caller's thread before the
 * first await, so `raw` may be bytes lent only until the call returns (the spool's withBody); the keys' signatures
 * side by side on the thread pool where the process has more than one core (signOffLoop). `crlfKnown`: the caller
 * knows that `raw` holds CR and LF only as CRLF pairs (a composed message, SpoolEntry.crlfOnly); it is not looked for
 * again, ~80 µs of a 100 kB message (README, Where the speed comes from).
 */
export async function dkimSignatures(
  raw: Buffer,
  keys: readonly SigningKey[],
  signTimeMs: number,
  crlfKnown = false,
): Promise<Signatures> {
  if (keys.length === 0) throw new DkimSignError('no DKIM key to sign with');
  const { header, body } = splitMessage(raw);
  const parsed = tools.parseHeaders(header).parsed;
  const { hash: bodyHash, crlfOnly: bodyCrlfOnly } = bodyHashOf(body, crlfKnown);
  // The header (a few hundred octets) looked at too, and the blank line after it: a bare-LF one ends a header of
  // LF lines, which splitMessage gives without it.
  const crlfOnly =
    crlfKnown ||
    (bodyCrlfOnly && raw.length - header.length - body.length === 2 && !LONE_CR_LF.test(header.toString('latin1')));
  // The same h= for every key: the fields present (bottom-up, as getSigningHeaderLines lists them), then each
  // oversigned name once more. The extra names match no field when a verifier walks h= bottom-up, so they add
  // nothing to the hash (RFC 6376 §5.4.2) but make any added instance part of it.
  const present = tools.getSigningHeaderLines(parsed, SIGNED_HEADERS);
  if (!present.headers.some((h) => h.key === 'from')) throw new DkimSignError('message has no From header');
  const signing = { keys: `${present.keys}: ${OVERSIGNED_NAMES}`, headers: present.headers };
  if (!Number.isFinite(signTimeMs)) throw new DkimSignError('no valid signing time');
  // The signed fields in relaxed form (RFC 6376 §3.4.2), the same for every key: made by the first that needs them.
  let canonicalFields: string | undefined;
  // What each key signs and how its field is written, all made before the first signature starts: a key refused
  // part way through leaves no signature running.
  const jobs: { key: KeyObject; input: Buffer; field: (signature: string) => string }[] = [];
  for (const k of keys) {
    const keyType = k.key.asymmetricKeyType;
    if (keyType !== 'rsa' && keyType !== 'ed25519') throw new DkimSignError(`unsupported DKIM key type ${keyType}`);
    const algorithm = `${keyType}-sha256`;
    if (plainTagValue(k.domain) && plainTagValue(k.selector)) {
      const tags = signatureTags({
        algorithm,
        domain: k.domain,
        selector: k.selector,
        headerKeys: signing.keys,
        time: Math.floor(signTimeMs / 1000),
        bodyHash,
      });
      canonicalFields ??= signing.headers.map((h) => relaxedField(h.line.toString('latin1'))).join('');
      const input = Buffer.from(canonicalFields + canonicalSignatureField(tags), 'latin1');
      jobs.push({ key: k.key, input, field: (signature) => signatureField(tags, signature) });
      continue;
    }
    // A domain or selector that is not plain ASCII (an IDN's U-labels): mailauth converts and formats it.
    const { canonicalizedHeader, dkimHeaderOpts } = generateCanonicalizedHeader('DKIM', signing, {
      signingDomain: k.domain,
      selector: k.selector,
      algorithm,
      canonicalization: 'relaxed/relaxed',
      signTime: new Date(signTimeMs),
      bodyHash,
    });
    jobs.push({
      key: k.key,
      input: canonicalizedHeader,
      field: (b) => tools.formatSignatureHeaderLine('DKIM', { ...dkimHeaderOpts, b }, true),
    });
  }
  const signatures = await Promise.all(jobs.map((j) => signOne(j.key, j.input)));
  const fields = jobs.map((j, i) => j.field(signatures[i]!)).join('\r\n') + '\r\n';
  // The fields are folded with CRLF (signatureField, libmime's foldLines); looked at all the same, being a few lines.
  return { fields: Buffer.from(fields), crlfOnly: crlfOnly && !LONE_CR_LF.test(fields) };
}

/** The signature of a canonicalized header, base64, made on the thread pool where there is one to gain (above). */
async function signOne(key: KeyObject, input: Buffer): Promise<string> {
  // RFC 8463 §3: Ed25519 signs the SHA-256 of the canonicalized header (PureEdDSA over the hash).
  const [algorithm, data] =
    key.asymmetricKeyType === 'rsa' ? ['rsa-sha256', input] : [null, createHash('sha256').update(input).digest()];
  const signature = signOffLoop ? await signOffLoop(algorithm, data, key) : cryptoSign(algorithm, data, key);
  return signature.toString('base64');
}

/** The message with its DKIM-Signature headers prepended. */
export async function dkimSign(raw: Buffer, keys: readonly SigningKey[], signTimeMs: number): Promise<Buffer> {
  return Buffer.concat([(await dkimSignatures(raw, keys, signTimeMs)).fields, raw]);
}
