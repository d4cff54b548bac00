// Domain names as customers type them, turned into the one form we store, compare and look up:
// lower case, no trailing dot, IDN labels in punycode (A-labels). Pure: no DNS, no storage.
// Used by custom webmail domains (docs/api.md §4.4) and domain claims (docs/api.md §4.5).
import { domainToASCII, domainToUnicode } from 'node:url';

/** RFC 1035 §2.3.4: 255 octets on the wire, so at most 253 characters written out without the root dot. */
export const MAX_DOMAIN_LENGTH = 253;
/** RFC 1035 §2.3.4: labels are 63 octets or less. */
export const MAX_LABEL_LENGTH = 63;

// Longer input is refused before any IDN processing: even a name of 253 A-label characters is far
// shorter than this in its Unicode form, so nothing valid is lost.
const MAX_RAW_LENGTH = 1024;

// RFC 952 / RFC 1123 §2.1 host name labels: letters, digits and hyphens, not starting or ending with a
// hyphen (a leading digit is allowed). Punycode A-labels (RFC 5890 `xn--`) fit the same pattern.
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
// ASCII that may appear in a name as typed: anything else ASCII (%, _, space, brackets, ':', '/', '@')
// is refused rather than decoded or mapped away by the URL host parser. Non-ASCII is left to IDNA.
const ASCII_OUTSIDE_HOSTNAME = /[\x00-\x2c\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]/;

/**
 * The normalized form of a host name, or null when it is not a valid one.
 *
 * Trims, lower-cases, removes one trailing dot (the DNS root), converts IDN labels to punycode
 * (UTS #46 via the WHATWG URL host parser, as browsers do) and then requires a host name:
 * at least two labels, each 1 to 63 characters of [a-z0-9-] not starting or ending with '-',
 * at most 253 characters in all, and not an IP address (RFC 3696 §2: a top-level label is never
 * all-numeric, which also rules out every IPv4 spelling).
 */
export function normalizeDomain(raw: string): string | null {
  if (typeof raw !== 'string' || raw.length > MAX_RAW_LENGTH) return null;
  let s = raw.trim().toLowerCase();
  if (s.endsWith('.')) s = s.slice(0, -1);
  if (!s || ASCII_OUTSIDE_HOSTNAME.test(s)) return null;
  // domainToASCII returns '' for what the URL host parser refuses: disallowed code points, an invalid
  // IPv4 number. It also maps IDNA equivalents (ideographic full stop, full-width letters) to their
  // ASCII form. Invalid punycode (xn--zz) it refuses on Node 20 but passes through unchanged on Node 24,
  // so each A-label is checked below.
  const ascii = HOSTNAME_ASCII.test(s) ? asciiHost(s) : domainToASCII(s);
  // No isIP here: an IPv6 address fails LABEL (its ':'), and an IPv4 one the all-numeric last label below. On the
  // hot path (every sender and recipient domain) net.isIP's IPv6 expression cost more than the rest of the checks.
  if (!ascii || ascii.length > MAX_DOMAIN_LENGTH) return null;
  const labels = ascii.split('.');
  if (labels.length < 2) return null;
  if (!labels.every((l) => l.length <= MAX_LABEL_LENGTH && LABEL.test(l) && validALabel(l))) return null;
  if (/^[0-9]+$/.test(labels[labels.length - 1] as string)) return null;
  return ascii;
}

// Only letters, digits, hyphens and dots: the name every sender and recipient domain is written in.
const HOSTNAME_ASCII = /^[a-z0-9.-]+$/;
// What the URL parser reads as an IPv4 number (URL Standard, "IPv4 number parser"): digits, or 0x and hex digits.
const NUMBER = /^(?:[0-9]+|0x[0-9a-f]*)$/;

/**
 * What domainToASCII gives for a name of [a-z0-9.-] already in lower case, without the URL host parser: such a name
 * has nothing to map or encode, so the parser returns it as it is, unless its last label is a number. Then the parser
 * reads the name as IPv4 and gives the address or '' (not one), and this gives '': normalizeDomain refuses both (an
 * IP, a numeric top-level label), as it refuses `xn--` labels that are not A-labels (validALabel).
 * test/mail/domain-names.test.ts compares the two on every short name of such characters. Why: a send normalizes
 * several domains (its sender's, its recipients', its return path's), and with the parser normalizeDomain took ~1.7 µs
 * a name here, without it ~0.5; the parser was ~3% of the control's CPU in sendEmail at 64 clients (a CPU profile of
 * `npm run bench`).
 */
export function asciiHost(s: string): string {
  // The parser reads the last label before a trailing dot (URL Standard, "ends in a number checker").
  const end = s.endsWith('.') ? s.length - 1 : s.length;
  return NUMBER.test(s.slice(s.lastIndexOf('.', end - 1) + 1, end)) ? '' : s;
}

/**
 * An `xn--` label must be an A-label (RFC 5890 §2.3.2.1): it decodes to a U-label (non-ASCII) that
 * encodes back to the same label. Other labels pass.
 */
function validALabel(label: string): boolean {
  if (!label.startsWith('xn--')) return true;
  const unicode = domainToUnicode(label);
  return /[^\x00-\x7f]/.test(unicode) && domainToASCII(unicode) === label;
}
