// The password the server generates for a new inbox (docs/api.md §4.11: returned once, shown to a
// person who may type it into a mail client). Pure apart from the system CSPRNG.
import { randomInt } from 'node:crypto';

/**
 * 28 symbols with none that read alike: no 0/O/o, 1/l/I/i, and no 5/S, 2/Z, 8/B either. Lower case
 * and digits only, so that the password survives being read aloud or typed on a phone.
 */
export const PASSWORD_ALPHABET = '34679abcdefghjkmnpqrstuvwxyz';
/** Characters per group; groups are joined by "-", which carries no entropy. */
export const GROUP_LENGTH = 4;
/** At least 96 bits (the brief of issue 12): ceil(96 / log2(alphabet size)) symbols. */
export const MIN_ENTROPY_BITS = 96;

export const SYMBOLS =
  Math.ceil(Math.ceil(MIN_ENTROPY_BITS / Math.log2(PASSWORD_ALPHABET.length)) / GROUP_LENGTH) * GROUP_LENGTH;

/** The entropy of one generated password, in bits. */
export function passwordEntropyBits(): number {
  return SYMBOLS * Math.log2(PASSWORD_ALPHABET.length);
}

/**
 * e.g. "k7mq-x4dt-…": each symbol from crypto.randomInt, which draws by rejection sampling and so
 * has no modulo bias (Node's documentation of crypto.randomInt).
 */
export function generatePassword(): string {
  let out = '';
  for (let i = 0; i < SYMBOLS; i++) {
    if (i > 0 && i % GROUP_LENGTH === 0) out += '-';
    out += PASSWORD_ALPHABET[randomInt(PASSWORD_ALPHABET.length)];
  }
  return out;
}
