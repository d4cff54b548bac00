// Header values of a received message, parsed the way an IMAP server and a webmail list need them:
// the header block split into fields (mailsplit's Headers, which also knows mbox "From " lines),
// structured values with parameters (RFC 2045 §5.1, RFC 2231), address lists with groups
// (RFC 5322 §3.4), RFC 2047 encoded words and dates (RFC 5322 §3.3). Pure: no I/O.
//
// Two forms of every display field: the raw value IMAP returns in ENVELOPE and BODYSTRUCTURE
// (RFC 3501 §7.4.2 passes encoded words through for the client to decode), and a decoded one for
// our own lists. Raw 8-bit header bytes (RFC 6532, or just broken mail) are read as UTF-8 when they
// are valid UTF-8 and as Latin-1 otherwise, so a stored string always round-trips through JSON.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Headers } = require('@zone-eu/mailsplit') as {
  Headers: new (raw: Buffer) => { getList(): { key: string; line: string }[] };
};

export interface HeaderField {
  /** Lower case field name. */
  name: string;
  /** The field body unfolded (RFC 5322 §2.2.3: CRLF removed) and trimmed; encoded words kept. */
  value: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as text: UTF-8 when valid, else Latin-1 (every byte maps to one character). */
export function bytesToText(bytes: Buffer): string {
  try {
    return utf8.decode(bytes);
  } catch {
    return bytes.toString('latin1');
  }
}

/** The fields of a header block (with or without its closing blank line), in order. */
export function parseHeaderBlock(raw: Buffer): HeaderField[] {
  const fields: HeaderField[] = [];
  for (const { key, line } of new Headers(raw).getList()) {
    const colon = line.indexOf(':');
    if (!key || colon < 0) continue; // a line that is no field at all (RFC 5322 §2.2 wants a colon)
    const value = bytesToText(Buffer.from(line.slice(colon + 1), 'latin1'));
    fields.push({ name: key, value: value.replace(/\r?\n/g, '').trim() });
  }
  return fields;
}

/**
 * Where each field of a raw header block lies, [start, end): its first line and the folded lines that continue it
 * (RFC 5322 §2.2.3), line ends included. One pass, without decoding anything.
 */
export function* fieldSpans(header: Buffer): Generator<[number, number]> {
  let start = 0;
  while (start < header.length) {
    // The field runs to the end of the last line not followed by a continuation line.
    let end = start;
    for (;;) {
      const lf = header.indexOf(0x0a, end);
      end = lf < 0 ? header.length : lf + 1;
      if (end >= header.length || (header[end] !== 0x20 && header[end] !== 0x09)) break;
    }
    yield [start, end];
    start = end;
  }
}

/** The first field of that name, or null (RFC 5322 §3.6 allows most of them once). */
export function firstField(fields: HeaderField[], name: string): string | null {
  const f = fields.find((x) => x.name === name);
  return f ? f.value : null;
}

// ---- charsets and RFC 2047 encoded words -------------------------------------------------------

const CHARSET_ALIASES: Record<string, string> = {
  utf8: 'utf-8',
  'ks_c_5601-1987': 'euc-kr',
  ascii: 'us-ascii',
  'unicode-1-1-utf-7': 'utf-8',
};

/** Decode bytes in a named charset; an unknown label falls back to bytesToText. */
export function decodeCharset(bytes: Buffer, charset: string | null | undefined): string {
  // RFC 2231 §5: a charset may carry "*language" in an encoded word.
  const label = (charset ?? '').split('*')[0]!.trim().toLowerCase();
  if (!label) return bytesToText(bytes);
  try {
    return new TextDecoder(CHARSET_ALIASES[label] ?? label).decode(bytes);
  } catch {
    return bytesToText(bytes);
  }
}

const ENCODED_WORD = /=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g;

function wordBytes(encoding: string, text: string): Buffer {
  if (encoding.toUpperCase() === 'B') return Buffer.from(text, 'base64');
  // RFC 2047 §4.2: "_" is a space, "=XX" an octet.
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '_') out.push(0x20);
    else if (c === '=' && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3))) {
      out.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else out.push(c.charCodeAt(0) & 0xff);
  }
  return Buffer.from(out);
}

/**
 * RFC 2047 encoded words decoded. Whitespace between two adjacent encoded words is dropped
 * (§6.2), and adjacent words in one charset are joined before decoding, because senders split a
 * multi-byte character across two words although §5 forbids it.
 */
export function decodeWords(value: string): string {
  if (!value.includes('=?')) return value;
  const pieces: ({ text: string } | { charset: string; bytes: Buffer })[] = [];
  let last = 0;
  for (const m of value.matchAll(ENCODED_WORD)) {
    const between = value.slice(last, m.index);
    const prev = pieces[pieces.length - 1];
    if (!(prev && 'bytes' in prev && /^[ \t]*$/.test(between))) {
      if (between) pieces.push({ text: between });
    }
    const charset = m[1]!.toLowerCase();
    const bytes = wordBytes(m[2]!, m[3]!);
    const before = pieces[pieces.length - 1];
    if (before && 'bytes' in before && before.charset === charset) before.bytes = Buffer.concat([before.bytes, bytes]);
    else pieces.push({ charset, bytes });
    last = m.index + m[0].length;
  }
  if (last < value.length) pieces.push({ text: value.slice(last) });
  return pieces.map((p) => ('text' in p ? p.text : decodeCharset(p.bytes, p.charset))).join('');
}

// ---- structured values: Content-Type, Content-Disposition (RFC 2045 §5.1, RFC 2183 §2) ----------

export interface StructuredValue {
  /** Lower case, e.g. "text/plain" or "attachment"; "" when the value is missing. */
  value: string;
  /**
   * Parameters with lower-case names, in order. RFC 2231 continuations are joined; a parameter with
   * an encoded section keeps its "*" and its charset'language'%XX form, as Dovecot returns it in
   * BODYSTRUCTURE (RFC 3501 §7.4.2 returns parameters as they are, the client decodes).
   */
  params: [string, string][];
}

function stripComments(s: string): string {
  let out = '';
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quoted) {
      out += c;
      if (c === '\\' && i + 1 < s.length) out += s[++i];
      else if (c === '"') quoted = false;
    } else if (c === '"' && depth === 0) {
      quoted = true;
      out += c;
    } else if (c === '(') depth++;
    else if (c === ')' && depth > 0) depth--;
    else if (depth === 0) out += c;
  }
  return out;
}

/** Parses `value; name=token; name="quoted"` tolerantly: bad pieces are skipped, never thrown. */
export function parseStructured(raw: string | null): StructuredValue {
  if (raw === null) return { value: '', params: [] };
  const s = stripComments(raw);
  const semi = s.indexOf(';');
  const value = (semi < 0 ? s : s.slice(0, semi)).trim().toLowerCase();
  const found: [string, string][] = [];
  let i = semi < 0 ? s.length : semi + 1;
  while (i < s.length) {
    const eq = s.indexOf('=', i);
    const nextSemi = s.indexOf(';', i);
    if (eq < 0 || (nextSemi >= 0 && nextSemi < eq)) {
      i = nextSemi < 0 ? s.length : nextSemi + 1;
      continue;
    }
    const name = s.slice(i, eq).trim().toLowerCase();
    let j = eq + 1;
    while (s[j] === ' ' || s[j] === '\t') j++;
    let val = '';
    if (s[j] === '"') {
      for (j++; j < s.length && s[j] !== '"'; j++) val += s[j] === '\\' && j + 1 < s.length ? s[++j] : s[j];
      const after = s.indexOf(';', j);
      i = after < 0 ? s.length : after + 1;
    } else {
      const end = s.indexOf(';', j);
      val = s.slice(j, end < 0 ? s.length : end).trim();
      i = end < 0 ? s.length : end + 1;
    }
    if (name && /^[\x21-\x7e]+$/.test(name)) found.push([name, val]);
  }
  return { value, params: joinContinuations(found) };
}

/** RFC 2231 §3-§4: name*0, name*1*, … joined in order of their section number. */
function joinContinuations(params: [string, string][]): [string, string][] {
  const out: [string, string][] = [];
  const sections = new Map<string, { n: number; encoded: boolean; value: string }[]>();
  for (const [name, value] of params) {
    const m = /^(.+?)\*(\d+)(\*?)$/.exec(name);
    if (!m) {
      out.push([name, value]);
      continue;
    }
    const base = m[1]!;
    if (!sections.has(base)) {
      sections.set(base, []);
      out.push([base, '']); // placeholder keeps the order of first appearance
    }
    sections.get(base)!.push({ n: Number(m[2]), encoded: m[3] === '*', value });
  }
  for (const [base, parts] of sections) {
    parts.sort((a, b) => a.n - b.n);
    const encoded = parts[0]!.encoded;
    // A plain section inside an encoded parameter is %-escaped so that the joined value decodes as one.
    const value = parts
      .map((p) => (encoded && !p.encoded ? p.value.replace(/[^A-Za-z0-9!#$&+\-.^_`{}~]/g, pct) : p.value))
      .join('');
    const at = out.findIndex(([n, v]) => n === base && v === '');
    out[at] = [encoded ? `${base}*` : base, value];
  }
  return out;
}

function pct(c: string): string {
  return [...Buffer.from(c, 'utf8')].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join('');
}

/** A parameter's value decoded for display: RFC 2231 `charset'lang'%XX`, or encoded words (common, §5 of 2047). */
export function paramText(params: [string, string][], name: string): string | null {
  for (const [n, v] of params) {
    if (n === `${name}*`) {
      const m = /^([^']*)'[^']*'(.*)$/.exec(v);
      if (!m) return v;
      return decodeCharset(Buffer.from(unescapeHex(m[2]!)), m[1] || 'us-ascii');
    }
  }
  for (const [n, v] of params) if (n === name) return decodeWords(v);
  return null;
}

function unescapeHex(s: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      out.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else out.push(...Buffer.from(s[i]!, 'utf8'));
  }
  return out;
}

// ---- addresses (RFC 5322 §3.4) and the IMAP envelope (RFC 3501 §7.4.2) --------------------------

/**
 * One ENVELOPE address: a mailbox, or a group marker. RFC 3501 §7.4.2: a group starts with
 * host null and the group name as mailbox, and ends with mailbox and host both null.
 */
export interface EnvelopeAddress {
  /** The display name as written (quotes removed, encoded words kept), or null. */
  name: string | null;
  /** The obsolete source route (RFC 5322 §4.4 obs-route), or null. */
  adl: string | null;
  mailbox: string | null;
  /** null only for group markers; a mailbox written without a domain gets "" instead. */
  host: string | null;
}

/** An address for display: the name decoded, the address as mailbox@host. */
export interface DisplayAddress {
  name: string;
  address: string;
}

type Token = { t: 'atom' | 'quoted' | 'comment' | 'angle' | 'special'; v: string };

function tokenize(s: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c === ' ' || c === '\t' || c === '\r' || c === '\n') i++;
    else if (c === '"') {
      let v = '';
      for (i++; i < s.length && s[i] !== '"'; i++) v += s[i] === '\\' && i + 1 < s.length ? s[++i] : s[i];
      i++;
      out.push({ t: 'quoted', v });
    } else if (c === '(') {
      let depth = 1;
      let v = '';
      for (i++; i < s.length && depth > 0; i++) {
        if (s[i] === '\\' && i + 1 < s.length) v += s[++i];
        else if (s[i] === '(') (depth++, (v += '('));
        else if (s[i] === ')') depth-- > 1 && (v += ')');
        else v += s[i];
      }
      out.push({ t: 'comment', v: v.trim() });
    } else if (c === '<') {
      const end = s.indexOf('>', i);
      out.push({ t: 'angle', v: s.slice(i + 1, end < 0 ? s.length : end).trim() });
      i = end < 0 ? s.length : end + 1;
    } else if (c === ',' || c === ':' || c === ';') {
      out.push({ t: 'special', v: c });
      i++;
    } else {
      let v = '';
      while (i < s.length && !' \t\r\n"(<,:;'.includes(s[i]!)) v += s[i++];
      out.push({ t: 'atom', v });
    }
  }
  return out;
}

function phrase(tokens: Token[]): string | null {
  const words = tokens.filter((x) => x.t === 'atom' || x.t === 'quoted').map((x) => x.v);
  return words.length ? words.join(' ') : null;
}

function mailboxFrom(tokens: Token[]): EnvelopeAddress | null {
  if (!tokens.length) return null;
  const angle = tokens.findIndex((x) => x.t === 'angle');
  let name: string | null;
  let spec: string;
  let adl: string | null = null;
  if (angle >= 0) {
    name = phrase(tokens.slice(0, angle));
    spec = tokens[angle]!.v;
    // RFC 5322 §4.4: obs-route "@a,@b:" before the addr-spec.
    const route = /^(@[^:]*):(.*)$/.exec(spec);
    if (route) [adl, spec] = [route[1]!, route[2]!];
  } else {
    spec = tokens
      .filter((x) => x.t !== 'comment')
      .map((x) => (x.t === 'quoted' ? `"${x.v}"` : x.v))
      .join('');
    // Old style "user@host (Full Name)": the comment is the only name there is.
    name = tokens.find((x) => x.t === 'comment' && x.v)?.v ?? null;
  }
  spec = spec.replace(/\s+/g, '');
  // A phrase or a comment alone is no mailbox (RFC 5322 §3.4 needs an addr-spec).
  if (!spec) return null;
  const at = spec.lastIndexOf('@');
  return {
    name: name === null || name === '' ? null : name,
    adl,
    mailbox: at < 0 ? spec : spec.slice(0, at),
    host: at < 0 ? '' : spec.slice(at + 1),
  };
}

/** An address list with group syntax; null when there is no address in it (RFC 3501: NIL). */
export function parseAddressList(raw: string | null): EnvelopeAddress[] | null {
  if (raw === null) return null;
  const out: EnvelopeAddress[] = [];
  let current: Token[] = [];
  let inGroup = false;
  const flush = (): void => {
    const a = mailboxFrom(current);
    if (a) out.push(a);
    current = [];
  };
  for (const tok of tokenize(raw)) {
    if (tok.t === 'special' && tok.v === ',') flush();
    else if (tok.t === 'special' && tok.v === ':' && !inGroup && !current.some((x) => x.t === 'angle')) {
      out.push({ name: null, adl: null, mailbox: phrase(current) ?? '', host: null });
      current = [];
      inGroup = true;
    } else if (tok.t === 'special' && tok.v === ';' && inGroup) {
      flush();
      out.push({ name: null, adl: null, mailbox: null, host: null });
      inGroup = false;
    } else if (tok.t === 'special') current.push({ t: 'atom', v: tok.v });
    else current.push(tok);
  }
  flush();
  if (inGroup) out.push({ name: null, adl: null, mailbox: null, host: null }); // unterminated group
  return out.length ? out : null;
}

export function displayAddresses(list: EnvelopeAddress[] | null): DisplayAddress[] {
  return (list ?? [])
    .filter((a) => a.host !== null)
    .map((a) => ({
      name: a.name === null ? '' : decodeWords(a.name),
      address: a.host ? `${a.mailbox}@${a.host}` : (a.mailbox ?? ''),
    }));
}

/** RFC 3501 §7.4.2, field for field; strings are the raw unfolded values. */
export interface Envelope {
  date: string | null;
  subject: string | null;
  from: EnvelopeAddress[] | null;
  sender: EnvelopeAddress[] | null;
  replyTo: EnvelopeAddress[] | null;
  to: EnvelopeAddress[] | null;
  cc: EnvelopeAddress[] | null;
  bcc: EnvelopeAddress[] | null;
  inReplyTo: string | null;
  messageId: string | null;
}

/** The same message decoded for people: subject and names with RFC 2047 words decoded. */
export interface EnvelopeDisplay {
  subject: string;
  from: DisplayAddress[];
  to: DisplayAddress[];
  cc: DisplayAddress[];
  bcc: DisplayAddress[];
  replyTo: DisplayAddress[];
}

export function envelopeOf(fields: HeaderField[]): Envelope {
  const from = parseAddressList(firstField(fields, 'from'));
  // RFC 3501 §7.4.2: absent or empty Sender and Reply-To take the value of From.
  const sender = parseAddressList(firstField(fields, 'sender'));
  const replyTo = parseAddressList(firstField(fields, 'reply-to'));
  return {
    date: firstField(fields, 'date'),
    subject: firstField(fields, 'subject'),
    from,
    sender: sender && sender.length ? sender : from,
    replyTo: replyTo && replyTo.length ? replyTo : from,
    to: parseAddressList(firstField(fields, 'to')),
    cc: parseAddressList(firstField(fields, 'cc')),
    bcc: parseAddressList(firstField(fields, 'bcc')),
    inReplyTo: firstField(fields, 'in-reply-to'),
    messageId: firstField(fields, 'message-id'),
  };
}

export function displayOf(envelope: Envelope): EnvelopeDisplay {
  return {
    subject: envelope.subject === null ? '' : decodeWords(envelope.subject),
    from: displayAddresses(envelope.from),
    to: displayAddresses(envelope.to),
    cc: displayAddresses(envelope.cc),
    bcc: displayAddresses(envelope.bcc),
    replyTo: displayAddresses(envelope.replyTo),
  };
}

/** The msg-id without its angle brackets (RFC 5322 §3.6.4), or null when there is none. */
export function normalizeMessageId(raw: string | null): string | null {
  if (raw === null) return null;
  const m = /<([^<>\s]+)>/.exec(raw);
  const id = m ? m[1]! : raw.trim().split(/\s+/)[0]!;
  return id ? id : null;
}

/**
 * A Date field (RFC 5322 §3.3) as an ISO 8601 UTC string, or null when unreadable. Comments such
 * as "(CEST)" are dropped; two-digit years follow §4.3 (below 50 is 20xx), which V8 also does.
 */
export function normalizeDate(raw: string | null): string | null {
  if (raw === null) return null;
  const s = stripComments(raw).replace(/\s+/g, ' ').trim();
  if (!s) return null;
  let ms = Date.parse(s);
  // "Mon, 3 Jun 2024 10:00:00 +0200 +0200"-style junk after the zone: retry on the first five words.
  if (Number.isNaN(ms))
    ms = Date.parse(
      s
        .replace(/^[A-Za-z]{3},\s*/, '')
        .split(' ')
        .slice(0, 5)
        .join(' '),
    );
  if (Number.isNaN(ms)) return null;
  return new Date(ms).toISOString();
}
