// Message building: customer JSON → RFC 5322 bytes, with nodemailer's MailComposer (file and URL
// access disabled), plus the address rules of sendEmail's `from` and `to` (docs/api.md §4.11).
//
// Everything that becomes a header is checked here a second time, behind the API's 400: CR, LF or NUL
// in a header-bound value throws instead of being folded, stripped or encoded by the composer
// (RFC 5322 §2.2: a field body never holds a bare CR or LF; NUL is never valid in a message).
import { randomUUID } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import addressparser from 'nodemailer/lib/addressparser';
import { detectMimeType, encodeWord } from 'nodemailer/lib/mime-funcs';
import type MimeNode from 'nodemailer/lib/mime-node';
import { normalizeDomain } from './domain-names.js';
import './header-keys.js'; // MimeNode's header-name normalization, remembered (see there)
import { textAlternative } from './html-alternative.js';
import { htmlText } from './html-text.js';
import {
  base64Pieces,
  crlf,
  hasLongerLines,
  isAsciiText,
  isPlainText,
  MAX_ENCODED_LINE,
  quotedPrintableParts,
  textTransferEncoding,
} from './mime-encode.js';
import { STRING_CHUNK, WHOLE_STRING } from './string-chunks.js';

export interface Mailbox {
  /** Display name, or null for a bare address. */
  name: string | null;
  address: string;
}

export interface ComposeInput {
  from: Mailbox;
  to: string;
  subject: string;
  text?: string;
  html?: string;
  /** Without angle brackets: <uuid>@<sender domain>. */
  messageId: string;
  date: Date;
  /** Extra headers (already validated), e.g. List-Unsubscribe later. */
  headers?: Record<string, string>;
  /**
   * The webmail's fields (docs/api.md §4.15). `displayTo` and `cc` are what the To and Cc fields show when a
   * message to several people goes out as one copy per recipient (`to` is then that recipient, RCPT TO).
   */
  displayTo?: (string | Mailbox)[];
  cc?: (string | Mailbox)[];
  /** Message-IDs without angle brackets (RFC 5322 §3.6.4). */
  inReplyTo?: string;
  references?: string[];
  /** Reply-To (RFC 5322 §3.6.2), each already checked by parseFrom. */
  replyTo?: Mailbox[];
  attachments?: ComposeAttachment[];
}

export interface ComposeAttachment {
  filename: string;
  /** type/subtype; absent: guessed from the file name's extension (nodemailer's table). */
  contentType?: string;
  content: Buffer;
  /**
   * An inline part (RFC 2392): Content-ID <contentId>, Content-Disposition inline, and beside the html in a
   * multipart/related (RFC 2387) when there is html, which refers to it as cid:<contentId>.
   */
  contentId?: string;
}

// RFC 2045 §6.4 and RFC 2046 §5.2.1: a multipart or message entity is never base64-encoded, and an
// attachment always is; such a type would also make nodemailer build the part as a container.
const CONTAINER_TYPE = /^(multipart|message)\//i;

/**
 * An attachment's content type: as given, or guessed from its file name by nodemailer's extension table
 * (application/octet-stream for an unknown one). A multipart/* or message/* one (.eml guesses message/rfc822)
 * becomes application/octet-stream, since an attachment is always base64.
 */
export function attachmentContentType(filename: string, given: string | undefined): string {
  const type = given !== undefined ? given.toLowerCase() : detectMimeType(filename);
  return CONTAINER_TYPE.test(type) ? 'application/octet-stream' : type;
}

/** What sendEmail takes as an attachment's content type: type/subtype, RFC 6838 §4.2 restricted names. */
export function isAttachmentContentType(s: string): boolean {
  return ATTACHMENT_TYPE.test(s) && !CONTAINER_TYPE.test(s);
}
// RFC 6838 §4.2: restricted-name = 1*127 of ALPHA / DIGIT and ! # $ & - ^ _ . + (first one ALPHA/DIGIT).
const ATTACHMENT_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;

/** RFC 5321 §4.5.3.1.1: a local part is at most 64 octets. */
export const MAX_LOCAL_PART_LENGTH = 64;
/** RFC 5321 §4.5.3.1.3: a path is at most 256 octets with its angle brackets, so a mailbox at most 254. */
export const MAX_ADDRESS_LENGTH = 254;
/** RFC 5322 §2.1.1: a line is at most 998 octets, CRLF excluded. */
export const MAX_LINE_LENGTH = 998;

// RFC 5322 §2.2 / §2.1: what must never reach a header. Checked on every header-bound value.
const HEADER_BREAK = /[\r\n\0]/;
// The other C0 controls and DEL are not allowed in a phrase, an atom or a quoted string either
// (RFC 5322 §3.2.3-§3.2.5 admit them only in the obsolete syntax), so parseFrom refuses them too.
// HTAB is WSP and stays allowed.
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;
// A lone UTF-16 surrogate is not a character (it would reach the wire as U+FFFD): not valid text.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Whether a string holds a lone UTF-16 surrogate (not text: it would be sent as U+FFFD). */
export const hasLoneSurrogate = (s: string): boolean => LONE_SURROGATE.test(s);

// RFC 5321 §4.1.2: Dot-string = Atom *("." Atom), Atom = 1*atext (RFC 5322 §3.2.3), ASCII only: a
// UTF-8 local part needs SMTPUTF8 (RFC 6531), which we do not offer.
const DOT_STRING = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*$/;
// RFC 5321 §4.1.2: Quoted-string = DQUOTE *QcontentSMTP DQUOTE, qtextSMTP = %d32-33 / %d35-91 /
// %d93-126, quoted-pairSMTP = "\" %d32-126. Narrower on purpose: an empty one is refused (it names
// no one), and so are "<" and ">", which nodemailer turns into spaces in the header address
// (mime-node _normalizeAddress), so the To header would name someone other than RCPT TO.
const QUOTED_STRING = /^"(?:[\x20\x21\x23-\x3b\x3d\x3f-\x5b\x5d-\x7e]|\\[\x20-\x7e])+"$/;
// RFC 5322 §3.2.3 atext, plus "." (obs-phrase, §3.2.5: "J. Smith" is everywhere) and any non-ASCII
// character (RFC 6532 §3.2 adds UTF8-non-ascii to atext): what an unquoted display name may hold.
const PHRASE_CHAR = /[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~.\u0080-\uffff]/;
// RFC 5322 §3.6.8: field-name = 1*ftext, ftext = %d33-57 / %d59-126.
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
// RFC 5322 §3.6.4: msg-id = "<" id-left "@" id-right ">", both dot-atom-text here (no-fold-literal
// is legal on the right but we never make one).
const DOT_ATOM_TEXT = DOT_STRING; // the same grammar: RFC 5321's Dot-string is RFC 5322's dot-atom-text
// RFC 2392 §2: a Content-ID is a msg-id (RFC 5322 §3.6.4); `cid:` URLs name it without the angle brackets.
// Accepted: dot-atom-text with at most one "@" inside (id-left@id-right, or a bare id, which every reader takes).
const DOT_ATOM_SOURCE = DOT_STRING.source.slice(1, -1); // without its ^ and $
export const CONTENT_ID = new RegExp(`^${DOT_ATOM_SOURCE}(?:@${DOT_ATOM_SOURCE})?$`);

// Headers composeMessage writes itself. An extra header of the same name would be a duplicate of a
// field RFC 5322 §3.6 allows once (or, for Content-*, contradict the MIME structure), or would be
// silently replaced by MailComposer; Bcc would name a hidden recipient to every recipient.
const OWN_HEADERS = new Set([
  'from',
  'sender',
  'to',
  'cc',
  'bcc',
  'reply-to',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
  'return-path',
]);

// RFC 8058 §3.1 and RFC 2369 §2: the receiver reads List-Unsubscribe's <https URL> and List-Unsubscribe-Post's
// "List-Unsubscribe=One-Click" as they stand. Written verbatim (nodemailer's `prepared`): never an RFC 2047
// encoded word, which no receiver reads as a URL, and never folded, which some receivers do not unfold before
// matching the URL. So the value must be printable ASCII and the field fit one line (RFC 5322 §2.1.1).
// Feedback-ID (core/send.ts) too: receivers' feedback loops read its colon-separated ids as written.
const VERBATIM_HEADERS = new Set(['list-unsubscribe', 'list-unsubscribe-post', 'feedback-id']);
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** A header written verbatim on one line, as nodemailer's MimeNode takes it. */
type PreparedHeader = { prepared: true; value: string };

/**
 * The address as we store and send it: the local part exactly as given (RFC 5321 §2.4: it is
 * case-sensitive), the domain lower-cased; null when it is not a mailbox we can send to or from.
 * With `idn`, a non-ASCII domain is converted to its A-labels (the form sender domains are stored
 * in, control/domain-names.ts); without it, only an ASCII address passes.
 */
function parseAddrSpec(s: string, idn: boolean): string | null {
  if (s.length > 1024) return null; // far above any valid address, even in Unicode form
  const at = s.lastIndexOf('@');
  if (at <= 0) return null;
  const local = s.slice(0, at);
  const domainRaw = s.slice(at + 1);
  if (!DOT_STRING.test(local) && !QUOTED_STRING.test(local)) return null;
  if (local.length > MAX_LOCAL_PART_LENGTH) return null;
  // RFC 5321 §4.1.2: Domain = sub-domain *("." sub-domain); an address literal ([1.2.3.4]) is
  // refused: no sender domain can be one, and we do not deliver to bare IPs.
  // normalizeDomain trims and drops a trailing dot (DNS root), neither of which an address may carry.
  if (!domainRaw || /\s/.test(domainRaw) || domainRaw.endsWith('.')) return null;
  if (!idn && /[^\x21-\x7e]/.test(domainRaw)) return null;
  const domain = normalizeDomain(domainRaw);
  if (!domain) return null;
  if (!idn && domain !== domainRaw.toLowerCase()) return null;
  const address = `${local}@${domain}`;
  if (address.length > MAX_ADDRESS_LENGTH) return null;
  return address;
}

/**
 * An RFC 5321 mailbox (local@domain) fit for RCPT TO, in the form to send it: the domain in lower
 * case; null for anything else. ASCII only: the caller puts this on the wire and looks up MX by its
 * domain, so a Unicode domain is refused rather than converted behind its back.
 */
export function normalizeMailbox(raw: string): string | null {
  if (typeof raw !== 'string' || CONTROL.test(raw)) return null;
  return parseAddrSpec(raw, false);
}

/** An RFC 5321 mailbox (local@domain) fit for RCPT TO; false for anything else. */
export function isDeliverableAddress(raw: string): boolean {
  return normalizeMailbox(raw) !== null;
}

/**
 * The display name of a name-addr, RFC 5322 §3.4: `phrase` is words (atoms or quoted strings)
 * separated by whitespace. Returns the decoded name ('' for none), or null when the text is not a
 * phrase: a special outside quotes (",", ";", ":", "@", "(", ...) means a list, a group, a comment
 * or a typo, and we refuse all of them rather than guess.
 */
function parsePhrase(s: string): string | null {
  let out = '';
  let pendingSpace = false;
  let i = 0;
  while (i < s.length) {
    const c = s[i] as string;
    if (c === ' ' || c === '\t') {
      pendingSpace = out.length > 0;
      i++;
      continue;
    }
    let word = '';
    if (c === '"') {
      // RFC 5322 §3.2.4 quoted-string: qtext or quoted-pair ("\" VCHAR / WSP), up to the closing quote.
      i++;
      let closed = false;
      while (i < s.length) {
        const q = s[i] as string;
        if (q === '"') {
          closed = true;
          i++;
          break;
        }
        if (q === '\\') {
          if (i + 1 >= s.length) return null;
          word += s[i + 1];
          i += 2;
          continue;
        }
        word += q;
        i++;
      }
      if (!closed) return null;
    } else if (PHRASE_CHAR.test(c)) {
      while (i < s.length && PHRASE_CHAR.test(s[i] as string)) word += s[i++];
    } else {
      return null;
    }
    if (pendingSpace) out += ' ';
    out += word;
    pendingSpace = false;
  }
  // Whitespace inside a name carries no meaning in a header (RFC 5322 §3.2.2 folding); one space.
  return out.replace(/[ \t]+/g, ' ').trim();
}

/**
 * The `from` field of sendEmail: a bare addr@domain or the RFC 5322 display-name form
 * ("Name" <addr@domain>, Name <addr@domain>); null when it is neither, or carries CR, LF or NUL.
 */
export function parseFrom(raw: string): Mailbox | null {
  return parseMailbox(raw, true);
}

/**
 * A recipient of sendEmail (to, cc, bcc: docs/api.md §4.11): a bare addr@domain or the display-name form, as
 * parseFrom reads it, but the address must be fit for RCPT TO as normalizeMailbox says (ASCII, no IDN
 * conversion behind the caller's back); null otherwise.
 */
export function parseRecipient(raw: string): Mailbox | null {
  return parseMailbox(raw, false);
}

function parseMailbox(raw: string, idn: boolean): Mailbox | null {
  if (typeof raw !== 'string' || CONTROL.test(raw) || LONE_SURROGATE.test(raw)) return null;
  // RFC 5322 §2.1.1: a From that cannot be written on one line of 998 octets is not one we take.
  if (Buffer.byteLength(raw, 'utf8') > MAX_LINE_LENGTH) return null;
  const s = raw.replace(/^[ \t]+|[ \t]+$/g, '');
  let name: string | null = null;
  let spec: string;
  if (s.endsWith('>')) {
    // name-addr = [display-name] angle-addr (RFC 5322 §3.4). The angle-addr is the last "<": a "<"
    // inside a quoted display name comes earlier, and the addr-spec holds none (QUOTED_STRING).
    const open = s.lastIndexOf('<');
    if (open < 0) return null;
    spec = s.slice(open + 1, -1);
    const phrase = parsePhrase(s.slice(0, open));
    if (phrase === null) return null;
    name = phrase === '' ? null : phrase;
  } else {
    spec = s;
  }
  const address = parseAddrSpec(spec, idn);
  if (!address) return null;
  // nodemailer's own reading must agree: exactly one mailbox, not a group, at the same domain (the
  // one that must be a verified sender domain). addressparser is lenient ("Name a@b" and "a@b c@d"
  // pass), so it is a cross-check, not the grammar; its local part is not compared because it
  // rewrites quoted ones ("b"@x.com → b@x.com, "a\,"@x.com → "a,"@x.com) in the bare form.
  const parsed = addressparser(s);
  if (parsed.length !== 1) return null;
  const only = parsed[0];
  if (!only || only.group !== undefined) return null;
  const theirs = only.address.slice(only.address.lastIndexOf('@') + 1).toLowerCase();
  if (theirs !== spec.slice(spec.lastIndexOf('@') + 1).toLowerCase()) return null;
  return { name, address };
}

function assertHeaderSafe(field: string, value: string): void {
  if (typeof value !== 'string') throw new TypeError(`compose: ${field} must be a string`);
  if (HEADER_BREAK.test(value)) throw new Error(`compose: CR, LF or NUL in ${field}`);
}

/**
 * The last line of defence on the bytes: CRLF only, every line within RFC 5322 §2.1.1's 998 octets,
 * and 7-bit clean (every non-ASCII value went through an encoded word or a transfer encoding, so the
 * message needs neither 8BITMIME nor SMTPUTF8), no NUL (RFC 5321 §4.1.4 / RFC 5322 §2.1). Run on the
 * message's text (and its latin1 octets, when made already: ASCII text is its own octets). Native scans only:
 * isAsciiText, NUL by indexOf, then one step per line with V8's indexOf.
 */
export function assertWireSafe(text: string, latin1?: Buffer): void {
  if (!isAsciiText(text, latin1)) throw new Error('compose: 8-bit octet in output');
  if (text.includes('\0')) throw new Error('compose: NUL in output');
  const len = text.length;
  let lineStart = 0;
  for (;;) {
    const cr = text.indexOf('\r', lineStart);
    const lf = text.indexOf('\n', lineStart);
    if (cr < 0) {
      if (lf >= 0) throw new Error('compose: bare LF in output');
      if (len - lineStart > MAX_LINE_LENGTH) throw new Error('compose: line over 998 octets');
      return;
    }
    if (lf !== cr + 1)
      throw new Error(lf >= 0 && lf < cr ? 'compose: bare LF in output' : 'compose: bare CR in output');
    if (cr - lineStart > MAX_LINE_LENGTH) throw new Error('compose: line over 998 octets');
    lineStart = cr + 2;
  }
}

/** Whether `text` holds an LF that is not the end of a CRLF: one step per line, not per character. */
function hasBareLf(text: string): boolean {
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1))
    if (i === 0 || text.charCodeAt(i - 1) !== 0x0d) return true;
  return false;
}

/**
 * Html up to this many characters gets mail/html-alternative.ts's text alternative (~0.015-0.02 ms a kB), at most three
 * times its length; a larger one gets mail/html-text.ts's plainer one, its words and lines, never longer than the html.
 */
export const MAX_CONVERTED_HTML = 1024 * 1024;

/** The text alternative of an html body (docs/decisions.md #87). */
function plainTextOf(html: string): string {
  return html.length > MAX_CONVERTED_HTML ? htmlText(html) : textAlternative(html);
}

export async function composeMessage(m: ComposeInput): Promise<Buffer> {
  const message = messagePieces(compileMessage(m));
  let chars = 0;
  for (const piece of message.pieces) chars += piece.length;
  if (chars > WHOLE_STRING && !message.bareLf) return checkedChunks(message.pieces, chars);
  const text = wholeText(message);
  // 7-bit (or refused below): latin1 and UTF-8 give the same octets, latin1 without the encoder's work.
  const bytes = Buffer.from(text, 'latin1');
  assertWireSafe(text, bytes);
  return bytes;
}

/**
 * The octets of a message of `chars` characters (over WHOLE_STRING) from its pieces, made and checked a chunk at a
 * time (mail/string-chunks.ts): each chunk the pieces up to one that ends in an LF, about `chunk` characters (a longer
 * piece is a chunk of its own). Each chunk but the last ends in an LF, so a CRLF or a line is never cut by a chunk's
 * end, and assertWireSafe of each chunk is assertWireSafe of the whole (test/mail/compose.test.ts).
 */
export function checkedChunks(pieces: readonly string[], chars: number, chunk = STRING_CHUNK): Buffer {
  const bytes = Buffer.allocUnsafe(chars);
  let at = 0;
  let from = 0;
  let size = 0;
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i]!;
    size += piece.length;
    const next = pieces[i + 1];
    if (next !== undefined && (size + next.length <= chunk || !piece.endsWith('\n'))) continue;
    const text = i === from ? piece : pieces.slice(from, i + 1).join('');
    const n = bytes.write(text, at, 'latin1');
    assertWireSafe(text, bytes.subarray(at, at + n));
    at += n;
    from = i + 1;
    size = 0;
  }
  if (at !== chars) throw new Error('compose: the message is not as long as its pieces');
  return bytes;
}

/** The validated message as nodemailer's MIME tree, ready to serialize. */
export function compileMessage(m: ComposeInput): MimeNode {
  const fromName = m.from.name ?? '';
  assertHeaderSafe('from name', fromName);
  assertHeaderSafe('from address', m.from.address);
  assertHeaderSafe('to', m.to);
  assertHeaderSafe('subject', m.subject);
  assertHeaderSafe('messageId', m.messageId);
  const from = normalizeMailbox(m.from.address);
  if (!from) throw new Error('compose: from is not a valid mailbox');
  const to = normalizeMailbox(m.to);
  if (!to) throw new Error('compose: to is not a valid mailbox');
  const at = m.messageId.lastIndexOf('@');
  if (at <= 0 || !DOT_ATOM_TEXT.test(m.messageId.slice(0, at)) || !DOT_ATOM_TEXT.test(m.messageId.slice(at + 1))) {
    throw new Error('compose: messageId is not id-left@id-right (RFC 5322 §3.6.4)');
  }
  if (!(m.date instanceof Date) || Number.isNaN(m.date.getTime())) throw new Error('compose: date is not a valid Date');
  // Only strings reach MailComposer as content: an object there ({ path }, { href }) would make it
  // read a file or fetch a URL. disableFileAccess/disableUrlAccess refuse those too; this keeps
  // them from being asked.
  for (const [field, v] of [
    ['text', m.text],
    ['html', m.html],
  ] as const) {
    if (v !== undefined && typeof v !== 'string') throw new TypeError(`compose: ${field} must be a string`);
  }
  const headers: Record<string, string | PreparedHeader> = {};
  for (const [key, value] of Object.entries(m.headers ?? {})) {
    if (!FIELD_NAME.test(key))
      throw new Error(`compose: header name ${JSON.stringify(key)} is not an RFC 5322 field name`);
    if (OWN_HEADERS.has(key.toLowerCase())) throw new Error(`compose: header ${key} is set by compose itself`);
    assertHeaderSafe(`header ${key}`, value);
    if (VERBATIM_HEADERS.has(key.toLowerCase())) {
      if (!PRINTABLE_ASCII.test(value)) throw new Error(`compose: ${key} must be printable ASCII`);
      if (key.length + 2 + value.length > MAX_LINE_LENGTH) throw new Error(`compose: ${key} does not fit one line`);
      headers[key] = { prepared: true, value };
    } else {
      headers[key] = value;
    }
  }

  const listed = (field: string, list: (string | Mailbox)[] | undefined) =>
    list?.map((a) => {
      const m = typeof a === 'string' ? { name: null, address: a } : a;
      assertHeaderSafe(field, m.address);
      assertHeaderSafe(`${field} name`, m.name ?? '');
      const n = normalizeMailbox(m.address);
      if (!n) throw new Error(`compose: ${field} holds an invalid mailbox`);
      return { name: m.name ?? '', address: n };
    });
  const displayTo = listed('to', m.displayTo);
  const cc = listed('cc', m.cc);
  const ids = [...(m.inReplyTo ? [m.inReplyTo] : []), ...(m.references ?? [])];
  for (const id of ids) {
    assertHeaderSafe('message id', id);
    if (!/^[^<>\s]+@[^<>\s]+$/.test(id)) throw new Error('compose: a referenced message id is not id-left@id-right');
  }
  for (const a of m.attachments ?? []) {
    assertHeaderSafe('attachment filename', a.filename);
    if (a.contentType !== undefined && !/^[\w.+-]+\/[\w.+-]+$/.test(a.contentType))
      throw new Error('compose: attachment content type is invalid');
    if (!Buffer.isBuffer(a.content)) throw new TypeError('compose: attachment content must be a Buffer');
    if (a.contentId !== undefined && !CONTENT_ID.test(a.contentId))
      throw new Error('compose: attachment content id is not an RFC 2392 id without angle brackets');
  }
  const replyTo = m.replyTo?.map((r) => {
    assertHeaderSafe('reply-to name', r.name ?? '');
    assertHeaderSafe('reply-to', r.address);
    const address = parseAddrSpec(r.address, true);
    if (!address) throw new Error('compose: reply-to holds an invalid mailbox');
    return { name: r.name ?? '', address };
  });

  const texts = heldTexts();
  const composer = new MailComposer({
    // Objects, not strings: MailComposer then does not run them through addressparser again, and the
    // name gets quoted (RFC 5322 §3.2.4) or encoded (RFC 2047 §5 (3)) as it needs.
    from: { name: fromName, address: from },
    to: displayTo && displayTo.length ? displayTo : { name: '', address: to },
    ...(cc && cc.length ? { cc } : {}),
    ...(replyTo && replyTo.length ? { replyTo } : {}),
    ...(m.inReplyTo ? { inReplyTo: `<${m.inReplyTo}>` } : {}),
    ...(m.references?.length ? { references: m.references.map((r) => `<${r}>`) } : {}),
    ...(m.attachments?.length
      ? {
          attachments: m.attachments.map((a) => ({
            filename: a.filename,
            contentType: attachmentContentType(a.filename, a.contentType),
            content: a.content,
            contentTransferEncoding: 'base64' as const,
            ...(a.contentId !== undefined ? { cid: a.contentId, contentDisposition: 'inline' as const } : {}),
          })),
        }
      : {}),
    subject: m.subject,
    // '' is "no body" to MailComposer, which is what it is: the part is left out. An html-only message
    // gets a text/plain alternative made from its html (RFC 2046 §5.1.4): readers without html get the
    // words, and receivers' filters score an html part with no text part as spam-like.
    text: texts.hold(m.text ? m.text : m.html ? plainTextOf(m.html) : undefined),
    html: texts.hold(m.html ? m.html : undefined),
    messageId: m.messageId,
    date: m.date,
    headers,
    newline: 'win',
    disableFileAccess: true,
    disableUrlAccess: true,
    // The random part of the multipart boundaries (RFC 2046 §5.1.1: a boundary must not occur in the parts), from
    // node's pooled UUID bytes: left to MimeNode, the root's costs a synchronous randomBytes call per message.
    baseBoundary: randomUUID().replaceAll('-', ''),
  });
  const root = composer.compile();
  bracketAddresses(root);
  texts.restore(root);
  pinTransferEncodings(root);
  // RFC 5322 §2.1.1 / §2.2.3: a header is folded only at whitespace, so an ASCII subject with a word
  // too long to fit a line would go out over 998 octets. As encoded words (RFC 2047 §2: at most 75
  // characters each, separated by folding whitespace) any text fits.
  if (m.subject && /^[\x20-\x7e\t]*$/.test(m.subject) && /[^ \t]{900}/.test(m.subject)) {
    root.setHeader('Subject', { prepared: true, foldLines: true, value: encodeWord(m.subject, 'Q', 52) });
  }
  return root;
}

/**
 * The text and html go to MailComposer as placeholders and into their parts after compile(): MimeNode.setContent
 * looks through a string content with mime-funcs' isPlainText and hasLongerLines, regular expressions over the whole
 * text (about 0.15 ms at 100 kB, and ~0.4 ms for a text of short lines), where those of mime-encode.ts give the same
 * answers (test/mail/mime-encode.test.ts) in a third and a tenth of that. A Buffer content is not looked at;
 * MailComposer only places it. The answers are set as setContent sets them, in `_isPlainText` and `_hasLongLines`
 * (nodemailer internals, pinned by package.json; test/mail/compose.test.ts checks both against a MimeNode given the
 * same text). A text without a CR keeps its LF line ends, which the serializer writes as CRLF (LF_BREAKS); any other
 * is converted here (crlf).
 */
function heldTexts() {
  const held = new Map<Buffer, { text: string; lf: boolean }>();
  return {
    hold(text: string | undefined): Buffer | undefined {
      if (text === undefined) return undefined;
      const placeholder = Buffer.from(' ');
      const lf = !text.includes('\r');
      held.set(placeholder, { text: lf ? text : crlf(text), lf });
      return placeholder;
    },
    restore,
  };
  function restore(node: MimeNode): void {
    const h = Buffer.isBuffer(node.content) ? held.get(node.content) : undefined;
    if (h !== undefined) {
      const { text, lf } = h;
      const plain = isPlainText(text);
      Object.assign(node, {
        content: text,
        _isPlainText: plain,
        // The same answers for the text with CRLF line ends: but for the length past which nodemailer counts any
        // text as long, where the CRs count.
        _hasLongLines: plain && (hasLongerLines(text, MAX_ENCODED_LINE) || (lf && crlfLength(text) > LONG_TEXT_LENGTH)),
      });
      if (lf) (node as LfNode)[LF_BREAKS] = text;
    }
    for (const child of node.childNodes ?? []) restore(child);
  }
}

/**
 * The text parts whose content has LF line ends alone (heldTexts), which messagePieces writes as CRLF: the same
 * bytes as for the converted text, without a converted copy of a 100 kB text (a rope that the first scan copies
 * flat again, ~220 kB of garbage a message). With that content: a part given another since is written as it is.
 * A property of the node's own, not a WeakMap: V8's young-generation collector keeps some of a WeakMap's values
 * whose keys are young and dead through a scavenge or two, and so promoted sendEmail's texts to the old generation.
 */
const LF_BREAKS = Symbol('text written with CRLF for its LFs');
type LfNode = MimeNode & { [LF_BREAKS]?: string };

/** nodemailer's hasLongerLines counts a text over this many characters as long whatever its lines. */
const LONG_TEXT_LENGTH = 128 * 1024;

/** `text`'s length with each LF written as CRLF: counted only where the answer can be over LONG_TEXT_LENGTH. */
function crlfLength(text: string): number {
  let n = text.length;
  if (2 * n <= LONG_TEXT_LENGTH || n > LONG_TEXT_LENGTH) return n;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/**
 * Each text part's transfer encoding, decided once. MimeNode.getTransferEncoding() weighs a quoted-printable
 * against a base64 text by counting its letters in a loop over the whole body each time it is asked, and
 * buildHeaders and serializeMime both ask (a sixth of a 100 kB message's composition). textTransferEncoding
 * gives its answer (test/mail/mime-encode.test.ts, test/mail/compose.test.ts), and set as the part's
 * Content-Transfer-Encoding it is read back as is: the bytes do not change.
 */
function pinTransferEncodings(node: MimeNode): void {
  const content = node.content;
  if (typeof content === 'string' && content && !node.getHeader('Content-Transfer-Encoding')) {
    const type = String(node.getHeader('Content-Type') ?? '').trim();
    if (/^text\//i.test(type)) {
      const encoding = textTransferEncoding(content, flagOf(node, '_isPlainText'), flagOf(node, '_hasLongLines'));
      if (encoding !== '7bit') node.setHeader('Content-Transfer-Encoding', encoding);
    }
  }
  for (const child of node.childNodes ?? []) pinTransferEncodings(child);
}

/**
 * What a node knows of its string content: whether it is plain text by mime-funcs' isPlainText (no C0 control but
 * TAB, CR and LF, no non-ASCII), its `_isPlainText`, and whether such text has lines over 76 characters,
 * `_hasLongLines`: set by MimeNode.setContent, or by heldTexts for compose's text parts (nodemailer internals, pinned
 * by package.json; test/mail/compose.test.ts fails if they go). Undefined when the node does not say.
 */
function flagOf(node: MimeNode, flag: '_isPlainText' | '_hasLongLines'): boolean | undefined {
  const known = (node as unknown as Record<string, unknown>)[flag];
  return typeof known === 'boolean' ? known : undefined;
}

interface AddressInternals {
  encodeHeaderValue(key: string, value: unknown): string;
  _parseAddresses(value: unknown): { name?: string; address?: string }[];
  _convertAddresses(addresses: { name?: string; address?: string }[]): string;
}

/**
 * A bare address in To or Cc is written in angle brackets (`To: <a@b.example>`, RFC 5322 §3.4's name-addr
 * without a name): receivers' filters score a To without them as bulk-like (SpamAssassin's TO_NO_BRKTS_*).
 * nodemailer writes such an address bare and takes no prepared value for an address field, so its encoder of
 * those two fields is wrapped on this node: a named mailbox stays as its `_convertAddresses` writes it (the
 * name quoted or encoded), and the whole field is folded as before. build() and serializeMime both use it.
 */
function bracketAddresses(root: MimeNode): void {
  const node = root as unknown as AddressInternals;
  const encode = node.encodeHeaderValue;
  node.encodeHeaderValue = function (this: AddressInternals, key: string, value: unknown): string {
    const k = key.toLowerCase();
    if (k !== 'to' && k !== 'cc') return encode.call(this, key, value);
    return this._parseAddresses(value)
      .map((a) => {
        const s = this._convertAddresses([a]);
        return a.name || !a.address || s.startsWith('<') ? s : `<${s}>`;
      })
      .join(', ');
  };
}

/**
 * What `root.build()` writes, without its streams: one synchronous pass over a tree whose contents are
 * all strings (compileMessage makes no other). MimeNode.build() pipes every part through stream
 * encoders and transforms, ~100 µs of a ~1 kB message (a fifth of a sendEmail's CPU); this uses the
 * same library's header building (buildHeaders), encoders (qp, base64: their streams' output is
 * `wrap(encode(x), 76)`) and boundaries, then the two final transforms of its read stream
 * (LastNewline, LeWindows). test/mail/compose.test.ts compares the bytes with build()'s. One exception:
 * the qp stream wraps a part 64 KiB at a time, and wraps on its own a last line that ends in a space or tab,
 * so a quoted-printable part over 64 KiB, or ending so, may have a soft break elsewhere than here (both are
 * valid RFC 2045 §6.7 lines of the same text).
 */
export function serializeMime(root: MimeNode): Buffer {
  // Header and encoded text are ASCII; an unencoded (7bit) part is too, or assertWireSafe refuses it.
  return Buffer.from(wholeText(messagePieces(root)), 'utf8');
}

/** A message's text in pieces, in order, and whether one may hold an LF that is not part of a CRLF. */
interface MessagePieces {
  pieces: string[];
  bareLf: boolean;
}

/** The message as one string (LeWindows: every LF is part of a CRLF). */
function wholeText({ pieces, bareLf }: MessagePieces): string {
  const text = pieces.join('');
  return bareLf ? text.replace(/(?<!\r)\n/g, '\r\n') : text;
}

/** serializeMime's pass (above): the message's text as pieces in order, joined by wholeText or by checkedChunks. */
function messagePieces(root: MimeNode): MessagePieces {
  const out: string[] = [];
  // Whether a chunk pushed so far may hold an LF that is not part of a CRLF (LeWindows below). Only headers and
  // unencoded text are looked at: base64 lines and the framing are CRLF-only as written, and so is
  // quoted-printable that says so. No chunk starts with an LF after one ending in a CR, so chunk by chunk is the
  // whole text's answer.
  let bareLf = false;
  const walk = (node: MimeNode) => {
    const encoding = node.getTransferEncoding();
    const headers = headersOf(node, encoding);
    bareLf ||= hasBareLf(headers);
    out.push(headers, '\r\n\r\n');
    const content = node.content;
    if (content) {
      // Strings, and the Buffers of the webmail's attachments (always base64).
      if (typeof content !== 'string' && !Buffer.isBuffer(content))
        throw new Error('compose: a part whose content is not a string');
      if (typeof content !== 'string' && encoding !== 'base64') throw new Error('compose: a binary part not in base64');
      const lf = (node as LfNode)[LF_BREAKS] === content;
      if (typeof content !== 'string' || encoding === 'base64') {
        base64Pieces(lf ? crlf(content as string) : content, out);
      } else if (encoding === 'quoted-printable') {
        // Its pieces go straight into `out`, joined once with the rest (quotedPrintableParts).
        const at = out.length;
        if (!quotedPrintableParts(content, flagOf(node, '_isPlainText') ?? false, out, lf))
          bareLf ||= out.slice(at).some(hasBareLf);
      } else if (lf) {
        // A rope, which the join copies as it stands.
        out.push(crlf(content));
      } else {
        bareLf ||= hasBareLf(content);
        out.push(content);
      }
    }
    if (node.multipart) {
      node.childNodes.forEach((child, i) => {
        out.push(`${i ? '\r\n' : ''}--${node.boundary}\r\n`);
        walk(child);
      });
      out.push(`\r\n--${node.boundary}--\r\n`);
    }
  };
  walk(root);
  // LastNewline: the message ends with a line break. Pushed before the join: added after it, the break would make
  // the message a rope that the wire check's first scan copies flat again.
  let i = out.length - 1;
  while (i > 0 && out[i] === '') i--;
  const last = out[i]!.at(-1);
  if (last !== '\n') out.push(last === '\r' ? '\n' : '\r\n');
  return { pieces: out, bareLf };
}

/**
 * node.buildHeaders(), without its look through a text/plain string content for non-ASCII (a regular expression
 * over the whole text, ~0.1 ms at 100 kB) where the answer cannot change the header: it adds charset=utf-8, which
 * MailComposer's text parts have (this exact Content-Type). The look is at a placeholder; the transfer encoding
 * buildHeaders asks for again is set first, as buildHeaders itself sets it, so its answer is the one already given
 * for the real content (pinned, or 7bit from setContent's flags). test/mail/compose.test.ts compares with build().
 */
function headersOf(node: MimeNode, encoding: string | false): string {
  const content = node.content;
  if (typeof content !== 'string' || !encoding || node.getHeader('Content-Type') !== 'text/plain; charset=utf-8')
    return node.buildHeaders();
  node.setHeader('Content-Transfer-Encoding', encoding);
  node.content = PLACEHOLDER;
  try {
    return node.buildHeaders();
  } finally {
    node.content = content;
  }
}
const PLACEHOLDER = Buffer.from(' ');
