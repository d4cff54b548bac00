// SEARCH (RFC 3501 §6.4.4, RFC 7162 §3.1.5 MODSEQ) evaluated over one message at a time: the parsed key
// tree (imap/parse-search.ts) against the message's metadata, its stored envelope and MIME tree, and
// only when a key needs them its header or body bytes. Keys are ranked by what they cost — metadata,
// then the envelope, then the header bytes, then the body — and AND and OR try the cheaper side first,
// so a body is read only for messages every cheaper key has let through.
import type { ImapDate, SearchKey } from './command-types.js';
import type { Envelope, EnvelopeAddress } from '../mail/mime-header.js';
import { decodeCharset, decodeWords, parseHeaderBlock, type HeaderField } from '../mail/mime-header.js';
import { transferDecode, type MimeEntity, type MimeTree } from '../mail/mime-tree.js';
import { sequenceSetHas } from './sequence-set.js';

/** What SEARCH knows of a message before reading any of its bytes. */
export interface SearchMessage {
  /** Message sequence number in the session's view (RFC 3501 §2.3.1.2). */
  seq: number;
  uid: number;
  modseq: bigint;
  flags: readonly string[];
  /** RFC 3501 §2.3.2 \Recent, which is per session. */
  recent: boolean;
  internalDate: Date;
  /** RFC822.SIZE: prefix plus stored body. */
  size: number;
  tree: MimeTree;
  /** Octets of the receipt prefix served before the stored body (imap/fetch-sections.ts). */
  prefixLength: number;
  /** The backend's handle for `read` (imap/backend.ts MessageMeta.ref). */
  ref?: unknown;
}

export interface SearchScope {
  /** What "*" stands for: the message count in a sequence set, the largest UID in a UID set. */
  maxSeq: number;
  maxUid: number;
  /** Octets [start, end) of the message as served (prefix + stored body). */
  read(m: SearchMessage, start: number, end: number): Promise<Buffer>;
}

/** Ranks of cost: what a key needs beyond the row. */
const META = 0;
const ENVELOPE = 1;
const HEADER = 2;
const BODY = 3;

/** Header fields whose (first) value the stored envelope holds as written. */
const ENVELOPE_FIELDS: Record<string, (e: Envelope) => string | null> = {
  subject: (e) => e.subject,
  date: (e) => e.date,
  'message-id': (e) => e.messageId,
  'in-reply-to': (e) => e.inReplyTo,
};

export function keyCost(key: SearchKey): number {
  switch (key.key) {
    case 'FROM':
    case 'TO':
    case 'CC':
    case 'BCC':
    case 'SUBJECT':
    case 'SENTBEFORE':
    case 'SENTON':
    case 'SENTSINCE':
      return ENVELOPE;
    case 'HEADER':
      return key.field.toLowerCase() in ENVELOPE_FIELDS ? ENVELOPE : HEADER;
    case 'BODY':
    case 'TEXT':
      return BODY;
    case 'NOT':
      return keyCost(key.operand);
    case 'OR':
      return Math.max(keyCost(key.left), keyCost(key.right));
    case 'AND':
      return Math.max(META, ...key.operands.map(keyCost));
    default:
      return META;
  }
}

/** Bytes read and decoded once per message, whichever keys ask for them. */
class Loaded {
  private headerFields: Promise<HeaderField[]> | null = null;
  private headerText: Promise<string> | null = null;
  private bodyText: Promise<string> | null = null;

  readonly m: SearchMessage;
  private readonly scope: SearchScope;

  constructor(m: SearchMessage, scope: SearchScope) {
    this.m = m;
    this.scope = scope;
  }

  /** The top-level header, prefix included: [0, prefix + header of the stored body). */
  private headerBytes(): Promise<Buffer> {
    return this.scope.read(this.m, 0, this.m.prefixLength + this.m.tree.body.bodyStart);
  }

  fields(): Promise<HeaderField[]> {
    return (this.headerFields ??= this.headerBytes().then((b) => parseHeaderBlock(b)));
  }

  /** The header as text for TEXT: fields unfolded, encoded words decoded (RFC 2047), lower case. */
  header(): Promise<string> {
    return (this.headerText ??= this.fields().then((fs) =>
      fs.map((f) => `${f.name}: ${decodeWords(f.value)}`.toLowerCase()).join('\n'),
    ));
  }

  /** The text of the body for BODY: every text part decoded, lower case (see bodyText). */
  body(): Promise<string> {
    const { m, scope } = this;
    return (this.bodyText ??= (async () => {
      const start = m.prefixLength + m.tree.body.bodyStart;
      const end = m.prefixLength + m.tree.body.bodyEnd;
      const bytes = end > start ? await scope.read(m, start, end) : Buffer.alloc(0);
      return bodyText(m.tree.body, bytes, m.tree.body.bodyStart).toLowerCase();
    })());
  }
}

/**
 * The searchable text of a body (RFC 3501 §6.4.4 BODY: "the body of the message"): each text/* part
 * decoded from its transfer encoding (RFC 2045 §6) and charset (the charsets Node's TextDecoder knows,
 * which are the WHATWG set; an unknown one is read as UTF-8 or Latin-1), the header of each attached
 * message/rfc822 with its encoded words decoded, and its body the same way. Parts of other types are
 * not text and are skipped. `bytes` holds the stored body from offset `base`.
 */
export function bodyText(e: MimeEntity, bytes: Buffer, base: number): string {
  const out: string[] = [];
  const walk = (x: MimeEntity): void => {
    if (x.children) return x.children.forEach(walk);
    if (x.message) {
      const inner = x.message.body;
      const header = bytes.subarray(inner.headerStart - base, inner.bodyStart - base);
      out.push(
        parseHeaderBlock(header)
          .map((f) => `${f.name}: ${decodeWords(f.value)}`)
          .join('\n'),
      );
      return walk(inner);
    }
    if (x.type !== 'text') return;
    const raw = bytes.subarray(x.bodyStart - base, x.bodyEnd - base);
    const charset = x.params.find(([n]) => n === 'charset')?.[1] ?? null;
    out.push(decodeText(transferDecode(Buffer.from(raw), x.encoding), charset));
  };
  walk(e);
  return out.join('\n');
}

/**
 * Octets 0x80-0x9F of windows-1252 (WHATWG Encoding §10: also what "iso-8859-1", "latin1" and
 * "us-ascii" labels mean, since senders write cp1252 under those names). Node 20's TextDecoder decoded
 * this family as Latin-1, leaving C1 controls where "€" or curly quotes were; Node 24's gets it right, and
 * this table gives the same text on both (the SDK and tools may still run on 20).
 */
const CP1252 =
  '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f' +
  '\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';
const CP1252_LABELS = new Set(['windows-1252', 'cp1252', 'x-cp1252', 'iso-8859-1', 'iso8859-1', 'latin1', 'l1']);

/** A text part's octets as text in its charset (mail/mime-header.ts decodeCharset, cp1252 mended). */
function decodeText(bytes: Buffer, charset: string | null): string {
  if (!CP1252_LABELS.has((charset ?? '').trim().toLowerCase())) return decodeCharset(bytes, charset);
  let out = '';
  for (const b of bytes) out += b >= 0x80 && b <= 0x9f ? CP1252[b - 0x80] : String.fromCharCode(b);
  return out;
}

function hasFlag(m: SearchMessage, flag: string): boolean {
  // RFC 3501 §2.3.2 flags are case-insensitive (RFC 9051 §2.3.2 says so outright).
  const f = flag.toLowerCase();
  return m.flags.some((x) => x.toLowerCase() === f);
}

/** RFC 3501 §6.4.4: "disregarding time and timezone" — the calendar date as a comparable number. */
function dayNumber(d: ImapDate): number {
  return d.year * 10000 + d.month * 100 + d.day;
}

/**
 * INTERNALDATE's calendar day. We show INTERNALDATE in +0000 (imap/response.ts formatDateTime), so its
 * day is the UTC day, the one the client sees.
 */
function utcDay(date: Date): number {
  return date.getUTCFullYear() * 10000 + (date.getUTCMonth() + 1) * 100 + date.getUTCDate();
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];

/**
 * The day a Date header was written on, in the sender's own zone (RFC 3501 §6.4.4 SENT* disregards
 * the zone): "Tue, 4 Jun 2024 23:30:00 -0700" is 4 June. Two-digit years follow RFC 5322 §4.3.
 */
export function writtenDay(raw: string | null): number | null {
  if (raw === null) return null;
  const m = /(\d{1,2})\s+([A-Za-z]{3})[A-Za-z]*\s+(\d{2,4})\b/.exec(raw);
  if (!m) return null;
  const month = MONTHS.indexOf(m[2]!.toLowerCase()) + 1;
  const day = Number(m[1]);
  let year = Number(m[3]);
  if (m[3]!.length === 2) year += year < 50 ? 2000 : 1900;
  else if (m[3]!.length === 3) year += 1900;
  if (month === 0 || day < 1 || day > 31) return null;
  return year * 10000 + month * 100 + day;
}

/**
 * The day SENT* compares: the Date header's written day; when there is none or it cannot be read,
 * the day of INTERNALDATE (as Dovecot falls back to the received date), so such a message still sorts
 * somewhere sensible instead of matching nothing.
 */
function sentDay(m: SearchMessage): number {
  const written = writtenDay(m.tree.envelope.date);
  if (written !== null) return written;
  return m.tree.date ? utcDay(new Date(m.tree.date)) : utcDay(m.internalDate);
}

/** An address list as searchable text: display names raw and decoded, and mailbox@host, lower case. */
function addressText(list: readonly EnvelopeAddress[] | null): string {
  return (list ?? [])
    .map((a) => {
      const spec = a.host ? `${a.mailbox}@${a.host}` : (a.mailbox ?? '');
      const name = a.name === null ? '' : `${a.name} ${decodeWords(a.name)} `;
      return `${name}<${spec}>`;
    })
    .join(', ')
    .toLowerCase();
}

/** RFC 3501 §6.4.4: string keys match a substring, case-insensitively; the raw and decoded forms both count. */
function contains(raw: string | null, needle: string): boolean {
  if (raw === null) return false;
  const n = needle.toLowerCase();
  return raw.toLowerCase().includes(n) || decodeWords(raw).toLowerCase().includes(n);
}

async function evaluate(key: SearchKey, l: Loaded, scope: SearchScope): Promise<boolean> {
  const m = l.m;
  const env = m.tree.envelope;
  switch (key.key) {
    case 'ALL':
      return true;
    case 'ANSWERED':
      return hasFlag(m, '\\Answered');
    case 'DELETED':
      return hasFlag(m, '\\Deleted');
    case 'DRAFT':
      return hasFlag(m, '\\Draft');
    case 'FLAGGED':
      return hasFlag(m, '\\Flagged');
    case 'SEEN':
      return hasFlag(m, '\\Seen');
    case 'UNANSWERED':
      return !hasFlag(m, '\\Answered');
    case 'UNDELETED':
      return !hasFlag(m, '\\Deleted');
    case 'UNDRAFT':
      return !hasFlag(m, '\\Draft');
    case 'UNFLAGGED':
      return !hasFlag(m, '\\Flagged');
    case 'UNSEEN':
      return !hasFlag(m, '\\Seen');
    case 'RECENT':
      return m.recent;
    case 'OLD':
      return !m.recent;
    case 'NEW': // RFC 3501 §6.4.4: "functionally equivalent to (RECENT UNSEEN)"
      return m.recent && !hasFlag(m, '\\Seen');
    case 'KEYWORD':
      return hasFlag(m, key.flag);
    case 'UNKEYWORD':
      return !hasFlag(m, key.flag);
    case 'LARGER':
      return m.size > key.size;
    case 'SMALLER':
      return m.size < key.size;
    case 'UID':
      return sequenceSetHas(key.set, m.uid, scope.maxUid);
    case 'SEQ':
      return sequenceSetHas(key.set, m.seq, scope.maxSeq);
    case 'MODSEQ': // RFC 7162 §3.1.5: mod-sequence "greater than or equal to"
      return m.modseq >= key.modseq;
    case 'BEFORE':
      return utcDay(m.internalDate) < dayNumber(key.date);
    case 'ON':
      return utcDay(m.internalDate) === dayNumber(key.date);
    case 'SINCE':
      return utcDay(m.internalDate) >= dayNumber(key.date);
    case 'SENTBEFORE':
      return sentDay(m) < dayNumber(key.date);
    case 'SENTON':
      return sentDay(m) === dayNumber(key.date);
    case 'SENTSINCE':
      return sentDay(m) >= dayNumber(key.date);
    case 'FROM':
      return addressText(env.from).includes(key.value.toLowerCase());
    case 'TO':
      return addressText(env.to).includes(key.value.toLowerCase());
    case 'CC':
      return addressText(env.cc).includes(key.value.toLowerCase());
    case 'BCC':
      return addressText(env.bcc).includes(key.value.toLowerCase());
    case 'SUBJECT':
      return contains(env.subject, key.value);
    case 'HEADER': {
      // RFC 3501 §6.4.4: a field of that name whose text contains the string; "" matches any such field.
      const name = key.field.toLowerCase();
      const fromEnvelope = ENVELOPE_FIELDS[name];
      if (fromEnvelope) return contains(fromEnvelope(env), key.value);
      return (await l.fields()).some((f) => f.name === name && contains(f.value, key.value));
    }
    case 'BODY':
      return (await l.body()).includes(key.value.toLowerCase());
    case 'TEXT': {
      // RFC 3501 §6.4.4: "in the header or body of the message".
      const needle = key.value.toLowerCase();
      return (await l.header()).includes(needle) || (await l.body()).includes(needle);
    }
    case 'NOT':
      return !(await evaluate(key.operand, l, scope));
    case 'OR': {
      const [a, b] = keyCost(key.left) <= keyCost(key.right) ? [key.left, key.right] : [key.right, key.left];
      return (await evaluate(a, l, scope)) || evaluate(b, l, scope);
    }
    case 'AND': {
      for (const k of [...key.operands].sort((x, y) => keyCost(x) - keyCost(y))) {
        if (!(await evaluate(k, l, scope))) return false;
      }
      return true;
    }
    default: {
      const never: never = key;
      throw new Error(`unknown search key ${JSON.stringify(never)}`);
    }
  }
}

/** Whether the message matches the criteria; its bytes are read through `scope` only if a key needs them. */
export function matchesSearch(key: SearchKey, m: SearchMessage, scope: SearchScope): Promise<boolean> {
  return evaluate(key, new Loaded(m, scope), scope);
}

/** Whether the criteria name MODSEQ anywhere: RFC 7162 §3.1.5 then adds `(MODSEQ n)` to the answer. */
export function usesModseq(key: SearchKey): boolean {
  switch (key.key) {
    case 'MODSEQ':
      return true;
    case 'NOT':
      return usesModseq(key.operand);
    case 'OR':
      return usesModseq(key.left) || usesModseq(key.right);
    case 'AND':
      return key.operands.some(usesModseq);
    default:
      return false;
  }
}

/**
 * A test on (sequence number, UID) alone that every match must pass: the UID and SEQ keys at the top
 * level of the criteria. The handler applies it before loading any metadata, so `UID SEARCH UID 900:*
 * ...` reads only the rows it can match.
 */
export function positionFilter(key: SearchKey, maxSeq: number, maxUid: number): (seq: number, uid: number) => boolean {
  const top = key.key === 'AND' ? key.operands : [key];
  const tests = top.flatMap((k) =>
    k.key === 'UID'
      ? [(_s: number, uid: number) => sequenceSetHas(k.set, uid, maxUid)]
      : k.key === 'SEQ'
        ? [(seq: number) => sequenceSetHas(k.set, seq, maxSeq)]
        : [],
  );
  return (seq, uid) => tests.every((t) => t(seq, uid));
}
