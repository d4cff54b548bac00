// The lexical layer of RFC 3501 §9 over a command as the reader delivered it (imap/reader.ts): a cursor
// that walks the lines and steps into each literal where its announcement ends a line. The grammar of the
// commands (imap/parser.ts) is written on top of these primitives.
import { decodeMutf7 } from './mutf7.js';
import { MAX_MODSEQ, MAX_NUMBER } from './limits.js';
import type { RawCommand } from './reader.js';
import type { ResponseCode } from './response.js';
import type { ImapDate } from './command-types.js';

/** A command that does not parse: answered `BAD` (or `NO` where the RFC says so), and the session goes on. */
export class ParseError extends Error {
  readonly status: 'BAD' | 'NO';
  readonly code?: ResponseCode;
  constructor(message: string, status: 'BAD' | 'NO' = 'BAD', code?: ResponseCode) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const SP = 0x20;
const DQUOTE = 0x22;
const BACKSLASH = 0x5c;
/**
 * RFC 3501 §9 atom-specials = "(" / ")" / "{" / SP / CTL / list-wildcards / quoted-specials /
 * resp-specials. ATOM-CHAR is any CHAR but those; 8-bit octets are not CHARs either.
 */
function isAtomChar(c: number): boolean {
  if (c <= 0x1f || c >= 0x7f) return false;
  return !'(){ %*"\\]'.includes(String.fromCharCode(c));
}
/** ASTRING-CHAR = ATOM-CHAR / resp-specials ("]"). */
function isAstringChar(c: number): boolean {
  return isAtomChar(c) || c === 0x5d;
}
/** list-char = ATOM-CHAR / list-wildcards / resp-specials (RFC 3501 §9 `list-mailbox`). */
function isListChar(c: number): boolean {
  return isAstringChar(c) || c === 0x25 || c === 0x2a;
}

export class Cursor {
  private seg = 0;
  private pos = 0;
  private readonly raw: RawCommand;

  constructor(raw: RawCommand) {
    this.raw = raw;
  }

  private get line(): Buffer {
    return this.raw.lines[this.seg] as Buffer;
  }

  /** The next octet of the current line, or -1 at its end. */
  peek(): number {
    return this.pos < this.line.length ? (this.line[this.pos] as number) : -1;
  }

  /** At the end of the command: the end of its last line. */
  atEnd(): boolean {
    return this.seg === this.raw.lines.length - 1 && this.pos >= this.line.length;
  }

  /** Takes `s` (compared case-insensitively, as all IMAP keywords are) if it comes next. */
  take(s: string): boolean {
    const text = this.line.toString('latin1', this.pos, this.pos + s.length);
    if (text.toUpperCase() !== s.toUpperCase()) return false;
    this.pos += s.length;
    return true;
  }

  expect(s: string, what = `"${s}"`): void {
    if (!this.take(s)) this.fail(`expected ${what}`);
  }

  space(): void {
    if (this.peek() !== SP) this.fail('expected a space');
    this.pos++;
  }

  /** The command is over; anything left is an error (RFC 3501 §9: each command ends in CRLF). */
  end(): void {
    if (!this.atEnd()) this.fail('unexpected text at the end of the command');
  }

  fail(message: string): never {
    const at = this.line.toString('latin1', this.pos, this.pos + 20).replace(/[^\x20-\x7e]/g, '?');
    throw new ParseError(at ? `${message} at "${at}"` : `${message} at the end of the line`);
  }

  private run(pred: (c: number) => boolean): string {
    const start = this.pos;
    while (this.pos < this.line.length && pred(this.line[this.pos] as number)) this.pos++;
    return this.line.toString('latin1', start, this.pos);
  }

  /** RFC 3501 §9 `atom` = 1*ATOM-CHAR. */
  atom(what = 'an atom'): string {
    const a = this.run(isAtomChar);
    if (a === '') this.fail(`expected ${what}`);
    return a;
  }

  /** Octets up to the next space, ")" or end of line: for sequence sets and other atom-like tokens. */
  word(what: string): string {
    const w = this.run((c) => c > SP && c !== 0x29 && c !== 0x28 && c < 0x7f);
    if (w === '') this.fail(`expected ${what}`);
    return w;
  }

  /** RFC 3501 §9 `number`: unsigned 32-bit. */
  number(what = 'a number'): number {
    const d = this.run((c) => c >= 0x30 && c <= 0x39);
    if (d === '' || d.length > 10 || Number(d) > MAX_NUMBER) this.fail(`expected ${what}`);
    return Number(d);
  }

  nzNumber(what = 'a non-zero number'): number {
    const n = this.number(what);
    if (n === 0) this.fail(`expected ${what}`);
    return n;
  }

  /** RFC 7162 §7 `mod-sequence-value`, or mod-sequence-valzer when `zero` (UNCHANGEDSINCE 0). */
  modseq(zero: boolean): bigint {
    const d = this.run((c) => c >= 0x30 && c <= 0x39);
    if (d === '' || d.length > 19) this.fail('expected a mod-sequence value');
    const v = BigInt(d);
    if (v > MAX_MODSEQ || (!zero && v === 0n)) this.fail('mod-sequence value out of range');
    return v;
  }

  /** RFC 3501 §9 `quoted`, escapes removed. 8-bit octets are taken as UTF-8 (clients send them). */
  quoted(): Buffer {
    this.expect('"', 'a quoted string');
    const bytes: number[] = [];
    for (;;) {
      const c = this.peek();
      if (c === -1) this.fail('unterminated quoted string');
      this.pos++;
      if (c === DQUOTE) return Buffer.from(bytes);
      if (c === BACKSLASH) {
        const e = this.peek();
        // RFC 3501 §9 QUOTED-CHAR: only "\" quoted-specials, i.e. \" and \\.
        if (e !== DQUOTE && e !== BACKSLASH) this.fail('bad escape in quoted string');
        this.pos++;
        bytes.push(e);
      } else if (c === 0) {
        this.fail('NUL in quoted string');
      } else {
        bytes.push(c);
      }
    }
  }

  /** True if a literal announcement `{n}` / `{n+}` ends the current line here. */
  private atLiteral(): boolean {
    return this.peek() === 0x7b && /^\{[0-9]+\+?\}$/.test(this.line.toString('latin1', this.pos));
  }

  /** RFC 3501 §9 `literal` (and RFC 7888's `{n+}`): the octets that follow the announcement. */
  literal(): Buffer {
    if (!this.atLiteral()) this.fail('expected a literal');
    const announced = Number(/[0-9]+/.exec(this.line.toString('latin1', this.pos))?.[0]);
    const data = this.raw.literals[this.seg];
    if (data === undefined || data.length !== announced) this.fail('literal does not match its announcement');
    this.seg++;
    this.pos = 0;
    return data;
  }

  /** RFC 3501 §9 `string` = quoted / literal. */
  string(what = 'a string'): Buffer {
    if (this.peek() === DQUOTE) return this.quoted();
    if (this.atLiteral()) return this.literal();
    this.fail(`expected ${what}`);
  }

  /** RFC 3501 §9 `astring` = 1*ASTRING-CHAR / string. */
  astring(what = 'a string'): Buffer {
    const c = this.peek();
    if (c === DQUOTE || c === 0x7b) return this.string(what);
    const a = this.run(isAstringChar);
    if (a === '') this.fail(`expected ${what}`);
    return Buffer.from(a, 'latin1');
  }

  /** RFC 3501 §9 `nstring` = string / nil; NIL as null. */
  nstring(): Buffer | null {
    if (this.take('NIL')) return null;
    return this.string();
  }

  /** RFC 3501 §9 `list-mailbox` = 1*list-char / string: a LIST pattern, wildcards kept. */
  listMailbox(): string {
    const c = this.peek();
    if (c === DQUOTE || c === 0x7b) return decodeName(this.string('a mailbox pattern'), this);
    const a = this.run(isListChar);
    if (a === '') this.fail('expected a mailbox pattern');
    return decodeName(Buffer.from(a, 'latin1'), this);
  }

  /**
   * RFC 3501 §9 `mailbox` = "INBOX" / astring, decoded from modified UTF-7 (§5.1.3). §5.1: INBOX is
   * case-insensitive, so any spelling of it is "INBOX".
   */
  mailbox(): string {
    const name = decodeName(this.astring('a mailbox name'), this);
    return name.toUpperCase() === 'INBOX' ? 'INBOX' : name;
  }

  /** RFC 3501 §9 `flag-list` = "(" [flag *(SP flag)] ")". */
  flagList(): string[] {
    this.expect('(', 'a flag list');
    const flags: string[] = [];
    while (!this.take(')')) {
      if (flags.length > 0) this.space();
      flags.push(this.flag());
    }
    return flags;
  }

  /**
   * RFC 3501 §9 `flag`: a system flag (its canonical spelling), "\" atom, or a keyword atom. \Recent is
   * not one: §2.3.2 says the client cannot set it, and the grammar leaves it to `flag-fetch`.
   */
  flag(): string {
    const backslash = this.take('\\');
    const name = this.atom('a flag');
    if (!backslash) return name;
    const system = SYSTEM_FLAGS.get(name.toUpperCase());
    if (system === '\\Recent') this.fail('\\Recent cannot be set by a client');
    return system ?? `\\${name}`;
  }

  /** RFC 3501 §9 `date` = date-text / DQUOTE date-text DQUOTE; date-text = date-day "-" date-month "-" date-year. */
  date(): ImapDate {
    const q = this.take('"');
    const m = /^([0-9]{1,2})-([A-Za-z]{3})-([0-9]{4})/.exec(this.line.toString('latin1', this.pos, this.pos + 11));
    if (!m) this.fail('expected a date (d-Mon-yyyy)');
    this.pos += m[0].length;
    if (q) this.expect('"');
    const d = { day: Number(m[1]), month: monthNumber(m[2] as string), year: Number(m[3]) };
    if (d.month === 0 || !validDay(d.year, d.month, d.day)) this.fail('no such date');
    return d;
  }

  /**
   * RFC 3501 §9 `date-time` = DQUOTE date-day-fixed "-" date-month "-" date-year SP time SP zone DQUOTE,
   * e.g. "17-Jul-1996 02:44:25 -0700"; date-day-fixed is (SP DIGIT) / 2DIGIT.
   */
  dateTime(): Date {
    const text = this.line.toString('latin1', this.pos, this.pos + 28);
    const m =
      /^"([ 0-9][0-9])-([A-Za-z]{3})-([0-9]{4}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([+-])([0-9]{2})([0-9]{2})"/.exec(
        text,
      );
    if (!m) this.fail('expected a date-time ("dd-Mon-yyyy hh:mm:ss +zzzz")');
    const [day, month, year] = [Number((m[1] as string).trim()), monthNumber(m[2] as string), Number(m[3])];
    const [h, min, s] = [Number(m[4]), Number(m[5]), Number(m[6])];
    if (month === 0 || !validDay(year, month, day) || h > 23 || min > 59 || s > 60) this.fail('no such date-time');
    const zone = (m[7] === '-' ? -1 : 1) * (Number(m[8]) * 60 + Number(m[9]));
    this.pos += m[0].length;
    return new Date(Date.UTC(year, month - 1, day, h, min, Math.min(s, 59)) - zone * 60_000);
  }
}

const SYSTEM_FLAGS = new Map(
  ['\\Answered', '\\Flagged', '\\Deleted', '\\Seen', '\\Draft', '\\Recent'].map((f) => [f.slice(1).toUpperCase(), f]),
);

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
function monthNumber(name: string): number {
  return MONTHS.indexOf(name.toUpperCase()) + 1;
}
function validDay(year: number, month: number, day: number): boolean {
  return day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * A mailbox name off the wire: modified UTF-7 (RFC 3501 §5.1.3) when it is 7-bit; taken as UTF-8 when it
 * has 8-bit octets, which some clients send and RFC 9051 §5.1 allows; refused when it is neither.
 */
function decodeName(bytes: Buffer, cursor: Cursor): string {
  if (bytes.some((b) => b >= 0x80)) {
    const s = bytes.toString('utf8');
    if (s.includes('\ufffd')) cursor.fail('mailbox name is neither modified UTF-7 nor UTF-8');
    return s;
  }
  const name = decodeMutf7(bytes.toString('latin1'));
  if (name === null)
    throw new ParseError(`mailbox name ${JSON.stringify(bytes.toString('latin1'))} is not valid modified UTF-7`);
  return name;
}
