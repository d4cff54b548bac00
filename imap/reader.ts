// The streaming command reader: bytes from the socket in, whole commands out. A command is one or more
// CRLF-terminated lines, each but the last ending in a literal announcement `{n}` (synchronising: the
// client waits for our "+" continuation, RFC 3501 §7.5) or `{n+}` (non-synchronising, LITERAL+,
// RFC 7888 §3), followed by exactly n octets. We offer LITERAL+, not LITERAL-: any size may be sent
// without waiting, and an over-limit one is read and thrown away (RFC 7888 §4 allows that or BYE).
//
// Every length the client announces is checked against a limit before a byte of it is kept: a line over
// MAX_LINE_BYTES, or a literal over its limit, turns the rest of the command into bytes that are counted
// and dropped as they arrive, and the command is answered with a refusal instead of being parsed.
//
// Pull-driven, so that the session decides when the next command is read: push() hands over a chunk,
// next() returns one event at a time (or null when it needs more bytes). Pure: no socket, no timers.
import {
  DEFAULT_APPEND_LIMIT,
  MAX_COMMAND_LITERAL_BYTES,
  MAX_LINE_BYTES,
  MAX_LITERAL_BYTES,
  MAX_LITERALS_PER_COMMAND,
} from './limits.js';

export interface ReaderLimits {
  /** One line, CRLF and literals excluded. */
  maxLineBytes: number;
  /** One literal outside APPEND. */
  maxLiteralBytes: number;
  /** One literal of APPEND: the APPENDLIMIT (RFC 7889). */
  appendLimit: number;
  /** All literals of one command but APPEND's. */
  maxCommandLiteralBytes: number;
  maxLiteralsPerCommand: number;
}

export const DEFAULT_READER_LIMITS: ReaderLimits = {
  maxLineBytes: MAX_LINE_BYTES,
  maxLiteralBytes: MAX_LITERAL_BYTES,
  appendLimit: DEFAULT_APPEND_LIMIT,
  maxCommandLiteralBytes: MAX_COMMAND_LITERAL_BYTES,
  maxLiteralsPerCommand: MAX_LITERALS_PER_COMMAND,
};

/**
 * A command as read: `lines[i]` (CRLF removed, its literal announcement kept) is followed by
 * `literals[i]`; the last line has no literal, so lines.length === literals.length + 1.
 */
export interface RawCommand {
  lines: Buffer[];
  literals: Buffer[];
}

export type RefusalReason = 'line-too-long' | 'literal-too-big' | 'too-many-literals';

export type ReaderEvent =
  | { kind: 'command'; command: RawCommand }
  /** Send a continuation request ("+ ...") now: the client waits for it before sending the literal. */
  | { kind: 'continue' }
  /** The line asked for with expectLine(): an AUTHENTICATE response or IDLE's "DONE". */
  | { kind: 'line'; line: Buffer }
  /**
   * A command refused unread: answer `tag` (BAD, or NO [TOOBIG] for APPEND, RFC 7889 §2). `tag` and
   * `name` come from the start of its first line when they could be read; both are null when the refused
   * line was one asked for with expectLine(), which the pending command then answers.
   */
  | { kind: 'refused'; reason: RefusalReason; tag: string | null; name: string | null; limit: number };

type Mode =
  | { kind: 'line' }
  | { kind: 'literal'; remaining: number; chunks: Buffer[] }
  | { kind: 'discard-line' }
  | { kind: 'discard-literal'; remaining: number };

const CR = 0x0d;
const LF = 0x0a;
const HEAD_BYTES = 64; // enough of a refused command's first line to read its tag and name
const TAIL_BYTES = 24; // enough of a discarded line's end to see a `{4294967295+}` announcement
/** RFC 3501 §9 `literal` = "{" number "}" CRLF; RFC 7888 §8 `literal` = "{" number64 ["+"] "}" CRLF. */
const ANNOUNCEMENT = /\{([0-9]{1,20})(\+?)\}$/;
/** RFC 3501 §9 `tag` (any ASTRING-CHAR but "+") and the command name, with UID's second word. */
const HEAD = /^([^\x00-\x20(){%*"\\+\]\x7f-\xff]+) ([A-Za-z]+)(?: ([A-Za-z]+))?/;

export class CommandReader {
  private limits: ReaderLimits;
  private input: Buffer[] = [];
  private inputBytes = 0;
  private mode: Mode = { kind: 'line' };
  // The line being read (at most maxLineBytes of it) and the command so far.
  private lineChunks: Buffer[] = [];
  private lineBytes = 0;
  private lines: Buffer[] = [];
  private literals: Buffer[] = [];
  private literalBytes = 0;
  // While discarding: what the refusal will say, and the end of the line being dropped.
  private refusal: { reason: RefusalReason; limit: number } | null = null;
  private head: Buffer | null = null;
  private tail: Buffer = Buffer.alloc(0);
  private wantLine = false;

  constructor(limits: Partial<ReaderLimits> = {}) {
    this.limits = { ...DEFAULT_READER_LIMITS, ...limits };
  }

  /**
   * Changes the limits from the next line or literal announcement on: the server keeps them tight before
   * login (an anonymous client may not make us hold an APPEND-sized literal) and raises them after.
   */
  setLimits(limits: Partial<ReaderLimits>): void {
    this.limits = { ...this.limits, ...limits };
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.input.push(chunk);
    this.inputBytes += chunk.length;
  }

  /** The next line is delivered as a `line` event, not read as a command (RFC 3501 §6.2.2, RFC 2177 §3). */
  expectLine(): void {
    this.wantLine = true;
  }

  /** Bytes held: unread input plus the partial line, command and literal. What a limit must bound. */
  bufferedBytes(): number {
    const literal = this.mode.kind === 'literal' ? this.mode.chunks.reduce((n, c) => n + c.length, 0) : 0;
    return (
      this.inputBytes + this.lineBytes + this.lines.reduce((n, l) => n + l.length, 0) + this.literalBytes + literal
    );
  }

  /** True between a command's first byte and its end: a closing connection then cut a command short. */
  midCommand(): boolean {
    return this.mode.kind !== 'line' || this.lineBytes > 0 || this.lines.length > 0;
  }

  next(): ReaderEvent | null {
    while (this.inputBytes > 0) {
      const event = this.step();
      if (event) return event;
    }
    return null;
  }

  private step(): ReaderEvent | null {
    switch (this.mode.kind) {
      case 'line':
        return this.readLine();
      case 'literal':
        return this.readLiteral(this.mode);
      case 'discard-line':
        return this.discardLine();
      case 'discard-literal': {
        this.mode.remaining -= this.drop(this.mode.remaining);
        if (this.mode.remaining === 0) this.mode = { kind: 'discard-line' };
        return null;
      }
    }
  }

  /** Takes up to `max` bytes off the input, or up to and including the first LF when `untilLf`. */
  private take(max: number, untilLf: boolean): { bytes: Buffer; sawLf: boolean } {
    const first = this.input[0] as Buffer;
    let n = Math.min(max, first.length);
    let sawLf = false;
    if (untilLf) {
      const lf = first.indexOf(LF);
      if (lf >= 0 && lf < n) {
        n = lf + 1;
        sawLf = true;
      }
    }
    const bytes = first.subarray(0, n);
    if (n === first.length) this.input.shift();
    else this.input[0] = first.subarray(n);
    this.inputBytes -= n;
    return { bytes, sawLf };
  }

  private drop(max: number): number {
    return this.take(max, false).bytes.length;
  }

  private readLine(): ReaderEvent | null {
    // One byte over the limit may be the CR of the CRLF, so allow for it before refusing.
    const room = this.limits.maxLineBytes + 2 - this.lineBytes;
    const { bytes, sawLf } = this.take(room, true);
    this.lineChunks.push(bytes);
    this.lineBytes += bytes.length;
    if (!sawLf) {
      if (this.lineBytes > this.limits.maxLineBytes + 1) {
        const partial = Buffer.concat(this.lineChunks);
        this.resetLine();
        this.startDiscard('line-too-long', this.limits.maxLineBytes, this.lines[0] ?? partial);
      }
      return null;
    }
    let line = Buffer.concat(this.lineChunks);
    this.resetLine();
    // RFC 3501 §2.2: lines end in CRLF. A bare LF is taken as the end of the line too, as most servers do.
    line = line.subarray(0, line.length - (line.length >= 2 && line[line.length - 2] === CR ? 2 : 1));
    if (line.length > this.limits.maxLineBytes) {
      this.startDiscard('line-too-long', this.limits.maxLineBytes, this.lines[0] ?? line);
      return this.endDiscardedLine(line.subarray(-TAIL_BYTES));
    }
    if (this.wantLine) {
      this.wantLine = false;
      return { kind: 'line', line };
    }
    if (line.length === 0 && this.lines.length === 0) return null; // an empty line is no command
    const m = ANNOUNCEMENT.exec(line.toString('latin1'));
    if (!m) {
      const command = { lines: [...this.lines, line], literals: this.literals };
      this.lines = [];
      this.literals = [];
      this.literalBytes = 0;
      return { kind: 'command', command };
    }
    const size = Number(m[1]);
    const sync = m[2] === '';
    this.lines.push(line);
    const first = this.lines[0] as Buffer;
    const refusal = this.checkLiteral(first, size);
    if (refusal) {
      const head = first;
      this.lines = [];
      this.literals = [];
      this.literalBytes = 0;
      this.startDiscard(refusal.reason, refusal.limit, head);
      // RFC 3501 §7.5: instead of the continuation, the server answers the command with a tagged NO or
      // BAD, and the client then sends no literal. A non-synchronising literal is on its way anyway.
      if (sync) return this.finishDiscard();
      this.mode = { kind: 'discard-literal', remaining: size };
      return null;
    }
    this.mode = { kind: 'literal', remaining: size, chunks: [] };
    return sync ? { kind: 'continue' } : null;
  }

  private checkLiteral(first: Buffer, size: number): { reason: RefusalReason; limit: number } | null {
    const { name, sub } = parseHead(first);
    const isAppend = name === 'APPEND' || (name === 'UID' && sub === 'APPEND');
    const max = this.limits.maxLiteralsPerCommand;
    if (this.literals.length + 1 > max) return { reason: 'too-many-literals', limit: max };
    if (isAppend) {
      if (size > this.limits.appendLimit) return { reason: 'literal-too-big', limit: this.limits.appendLimit };
      return null;
    }
    if (size > this.limits.maxLiteralBytes) return { reason: 'literal-too-big', limit: this.limits.maxLiteralBytes };
    const total = this.limits.maxCommandLiteralBytes;
    if (this.literalBytes + size > total) return { reason: 'literal-too-big', limit: total };
    return null;
  }

  private readLiteral(mode: { remaining: number; chunks: Buffer[] }): ReaderEvent | null {
    const { bytes } = this.take(mode.remaining, false);
    // Copied, so that a literal never pins the socket's (possibly much larger) chunk in memory.
    mode.chunks.push(Buffer.from(bytes));
    mode.remaining -= bytes.length;
    if (mode.remaining > 0) return null;
    const literal = Buffer.concat(mode.chunks);
    this.literals.push(literal);
    this.literalBytes += literal.length;
    this.mode = { kind: 'line' };
    return null;
  }

  private startDiscard(reason: RefusalReason, limit: number, head: Buffer): void {
    this.refusal ??= { reason, limit };
    this.head ??= Buffer.from(head.subarray(0, HEAD_BYTES));
    this.tail = Buffer.alloc(0);
    this.lines = [];
    this.literals = [];
    this.literalBytes = 0;
    this.mode = { kind: 'discard-line' };
  }

  private discardLine(): ReaderEvent | null {
    const { bytes, sawLf } = this.take(Infinity, true);
    this.tail = Buffer.concat([this.tail, bytes]).subarray(-(TAIL_BYTES + 2));
    if (!sawLf) return null;
    let end = this.tail.subarray(0, this.tail.length - 1);
    if (end[end.length - 1] === CR) end = end.subarray(0, end.length - 1);
    return this.endDiscardedLine(end);
  }

  /** A dropped line has ended: the command goes on if it announced a non-synchronising literal. */
  private endDiscardedLine(end: Buffer): ReaderEvent | null {
    const m = ANNOUNCEMENT.exec(end.toString('latin1'));
    this.tail = Buffer.alloc(0);
    if (m && m[2] === '+') {
      this.mode = { kind: 'discard-literal', remaining: Number(m[1]) };
      return null;
    }
    // No announcement, or a synchronising one that the client will wait for in vain (RFC 3501 §7.5).
    return this.finishDiscard();
  }

  private finishDiscard(): ReaderEvent {
    const refusal = this.refusal ?? { reason: 'line-too-long' as const, limit: this.limits.maxLineBytes };
    const { tag, name, sub } = parseHead(this.head ?? Buffer.alloc(0));
    this.refusal = null;
    this.head = null;
    this.mode = { kind: 'line' };
    if (this.wantLine) {
      this.wantLine = false;
      return { kind: 'refused', reason: refusal.reason, limit: refusal.limit, tag: null, name: null };
    }
    const full = name === 'UID' && sub ? `UID ${sub}` : name;
    return { kind: 'refused', reason: refusal.reason, limit: refusal.limit, tag, name: full };
  }

  private resetLine(): void {
    this.lineChunks = [];
    this.lineBytes = 0;
  }
}

function parseHead(line: Buffer): { tag: string | null; name: string | null; sub: string | null } {
  const m = HEAD.exec(line.subarray(0, HEAD_BYTES).toString('latin1'));
  if (!m) return { tag: null, name: null, sub: null };
  return { tag: m[1] as string, name: (m[2] as string).toUpperCase(), sub: m[3] ? m[3].toUpperCase() : null };
}
