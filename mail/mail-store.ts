// The mailbox backend that the MX listener, the IMAP server and the webmail API call (docs/conventions.md
// #1: protocol code and storage joined by a small named interface), and its change feed. Declared here,
// implemented in storage/pg/mail-store.ts; none of the callers writes SQL. Types and tiny pure helpers.
//
// Per mailbox: a UIDVALIDITY never reused, and UID and MODSEQ allocated together in the transaction that
// inserts the message, so both only grow (RFC 3501 §2.3.1.1, RFC 7162 §3.1). Every append, flag change
// and expunge writes a journal entry in the same transaction and wakes the change feed after it commits.
import type { BlobRef } from './blob-store.js';

/** RFC 6154 §2 special-use roles. */
export type SpecialUse = '\\All' | '\\Archive' | '\\Drafts' | '\\Flagged' | '\\Junk' | '\\Sent' | '\\Trash';

/** The mailboxes every inbox starts with (issue 12): INBOX plus four RFC 6154 roles. */
export const DEFAULT_MAILBOXES: readonly { name: string; specialUse: SpecialUse | null }[] = [
  { name: 'INBOX', specialUse: null },
  { name: 'Sent', specialUse: '\\Sent' },
  { name: 'Drafts', specialUse: '\\Drafts' },
  { name: 'Trash', specialUse: '\\Trash' },
  { name: 'Junk', specialUse: '\\Junk' },
];

export interface Mailbox {
  id: string;
  inboxId: string;
  name: string;
  specialUse: SpecialUse | null;
  uidValidity: number;
  uidNext: number;
  highestModseq: number;
  subscribed: boolean;
}

/** A message as the list views and FETCH of metadata read it, without opening the body. */
export interface StoredMessage {
  id: string;
  mailboxId: string;
  uid: number;
  modseq: number;
  /** SHA-256 of the stored body: its content hash and its blob store address. */
  blobAddress: string;
  /** Header lines added on receipt, served in front of the body (which is never rewritten). */
  prefix: Buffer;
  /** RFC822.SIZE: prefix plus body. */
  size: number;
  internalDate: Date;
  /** System flags in canonical case, then keywords, as FLAGS shows them. */
  flags: string[];
  messageId: string | null;
  envelope: unknown;
  structure: unknown;
}

export interface AppendInput {
  mailboxId: string;
  /** The body, already in the blob store; append takes a reference of its own (the caller keeps its). */
  blob: BlobRef;
  /**
   * Instead, the caller's own reference (its put's) becomes the row's once the row is stored, and stays the
   * caller's otherwise (any outcome but `appended`, or a throw): one write to the blob store less a message.
   */
  takesCallerRef?: boolean;
  prefix?: Uint8Array;
  internalDate: Date;
  flags?: readonly string[];
  messageId?: string | null;
  /** JSON values computed once at insert (mail/mime-tree.ts). */
  envelope?: unknown;
  structure?: unknown;
  /** docs/decisions.md #20: an import key already present in the inbox makes this a duplicate. */
  importKey?: string | null;
  /**
   * Refuse when the message would take the inbox past its limit (IMAP APPEND: RFC 9208 §4.3 OVERQUOTA).
   * The MX leaves it unset: a message accepted at DATA is stored even past the limit (docs/decisions.md #19).
   */
  enforceLimit?: boolean;
  /** Starts the inbox's billing at this time if it has not started (first inbound mail, docs/decisions.md #18). */
  startBillingAt?: Date;
}

export type AppendOutcome =
  | { kind: 'appended'; id: string; uid: number; modseq: number; uidValidity: number; size: number }
  | { kind: 'duplicate' }
  | { kind: 'over_quota' }
  /** The mailbox does not exist, or its inbox is deleted. */
  | { kind: 'no_mailbox' };

export type FlagMode = 'add' | 'remove' | 'replace';

export interface FlagChange {
  mode: FlagMode;
  flags: readonly string[];
}

export interface FlagsOutcome {
  /** The modseq of this change; null when no message changed. */
  modseq: number | null;
  /** The messages whose flags changed, with their new flags. */
  changed: { uid: number; flags: string[] }[];
  /** RFC 7162 §3.1.3: UIDs left alone because they changed after `unchangedSince` (MODIFIED). */
  modified: number[];
}

export interface ExpungeOutcome {
  modseq: number | null;
  expunged: number[];
}

export type ChangeKind = 'append' | 'flags' | 'expunge';

export interface Change {
  modseq: number;
  uid: number;
  kind: ChangeKind;
  /** The new flags of a `flags` change; null otherwise. */
  flags: string[] | null;
}

export interface MailStore {
  /** Creates INBOX, Sent, Drafts, Trash and Junk for an inbox (idempotent; createInbox does it in its transaction). */
  createDefaultMailboxes(inboxId: string): Promise<Mailbox[]>;
  /** A folder a user creates; null when the inbox already has one of that name (or that role). */
  createMailbox(inboxId: string, name: string, specialUse?: SpecialUse | null): Promise<Mailbox | null>;
  mailboxes(inboxId: string): Promise<Mailbox[]>;
  mailbox(mailboxId: string): Promise<Mailbox | null>;
  append(input: AppendInput): Promise<AppendOutcome>;
  /**
   * Several appends in one transaction (one message to several inboxes): every input that can be stored is,
   * atomically, and the outcomes come back in input order. A duplicate import key refuses them all.
   */
  appendAll(inputs: readonly AppendInput[]): Promise<AppendOutcome[]>;
  /**
   * appendAll whose transaction may also carry other concurrent callers' inputs (group commit): answered once
   * that shared transaction commits; when it fails, each caller's inputs are tried again on their own. For
   * inputs without import keys.
   */
  appendGrouped(inputs: readonly AppendInput[]): Promise<AppendOutcome[]>;
  setFlags(
    mailboxId: string,
    uids: readonly number[],
    change: FlagChange,
    opts?: { unchangedSince?: number },
  ): Promise<FlagsOutcome>;
  /** Removes the messages, gives their bytes back to the inbox and their blob references back to the store. */
  expunge(mailboxId: string, uids: readonly number[], opts?: { deletedOnly?: boolean }): Promise<ExpungeOutcome>;
  /** Journal entries after `modseq`, oldest first. */
  changesSince(mailboxId: string, modseq: number, limit?: number): Promise<Change[]>;
  /** The index rows of a mailbox in UID order: all, the given UIDs, or those changed after a modseq. */
  messages(mailboxId: string, opts?: { uids?: readonly number[]; changedSince?: number }): Promise<StoredMessage[]>;
}

/** What the feed says: something in this mailbox changed, up to this modseq. */
export interface ChangeNotice {
  inboxId: string;
  mailboxId: string;
  modseq: number;
}

export type ChangeFilter = { mailboxId: string } | { inboxId: string };

// Inbox notices: the contract between the inbox routes (core/inboxes.ts) and every session of an inbox.
//
// A password change and a deletion (docs/api.md §4.5, §3) bump the inbox's credentials version
// (storage/pg/inboxes.ts, inboxes.credentials_version) and, at the commit of that change, publish an inbox
// notice: a ChangeNotice whose mailboxId is '' and modseq 0. It reaches subscribers with `{ inboxId }` only
// (no mailbox has the id ''), in this process and in every other one sharing the database.
//
// What a session (IMAP, webmail) does: at login it reads the credentials version (inboxCredentials in
// storage/pg/inboxes.ts) and subscribes with `{ inboxId }`. When an inbox notice arrives it reads the version
// again and ends, at once, when the version is larger than the one it logged in with or the inbox is deleted
// (IMAP: an untagged `BYE` and the connection closed, RFC 9051 §7.1.5; webmail: its session refused). A
// notice is a wake-up, as ever: a session that reads an unchanged version keeps going.

/** The inbox notice of `inboxId` (see "Inbox notices" above). */
export const inboxNotice = (inboxId: string): ChangeNotice => ({ inboxId, mailboxId: '', modseq: 0 });

export const isInboxNotice = (notice: ChangeNotice): boolean => notice.mailboxId === '';

export interface ChangeFeed {
  /**
   * Calls `onChange` after each committed change that matches, in this process or (on Postgres) in any
   * process sharing the database. Resolves once the subscription is live, with the function that ends it.
   * A notice is a wake-up, not the data: read `changesSince` for what changed.
   */
  subscribe(filter: ChangeFilter, onChange: (notice: ChangeNotice) => void): Promise<() => void>;
}

// RFC 9051 §2.3.2 system flags. \Recent (RFC 3501) is a session flag: never stored, never set by a client.
const SYSTEM_FLAGS = ['\\Seen', '\\Answered', '\\Flagged', '\\Deleted', '\\Draft'] as const;
const CANONICAL = new Map<string, string>(SYSTEM_FLAGS.map((f) => [f.toLowerCase(), f]));
// RFC 9051 §9: flag-keyword = atom; atom-specials are ( ) { SP CTL % * " \ ].
const KEYWORD = /^[^(){ %*"\\\]\x00-\x1f\x7f]+$/;

/**
 * Flags in canonical order and case: system flags (recognized case-insensitively) first, then keywords
 * in the order given, each once (flag names are case-insensitive). Throws a TypeError on a name that
 * is neither.
 */
export function normalizeFlags(flags: readonly string[]): string[] {
  const system = new Set<string>();
  const keywords = new Map<string, string>();
  for (const f of flags) {
    const canonical = CANONICAL.get(f.toLowerCase());
    if (canonical) system.add(canonical);
    else if (KEYWORD.test(f) && !f.startsWith('\\')) {
      if (!keywords.has(f.toLowerCase())) keywords.set(f.toLowerCase(), f);
    } else throw new TypeError(`not a storable flag: ${JSON.stringify(f)}`);
  }
  return [...SYSTEM_FLAGS.filter((f) => system.has(f)), ...keywords.values()];
}

/** The flags after a STORE (RFC 9051 §6.4.6): FLAGS replaces, +FLAGS adds, -FLAGS removes. */
export function applyFlagChange(current: readonly string[], change: FlagChange): string[] {
  const given = normalizeFlags(change.flags);
  if (change.mode === 'replace') return given;
  if (change.mode === 'add') return normalizeFlags([...current, ...given]);
  const drop = new Set(given.map((f) => f.toLowerCase()));
  return normalizeFlags(current.filter((f) => !drop.has(f.toLowerCase())));
}

export function sameFlags(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((f, i) => f === b[i]);
}
