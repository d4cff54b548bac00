// BODY[section]<partial> of FETCH (RFC 3501 §6.4.5) as byte ranges of the message a client sees:
// the receipt prefix (Return-Path, Received, Authentication-Results lines added at delivery) followed
// by the stored body. The MIME tree (mail/mime-tree.ts) is computed over the stored body alone, so
// every offset in it moves by the prefix length, except the start of the top-level header: the prefix
// is part of that header (BODY[HEADER] and BODY[] begin with it), as mox serves its MsgPrefix.
//
// A plan says which bytes to read, so that the handler reads only those (a partial of a part is a
// small range read) and HEADER.FIELDS filtering is done here on the header bytes alone.
import type { Section } from './command-types.js';
import { sectionRange, type MimeTree } from '../mail/mime-tree.js';

export interface SectionPlan {
  /** Octets [start, end) of the served message (prefix + body) to read. */
  start: number;
  end: number;
  /** HEADER.FIELDS (.NOT): the header range is read whole and filtered; the partial comes after. */
  filter: { names: string[]; not: boolean } | null;
  /** A partial still to apply after filtering (only with a filter: otherwise already in the range). */
  partial: { offset: number; length: number } | null;
}

/**
 * A message known only by its stored size and its top-level header's length (a FETCH that needs no
 * more reads no MIME tree, imap/backend.ts fetchMeta): enough for the sections of the message itself.
 */
export interface TopLevel {
  size: number;
  headerEnd: number;
}

/** Whether a section is one of the message itself (BODY[], [HEADER], [TEXT], [HEADER.FIELDS …]): no tree needed. */
export const isTopLevel = (section: Section) => section.part.length === 0 && section.text !== 'MIME';

function topLevelRange(m: TopLevel, section: Section): { start: number; end: number } | null {
  if (!isTopLevel(section)) return null;
  if (section.text === null) return { start: 0, end: m.size };
  return section.text === 'TEXT' ? { start: m.headerEnd, end: m.size } : { start: 0, end: m.headerEnd };
}

/**
 * The plan for one section, or null when the message has no such part (the FETCH answer is then
 * NIL). `partial` is RFC 3501 §6.4.5 `<origin.octets>`: an origin past the end gives an empty string.
 * `tree` may be a TopLevel for a section of the message itself.
 */
export function planSection(
  tree: MimeTree | TopLevel,
  prefixLength: number,
  section: Section,
  partial: { offset: number; length: number } | null,
): SectionPlan | null {
  const text = section.text;
  const range = 'body' in tree ? sectionRange(tree, section.part, text) : topLevelRange(tree, section);
  if (!range) return null;
  // Only the top-level header starts at 0: it takes the prefix in; everything else moves past it.
  const start = range.start === 0 ? 0 : range.start + prefixLength;
  const end = range.end + prefixLength;
  if (text === 'HEADER.FIELDS' || text === 'HEADER.FIELDS.NOT') {
    return { start, end, filter: { names: section.fields ?? [], not: text === 'HEADER.FIELDS.NOT' }, partial };
  }
  if (!partial) return { start, end, filter: null, partial: null };
  const from = Math.min(end, start + partial.offset);
  return { start: from, end: Math.min(end, from + partial.length), filter: null, partial: null };
}

/** The section's octets, given `source` = octets [sourceStart, …) of the served message, covering the plan. */
export function sectionBytes(plan: SectionPlan, source: Buffer, sourceStart: number): Buffer {
  let bytes = source.subarray(plan.start - sourceStart, plan.end - sourceStart);
  if (plan.filter) bytes = filterHeaderFields(bytes, plan.filter.names, plan.filter.not);
  return plan.partial ? clipPartial(bytes, plan.partial) : bytes;
}

/** RFC 3501 §6.4.5: `<origin.octets>` — from origin, at most octets; past the end, the empty string. */
export function clipPartial(bytes: Buffer, partial: { offset: number; length: number }): Buffer {
  if (partial.offset >= bytes.length) return bytes.subarray(0, 0);
  return bytes.subarray(partial.offset, partial.offset + partial.length);
}

/**
 * RFC 3501 §6.4.5 HEADER.FIELDS / HEADER.FIELDS.NOT over a header block: the fields whose name is (or
 * is not) in `names`, compared without regard to case, each with its folded continuation lines
 * (RFC 5322 §2.2.3), in message order, then the blank line that ends a header, as Dovecot and Cyrus
 * return it. A line that is not a field (no colon, an mbox "From " line) is in neither answer.
 */
export function filterHeaderFields(header: Buffer, names: readonly string[], not: boolean): Buffer {
  const wanted = new Set(names.map((n) => n.toLowerCase()));
  const out: Buffer[] = [];
  let keep = false;
  let at = 0;
  while (at < header.length) {
    const lf = header.indexOf(0x0a, at);
    const end = lf < 0 ? header.length : lf + 1;
    const line = header.subarray(at, end);
    at = end;
    const blank = line.length === 0 || line[0] === 0x0a || (line[0] === 0x0d && line[1] === 0x0a);
    if (blank) break; // RFC 5322 §2.1: the header ends at the first empty line
    if (line[0] === 0x20 || line[0] === 0x09) {
      if (keep) out.push(line); // a continuation belongs to the field above it
      continue;
    }
    const colon = line.indexOf(0x3a);
    const name = colon > 0 ? line.subarray(0, colon).toString('latin1').trim().toLowerCase() : null;
    // RFC 5322 §3.6.8: a field name is printable US-ASCII without spaces or colons.
    keep = name !== null && /^[\x21-\x39\x3b-\x7e]+$/.test(name) && wanted.has(name) !== not;
    if (keep) out.push(line);
  }
  // A kept last line that ends without a line break still needs one before the blank line.
  const last = out[out.length - 1];
  if (last && last[last.length - 1] !== 0x0a) out.push(Buffer.from('\r\n'));
  out.push(Buffer.from('\r\n'));
  return Buffer.concat(out);
}
