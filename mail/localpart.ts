// The local part of an inbox address, as a customer creates it (docs/api.md §4.11): an RFC 5321
// §4.1.2 Dot-string and nothing else. Pure.
//
// Refused on purpose:
// - Quoted-string local parts (§4.1.2 allows them, §4.1.2 also says they SHOULD NOT be used): every
//   address we hand out must be writable without quoting in any client.
// - Non-ASCII: atext is ASCII (RFC 5322 §3.2.3); UTF-8 local parts need SMTPUTF8 (RFC 6531), which
//   our MX does not offer.

/** RFC 5321 §4.5.3.1.1: at most 64 octets. */
export const MAX_LOCALPART_OCTETS = 64;

// RFC 5322 §3.2.3 atext: ALPHA / DIGIT / "!#$%&'*+-/=?^_`{|}~". A Dot-string is Atom *("." Atom).
const DOT_STRING = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*$/;

export type LocalpartProblem = 'empty' | 'too_long' | 'not_dot_string';

/** Why a local part is refused, or null when it is a valid Dot-string. */
export function localpartProblem(localpart: string): LocalpartProblem | null {
  if (typeof localpart !== 'string' || localpart.length === 0) return 'empty';
  if (!DOT_STRING.test(localpart)) return 'not_dot_string';
  // Checked after the pattern, which admits ASCII only, so characters and octets are the same count.
  if (localpart.length > MAX_LOCALPART_OCTETS) return 'too_long';
  return null;
}

export function isValidLocalpart(localpart: string): boolean {
  return localpartProblem(localpart) === null;
}

/**
 * The form we compare and store for uniqueness: lower case. RFC 5321 §2.4 lets the receiving host
 * treat local parts as case-sensitive, but two inboxes that differ only by case would be a trap for
 * senders (and many MTAs and address books change case), so "Info" and "info" are one inbox here.
 * Returns null for an invalid local part.
 */
export function normalizeLocalpart(localpart: string): string | null {
  return isValidLocalpart(localpart) ? localpart.toLowerCase() : null;
}
