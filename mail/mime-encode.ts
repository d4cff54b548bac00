// Transfer encodings of a composed part's body (RFC 2045 §6.7 quoted-printable, §6.8 base64), written
// for speed and byte for byte what nodemailer's encoders write (`wrap(encode(x), 76)` of its lib/qp and
// lib/base64, which its MimeNode.build() streams also produce), so serializeMime's output does not depend on
// which of the two made it. Theirs run a regex per output line and build the result by string
// concatenation: a quarter of a 100 kB message's composition (docs/decisions.md #59). Ours escape by one
// native regex pass and look character by character only at the lines long enough for soft breaks; text
// with a lone CR or LF (compose never makes one) is soft-wrapped by an octet loop with the same rules.
// test/mail/mime-encode.test.ts compares ours with theirs on random inputs.
import { isAscii } from 'node:buffer';
import v8 from 'node:v8';
import { hasLongerLines as theirHasLongerLines } from 'nodemailer/lib/mime-funcs';
import { STRING_CHUNK, WHOLE_STRING } from './string-chunks.js';

/** RFC 2045 §6.8 / §6.7: encoded lines hold at most 76 characters. */
export const MAX_ENCODED_LINE = 76;

const CR = 0x0d;
const LF = 0x0a;
const EQ = 0x3d;

// RFC 2045 §6.7 (1), (2), (3): octets written as themselves. TAB, CR, LF, 33-60 and 62-126, and space.
const LITERAL = new Uint8Array(256);
for (let i = 0; i < 256; i++)
  LITERAL[i] = i === 0x09 || i === LF || i === CR || (i >= 0x20 && i <= 0x7e && i !== EQ) ? 1 : 0;
const HEX = Buffer.from('0123456789ABCDEF', 'latin1');
// Where a soft break may follow (nodemailer's wrap breaks after the last of these within a line's last third).
const BREAK_AFTER = new Uint8Array(256);
for (const c of ' \t.,!?') BREAK_AFTER[c.charCodeAt(0)] = 1;

/** The quoted-printable octets of `src`, unwrapped (nodemailer's qp.encode). */
function qpEncodeBytes(src: Uint8Array): { buf: Buffer; len: number } {
  const n = src.length;
  const out = Buffer.allocUnsafe(n * 3);
  let o = 0;
  for (let i = 0; i < n; i++) {
    const c = src[i] as number;
    if (LITERAL[c]) {
      // RFC 2045 §6.7 (3): space or tab at the end of a line (or of the text) is encoded.
      if (c === 0x20 || c === 0x09) {
        const next = i + 1 < n ? src[i + 1] : -1;
        if (next !== -1 && next !== LF && next !== CR) {
          out[o++] = c;
          continue;
        }
      } else {
        out[o++] = c;
        continue;
      }
    }
    out[o++] = EQ;
    out[o++] = HEX[c >> 4] as number;
    out[o++] = HEX[c & 15] as number;
  }
  return { buf: out, len: o };
}

/**
 * Soft line breaks (RFC 2045 §6.7 (5)) into encoded text, by nodemailer's qp.wrap rules: a line ends at its
 * first CRLF when that fits; else after the last space or punctuation of its last third; else before an
 * escape sequence it would cut, and before the continuation octets of a UTF-8 character; a full-length
 * line gives up one character for the "=".
 */
function qpWrap(s: Buffer, len: number, lineLength: number): string {
  if (len <= lineLength) return s.toString('latin1', 0, len);
  const margin = Math.floor(lineLength / 3);
  // A soft break adds 3 octets to a line of at least 51 characters (62 when it backs off a UTF-8 character):
  // twice the input is room enough.
  const out = Buffer.allocUnsafe(len * 2 + 3);
  let o = 0;
  let pos = 0;
  // A byte loop: lines are short, and Buffer#copy's own overhead is more than the bytes it moves.
  const copy = (from: number, to: number) => {
    for (let i = from; i < to; i++) out[o++] = s[i] as number;
  };
  while (pos < len) {
    const end = Math.min(pos + lineLength, len);
    // A CRLF within the line: the line ends there.
    let crlf = -1;
    for (let i = pos; i < end - 1; i++) {
      if (s[i] === CR && s[i + 1] === LF) {
        crlf = i;
        break;
      }
    }
    if (crlf >= 0) {
      copy(pos, crlf + 2);
      pos = crlf + 2;
      continue;
    }
    if (s[end - 1] === LF) {
      copy(pos, end);
      pos = end;
      continue;
    }
    // A bare LF in the last third, with no line-break character after it: the line ends after it.
    const tailStart = Math.max(pos, end - margin);
    let lastTerm = -1;
    for (let i = end - 1; i >= tailStart; i--) {
      if (s[i] === LF || s[i] === CR) {
        lastTerm = i;
        break;
      }
    }
    if (lastTerm >= 0 && s[lastTerm] === LF) {
      copy(pos, lastTerm + 1);
      pos = lastTerm + 1;
      continue;
    }
    let lineEnd = end;
    let brokeAtSpace = false;
    if (end - pos > lineLength - margin) {
      for (let i = end - 1; i >= tailStart; i--) {
        if (BREAK_AFTER[s[i] as number]) {
          lineEnd = i + 1;
          brokeAtSpace = true;
          break;
        }
      }
    }
    if (
      !brokeAtSpace &&
      (s[end - 1] === EQ || (end - 2 >= pos && s[end - 2] === EQ) || (end - 3 >= pos && s[end - 3] === EQ))
    ) {
      // An escape cut short goes to the next line whole.
      if (s[end - 1] === EQ) lineEnd = end - 1;
      else if (end - 2 >= pos && s[end - 2] === EQ) lineEnd = end - 2;
      // And so do the octets of a UTF-8 character: continuation octets, then their lead octet.
      while (lineEnd - pos > 3 && lineEnd - pos < len - pos && !onlyEscapes(s, pos, lineEnd) && s[lineEnd - 3] === EQ) {
        const code = (hexValue(s[lineEnd - 2] as number) << 4) | hexValue(s[lineEnd - 1] as number);
        if (code < 0x80) break;
        lineEnd -= 3;
        if (code >= 0xc0) break;
      }
    }
    if (lineEnd === pos) lineEnd = end;
    if (lineEnd < len && s[lineEnd - 1] !== LF) {
      if (lineEnd - pos === lineLength) lineEnd -= s[lineEnd - 3] === EQ ? 3 : 1;
      copy(pos, lineEnd);
      out[o++] = EQ;
      out[o++] = CR;
      out[o++] = LF;
    } else {
      copy(pos, lineEnd);
    }
    pos = lineEnd;
  }
  return out.toString('latin1', 0, o);
}

/** Whether s[from, to) is one to four escape sequences and nothing else. */
function onlyEscapes(s: Buffer, from: number, to: number): boolean {
  const n = to - from;
  if (n % 3 !== 0 || n < 3 || n > 12) return false;
  for (let i = from; i < to; i += 3)
    if (s[i] !== EQ || !isHex(s[i + 1] as number) || !isHex(s[i + 2] as number)) return false;
  return true;
}
const isHex = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
const hexValue = (c: number) => (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);

// What quoted-printable writes as an escape: an octet outside RFC 2045 §6.7 (2)'s literal range (a run of them,
// which covers every non-ASCII character's UTF-8 octets), and a space or tab that ends a line or the text.
const ESCAPED = /[^\t\r\n\x20-\x3c\x3e-\x7e]+|[ \t](?=[\r\n]|$)/g;
const ESCAPE: string[] = [];
for (let b = 0; b < 256; b++) ESCAPE.push(`=${b < 16 ? '0' : ''}${b.toString(16).toUpperCase()}`);
/** The escapes of a run's UTF-8 octets (a lone surrogate as U+FFFD, as Buffer.from writes it). */
function escapeRun(run: string): string {
  let out = '';
  for (let i = 0; i < run.length; i++) {
    let c = run.charCodeAt(i);
    if (c < 0x80) {
      out += ESCAPE[c];
      continue;
    }
    if (c < 0x800) {
      out += (ESCAPE[0xc0 | (c >> 6)] as string) + ESCAPE[0x80 | (c & 63)];
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < run.length ? run.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        const cp = ((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000;
        out +=
          (ESCAPE[0xf0 | (cp >> 18)] as string) +
          ESCAPE[0x80 | ((cp >> 12) & 63)] +
          ESCAPE[0x80 | ((cp >> 6) & 63)] +
          ESCAPE[0x80 | (cp & 63)];
        i++;
        continue;
      }
      c = 0xfffd;
    }
    out += (ESCAPE[0xe0 | (c >> 12)] as string) + ESCAPE[0x80 | ((c >> 6) & 63)] + ESCAPE[0x80 | (c & 63)];
  }
  return out;
}

// RFC 5322 §2.3: CR and LF occur in a body only together, as CRLF. A bare one would reach the wire as
// is in a 7bit part (MailComposer converts a lone LF but not a lone CR). Text without a CR (what JSON
// bodies mostly are) takes a plain string replacement instead of the regex.
export function crlf(body: string): string {
  return body.includes('\r') ? body.replace(/\r\n|\r|\n/g, '\r\n') : body.replaceAll('\n', '\r\n');
}

/**
 * `text` (UTF-8) as quoted-printable lines of at most 76 characters: nodemailer's `qp.wrap(qp.encode(text), 76)`.
 * Text whose line breaks are all CRLF (what compose makes) takes the fast path: escapes by one native regex
 * pass, and only the lines long enough to be wrapped are looked at character by character. `plain` says the
 * text holds no C0 control but TAB, CR and LF and no non-ASCII character (mime-funcs' isPlainText, which
 * MimeNode has already run on its content): the only octets to escape are then "=" and DEL, which native
 * single-character replacements write, and a space or tab before a line break or at the end, which the
 * wrapping escapes as it meets each line's end.
 */
export function quotedPrintable(text: string, plain = false): string {
  return quotedPrintableLines(text, plain).text;
}

/** quotedPrintable, and whether its line breaks are known to be all CRLF (false: not known). */
export function quotedPrintableLines(text: string, plain = false): { text: string; crlfOnly: boolean } {
  const parts: string[] = [];
  const crlfOnly = quotedPrintableParts(text, plain, parts);
  return { text: parts.length === 1 ? (parts[0] as string) : parts.join(''), crlfOnly };
}

/**
 * quotedPrintableLines as pieces pushed onto `out`: the text's slices between soft breaks, and the breaks. For a
 * caller that joins them with more (compose's serializer), so that the message is one flat string made once: built
 * by concatenation, a 100 kB text's encoding was a rope of a few nodes a line, ~120 kB of garbage a message for the
 * young generation's collector. With `lfBreaks`, the text's line breaks are LFs alone (it holds no CR), written as
 * CRLF: the same pieces as for the text with CRLF line breaks, without a converted copy of the text (compose's LF
 * texts, what JSON bodies hold). Returns whether its line breaks are all CRLF.
 */
export function quotedPrintableParts(text: string, plain: boolean, out: string[], lfBreaks = false): boolean {
  if (text.length > WHOLE_STRING && quotedPrintableSegments(text, plain, out, lfBreaks, STRING_CHUNK)) return true;
  // A short text's choices below count its CRs, which an LF text does not hold yet: it is converted first.
  if (lfBreaks && text.length <= MAX_ENCODED_LINE) return quotedPrintableParts(crlf(text), plain, out);
  if (plain && text.length > MAX_ENCODED_LINE) {
    let enc = text;
    if (enc.includes('=')) enc = enc.replaceAll('=', '=3D');
    if (enc.includes('\x7f')) enc = enc.replaceAll('\x7f', '=7F');
    if (wrapCrlfText(enc, MAX_ENCODED_LINE, true, out, lfBreaks)) return true;
  }
  // The escapes are the same whatever the line breaks (CR and LF are literal, and whitespace before either is
  // escaped); the soft breaks of text with a lone CR or LF are qpWrap's.
  const enc = text.replace(ESCAPED, escapeRun);
  if (enc.length <= MAX_ENCODED_LINE) {
    out.push(enc);
    return false;
  }
  if (wrapCrlfText(enc, MAX_ENCODED_LINE, false, out, lfBreaks)) return true;
  out.push(qpWrap(Buffer.from(enc, 'latin1'), enc.length, MAX_ENCODED_LINE));
  return false;
}

/**
 * quotedPrintableParts of a long text a segment of whole lines at a time, about `segment` characters each, and each
 * segment's pieces joined into one string pushed onto `out`: so that neither a string nor an array of pieces of the
 * whole encoding is made (mail/string-chunks.ts). The same text once joined: soft breaks are made line by line, and a
 * segment ends just after a line break and starts a line. False, with nothing pushed, for a text whose line breaks are
 * not all CRLF (LF with `lfBreaks`), whose soft breaks qpWrap makes over the whole text, for one that would be a single
 * segment, and for one with a segment of a short text's length (which quotedPrintableParts encodes otherwise and calls
 * not CRLF-only): each of these the caller encodes whole. So a segment after a line longer than `segment` takes the
 * rest of the text with it when less than MIN_REST would be left.
 */
export function quotedPrintableSegments(
  text: string,
  plain: boolean,
  out: string[],
  lfBreaks: boolean,
  segment: number,
): boolean {
  const len = text.length;
  if (len <= segment + MIN_REST) return false;
  const first = out.length;
  const pieces: string[] = [];
  for (let from = 0; from < len;) {
    let end = len;
    if (len - from > segment + MIN_REST) {
      const lf = text.lastIndexOf('\n', from + segment - 1);
      end = lf >= from ? lf + 1 : text.indexOf('\n', from + segment) + 1 || len;
      if (len - end < MIN_REST) end = len;
    }
    // A text of one segment (a line as long) is the whole text's way.
    if (from === 0 && end === len) return false;
    if (!quotedPrintableParts(text.slice(from, end), plain, pieces, lfBreaks)) {
      out.length = first;
      return false;
    }
    out.push(pieces.length === 1 ? pieces[0]! : pieces.join(''));
    pieces.length = 0;
    from = end;
  }
  return true;
}

/** Characters a segment of quotedPrintableSegments leaves at least after it: more than a short text's. */
const MIN_REST = 2 * MAX_ENCODED_LINE;

/** `text` as quoted-printable by the octet loops alone: what quotedPrintable's fast path is checked against. */
export function quotedPrintableBytes(text: string): string {
  const { buf, len } = qpEncodeBytes(Buffer.from(text, 'utf8'));
  return qpWrap(buf, len, MAX_ENCODED_LINE);
}

/**
 * qpWrap's rules for encoded text whose only line breaks are CRLF, pushed onto `out` (quotedPrintableParts); false,
 * with nothing pushed, for any other text. With `unescapedBlanks`, the text's spaces and tabs before a line break or
 * at its end are still to be escaped, and are, line by line. A line (CRLF excluded) of up to lineLength - 2
 * characters is taken whole with its CRLF; so is a last line (none after it) of up to lineLength - margin. Only
 * longer ones get soft breaks, where a window of lineLength characters from the current position may reach the
 * line's CR but never past it. With `lfBreaks`, text whose line breaks are LFs alone, written as CRLF.
 */
function wrapCrlfText(
  s: string,
  lineLength: number,
  unescapedBlanks: boolean,
  out: string[],
  lfBreaks = false,
): boolean {
  const len = s.length;
  const margin = Math.floor(lineLength / 3);
  const first = out.length;
  // The output between soft breaks is pushed whole: one slice per soft break, then the rest.
  let copied = 0;
  let start = 0;
  while (start < len) {
    // Native single-character scans: the next CR must be the next LF's own, else false (not CRLF-only text).
    const cr = lfBreaks ? -1 : s.indexOf('\r', start);
    const lf = s.indexOf('\n', start);
    if (!lfBreaks && (cr < 0 ? lf >= 0 : lf !== cr + 1)) {
      out.length = first;
      return false;
    }
    // An LF text's LF stands where a CRLF text's CR does: the windows below reach it but never cut after it (it is
    // neither a place to break nor an "="), so both give the same soft breaks.
    const lineBreak = lfBreaks ? lf : cr;
    const lineEnd = lineBreak < 0 ? len : lineBreak;
    const hasBreak = lineEnd < len;
    const next = hasBreak ? lineEnd + (lfBreaks ? 1 : 2) : len;
    if (unescapedBlanks && lineEnd > start) {
      const last = s.charCodeAt(lineEnd - 1);
      if (last === 0x20 || last === 0x09) {
        // RFC 2045 §6.7 (3): the space or tab that ends the line is escaped. Lines are wrapped one by one (the
        // window never passes a CRLF), so the escaped line is wrapped on its own, the end of the text with it.
        const line = s.slice(start, lineEnd - 1) + (last === 0x20 ? '=20' : '=09') + s.slice(lineEnd, next);
        if (start > copied) out.push(s.slice(copied, start));
        // One line with its line break, if any.
        wrapCrlfText(line, lineLength, false, out, lfBreaks);
        copied = start = next;
        continue;
      }
    }
    if (lineEnd - start > (hasBreak ? lineLength - 2 : lineLength - margin)) {
      let p = start;
      // With a CRLF after it, the rest of the line is taken with it once a window holds both.
      while (hasBreak ? lineEnd - p > lineLength - 2 : p < lineEnd) {
        const end = Math.min(p + lineLength, hasBreak ? lineEnd + 1 : lineEnd);
        const tail = Math.max(p, end - margin);
        let cut = end;
        let brokeAtSpace = false;
        if (end - p > lineLength - margin) {
          for (let i = end - 1; i >= tail; i--) {
            if (BREAK_AFTER[s.charCodeAt(i)]) {
              cut = i + 1;
              brokeAtSpace = true;
              break;
            }
          }
        }
        if (!brokeAtSpace) {
          const at1 = s.charCodeAt(end - 1) === EQ;
          const at2 = end - 2 >= p && s.charCodeAt(end - 2) === EQ;
          if (at1 || at2 || (end - 3 >= p && s.charCodeAt(end - 3) === EQ)) {
            if (at1) cut = end - 1;
            else if (at2) cut = end - 2;
            while (
              cut - p > 3 &&
              (hasBreak || cut < len) &&
              !onlyEscapesText(s, p, cut) &&
              s.charCodeAt(cut - 3) === EQ
            ) {
              const code = (hexValue(s.charCodeAt(cut - 2)) << 4) | hexValue(s.charCodeAt(cut - 1));
              if (code < 0x80) break;
              cut -= 3;
              if (code >= 0xc0) break;
            }
          }
        }
        if (cut === p) cut = end;
        // A cut at the end of the text is no soft break: the rest is copied after the loop. (A line with a break after
        // it is not the end: an LF text's LF can be the last character, where a CRLF text's CR cannot.)
        if (!hasBreak && cut >= len) break;
        if (cut - p === lineLength) cut -= s.charCodeAt(cut - 3) === EQ ? 3 : 1;
        out.push(s.slice(copied, cut), '=\r\n');
        copied = p = cut;
      }
    }
    // An LF text's pieces end at each line's end, where its CRLF is written.
    if (lfBreaks && hasBreak) {
      if (lineEnd > copied) out.push(s.slice(copied, lineEnd));
      out.push('\r\n');
      copied = next;
    }
    start = next;
  }
  if (copied < len) out.push(copied === 0 ? s : s.slice(copied));
  return true;
}

function onlyEscapesText(s: string, from: number, to: number): boolean {
  const n = to - from;
  if (n % 3 !== 0 || n < 3 || n > 12) return false;
  for (let i = from; i < to; i += 3)
    if (s.charCodeAt(i) !== EQ || !isHex(s.charCodeAt(i + 1)) || !isHex(s.charCodeAt(i + 2))) return false;
  return true;
}

/** `data` (UTF-8 when a string) as base64 lines of 76 characters, CRLF between them and none after the last. */
export function base64Lines(data: string | Buffer): string {
  const b64 = (typeof data === 'string' ? Buffer.from(data, 'utf8') : data).toString('base64');
  if (b64.length <= MAX_ENCODED_LINE) return b64;
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += MAX_ENCODED_LINE) lines.push(b64.slice(i, i + MAX_ENCODED_LINE));
  return lines.join('\r\n');
}

/** Octets encoded at a time by base64Pieces: 800 lines' worth (76 characters are 57 octets), 62,400 characters. */
export const BASE64_CHUNK = 57 * 800;

/**
 * base64Lines(data) pushed onto `out`: in one piece, or, for more than BASE64_CHUNK octets, in pieces of 800 lines with
 * the CRLFs between them pieces of their own (mail/string-chunks.ts: a 1 MB attachment is 1.4 MB of base64). A chunk
 * of whole 57-octet groups encodes without padding to whole lines, so the pieces are the whole's lines.
 */
export function base64Pieces(data: string | Buffer, out: string[]): void {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  if (bytes.length <= BASE64_CHUNK) {
    out.push(base64Lines(bytes));
    return;
  }
  for (let from = 0; from < bytes.length; from += BASE64_CHUNK) {
    if (from > 0) out.push('\r\n');
    out.push(base64Lines(bytes.subarray(from, from + BASE64_CHUNK)));
  }
}

// C0 controls other than TAB, LF and CR, one string each.
const CONTROLS = Array.from({ length: 32 }, (_, c) => String.fromCharCode(c)).filter((c) => !'\t\n\r'.includes(c));

/**
 * nodemailer's mime-funcs isPlainText(text): no C0 control but TAB, LF and CR, and no non-ASCII code unit. Its
 * one regular expression, /[\x00-\x08\x0b\x0c\x0e-\x1f\u0080-\uFFFF]/, steps through a long ASCII text a
 * character at a time (~150 µs at 100 kB here); isAsciiText (the UTF-8 length) and a native search for each control
 * (~30 µs for all 29) give the same answer (test/mail/mime-encode.test.ts) in about a third of the time.
 */
export function isPlainText(text: string): boolean {
  return isAsciiText(text) && !CONTROLS.some((c) => text.includes(c));
}

// Node 22.15 and later (the service runs on the Node that package.json pins); on an older one every string takes
// the UTF-8 length's way.
const oneByte: (s: string) => boolean = v8.isStringOneByteRepresentation ?? (() => false);

/**
 * Whether every code unit of `text` is below 0x80, by its UTF-8 length (equal to the length in code units only when
 * every unit is below 0x80; a lone surrogate counts 3), which V8 counts a character at a time: ~14 µs for 100 kB on
 * the twenty-second set's machine (README, Benchmarks). A caller that has `text`'s latin1 octets already passes them:
 * for a string V8 keeps one octet a character they are its characters, which simdutf looks at many at a time
 * (buffer.isAscii, ~1 µs); a string kept two octets a character may hold code units above 0xff, which latin1 cuts to
 * their low octet ('Ł', 0x141, to 'A'), so it is counted. Making the octets for this alone costs more than counting.
 */
export function isAsciiText(text: string, latin1?: Buffer): boolean {
  if (latin1 !== undefined && oneByte(text)) return isAscii(latin1);
  return Buffer.byteLength(text, 'utf8') === text.length;
}

/**
 * nodemailer's mime-funcs hasLongerLines(text, lineLength): whether a line holds more than lineLength characters,
 * where CR, LF, U+2028 and U+2029 end a line (its `/^.{lineLength+1,}/m`), and any text over 128 kB counts as
 * long. Its regular expression tries every position of a text whose lines are all short: ~370 µs for 100 kB of
 * 72-character lines here, asked of every text part compose makes. A native search for the next CR and the next LF
 * steps a line at a time instead (~30 µs); text holding U+2028 or U+2029 (none in ASCII, which a one-byte string
 * tells V8 at once) is left to theirs. test/mail/mime-encode.test.ts compares the two on random text.
 */
export function hasLongerLines(text: string, lineLength: number): boolean {
  const len = text.length;
  if (len > 128 * 1024) return true;
  if (len <= lineLength) return false;
  if (text.includes('\u2028') || text.includes('\u2029')) return theirHasLongerLines(text, lineLength);
  // The next CR and the next LF at or after `start`, len for none; each searched again only once it is behind.
  let cr = -1;
  let lf = -1;
  for (let start = 0; ;) {
    if (cr < start) cr = indexOrEnd(text, '\r', start);
    if (lf < start) lf = indexOrEnd(text, '\n', start);
    const end = Math.min(cr, lf);
    if (end - start > lineLength) return true;
    if (end === len) return false;
    start = end + 1;
  }
}

function indexOrEnd(text: string, c: string, from: number): number {
  const i = text.indexOf(c, from);
  return i < 0 ? text.length : i;
}

const LETTER = /[A-Za-z]/;

/**
 * The transfer encoding nodemailer's MimeNode gives a text/* part of string content (getTransferEncoding):
 * 7bit for plain text with short lines (nothing over 128 kB is measured: such a text counts as long); else
 * quoted-printable when the text has more ASCII letters than controls and non-ASCII code units, else base64.
 * The same answer in one pass at most, stopped once the rest of the text cannot change it, with the plain case
 * left to hasLongerLines and one regex scan.
 */
export function textTransferEncoding(
  text: string,
  /** Whether the text is plain (isPlainText), when the caller knows it already. */
  plain: boolean = isPlainText(text),
  /** Whether a plain text has lines over 76 characters (hasLongerLines), when the caller knows it already. */
  longLines?: boolean,
): '7bit' | 'quoted-printable' | 'base64' {
  if (plain) {
    if (!(longLines ?? hasLongerLines(text, MAX_ENCODED_LINE))) return '7bit';
    // Plain: nothing to weigh against the letters.
    return LETTER.test(text) ? 'quoted-printable' : 'base64';
  }
  // letters - other, in blocks: each code unit left moves it by one at most, so the answer is often known
  // before the end (a text of mostly letters, or of mostly non-ASCII, is decided a little past half way).
  let lead = 0;
  const n = text.length;
  for (let from = 0; from < n; from += WEIGH_BLOCK) {
    const to = Math.min(n, from + WEIGH_BLOCK);
    for (let i = from; i < to; i++) {
      const c = text.charCodeAt(i);
      lead += c < 0x80 ? (WEIGHT[c] as number) : -1;
    }
    const left = n - to;
    if (lead > left) return 'quoted-printable';
    if (lead + left <= 0) return 'base64';
  }
  return 'base64';
}
// What each ASCII code unit adds to letters - other: 1 for a letter, -1 for a control but TAB, LF and CR
// (every non-ASCII code unit is -1 too).
const WEIGHT = new Int8Array(128);
for (let c = 0; c < 128; c++)
  WEIGHT[c] =
    (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)
      ? 1
      : c <= 0x08 || c === 0x0b || c === 0x0c || (c >= 0x0e && c <= 0x1f)
        ? -1
        : 0;
const WEIGH_BLOCK = 4096;
