// The one door between the IMAP protocol layer and the mail store (docs/conventions.md #1): every
// operation an IMAP server needs, declared here, implemented next to storage/ and adapted to this shape.
// The protocol code calls only this; it never sees SQL, LMDB or a blob id.
//
// Names are Unicode (modified UTF-7 is decoded at the parser), hierarchy delimiter "/", "INBOX" spelled
// so. UIDs and counts are 32-bit (RFC 3501 §9 `number`); MODSEQs are bigint (RFC 7162 §7, up to 2^63-1).

import type { MimeTree } from '../mail/mime-tree.js';

/** Who logged in: what the backend needs to find their mailboxes again. */
export interface Principal {
  readonly id: string;
  readonly username: string;
}

/** RFC 6154 §2 special-use attributes. */
export type SpecialUse = '\\All' | '\\Archive' | '\\Drafts' | '\\Flagged' | '\\Junk' | '\\Sent' | '\\Trash';

export interface MailboxInfo {
  name: string;
  specialUse: SpecialUse | null;
  subscribed: boolean;
  /** RFC 3501 §7.2.2 \Noselect: a name that exists only as a parent of others. */
  selectable: boolean;
  hasChildren: boolean;
}

/** RFC 3501 §6.3.10 STATUS, with RFC 7162 §3.1.6 HIGHESTMODSEQ. */
export interface MailboxStatus {
  messages: number;
  recent: number;
  unseen: number;
  uidNext: number;
  uidValidity: number;
  highestModseq: bigint;
  /** Octets of all messages, for QUOTA and STATUS=SIZE. */
  size: number;
}

/** What SELECT / EXAMINE need (RFC 3501 §6.3.1, RFC 7162 §3.1.2): the state plus the UID map. */
export interface MailboxSnapshot extends MailboxStatus {
  /** Opaque handle for the operations below; stable while the mailbox exists. */
  mailboxId: string;
  /** The UIDs in the mailbox, ascending: index + 1 is the message sequence number. */
  uids: number[];
  /** Keywords in use, for FLAGS and PERMANENTFLAGS (RFC 3501 §7.2.6). */
  keywords: string[];
  readOnly: boolean;
  /** The lowest UID without \\Seen, for `OK [UNSEEN n]` (RFC 3501 §6.3.1); null when all are seen. */
  firstUnseenUid: number | null;
  /**
   * RFC 3501 §2.3.2: the UIDs that are \Recent in this session (it is the first to see them since they
   * arrived). FETCH FLAGS shows \Recent on them, SEARCH RECENT/NEW/OLD test it; absent means none.
   */
  recentUids?: readonly number[];
}

/** Per-message facts FETCH and SEARCH read without the body. */
export interface MessageMeta {
  uid: number;
  modseq: bigint;
  flags: string[];
  internalDate: Date;
  /** RFC822.SIZE: the receipt prefix plus the stored body. */
  size: number;
  /**
   * The MIME structure stored with the message (mail/mime-tree.ts, computed once at delivery or APPEND):
   * ENVELOPE, BODYSTRUCTURE and every BODY[section] range come from it. Its offsets are over the stored
   * body alone; imap/fetch-sections.ts moves them past the prefix. null when fetchMeta was asked for no
   * tree (a FETCH of flags, sizes, BODY[], BODY[HEADER] or BODY[TEXT] needs only `headerEnd`).
   */
  tree: MimeTree | null;
  /** Octets of the stored body's top-level header, its blank line included (the tree's body.bodyStart). */
  headerEnd: number;
  /**
   * Octets of the receipt prefix (Return-Path, Received, Authentication-Results lines added at delivery)
   * that `readBody` serves in front of the stored body; 0 for an APPENDed message.
   */
  prefixLength: number;
  /**
   * The backend's own handle on where the message's bytes are, opaque to the protocol layer, which passes
   * it back to `readBody` so that reading a body costs no second look-up of the message.
   */
  ref?: unknown;
}

/** One range of `readBodies`: octets [start, end) of message `uid` as served, `ref` its MessageMeta.ref. */
export interface BodyRange {
  uid: number;
  start: number;
  end: number;
  ref?: unknown;
}

export interface StoreRequest {
  op: 'replace' | 'add' | 'remove';
  flags: string[];
  /** RFC 7162 §3.1.3: only messages whose MODSEQ is at most this are changed. */
  unchangedSince: bigint | null;
}

export interface StoreResult {
  /** Messages changed, with their new flags and MODSEQ, for the untagged FETCH responses. */
  changed: Array<{ uid: number; flags: string[]; modseq: bigint }>;
  /** RFC 7162 §3.1.3: UIDs that failed UNCHANGEDSINCE, for `[MODIFIED ...]`. */
  modified: number[];
}

/** RFC 4315 §3 COPYUID: source and destination UIDs, pairwise. */
export interface CopyResult {
  uidValidity: number;
  source: number[];
  dest: number[];
}

/** What happened in a mailbox since a MODSEQ, for NOOP, IDLE and CONDSTORE (RFC 7162 §3.1.4). */
export type MailboxChange =
  | { kind: 'added'; uid: number; modseq: bigint }
  | { kind: 'flags'; uid: number; flags: string[]; modseq: bigint }
  | { kind: 'expunged'; uid: number; modseq: bigint };

/** RFC 9208 §4.2: one resource of a quota root; STORAGE is in units of 1024 octets. */
export interface QuotaRoot {
  name: string;
  resources: Array<{ name: 'STORAGE' | 'MESSAGE'; usage: number; limit: number }>;
}

/**
 * Why an operation failed, mapped to one response code in one table (imap/commands.ts). Anything else
 * thrown is an internal error: `NO [SERVERBUG]`, never a crash.
 */
export type BackendErrorCode =
  | 'nonexistent' // NO [NONEXISTENT], or [TRYCREATE] for a missing APPEND/COPY/MOVE target (RFC 3501 §6.3.11)
  | 'already-exists' // NO [ALREADYEXISTS] (RFC 5530 §3)
  | 'over-quota' // NO [OVERQUOTA] (RFC 9208 §4.3)
  | 'too-big' // NO [TOOBIG] (RFC 7889 §2)
  | 'no-permission' // NO [NOPERM]
  | 'in-use' // NO [INUSE]
  | 'has-children' // NO [HASCHILDREN] (RFC 5530 §3), a DELETE of an inferior's parent
  | 'cannot' // NO [CANNOT]: e.g. RENAME of INBOX into its own child
  | 'unavailable'; // NO [UNAVAILABLE]: the store is down; try again

export class BackendError extends Error {
  readonly code: BackendErrorCode;
  constructor(code: BackendErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

export interface MailboxBackend {
  /**
   * Password check for LOGIN and AUTHENTICATE PLAIN; null for wrong credentials (not an exception).
   * Throws BackendError('unavailable') while failures from this client or for this user are throttled.
   */
  authenticate(username: string, password: string, meta: { remoteAddress: string }): Promise<Principal | null>;
  /** Whether a logged-in principal still holds: false once the inbox is deleted or its password changed. */
  checkPrincipal(user: Principal): Promise<boolean>;

  listMailboxes(user: Principal): Promise<MailboxInfo[]>;
  createMailbox(user: Principal, name: string, specialUse?: SpecialUse): Promise<void>;
  deleteMailbox(user: Principal, name: string): Promise<void>;
  /** RFC 3501 §6.3.5: inferiors move along; renaming INBOX moves its messages into a new mailbox. */
  renameMailbox(user: Principal, from: string, to: string): Promise<void>;
  setSubscribed(user: Principal, name: string, subscribed: boolean): Promise<void>;
  status(user: Principal, name: string): Promise<MailboxStatus>;

  /** SELECT / EXAMINE: the snapshot; `readOnly` for EXAMINE, which also leaves \Recent alone. */
  select(user: Principal, name: string, opts: { readOnly: boolean }): Promise<MailboxSnapshot>;
  /**
   * Metadata of the given UIDs (ascending), optionally only those changed after `changedSince`; with
   * `tree: false` without the MIME tree (MessageMeta.tree null), which saves reading and decoding it.
   * In pages (each ascending, none empty): a FETCH of 10,000 messages then waits a few times, not once
   * per message.
   */
  fetchMeta(
    user: Principal,
    mailboxId: string,
    uids: readonly number[],
    opts: { changedSince: bigint | null; tree?: boolean },
  ): AsyncIterable<MessageMeta[]>;
  /**
   * Octets [start, end) of a message as served: the receipt prefix, then the stored body (BODY[] is
   * octets [0, size)). FETCH asks for the one range covering the sections it returns, SEARCH for the
   * header or the body. SEARCH itself runs in the protocol layer (imap/search-eval.ts) over fetchMeta
   * and this, so the store needs no search of its own. A message expunged meanwhile is a
   * BackendError('nonexistent'); fetchMeta simply leaves such UIDs out. `ref` is the message's
   * MessageMeta.ref when the caller has it.
   */
  readBody(user: Principal, mailboxId: string, uid: number, start: number, end: number, ref?: unknown): Promise<Buffer>;
  /**
   * `readBody` of many messages in one call (FETCH asks for a batch's ranges at once, so that a FETCH of
   * 1,000 headers costs a few waits, not 1,000), in the order given; null for a message expunged
   * meanwhile. The caller bounds the octets it asks for in one call. With `alloc`, the octets are copied
   * into `alloc(size)` where the store can (memory the caller reuses once it has sent them). A store
   * that cannot read many at once answers with one `readBody` after another.
   */
  readBodies(
    user: Principal,
    mailboxId: string,
    ranges: readonly BodyRange[],
    alloc?: (size: number) => Buffer,
  ): Promise<Array<Buffer | null>>;
  /**
   * Optional, for SEARCH: a superset of the UIDs among `uids` whose header `field` (lower case) may
   * contain `needle`, without regard to case (RFC 3501 §6.4.4 HEADER and SUBJECT), found without
   * reading each message; null when the backend cannot tell for that field or needle. SEARCH still
   * tests every candidate (imap/search-eval.ts), so a backend may return too many, never too few, except
   * those in `matched`: certain matches (as search-eval would find them), which a SEARCH of that one key
   * takes without reading the message.
   */
  narrowByHeader?(
    user: Principal,
    mailboxId: string,
    uids: readonly number[],
    field: string,
    needle: string,
  ): Promise<{ candidates: number[]; matched: number[] } | null>;
  /** RFC 3501 §6.4.5: a non-PEEK BODY[] sets \Seen; the change must be seen by other sessions. */
  markSeen(user: Principal, mailboxId: string, uids: readonly number[]): Promise<StoreResult>;
  append(
    user: Principal,
    name: string,
    message: { bytes: Buffer; flags: string[]; internalDate: Date | null },
  ): Promise<{ uidValidity: number; uid: number }>;
  store(user: Principal, mailboxId: string, uids: readonly number[], req: StoreRequest): Promise<StoreResult>;
  copy(user: Principal, mailboxId: string, uids: readonly number[], target: string): Promise<CopyResult>;
  /** RFC 6851 §3.3: atomic copy-and-expunge; the expunged UIDs are the `source` of the result. */
  move(user: Principal, mailboxId: string, uids: readonly number[], target: string): Promise<CopyResult>;
  /** Expunges messages flagged \Deleted, only among `uids` when given (RFC 4315 §2.1 UID EXPUNGE). */
  expunge(user: Principal, mailboxId: string, uids: readonly number[] | null): Promise<number[]>;

  /** RFC 9208 §4.2, §4.3: the roots a mailbox belongs to, and one root's usage and limits. */
  quotaRoots(user: Principal, mailbox: string): Promise<QuotaRoot[]>;
  quota(user: Principal, root: string): Promise<QuotaRoot>;

  /** The changes after `since`, oldest first (RFC 7162 §3.1.4), for NOOP, IDLE and FETCH CHANGEDSINCE. */
  changesSince(user: Principal, mailboxId: string, since: bigint): Promise<MailboxChange[]>;
  /** Resolves when the mailbox may have changed, or when `signal` aborts (IDLE, RFC 2177). */
  waitForChange(user: Principal, mailboxId: string, signal: AbortSignal): Promise<void>;
  /**
   * Calls `onChange` after each committed change to the mailbox, from any process sharing the store.
   * Resolves once live (so a change after it is never missed), with the function that stops it.
   */
  watch(user: Principal, mailboxId: string, onChange: () => void): Promise<() => void>;
}
