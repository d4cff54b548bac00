// How long a string made of a whole message may be before the message is handled a chunk at a time instead.
//
// V8 keeps an object of more than 128 KiB (its largest regular heap object) on pages of its own, mapped for it and
// unmapped once it is collected: a page fault every 4 kB, ~10 µs each on a machine under PVM (docs/decisions.md #85).
// A string of a whole 1 MB message cost more to make than everything else composing it did. So a message over
// WHOLE_STRING characters is written, checked and scanned in chunks of about STRING_CHUNK, each cut after an LF so
// that no line spans two; one up to WHOLE_STRING keeps the single string, which costs less for a message that fits.

/** Characters (octets, for the latin1 text of a message) of one chunk, about: half of V8's 128 KiB. */
export const STRING_CHUNK = 64 * 1024;

/** Characters of the longest message handled as one string: under V8's 128 KiB, with room for the string's header. */
export const WHOLE_STRING = 127 * 1024;
