// What makes platform mail (password resets, invitations, TLS reports) recognisable and authenticated beside its
// DKIM signature: the envelope sender on the notify domain, the From with a display name, and Auto-Submitted
// (RFC 3834 §5). docs/operations.md, "Platform mail".
import { encodeWord } from 'nodemailer/lib/mime-funcs';
import type { Mailbox } from './compose.js';

/**
 * The envelope sender (RFC 5321 §4.1.2 reverse-path) of platform mail: a fixed address on the notify domain, so
 * that SPF is checked on the domain the From names (RFC 7489 §3.1.2, aligned) and bounces go to the operator.
 */
export const platformReturnPath = (notifyDomain: string) => `bounces@${notifyDomain}`;

/** RFC 3834 §5: machine-made mail; auto-responders do not answer it (§2). */
export const AUTO_SUBMITTED = 'auto-generated';

/** RFC 5322 §3.2.3 atext, plus space between words: a phrase needing no quotes. */
const PLAIN_PHRASE = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+( [A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*$/;

/** A mailbox as a header value: the name as atoms, a quoted string (RFC 5322 §3.2.4), or encoded (RFC 2047 §5). */
export function formatMailbox(m: Mailbox): string {
  if (/[\r\n\x00]/.test(m.name ?? '') || /[\s<>"\x00-\x1f\x7f]/.test(m.address))
    throw new Error('formatMailbox: a control character or space in the name or address');
  if (!m.name) return m.address;
  const name = PLAIN_PHRASE.test(m.name)
    ? m.name
    : /^[\x20-\x7e]*$/.test(m.name)
      ? `"${m.name.replace(/(["\\])/g, '\\$1')}"`
      : encodeWord(m.name, 'B', 52);
  return `${name} <${m.address}>`;
}

/**
 * A message a producer built whole (a TLS report) made platform mail: its From field replaced by `from` (with the
 * display name) and Auto-Submitted added when it has none. The header is rewritten line by line, folded fields
 * kept (RFC 5322 §2.2.3); the body is untouched.
 */
export function withPlatformHeaders(raw: Buffer, from: Mailbox): Buffer {
  const text = raw.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const head = end < 0 ? text : text.slice(0, end);
  const rest = end < 0 ? '' : text.slice(end);
  const eol = head.includes('\r\n') ? '\r\n' : '\n';
  // Fields, each with its folded continuation lines.
  const fields: string[] = [];
  for (const line of head.split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && fields.length) fields[fields.length - 1] += eol + line;
    else fields.push(line);
  }
  const name = (f: string) => f.slice(0, f.indexOf(':')).trim().toLowerCase();
  const fromLine = `From: ${Buffer.from(formatMailbox(from), 'utf8').toString('latin1')}`;
  const out = fields.map((f) => (name(f) === 'from' ? fromLine : f));
  if (!out.some((f) => name(f) === 'from')) out.unshift(fromLine);
  if (!out.some((f) => name(f) === 'auto-submitted')) out.push(`Auto-Submitted: ${AUTO_SUBMITTED}`);
  return Buffer.from(out.join(eol) + rest, 'latin1');
}
