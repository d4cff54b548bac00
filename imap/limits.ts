// The protocol layer's limits, in one place, each with the reason it has the value it has. The reader
// (imap/reader.ts) enforces the byte limits before anything is buffered; the parser the structural ones.

/**
 * RFC 7162 §4: clients should keep a command line to about 8192 octets, literals not counted, and
 * servers should accept at least that; RFC 2683 §3.2.1.5 asks servers for 8000. mox reads command lines
 * into buffers of the same order (16 KiB, citing RFC 7162) and fails longer ones. One line, CRLF excluded.
 */
export const MAX_LINE_BYTES = 8192;

/**
 * A literal outside APPEND is a user name, a password, a mailbox name or a SEARCH string: 64 KiB is far
 * above any of them (mox allows 100 KiB) and small enough to buffer. RFC 7888 §4 lets a server refuse a
 * larger one with `BAD [TOOBIG]`.
 */
export const MAX_LITERAL_BYTES = 64 * 1024;

/** mox allows ten times its literal size per command; the same ratio here. APPEND's message not counted. */
export const MAX_COMMAND_LITERAL_BYTES = 10 * MAX_LITERAL_BYTES;

/** A command of a thousand literals is an attack, not a client (mox's limit is the same order). */
export const MAX_LITERALS_PER_COMMAND = 100;

/**
 * APPENDLIMIT (RFC 7889 §2) when the operator sets none: the largest message APPEND takes. 50 MiB is
 * above what the MX listener accepts by default, so a message that reached a mailbox can be put back.
 */
export const DEFAULT_APPEND_LIMIT = 50 * 1024 * 1024;

/**
 * RFC 3501 §5.4: an inactivity autologout timer must be at least 30 minutes, and any command resets it.
 * The RFC draws no line between states, so the not-authenticated timer is the same (mox uses 30 s there,
 * which the RFC does not allow).
 */
export const AUTOLOGOUT_MS = 30 * 60 * 1000;

/**
 * RFC 2177 §3: a server may log out a client that has been idle for 30 minutes without re-issuing IDLE;
 * clients re-issue IDLE at least every 29 minutes. The IDLE timer is therefore the same 30 minutes.
 */
export const IDLE_TIMEOUT_MS = 30 * 60 * 1000;

/** Nested SEARCH keys (`NOT`, `OR`, parentheses): deep enough for any client, shallow enough for the stack. */
export const MAX_SEARCH_DEPTH = 100;

/** RFC 2971 §3.3: at most 30 field-value pairs, fields of at most 30 octets, values of at most 1024. */
export const ID_MAX_PAIRS = 30;
export const ID_MAX_FIELD_BYTES = 30;
export const ID_MAX_VALUE_BYTES = 1024;

/** RFC 3501 §9 `number`: an unsigned 32-bit integer; UIDs and sequence numbers never exceed it. */
export const MAX_NUMBER = 4294967295;

/** RFC 7162 §7 `mod-sequence-value`: 1 to 2^63-1. */
export const MAX_MODSEQ = (1n << 63n) - 1n;
