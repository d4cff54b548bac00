// The extra fields of sendEmail (docs/api.md §4.11): replyTo, headers, attachments, tags and metadata. The
// route's schema has checked their shapes and counts; this checks what a schema cannot say well (address
// syntax, header names, reserved fields, base64, sizes) and names the field of every refusal. A message
// without any of them never comes here: the plain send does no extra work.
import { MAX_EXTRA_HEADER_BYTES, MAX_METADATA_BYTES } from '@svc-mail/sdk';
import { fail } from './errors.js';
import {
  CONTENT_ID,
  isAttachmentContentType,
  parseFrom,
  type ComposeAttachment,
  type ComposeInput,
  type Mailbox,
} from '../mail/compose.js';

/** The extra fields as the request gives them. */
export interface ExtraFields {
  replyTo?: string | string[];
  headers?: Readonly<Record<string, string>>;
  attachments?: readonly { filename: string; content: string; contentType?: string; contentId?: string }[];
  tags?: readonly { name: string; value: string }[];
  metadata?: Readonly<Record<string, string>>;
}

/** What the extra fields become: parts of the composed message and the JSON stored with it. */
export interface Extras {
  compose: Pick<ComposeInput, 'replyTo' | 'attachments'>;
  headers: Record<string, string> | undefined;
  /** JSON of the tags array, or null without tags. */
  tags: string | null;
  /** JSON of the metadata object, or null without metadata. */
  metadata: string | null;
}

export const hasExtras = (b: ExtraFields): boolean =>
  b.replyTo !== undefined ||
  b.headers !== undefined ||
  b.attachments !== undefined ||
  b.tags !== undefined ||
  b.metadata !== undefined;

/**
 * Fields the service writes itself (docs/api.md §4.11), lower case: an extra one would duplicate a field
 * RFC 5322 §3.6 allows once, contradict the MIME structure (Content-*, RFC 2045 §9: any Content- field is
 * MIME's), claim a trace or signature the service did not make (Received, Return-Path, DKIM-Signature), or
 * bypass a field the API offers with its own checks (Reply-To: replyTo; List-Unsubscribe: unsubscribeUrl), or
 * speak for the service to receivers' feedback loops (Feedback-ID, core/send.ts).
 * Sender is mail/compose.ts's too.
 */
const RESERVED_HEADERS = new Set([
  'from',
  'sender',
  'to',
  'cc',
  'bcc',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'dkim-signature',
  'return-path',
  'received',
  'list-unsubscribe',
  'list-unsubscribe-post',
  'reply-to',
  'feedback-id',
]);
export const isReservedHeader = (name: string): boolean => {
  const n = name.toLowerCase();
  return RESERVED_HEADERS.has(n) || n.startsWith('content-');
};

// RFC 5322 §3.6.8: field-name = 1*ftext, ftext = %d33-57 / %d59-126 (printable ASCII but the colon).
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
/** The longest extra field name: a name and the first word of its value must fit one line. */
export const MAX_HEADER_NAME_LENGTH = 76;
// RFC 5322 §2.2: never CR or LF in a field body (folding is the composer's); NUL nowhere (§2.1). The other
// C0 controls and DEL are obs-utext only (§3.2.5, §4.1): refused too. HTAB is WSP and stays allowed.
const HEADER_BREAK = /[\r\n\0]/;
const CONTROL = /[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]/;
// RFC 5322 §2.1.1 / §2.2.3: a field is folded only at whitespace and a line holds at most 998 octets.
const LONG_WORD = /[^ \t]{900}/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// RFC 4648 §4: the base64 alphabet, padded to a multiple of 4 characters, nothing else (no line breaks).
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
// Postgres jsonb holds no \u0000 and no lone surrogate (RFC 8259 §8.2: not interoperable anyway).
const NOT_JSONB_TEXT = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

interface Problem {
  field: string;
  message: string;
}

function replyToOf(raw: string | string[], problems: Problem[]): Mailbox[] {
  const list = typeof raw === 'string' ? [raw] : raw;
  const out: Mailbox[] = [];
  list.forEach((a, i) => {
    const m = parseFrom(a);
    if (m) out.push(m);
    else
      problems.push({
        field: typeof raw === 'string' ? 'body.replyTo' : `body.replyTo[${i}]`,
        message: 'is not an address or a "Name <address>"',
      });
  });
  return out;
}

function headersOf(raw: Readonly<Record<string, string>>, problems: Problem[]): Record<string, string> {
  const out: Record<string, string> = {};
  const seen = new Set<string>();
  let bytes = 0;
  for (const [name, value] of Object.entries(raw)) {
    const field = `body.headers.${name}`;
    const bad = (message: string) => problems.push({ field, message });
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
    if (!FIELD_NAME.test(name)) {
      bad('is not an RFC 5322 field name (printable ASCII 33-126 but the colon)');
      continue;
    }
    if (name.length > MAX_HEADER_NAME_LENGTH) {
      bad(`is longer than ${MAX_HEADER_NAME_LENGTH} characters`);
      continue;
    }
    const lower = name.toLowerCase();
    if (isReservedHeader(name)) {
      bad(`is set by the service and cannot be given in headers`);
      continue;
    }
    if (seen.has(lower)) {
      bad('is given twice (header field names are case-insensitive)');
      continue;
    }
    seen.add(lower);
    if (HEADER_BREAK.test(value)) bad('must not contain CR, LF or NUL');
    else if (CONTROL.test(value) || LONE_SURROGATE.test(value)) bad('must not contain control characters');
    else if (!value.trim()) bad('must not be empty');
    else if (LONG_WORD.test(value)) bad('holds a word of 900 characters or more, which no header line can fit');
    else out[name] = value;
  }
  if (bytes > MAX_EXTRA_HEADER_BYTES)
    problems.push({ field: 'body.headers', message: `must be at most ${MAX_EXTRA_HEADER_BYTES} octets in all` });
  return out;
}

function attachmentsOf(raw: NonNullable<ExtraFields['attachments']>, problems: Problem[]): ComposeAttachment[] {
  const ids = new Set<string>();
  const out: ComposeAttachment[] = [];
  raw.forEach((a, i) => {
    const field = (f: string) => `body.attachments[${i}].${f}`;
    let ok = true;
    const bad = (f: string, message: string) => {
      problems.push({ field: field(f), message });
      ok = false;
    };
    if (CONTROL.test(a.filename) || HEADER_BREAK.test(a.filename) || LONE_SURROGATE.test(a.filename))
      bad('filename', 'must not contain control characters');
    if (a.content.length % 4 !== 0 || !BASE64.test(a.content))
      bad('content', 'is not base64 (RFC 4648 §4: the base64 alphabet, padded, no line breaks)');
    if (a.contentType !== undefined && !isAttachmentContentType(a.contentType))
      bad('contentType', 'must be type/subtype without parameters, and not multipart/* or message/*');
    if (a.contentId !== undefined) {
      if (!CONTENT_ID.test(a.contentId))
        bad('contentId', 'must be an id such as logo or logo@example.com, without angle brackets');
      else if (ids.has(a.contentId)) bad('contentId', 'is given twice');
      ids.add(a.contentId);
    }
    if (ok)
      out.push({
        filename: a.filename,
        content: Buffer.from(a.content, 'base64'),
        ...(a.contentType !== undefined ? { contentType: a.contentType } : {}),
        ...(a.contentId !== undefined ? { contentId: a.contentId } : {}),
      });
  });
  return out;
}

function tagsOf(raw: NonNullable<ExtraFields['tags']>, problems: Problem[]): string | null {
  const names = new Set<string>();
  raw.forEach((t, i) => {
    if (names.has(t.name)) problems.push({ field: `body.tags[${i}].name`, message: 'is given twice' });
    names.add(t.name);
  });
  return raw.length ? JSON.stringify(raw.map((t) => ({ name: t.name, value: t.value }))) : null;
}

function metadataOf(raw: Readonly<Record<string, string>>, problems: Problem[]): string | null {
  const json = JSON.stringify(raw);
  for (const [k, v] of Object.entries(raw)) {
    if (NOT_JSONB_TEXT.test(k) || NOT_JSONB_TEXT.test(v))
      problems.push({ field: `body.metadata.${k}`, message: 'must not contain NUL or a lone surrogate' });
  }
  if (Buffer.byteLength(json) > MAX_METADATA_BYTES)
    problems.push({ field: 'body.metadata', message: `must be at most ${MAX_METADATA_BYTES} octets as JSON` });
  return Object.keys(raw).length ? json : null;
}

/** Checks the extra fields of a send; a 400 naming every field refused. */
export function extrasOf(b: ExtraFields): Extras {
  const problems: Problem[] = [];
  const replyTo = b.replyTo === undefined ? undefined : replyToOf(b.replyTo, problems);
  const headers = b.headers === undefined ? undefined : headersOf(b.headers, problems);
  const attachments = b.attachments === undefined ? undefined : attachmentsOf(b.attachments, problems);
  const tags = b.tags === undefined ? null : tagsOf(b.tags, problems);
  const metadata = b.metadata === undefined ? null : metadataOf(b.metadata, problems);
  if (problems.length) {
    throw fail(
      'invalid_request',
      `Invalid body: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}.`,
      problems,
    );
  }
  return {
    compose: {
      ...(replyTo?.length ? { replyTo } : {}),
      ...(attachments?.length ? { attachments } : {}),
    },
    headers: headers && Object.keys(headers).length ? headers : undefined,
    tags,
    metadata,
  };
}
