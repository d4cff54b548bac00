// A session as the command handlers see it: its state (RFC 3501 §3), who logged in, what is selected,
// which extensions the client enabled, and a way to send untagged responses. The socket, TLS and timers
// live in the server (imap/server.ts); the handlers get only this.
//
// The selected mailbox (the API message-level handlers use; names are stable):
//   - `session.selected.uids` is the session's sequence-number map: uids[seq - 1] is the UID of message
//     `seq` (RFC 3501 §2.3.1.2). It changes only at the moments RFC 3501 §7 allows: a message appended
//     elsewhere joins it with `* n EXISTS`; one expunged elsewhere leaves it with `* n EXPUNGE`, never
//     during FETCH, STORE or SEARCH (§7.4.1), so a sequence number a handler resolved stays valid for the
//     whole command. Use seqOf(sel, uid) / uidAt(sel, seq) and resolveSequenceNumbers/resolveUids
//     (imap/sequence-set.ts) against it.
//   - After every command in the selected state the dispatcher runs syncSelected(): it reads the store's
//     changes since `sel.modseq` and sends EXISTS, EXPUNGE (when allowed) and `* n FETCH (UID FLAGS
//     [MODSEQ])` for flags changed by others. IDLE runs it on every change notice.
//   - A handler that itself reports a flag change in a FETCH response (STORE, a non-PEEK BODY[] setting
//     \Seen) calls markReported(sel, uid, modseq), so that the sync does not repeat it.
//   - A handler that expunges (EXPUNGE, UID EXPUNGE, MOVE) calls announceExpunged(session, uids): it
//     sends `* n EXPUNGE` for each UID still in the map (highest sequence number first, so each number
//     is valid when sent) and removes them. UIDs the session never saw are ignored.
import type { MailboxBackend, MailboxChange, MailboxSnapshot, Principal } from './backend.js';
import { atom, untagged, type ImapValue } from './response.js';

/** RFC 3501 §3: the four states; a command names the ones it is valid in. */
export type SessionState = 'not-authenticated' | 'authenticated' | 'selected' | 'logout';

export interface SessionConfig {
  /** RFC 7889 §2: the APPENDLIMIT we advertise and the reader enforces. */
  appendLimit: number;
  /** A certificate is configured, so STARTTLS can be offered. */
  tlsAvailable: boolean;
  /**
   * RFC 3501 §6.2.3 / §11.1: a server should not accept a password in the clear; without TLS LOGIN is
   * refused and LOGINDISABLED advertised, unless this is set (loopback tests, a TLS-terminating proxy).
   */
  allowPlaintextAuth: boolean;
  /** RFC 2971 §3.3 server ID: name and version. */
  serverName: string;
  serverVersion: string;
  /**
   * Every failed login is answered this long after it began, whatever failed (unknown address, deleted
   * inbox, wrong password), so that neither the answer nor its timing tells them apart.
   */
  loginFailureDelayMs: number;
}

export interface SelectedMailbox {
  snapshot: MailboxSnapshot;
  /** EXAMINE, or a mailbox the user may not change (RFC 3501 §6.3.2). */
  readOnly: boolean;
  /** The sequence-number map (see the top of this file). Starts as snapshot.uids. */
  uids: number[];
  /** Every change of the store up to this MODSEQ is in `uids` or queued below. */
  modseq: bigint;
  /** Expunged elsewhere, not yet announced: their sequence numbers still count (RFC 3501 §7.4.1). */
  pendingExpunges: Set<number>;
  /** Flag changes made elsewhere, to announce as untagged FETCH. */
  pendingFlags: Map<number, { flags: string[]; modseq: bigint }>;
  /** uid → the MODSEQ of a flag change this session already reported itself. */
  reported: Map<number, bigint>;
  /** The EXISTS count the client last heard. */
  announcedExists: number;
  /**
   * RFC 3501 §2.3.2: the UIDs that are \Recent in this session: those its SELECT claimed, and those that
   * arrived while it had the mailbox selected (it is the first to be told of them).
   */
  recent: Set<number>;
  /** The RECENT count the client last heard (RFC 3501 §7.3.2). */
  announcedRecent: number;
}

export interface Session {
  state: SessionState;
  principal: Principal | null;
  selected: SelectedMailbox | null;
  /** RFC 5161: the extensions ENABLEd in this session (only CONDSTORE is enable-able here). */
  enabled: Set<string>;
  /** TLS is in force (implicit TLS or after STARTTLS). */
  secure: boolean;
  /** RFC 2971: what the client said about itself, for logs. */
  clientId: Array<[string, string | null]> | null;
  readonly remoteAddress: string;
  readonly config: SessionConfig;
  /** Writes bytes (untagged responses, continuations) to the client, in order. */
  send(data: Buffer): void;
  /**
   * Sends what `send` has queued now, in one write to the socket (a command that sends many responses
   * calls it every so many octets, so that they leave in a few large writes). Absent: sent as written.
   */
  flush?(): void;
  /**
   * Backpressure for a command that sends much: a promise while the client has yet to read a good part
   * of what was sent (await it before sending more), null when more can go now. Absent: never waits.
   */
  writable?(): Promise<void> | null;
  /**
   * null when everything sent so far has been handed to the operating system (its buffers are free to
   * be reused), else a promise of that moment (or of the connection's end). Absent: never known.
   */
  drained?(): Promise<void> | null;
  /**
   * The client's next line, for a command that asked for one after a continuation (AUTHENTICATE's
   * response, RFC 3501 §6.2.2; IDLE's DONE, RFC 2177 §3). null when the connection closed (or the line
   * was over the limit) first. `signal` stops waiting (resolving null).
   */
  readLine(signal?: AbortSignal): Promise<Buffer | null>;
}

export function newSelected(snapshot: MailboxSnapshot, readOnly: boolean): SelectedMailbox {
  return {
    snapshot,
    readOnly,
    uids: [...snapshot.uids],
    modseq: snapshot.highestModseq,
    pendingExpunges: new Set(),
    pendingFlags: new Map(),
    reported: new Map(),
    announcedExists: snapshot.uids.length,
    recent: new Set(snapshot.recentUids ?? []),
    announcedRecent: snapshot.recentUids?.length ?? 0,
  };
}

function lowerBound(sorted: readonly number[], target: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The sequence number of `uid` in the session's map, or 0 when it is not there. */
export function seqOf(sel: SelectedMailbox, uid: number): number {
  const i = lowerBound(sel.uids, uid);
  return sel.uids[i] === uid ? i + 1 : 0;
}

/** The UID of message `seq`, or undefined outside 1..uids.length. */
export function uidAt(sel: SelectedMailbox, seq: number): number | undefined {
  return seq >= 1 ? sel.uids[seq - 1] : undefined;
}

/** A flag change this session has reported itself: the sync will not report it again. */
export function markReported(sel: SelectedMailbox, uid: number, modseq: bigint): void {
  const had = sel.reported.get(uid);
  if (had === undefined || had < modseq) sel.reported.set(uid, modseq);
}

/** Sends `* n EXPUNGE` for each of `uids` in the map, highest first, and removes them (RFC 3501 §7.4.1). */
export function announceExpunged(session: Session, uids: Iterable<number>): void {
  const sel = session.selected;
  if (!sel) return;
  const seqs = [...new Set(uids)]
    .map((u) => seqOf(sel, u))
    .filter((s) => s > 0)
    .sort((a, b) => b - a);
  for (const seq of seqs) {
    const uid = sel.uids[seq - 1] as number;
    sel.uids.splice(seq - 1, 1);
    sel.pendingExpunges.delete(uid);
    sel.pendingFlags.delete(uid);
    sel.reported.delete(uid);
    sel.recent.delete(uid);
    session.send(untagged([seq, atom('EXPUNGE')]));
  }
  sel.announcedExists = sel.uids.length;
  sel.announcedRecent = sel.recent.size;
}

/** Folds store changes (oldest first) into the session's queues; new UIDs join the map at once. */
export function queueChanges(sel: SelectedMailbox, changes: readonly MailboxChange[]): void {
  // An append and its expunge in the same batch cancel out: the client never needs to hear of it.
  const expunged = new Set(changes.filter((c) => c.kind === 'expunged').map((c) => c.uid));
  for (const c of changes) {
    if (c.modseq > sel.modseq) sel.modseq = c.modseq;
    const last = sel.uids[sel.uids.length - 1] ?? 0;
    if (c.kind === 'added') {
      // RFC 3501 §2.3.1.1: UIDs only grow, so a new message goes at the end of the map.
      if (!expunged.has(c.uid) && c.uid > last) {
        sel.uids.push(c.uid);
        // Seen first here, unless another session has it selected too (RFC 3501 §2.3.2 then lets both
        // call it recent rather than neither).
        if (!sel.readOnly) sel.recent.add(c.uid);
      }
    } else if (c.kind === 'expunged') {
      if (seqOf(sel, c.uid) > 0) sel.pendingExpunges.add(c.uid);
    } else if (seqOf(sel, c.uid) > 0 && !sel.pendingExpunges.has(c.uid)) {
      const mine = sel.reported.get(c.uid);
      if (mine !== undefined && mine >= c.modseq) continue;
      sel.pendingFlags.set(c.uid, { flags: c.flags, modseq: c.modseq });
    }
  }
}

/**
 * Sends what is queued: EXPUNGE first when `expunges` (not during FETCH, STORE, SEARCH: RFC 3501 §7.4.1),
 * then EXISTS when the count grew, then FETCH FLAGS (with MODSEQ once CONDSTORE is on, RFC 7162 §3.2.4).
 */
export function flushUpdates(session: Session, opts: { expunges: boolean }): void {
  const sel = session.selected;
  if (!sel) return;
  if (opts.expunges && sel.pendingExpunges.size) announceExpunged(session, [...sel.pendingExpunges]);
  if (sel.uids.length > sel.announcedExists) {
    session.send(untagged([sel.uids.length, atom('EXISTS')]));
    sel.announcedExists = sel.uids.length;
  } else if (sel.uids.length < sel.announcedExists) {
    sel.announcedExists = sel.uids.length;
  }
  // RFC 3501 §7.3.2: RECENT whenever the number changed (with EXISTS when mail arrived).
  if (sel.recent.size !== sel.announcedRecent) {
    session.send(untagged([sel.recent.size, atom('RECENT')]));
    sel.announcedRecent = sel.recent.size;
  }
  const condstore = session.enabled.has('CONDSTORE');
  for (const [uid, change] of [...sel.pendingFlags].sort((a, b) => a[0] - b[0])) {
    const seq = seqOf(sel, uid);
    sel.pendingFlags.delete(uid);
    if (!seq) continue;
    const items: ImapValue[] = [atom('UID'), uid, atom('FLAGS'), change.flags.map(atom)];
    if (condstore) items.push(atom('MODSEQ'), [change.modseq]);
    session.send(untagged([seq, atom('FETCH'), items]));
  }
  if (sel.reported.size > 1000) sel.reported.clear();
}

/**
 * Reads the selected mailbox's changes since the session last looked and sends them (see above).
 * Throws what the backend throws: BackendError('nonexistent') once the mailbox was deleted.
 */
export async function syncSelected(session: Session, backend: MailboxBackend, opts: { expunges: boolean }) {
  const sel = session.selected;
  if (!sel || !session.principal) return;
  const changes = await backend.changesSince(session.principal, sel.snapshot.mailboxId, sel.modseq);
  // The session may have left the mailbox while the read ran (it cannot: commands run one at a time).
  if (session.selected !== sel) return;
  queueChanges(sel, changes);
  flushUpdates(session, opts);
}
