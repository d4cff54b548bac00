// Writing responses (RFC 3501 §7): untagged data, status responses with their codes, continuation
// requests, and the values inside them. A string goes quoted when RFC 3501 §4.3 allows it and as a
// literal otherwise; "written in one place" so that no handler hand-builds a wire line.
import { formatSequenceSet } from './sequence-set.js';

/** Written as is: flags, keywords, FETCH item names, response words. Must be an atom the caller vouches for. */
export interface Atom {
  readonly kind: 'atom';
  readonly text: string;
}
/** Always written as a literal: message bodies and parts. */
export interface Literal {
  readonly kind: 'literal';
  readonly bytes: Uint8Array;
}
/**
 * Values written one after the other with no space between: RFC 3501 §9 `body-type-mpart = 1*body SP
 * media-subtype` puts the parts of a multipart side by side, "(...)(...)", as Dovecot and Cyrus write them.
 */
export interface Adjacent {
  readonly kind: 'adjacent';
  readonly values: readonly ImapValue[];
}
/** null is NIL; a string is quoted or a literal; an array is a parenthesised list. */
export type ImapValue = null | number | bigint | string | Atom | Literal | Adjacent | readonly ImapValue[];

export const atom = (text: string): Atom => ({ kind: 'atom', text });
export const literal = (bytes: Uint8Array | string): Literal => ({
  kind: 'literal',
  bytes: typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes,
});

const CRLF = '\r\n';
/**
 * RFC 3501 §4.3 / §9 `quoted`: TEXT-CHARs (7-bit, no CR, LF or NUL) with `"` and `\` escaped. Anything
 * else — 8-bit, CR, LF, NUL — must be a literal. Very long strings go as literals too, to keep lines short.
 */
const QUOTABLE = /^[\x01-\x09\x0b\x0c\x0e-\x7f]*$/;
const MAX_QUOTED = 1024;

/** Where writeValue puts a response: runs of text and literal bytes, in order. */
interface Sink {
  str(s: string): void;
  bytes(b: Uint8Array): void;
}

/**
 * A response is built as text runs and literal bytes, joined into one buffer at the end: a message body
 * inside `* n FETCH (BODY[] {…}` is copied once, not once per level of nesting around it.
 */
class Out implements Sink {
  readonly parts: (string | Uint8Array)[] = [];
  private text = '';

  str(s: string): void {
    this.text += s;
  }

  bytes(b: Uint8Array): void {
    if (this.text) this.parts.push(this.text);
    this.text = '';
    this.parts.push(b);
  }

  join(): Buffer {
    if (this.text) this.parts.push(this.text);
    this.text = '';
    if (this.parts.length === 1 && typeof this.parts[0] === 'string') return Buffer.from(this.parts[0], 'utf8');
    return Buffer.concat(this.parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)));
  }
}

/** Literals at least this long are passed on as their own buffers by ResponseBuffer, not copied. */
const SEPARATE_LITERAL = 4 * 1024;
/** The blocks a ResponseBuffer writes its text into and lends out through `alloc`. */
const BLOCK = 256 * 1024;
/** A FETCH's first block: most FETCHes answer a few messages' flags, and should not take 256 KiB for that. */
const FIRST_BLOCK = 16 * 1024;
const NO_BYTES = Buffer.alloc(0);

/**
 * Many responses written into few buffers, for a FETCH of thousands of messages: the text straight into
 * a block of bytes, a small literal copied in beside it, a large one (a body) passed on as the caller's
 * buffer, not copied at all. `take` hands over what is written, as buffers to send in order; a block
 * goes on being written after the part taken, which stays as it was.
 *
 * `alloc` lends memory from the same blocks for the literals themselves (bodies read into it), and
 * `recycle` reuses every block once all that was taken has been sent: a FETCH of 140 MB of bodies then
 * cycles through a few blocks instead of allocating 140 MB for the garbage collector to find (which,
 * outside V8's heap, it counts only slowly, and then pays for in full collections).
 */
export class ResponseBuffer implements Sink {
  private written = 0;
  private text = '';
  /** The block the text goes into, the octets written to it, and where the part not yet taken begins. */
  private block: Buffer = NO_BYTES;
  private at = 0;
  private from = 0;
  /** The block `alloc` lends from, and the octets lent. */
  private lend: Buffer = NO_BYTES;
  private lent = 0;
  private out: Buffer[] = [];
  /** Blocks in use since the last `recycle`, and those free again. */
  private inUse: Buffer[] = [];
  private spare: Buffer[] = [];

  str(s: string): void {
    this.text += s;
  }

  bytes(b: Uint8Array): void {
    this.writeText();
    if (b.length >= SEPARATE_LITERAL) {
      this.cut();
      this.out.push(Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));
    } else {
      this.reserve(b.length);
      this.block.set(b, this.at);
      this.at += b.length;
    }
    this.written += b.length;
  }

  /** About the octets written and not yet taken (text not yet encoded counted by its length). */
  get length(): number {
    return this.written + this.text.length;
  }

  /** Octets of the blocks in use since the last `recycle`. */
  get held(): number {
    return this.inUse.reduce((n, b) => n + b.length, 0);
  }

  take(): Buffer[] {
    this.writeText();
    this.cut();
    const out = this.out;
    this.out = [];
    this.written = 0;
    return out;
  }

  /** `size` octets of memory, valid until `recycle` (larger than a block: a buffer of its own). */
  readonly alloc = (size: number): Buffer => {
    if (size > BLOCK) return Buffer.allocUnsafe(size);
    if (this.lend.length - this.lent < size) [this.lend, this.lent] = [this.newBlock(size), 0];
    const b = this.lend.subarray(this.lent, this.lent + size);
    this.lent += size;
    return b;
  };

  /**
   * Everything taken has been sent (and nothing was written since): the blocks are written and lent
   * again from the start. Buffers `take` or `alloc` returned before must no longer be used.
   */
  recycle(): void {
    if (this.text || this.out.length) throw new Error('ResponseBuffer.recycle with responses not taken');
    this.spare.push(...this.inUse);
    this.inUse = [];
    this.block = this.lend = NO_BYTES;
    this.at = this.from = this.lent = 0;
  }

  /** A block of at least `need` octets (at most BLOCK): a spare one, else a small first one, else BLOCK. */
  private newBlock(need: number): Buffer {
    const i = this.spare.findIndex((b) => b.length >= need);
    const fresh = this.inUse.length + this.spare.length === 0 ? Math.max(need, FIRST_BLOCK) : BLOCK;
    const b = i >= 0 ? this.spare.splice(i, 1)[0]! : Buffer.allocUnsafeSlow(fresh);
    this.inUse.push(b);
    return b;
  }

  private writeText(): void {
    const t = this.text;
    if (!t) return;
    this.text = '';
    // At most 3 octets of UTF-8 per UTF-16 unit (the text is ASCII but for a rare quoted name).
    this.reserve(t.length * 3);
    const n = this.block.write(t, this.at, 'utf8');
    this.at += n;
    this.written += n;
  }

  private reserve(n: number): void {
    if (this.block.length - this.at >= n) return;
    this.cut();
    this.block = n > BLOCK ? Buffer.allocUnsafe(n) : this.newBlock(n);
    this.at = this.from = 0;
  }

  private cut(): void {
    if (this.at > this.from) this.out.push(this.block.subarray(this.from, this.at));
    this.from = this.at;
  }
}

function writeString(out: Sink, s: string): void {
  if (QUOTABLE.test(s) && s.length <= MAX_QUOTED) return out.str(`"${s.replace(/(["\\])/g, '\\$1')}"`);
  writeLiteral(out, Buffer.from(s, 'utf8'));
}

function writeLiteral(out: Sink, bytes: Uint8Array): void {
  out.str(`{${bytes.length}}${CRLF}`);
  out.bytes(bytes);
}

function writeValue(out: Sink, v: ImapValue): void {
  if (v === null) return out.str('NIL');
  if (typeof v === 'number' || typeof v === 'bigint') return out.str(String(v));
  if (typeof v === 'string') return writeString(out, v);
  if (Array.isArray(v)) {
    out.str('(');
    writeValues(out, v);
    return out.str(')');
  }
  const tagged = v as Atom | Literal | Adjacent;
  if (tagged.kind === 'adjacent') return tagged.values.forEach((x) => writeValue(out, x));
  if (tagged.kind === 'atom') return out.str(tagged.text);
  writeLiteral(out, tagged.bytes);
}

function writeValues(out: Sink, values: readonly ImapValue[]): void {
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out.str(' ');
    writeValue(out, values[i]!);
  }
}

export function encodeValue(v: ImapValue): Buffer {
  const out = new Out();
  writeValue(out, v);
  return out.join();
}

/** `* <values>` CRLF: untagged data such as `* 12 FETCH (...)`, `* LIST (...) "/" INBOX`. */
export function untagged(values: readonly ImapValue[]): Buffer {
  const out = new Out();
  out.str('* ');
  writeValues(out, values);
  out.str(CRLF);
  return out.join();
}

/** `untagged` written into a ResponseBuffer (a FETCH's many responses, its bodies not copied). */
export function writeUntagged(out: ResponseBuffer, values: readonly ImapValue[]): void {
  out.str('* ');
  writeValues(out, values);
  out.str(CRLF);
}

/** RFC 3501 §7.5 `continue-req` = "+" SP (resp-text / base64) CRLF. */
export function continuation(text = 'Ready'): Buffer {
  return Buffer.from(`+ ${cleanText(text)}${CRLF}`, 'utf8');
}

/** RFC 5530 §3 codes and those of the extensions we speak; the ones with arguments below. */
export type PlainCode =
  | 'ALERT'
  | 'PARSE'
  | 'READ-ONLY'
  | 'READ-WRITE'
  | 'TRYCREATE'
  | 'UIDNOTSTICKY'
  | 'OVERQUOTA'
  | 'TOOBIG'
  | 'NOMODSEQ'
  | 'CLOSED'
  | 'UNAVAILABLE'
  | 'AUTHENTICATIONFAILED'
  | 'AUTHORIZATIONFAILED'
  | 'EXPIRED'
  | 'PRIVACYREQUIRED'
  | 'CONTACTADMIN'
  | 'NOPERM'
  | 'INUSE'
  | 'EXPUNGEISSUED'
  | 'CORRUPTION'
  | 'SERVERBUG'
  | 'CLIENTBUG'
  | 'CANNOT'
  | 'LIMIT'
  | 'NONEXISTENT'
  | 'ALREADYEXISTS'
  | 'HASCHILDREN'
  | 'USEATTR';

export type ResponseCode =
  | { code: PlainCode }
  | { code: 'UIDNEXT' | 'UIDVALIDITY' | 'UNSEEN'; value: number }
  | { code: 'HIGHESTMODSEQ'; value: bigint }
  | { code: 'PERMANENTFLAGS'; flags: readonly string[] }
  | { code: 'CAPABILITY'; capabilities: readonly string[] }
  | { code: 'BADCHARSET'; charsets: readonly string[] }
  /** RFC 4315 §3: the UIDs of the appended messages, in order. */
  | { code: 'APPENDUID'; uidValidity: number; uids: readonly number[] }
  /** RFC 4315 §3: source and destination UIDs pair up element by element. */
  | { code: 'COPYUID'; uidValidity: number; source: readonly number[]; dest: readonly number[] }
  /** RFC 7162 §3.1.3: the messages STORE ... UNCHANGEDSINCE did not change. */
  | { code: 'MODIFIED'; set: readonly number[] };

export function formatCode(c: ResponseCode): string {
  switch (c.code) {
    case 'UIDNEXT':
    case 'UIDVALIDITY':
    case 'UNSEEN':
    case 'HIGHESTMODSEQ':
      return `${c.code} ${c.value}`;
    case 'PERMANENTFLAGS':
      return `PERMANENTFLAGS (${c.flags.join(' ')})`;
    case 'CAPABILITY':
      return `CAPABILITY ${c.capabilities.join(' ')}`;
    case 'BADCHARSET':
      return `BADCHARSET (${c.charsets.join(' ')})`;
    case 'APPENDUID':
      return `APPENDUID ${c.uidValidity} ${formatSequenceSet(c.uids)}`;
    case 'COPYUID':
      return `COPYUID ${c.uidValidity} ${formatSequenceSet(c.source)} ${formatSequenceSet(c.dest)}`;
    case 'MODIFIED':
      return `MODIFIED ${formatSequenceSet(c.set)}`;
    default:
      return c.code;
  }
}

export type Status = 'OK' | 'NO' | 'BAD' | 'PREAUTH' | 'BYE';

/** RFC 3501 §9 `text` = 1*TEXT-CHAR: no CR or LF may reach the wire inside a human-readable text. */
function cleanText(text: string): string {
  const t = text.replace(/[\r\n\0]+/g, ' ');
  return t === '' ? 'done' : t;
}

/** A status response: `<tag> OK [code] text` for a tag, `* OK [code] text` for null (untagged). */
export function statusResponse(tag: string | null, status: Status, text: string, code?: ResponseCode): Buffer {
  const c = code ? `[${formatCode(code)}] ` : '';
  return Buffer.from(`${tag ?? '*'} ${status} ${c}${cleanText(text)}${CRLF}`, 'utf8');
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * RFC 3501 §9 `date-time`, e.g. "17-Jul-1996 02:44:25 -0700": `date` shown in the zone `offsetMinutes`
 * east of UTC (INTERNALDATE keeps the instant; the zone is presentation).
 */
export function formatDateTime(date: Date, offsetMinutes = 0): string {
  const local = new Date(date.getTime() + offsetMinutes * 60_000);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  const day = local.getUTCDate();
  return (
    `${day < 10 ? ' ' : ''}${day}-${MONTHS[local.getUTCMonth()]}-${local.getUTCFullYear()} ` +
    `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())} ` +
    `${sign}${pad(Math.floor(abs / 60))}${pad(abs % 60)}`
  );
}

/**
 * The name a FETCH response gives a BODY[...] item (RFC 3501 §7.4.2): the section as asked, BODY.PEEK
 * shown as BODY, and of a partial only its origin — "BODY[1.2.HEADER.FIELDS (SUBJECT FROM)]<0>".
 */
export function sectionLabel(
  section: { part: readonly number[]; text: string | null; fields: readonly string[] | null },
  partial: { offset: number } | null,
): string {
  const spec = [...section.part.map(String), ...(section.text ? [section.text] : [])].join('.');
  const fields = section.fields
    ? ` (${section.fields.map((f) => encodeValue(headerName(f)).toString()).join(' ')})`
    : '';
  return `BODY[${spec}${fields}]${partial ? `<${partial.offset}>` : ''}`;
}

/** A header field name as an atom when it can be one (they nearly always can), else a quoted string. */
function headerName(name: string): ImapValue {
  // RFC 3501 §9 ATOM-CHAR: not atom-specials, 7-bit.
  return /^[^\x00-\x20(){%*"\\\]\x7f-\uffff]+$/.test(name) ? atom(name) : name;
}
