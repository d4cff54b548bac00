// The MIME structure of a stored message, computed once at insert and kept beside it as JSON, so
// that IMAP FETCH (ENVELOPE, BODYSTRUCTURE, BODY[section], RFC822.SIZE) and the webmail list never
// parse the message again: every entity carries the byte offsets of its header and body in the raw
// message, and the fields BODYSTRUCTURE writes (RFC 3501 §7.4.2). Pure: no storage, no sockets.
//
// Why our own boundary scan next to mailsplit: offsets must be exact, and mailsplit's Splitter does
// not expose them. Summing its output chunks is not enough either: a part whose header is ended by
// a delimiter instead of a blank line loses or repeats those header bytes in its output (5.4.19),
// it leaves a message/rfc822 marked "attachment" unparsed, and it does not recognise a boundary
// two levels up. So we scan lines here (RFC 2046 §5.1.1) and let mailsplit's Headers parse each
// header block (mime-header.ts). The scan is incremental: a 25 MB message is fed chunk by chunk and
// only header blocks, one line and the first bytes of the preview part are held.
import type { Readable } from 'node:stream';
import {
  type Envelope,
  type EnvelopeDisplay,
  type HeaderField,
  decodeCharset,
  displayOf,
  envelopeOf,
  firstField,
  normalizeDate,
  normalizeMessageId,
  paramText,
  parseHeaderBlock,
  parseStructured,
} from './mime-header.js';
import { htmlText } from './html-text.js';

export type { Envelope, EnvelopeAddress, EnvelopeDisplay, DisplayAddress } from './mime-header.js';

/**
 * RFC 2046 sets no limit on nesting or on the number of parts. Each entity is a row of the stored
 * JSON and a parenthesised list in BODYSTRUCTURE that clients parse recursively, so we bound both:
 * 32 levels and 1000 entities (mailsplit's own MAX_CHILD_NODES is 1000; Dovecot's
 * message-parser.h defaults are 100 and 10000 and are meant for a server without our JSON copy).
 * Past a limit the structure stops growing and the bytes stay inside the enclosing entity.
 */
export const MAX_DEPTH = 32;
export const MAX_ENTITIES = 1000;
/** Header bytes parsed per entity; later header lines are still counted, not parsed (mailsplit: 1 MB). */
const MAX_HEADER_BYTES = 256 * 1024;
/** Bytes of one line kept for boundary and header matching; offsets stay exact past it. */
const MAX_LINE_BYTES = 64 * 1024;
/** Raw body bytes kept of the parts a preview may come from. */
const PREVIEW_RAW_BYTES = 16 * 1024;
const PREVIEW_CHARS = 200;

export interface Disposition {
  /** Lower case, e.g. "attachment". */
  type: string;
  params: [string, string][];
}

/** One MIME entity: the message itself, a body part, or the message inside a message/rfc822 part. */
export interface MimeEntity {
  /**
   * The IMAP part number (RFC 3501 §6.4.5): "1", "1.2", …; for a single-part message its body is
   * "1" (and "1" for the body of a single-part message inside message/rfc822 part "2" is "2.1").
   * null for a multipart message root, which is reached only as "" or "2" with HEADER and TEXT.
   */
  part: string | null;
  /** [headerStart, bodyStart) is the header block including its blank line; [bodyStart, bodyEnd) the body. */
  headerStart: number;
  bodyStart: number;
  bodyEnd: number;
  /** Lower case; text/plain when absent or invalid (RFC 2045 §5.2), message/rfc822 in a digest (RFC 2046 §5.1.5). */
  type: string;
  subtype: string;
  /** Content-Type parameters (see StructuredValue in mime-header.ts). */
  params: [string, string][];
  id: string | null;
  description: string | null;
  /** Content-Transfer-Encoding as written, or null (IMAP writes "7BIT" then). */
  encoding: string | null;
  md5: string | null;
  disposition: Disposition | null;
  language: string[] | null;
  location: string | null;
  /** Octets of the body as transmitted: bodyEnd − bodyStart (RFC 3501 body-fld-octets). */
  size: number;
  /** Text lines of the body (RFC 3501 body-fld-lines, which IMAP writes for text/* and message/rfc822). */
  lines: number;
  /** The file name for display: RFC 2231 and encoded words decoded; from the disposition, else "name". */
  filename: string | null;
  /**
   * Why the entity is shown differently from its header: "depth" or "count" when a limit above
   * stopped the structure (it is then application/octet-stream, as Dovecot shows such parts),
   * "no-parts" for a multipart whose boundary never occurs (then text/plain, RFC 2045 §5.2).
   */
  fallback?: 'depth' | 'count' | 'no-parts';
  /** Children of a multipart, in order; absent for every other type. */
  children?: MimeEntity[];
  /** For message/rfc822 (and message/global) with an identity encoding: the message it holds. */
  message?: { envelope: Envelope; body: MimeEntity };
}

export interface MimeTree {
  version: 1;
  /** RFC822.SIZE: octets of the raw message as stored. */
  size: number;
  envelope: Envelope;
  display: EnvelopeDisplay;
  /** Message-ID without angle brackets, or null. */
  messageId: string | null;
  /** The Date field as an ISO 8601 UTC string, or null when absent or unreadable. */
  date: string | null;
  /** The first ~200 characters of the first text part, decoded, HTML crudely stripped. */
  preview: string;
  hasAttachments: boolean;
  /** The message's own entity: header at 0, its body to the end. */
  body: MimeEntity;
}

// ---- the incremental scanner ---------------------------------------------------------------------

interface Open {
  entity: MimeEntity;
  depth: number;
  inHeader: boolean;
  header: Buffer[];
  headerBytes: number;
  /** Line feeds before bodyStart, to count the body's lines at its end. */
  lfAtBody: number;
  /** Set on a multipart whose parts we follow. */
  boundary: Buffer | null;
  /** After the close delimiter the multipart's own boundary no longer counts (its epilogue). */
  epilogue: boolean;
  /** The parent is multipart/digest: parts default to message/rfc822 (RFC 2046 §5.1.5). */
  inDigest: boolean;
  /** This entity heads a message (the top one or one inside message/rfc822): it has an envelope. */
  messageRoot: boolean;
  container: MimeEntity | null;
}

interface Capture {
  entity: MimeEntity;
  chunks: Buffer[];
  bytes: number;
}

function newEntity(headerStart: number): MimeEntity {
  return {
    part: null,
    headerStart,
    bodyStart: headerStart,
    bodyEnd: headerStart,
    type: 'text',
    subtype: 'plain',
    params: [],
    id: null,
    description: null,
    encoding: null,
    md5: null,
    disposition: null,
    language: null,
    location: null,
    size: 0,
    lines: 0,
    filename: null,
  };
}

const IDENTITY_ENCODINGS = new Set(['', '7bit', '8bit', 'binary']);

class Scanner {
  private offset = 0;
  private lineFeeds = 0;
  private lineParts: Buffer[] = [];
  private lineBytes = 0;
  private lineStart = 0;
  private prevLineEmpty = false;
  private prevLineCr = false;
  private lfAtLineStart = 0;
  private lastByte = -1;
  private entities = 1;
  private readonly stack: Open[];
  readonly root: MimeEntity;
  envelope: Envelope | null = null;
  plain: Capture | null = null;
  html: Capture | null = null;

  constructor() {
    this.root = newEntity(0);
    this.stack = [this.open(this.root, 0, false, true, null)];
  }

  private open(
    entity: MimeEntity,
    depth: number,
    inDigest: boolean,
    messageRoot: boolean,
    container: MimeEntity | null,
  ): Open {
    return {
      entity,
      depth,
      inHeader: true,
      header: [],
      headerBytes: 0,
      lfAtBody: 0,
      boundary: null,
      epilogue: false,
      inDigest,
      messageRoot,
      container,
    };
  }

  push(chunk: Buffer): void {
    const chunkStart = this.offset;
    let from = 0;
    while (from < chunk.length) {
      const lf = chunk.indexOf(0x0a, from);
      const end = lf < 0 ? chunk.length : lf + 1;
      // Most lines are body lines that cannot be a delimiter (they do not start with "--"): only their
      // line-end state is kept, without copying or joining them (the whole line is in this chunk).
      if (lf >= 0 && this.lineBytes === 0 && !(chunk[from] === 0x2d && chunk[from + 1] === 0x2d)) {
        const top = this.stack[this.stack.length - 1]!;
        if (!top.inHeader) {
          this.offset = chunkStart + end;
          this.lineFeeds++;
          const hasCr = end - from >= 2 && chunk[lf - 1] === 0x0d;
          this.prevLineEmpty = end - from === (hasCr ? 2 : 1);
          this.prevLineCr = hasCr;
          this.lineStart = this.offset;
          from = end;
          continue;
        }
      }
      this.appendLine(chunk.subarray(from, end));
      this.offset = chunkStart + end;
      if (lf >= 0) {
        this.lineFeeds++;
        this.endLine(this.offset);
      }
      from = end;
    }
    if (chunk.length) this.lastByte = chunk[chunk.length - 1]!;
    for (const c of [this.plain, this.html]) if (c) this.capture(c, chunk, chunkStart);
  }

  private capture(c: Capture, chunk: Buffer, chunkStart: number): void {
    const start = Math.max(c.entity.bodyStart + c.bytes, chunkStart);
    const stop = Math.min(c.entity.bodyStart + PREVIEW_RAW_BYTES, chunkStart + chunk.length);
    if (stop <= start) return;
    // A view, not a copy: the caller hands each chunk over and does not write to it again.
    c.chunks.push(chunk.subarray(start - chunkStart, stop - chunkStart));
    c.bytes += stop - start;
  }

  private appendLine(piece: Buffer): void {
    if (this.lineBytes < MAX_LINE_BYTES) this.lineParts.push(piece.subarray(0, MAX_LINE_BYTES - this.lineBytes));
    this.lineBytes += piece.length;
  }

  /** Called at each line end (after its LF) and once for an unterminated last line. */
  private endLine(lineEnd: number): void {
    const line = this.lineParts.length === 1 ? this.lineParts[0]! : Buffer.concat(this.lineParts);
    const lineStart = this.lineStart;
    this.lineParts = [];
    this.lineBytes = 0;
    this.lineStart = lineEnd;
    const hasLf = line[line.length - 1] === 0x0a;
    const hasCr = hasLf && line[line.length - 2] === 0x0d;
    const contentLength = line.length - (hasLf ? 1 : 0) - (hasCr ? 1 : 0);
    this.lfAtLineStart = this.lineFeeds - (hasLf ? 1 : 0);
    this.handleLine(line, contentLength, lineStart, lineEnd);
    this.prevLineEmpty = contentLength === 0 && lineEnd - lineStart === line.length;
    this.prevLineCr = hasCr;
  }

  private handleLine(line: Buffer, contentLength: number, lineStart: number, lineEnd: number): void {
    if (contentLength >= 2 && line[0] === 0x2d && line[1] === 0x2d && lineEnd - lineStart === line.length) {
      const m = this.matchDelimiter(line.subarray(0, contentLength));
      if (m) return this.delimiter(m.at, m.close, lineStart, lineEnd);
    }
    const top = this.stack[this.stack.length - 1]!;
    if (!top.inHeader) return;
    if (top.headerBytes < MAX_HEADER_BYTES) top.header.push(Buffer.from(line));
    top.headerBytes += line.length;
    // RFC 5322 §2.1: the header ends at the first empty line.
    if (contentLength === 0 && lineEnd - lineStart === line.length) this.endHeader(top, lineEnd, true);
  }

  /** RFC 2046 §5.1.1: "--" boundary, "--" for the last one, then optional transport padding. */
  private matchDelimiter(content: Buffer): { at: number; close: boolean } | null {
    for (let i = this.stack.length - 1; i >= 0; i--) {
      const o = this.stack[i]!;
      if (!o.boundary || o.epilogue) continue;
      const b = o.boundary;
      if (content.length < b.length + 2 || content.compare(b, 0, b.length, 2, 2 + b.length) !== 0) continue;
      let rest = content.subarray(2 + b.length);
      const close = rest[0] === 0x2d && rest[1] === 0x2d;
      if (close) rest = rest.subarray(2);
      if (rest.every((c) => c === 0x20 || c === 0x09)) return { at: i, close };
    }
    return null;
  }

  private delimiter(at: number, close: boolean, lineStart: number, lineEnd: number): void {
    // RFC 2046 §5.1.1: the line break before a delimiter belongs to the delimiter, not to the part.
    const lb = lineStart === 0 ? 0 : this.prevLineCr ? 2 : 1;
    const lfBefore = this.lfAtLineStart - (lb ? 1 : 0);
    while (this.stack.length - 1 > at)
      this.close(this.stack.pop()!, lineStart, lineStart - lb, lfBefore, this.prevLineEmpty);
    const owner = this.stack[at]!;
    if (close) {
      owner.epilogue = true;
      return;
    }
    owner.epilogue = false;
    if (this.entities >= MAX_ENTITIES) {
      // Past the limit the following parts stay unlisted: their bytes are the owner's, and only
      // the owner's own delimiters are still followed.
      return;
    }
    this.entities++;
    const child = newEntity(lineEnd);
    (owner.entity.children ??= []).push(child);
    this.stack.push(this.open(child, owner.depth + 1, owner.entity.subtype === 'digest', false, null));
  }

  private close(o: Open, headerEnd: number, end: number, lfBefore: number, endsWithLf: boolean): void {
    if (o.inHeader) this.endHeader(o, headerEnd, false);
    const e = o.entity;
    e.bodyEnd = Math.max(e.bodyStart, end);
    e.size = e.bodyEnd - e.bodyStart;
    e.lines = e.size === 0 ? 0 : lfBefore - o.lfAtBody + (endsWithLf ? 0 : 1);
  }

  /** The header block is complete: read the fields the structure needs and decide what follows. */
  private endHeader(o: Open, bodyStart: number, bodyFollows: boolean): void {
    o.inHeader = false;
    o.lfAtBody = this.lineFeeds;
    const e = o.entity;
    e.bodyStart = e.bodyEnd = bodyStart;
    let fields: HeaderField[] = [];
    try {
      fields = parseHeaderBlock(Buffer.concat(o.header));
    } catch {
      // A header block mailsplit cannot read is an empty one: the defaults of RFC 2045 §5.2 apply.
    }
    o.header = [];
    applyContentFields(e, fields, o.inDigest);
    if (o.messageRoot && o.container === null) this.envelope = envelopeOf(fields);
    if (o.container) o.container.message = { envelope: envelopeOf(fields), body: e };
    if (!bodyFollows) {
      if (e.type === 'multipart') setFallback(e, 'no-parts');
      return;
    }
    const full = o.depth + 1 >= MAX_DEPTH ? 'depth' : this.entities >= MAX_ENTITIES ? 'count' : null;
    if (e.type === 'multipart') {
      const boundary = e.params.find(([n]) => n === 'boundary')?.[1];
      if (!boundary) return setFallback(e, 'no-parts');
      if (full) return setFallback(e, full);
      o.boundary = Buffer.from(boundary, 'utf8');
      return;
    }
    if (e.type === 'message' && (e.subtype === 'rfc822' || e.subtype === 'global')) {
      if (full || !IDENTITY_ENCODINGS.has((e.encoding ?? '').toLowerCase())) return;
      this.entities++;
      const inner = newEntity(bodyStart);
      this.stack.push(this.open(inner, o.depth + 1, false, true, e));
      return;
    }
    if (e.type === 'text' && !isAttachment(e)) {
      if (e.subtype === 'plain' && !this.plain) this.plain = { entity: e, chunks: [], bytes: 0 };
      if (e.subtype === 'html' && !this.html) this.html = { entity: e, chunks: [], bytes: 0 };
    }
  }

  end(): void {
    if (this.lineParts.length || this.lineBytes) this.endLine(this.offset);
    const endsWithLf = this.lastByte === 0x0a;
    while (this.stack.length) this.close(this.stack.pop()!, this.offset, this.offset, this.lineFeeds, endsWithLf);
  }

  get size(): number {
    return this.offset;
  }
}

function setFallback(e: MimeEntity, why: 'depth' | 'count' | 'no-parts'): void {
  e.fallback = why;
  if (why === 'no-parts') [e.type, e.subtype, e.params] = ['text', 'plain', [['charset', 'us-ascii']]];
  else [e.type, e.subtype, e.params] = ['application', 'octet-stream', []];
}

function applyContentFields(e: MimeEntity, fields: HeaderField[], inDigest: boolean): void {
  const ct = parseStructured(firstField(fields, 'content-type'));
  const slash = ct.value.indexOf('/');
  const valid = slash > 0 && slash < ct.value.length - 1 && !/[\s"]/.test(ct.value);
  if (valid) {
    [e.type, e.subtype, e.params] = [ct.value.slice(0, slash), ct.value.slice(slash + 1), ct.params];
  } else if (ct.value === '' && inDigest) {
    [e.type, e.subtype] = ['message', 'rfc822'];
  } else {
    // RFC 2045 §5.2: absent or invalid Content-Type means text/plain; charset=us-ascii.
    [e.type, e.subtype, e.params] = ['text', 'plain', ct.value === '' ? ct.params : [['charset', 'us-ascii']]];
  }
  if (e.type === 'text' && !e.params.some(([n]) => n === 'charset')) e.params.push(['charset', 'us-ascii']);
  e.id = firstField(fields, 'content-id');
  e.description = firstField(fields, 'content-description');
  e.encoding = firstField(fields, 'content-transfer-encoding');
  e.md5 = firstField(fields, 'content-md5');
  const cd = firstField(fields, 'content-disposition');
  if (cd !== null) {
    const d = parseStructured(cd);
    if (d.value) e.disposition = { type: d.value, params: d.params };
  }
  const lang = firstField(fields, 'content-language');
  // RFC 3282 §2: a comma-separated list of language tags.
  if (lang !== null)
    e.language = lang
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  if (e.language && !e.language.length) e.language = null;
  e.location = firstField(fields, 'content-location');
  e.filename = (e.disposition && paramText(e.disposition.params, 'filename')) ?? paramText(e.params, 'name');
}

/**
 * The paperclip of the list view: a leaf that is not meant to be shown inline. RFC 2183 §2.1-2.2
 * says so with "attachment"; without a disposition, a named part or one that is not text is one.
 */
function isAttachment(e: MimeEntity): boolean {
  if (e.type === 'multipart') return false;
  if (e.disposition?.type === 'attachment') return true;
  if (e.disposition?.type === 'inline') return false;
  if (e.filename) return true;
  return e.type !== 'text' && !(e.type === 'message' && e.message);
}

// ---- after the scan: part numbers, attachments, preview ------------------------------------------

/** RFC 3501 §6.4.5 part numbers: children of a multipart are 1, 2, …; a single-part body is 1. */
function number(e: MimeEntity, prefix: string): void {
  const join = (n: number): string => (prefix ? `${prefix}.${n}` : String(n));
  if (e.children) {
    e.part = e.part ?? null;
    e.children.forEach((c, i) => {
      c.part = join(i + 1);
      numberInside(c, c.part);
    });
  } else {
    e.part = join(1);
    numberInside(e, e.part);
  }
}

function numberInside(e: MimeEntity, part: string): void {
  if (e.children) {
    e.children.forEach((c, i) => {
      c.part = `${part}.${i + 1}`;
      numberInside(c, c.part);
    });
  } else if (e.message) number(e.message.body, part);
}

function anyAttachment(e: MimeEntity): boolean {
  if (e.children) return e.children.some(anyAttachment);
  if (e.message && isAttachment(e)) return true;
  if (e.message) return anyAttachment(e.message.body);
  return isAttachment(e);
}

/** RFC 2045 §6.7-§6.8: a body decoded from its Content-Transfer-Encoding (identity encodings pass). */
export function transferDecode(raw: Buffer, encoding: string | null): Buffer {
  const enc = (encoding ?? '').trim().toLowerCase();
  if (enc === 'base64') {
    const clean = raw.toString('latin1').replace(/[^A-Za-z0-9+/]/g, '');
    // The padding went with the other non-alphabet characters: a last group of 2 or 3 characters still
    // holds 1 or 2 octets (RFC 4648 §4); only a lone last character carries none.
    return Buffer.from(clean.length % 4 === 1 ? clean.slice(0, -1) : clean, 'base64');
  }
  if (enc === 'quoted-printable') {
    // RFC 2045 §6.7: "=" at a line end is a soft break, "=XX" an octet.
    return quotedPrintableDecode(raw);
  }
  return raw;
}

const hexValue = (c: number | undefined): number =>
  c === undefined
    ? -1
    : c >= 0x30 && c <= 0x39
      ? c - 0x30
      : (c | 0x20) >= 0x61 && (c | 0x20) <= 0x66
        ? (c | 0x20) - 0x57
        : -1;

/**
 * RFC 2045 §6.7, byte by byte (one pass, no string copies): "=" before a line end is a soft break,
 * "=XX" an octet; any other "=" stays as it is (note (2): a robust decoder passes it through).
 */
function quotedPrintableDecode(raw: Buffer): Buffer {
  const out = Buffer.allocUnsafe(raw.length);
  let n = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === 0x3d) {
      if (raw[i + 1] === 0x0a) {
        i += 1;
        continue;
      }
      if (raw[i + 1] === 0x0d && raw[i + 2] === 0x0a) {
        i += 2;
        continue;
      }
      const hi = hexValue(raw[i + 1]);
      const lo = hexValue(raw[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out[n++] = hi * 16 + lo;
        i += 2;
        continue;
      }
    }
    out[n++] = c;
  }
  return out.subarray(0, n);
}

function previewOf(c: Capture | null, html: boolean): string {
  if (!c) return '';
  const e = c.entity;
  const raw = Buffer.concat(c.chunks).subarray(0, Math.max(0, Math.min(c.bytes, e.size)));
  const charset = e.params.find(([n]) => n === 'charset')?.[1] ?? null;
  let text = decodeCharset(transferDecode(raw, e.encoding), charset);
  if (html) text = htmlText(text);
  // The first PREVIEW_CHARS code points (never half a surrogate pair), without splitting the whole text.
  let out = '';
  let n = 0;
  for (const ch of text.replace(/\s+/g, ' ').trim()) {
    if (n++ === PREVIEW_CHARS) return out.trimEnd() + '…';
    out += ch;
  }
  return out;
}

/** A multipart in which no delimiter occurred has no parts: RFC 2046 §5.1.1 wants one at least. */
function settleEmptyMultiparts(e: MimeEntity): void {
  if (e.type === 'multipart' && !e.children?.length) {
    delete e.children;
    setFallback(e, 'no-parts');
  }
  e.children?.forEach(settleEmptyMultiparts);
  if (e.message) settleEmptyMultiparts(e.message.body);
}

function finish(s: Scanner): MimeTree {
  s.end();
  const body = s.root;
  settleEmptyMultiparts(body);
  number(body, '');
  const envelope = s.envelope!;
  return {
    version: 1,
    size: s.size,
    envelope,
    display: displayOf(envelope),
    messageId: normalizeMessageId(envelope.messageId),
    date: normalizeDate(envelope.date),
    preview: previewOf(s.plain, false) || previewOf(s.html, true),
    hasAttachments: anyAttachment(body),
    body,
  };
}

/** The structure of a raw message held in memory. */
export function parseMimeTree(raw: Buffer): MimeTree {
  const s = mimeTreeScanner();
  s.push(raw);
  return s.finish();
}

/**
 * The same, fed chunk by chunk by its caller (the message is never held whole); a chunk must not be
 * written to after it is pushed (the preview keeps views of the first ones). `finish` once, at the end.
 */
export function mimeTreeScanner(): { push(chunk: Buffer): void; finish(): MimeTree } {
  const s = new Scanner();
  return { push: (chunk) => s.push(chunk), finish: () => finish(s) };
}

/** The same, read from a stream. */
export async function parseMimeTreeStream(source: Readable | AsyncIterable<Buffer | string>): Promise<MimeTree> {
  const s = mimeTreeScanner();
  for await (const chunk of source as AsyncIterable<Buffer | string>)
    s.push(typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk);
  return s.finish();
}

// ---- sections (RFC 3501 §6.4.5) ------------------------------------------------------------------

export type SectionText = 'HEADER' | 'HEADER.FIELDS' | 'HEADER.FIELDS.NOT' | 'TEXT' | 'MIME';

/** The entity a numeric part path names, or null; [] is the message's own entity. */
export function findEntity(tree: MimeTree, path: number[]): MimeEntity | null {
  let e: MimeEntity = tree.body;
  let inMessage = true; // e heads a message: "1" is its first child, or e itself when single-part
  for (const n of path) {
    if (!Number.isInteger(n) || n < 1) return null;
    if (!inMessage && e.message) [e, inMessage] = [e.message.body, true];
    let next: MimeEntity | undefined;
    if (e.children) next = e.children[n - 1];
    else if (inMessage && n === 1) next = e;
    if (!next) return null;
    [e, inMessage] = [next, false];
  }
  return e;
}

/**
 * The byte range [start, end) of the raw message a BODY[section] names, or null when the section
 * does not exist. HEADER.FIELDS(.NOT) gets the header range; the caller filters its fields.
 * RFC 3501 §6.4.5: HEADER and TEXT after a part number need a message/rfc822 part; MIME needs one.
 */
export function sectionRange(
  tree: MimeTree,
  path: number[],
  text: SectionText | null,
): { start: number; end: number } | null {
  const e = findEntity(tree, path);
  if (!e) return null;
  if (text === null) return path.length ? { start: e.bodyStart, end: e.bodyEnd } : { start: 0, end: tree.size };
  if (text === 'MIME') return path.length ? { start: e.headerStart, end: e.bodyStart } : null;
  const m = path.length === 0 ? e : e.message?.body;
  if (!m) return null;
  return text === 'TEXT' ? { start: m.bodyStart, end: m.bodyEnd } : { start: m.headerStart, end: m.bodyStart };
}
