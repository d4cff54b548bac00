// The message commands of the selected state (RFC 3501 §6.4): FETCH, SEARCH, STORE, COPY, their UID
// forms (§6.4.8), MOVE (RFC 6851) and the CONDSTORE parts of them (RFC 7162 §3.1). They run over the
// Session and the MailboxBackend only: the pure work — ENVELOPE and BODYSTRUCTURE, section ranges,
// search keys — lives in imap/render-*.ts, imap/fetch-sections.ts and imap/search-eval.ts.
import type { CommandOf, FetchAttribute, Section } from '../command-types.js';
import type { Handler, Outcome } from '../commands.js';
import { BackendError, type MailboxBackend, type MessageMeta, type StoreResult } from '../backend.js';
import { announceExpunged, markReported, seqOf, type SelectedMailbox, type Session } from '../session.js';
import {
  atom,
  formatDateTime,
  literal,
  sectionLabel,
  statusResponse,
  untagged,
  untaggedChunks,
  type ImapValue,
} from '../response.js';
import { resolveSequenceNumbers, resolveUids, type SequenceSet } from '../sequence-set.js';
import { envelopeValue } from '../render-envelope.js';
import { bodyValue } from '../render-bodystructure.js';
import { isTopLevel, planSection, sectionBytes, type SectionPlan } from '../fetch-sections.js';
import type { MimeTree } from '../../mail/mime-tree.js';
import { matchesSearch, positionFilter, usesModseq, type SearchScope } from '../search-eval.js';

const NOT_SELECTED: Outcome = { status: 'BAD', text: 'no mailbox is selected' };
const READ_ONLY: Outcome = { status: 'NO', text: 'the mailbox is read-only' };

/** FETCH works through the metadata in batches, so that \Seen is set once per batch, not per message. */
const FETCH_BATCH = 256;
/** FETCH responses queued before they are sent in one write (imap/session.ts Session.flush). */
const FLUSH_BYTES = 128 * 1024;

/**
 * The UIDs a command's set names, ascending. UID forms: UIDs not in the mailbox are ignored (RFC 3501
 * §6.4.8). Sequence numbers: one outside 1..count is a BAD (RFC 3501 §9 seq-number).
 */
function targets(sel: SelectedMailbox, set: SequenceSet, byUid: boolean): number[] | Outcome {
  // The session's sequence-number map (imap/session.ts), not the snapshot SELECT took.
  const uids = sel.uids;
  if (byUid) return resolveUids(set, uids);
  const r = resolveSequenceNumbers(set, uids.length);
  if (!r.ok) return { status: 'BAD', text: r.reason };
  const out: number[] = [];
  for (const [low, high] of r.ranges) for (let n = low; n <= high; n++) out.push(uids[n - 1] as number);
  return out;
}

function isSeen(flags: readonly string[]): boolean {
  return flags.some((f) => f.toLowerCase() === '\\seen');
}

function flagList(flags: readonly string[], recent: boolean): ImapValue {
  return [...flags, ...(recent ? ['\\Recent'] : [])].map(atom);
}

/** RFC 7162 §3.1: once a CONDSTORE enabling command was seen, FETCH responses carry MODSEQ. */
function condstore(session: Session): boolean {
  return session.enabled.has('CONDSTORE');
}

// ---- FETCH ------------------------------------------------------------------------------------------

const WHOLE: Section = { part: [], text: null, fields: null };

/** The section a body item reads, how its answer is labelled, and whether it sets \Seen (RFC 3501 §6.4.5). */
function bodyItem(a: FetchAttribute): { section: Section; partial: SectionPlan['partial']; label: string } | null {
  switch (a.kind) {
    case 'BODY[]':
      // The answer names BODY, never BODY.PEEK, and of a partial only its origin (RFC 3501 §7.4.2).
      return { section: a.section, partial: a.partial, label: sectionLabel(a.section, a.partial) };
    case 'RFC822': // RFC 3501 §6.4.5: equivalent to BODY[], answered as RFC822
      return { section: WHOLE, partial: null, label: 'RFC822' };
    case 'RFC822.HEADER': // BODY.PEEK[HEADER]
      return { section: { ...WHOLE, text: 'HEADER' }, partial: null, label: 'RFC822.HEADER' };
    case 'RFC822.TEXT': // BODY[TEXT]
      return { section: { ...WHOLE, text: 'TEXT' }, partial: null, label: 'RFC822.TEXT' };
    default:
      return null;
  }
}

/**
 * Whether any item needs the MIME tree: ENVELOPE, BODY, BODYSTRUCTURE and the sections of parts do;
 * flags, sizes and the message's own BODY[], [HEADER], [TEXT] need only the header's length.
 */
function needsTree(items: readonly FetchAttribute[]): boolean {
  return items.some((a) => {
    if (a.kind === 'ENVELOPE' || a.kind === 'BODY' || a.kind === 'BODYSTRUCTURE') return true;
    const b = bodyItem(a);
    return b !== null && !isTopLevel(b.section);
  });
}

function treeOf(m: MessageMeta): MimeTree {
  if (!m.tree) throw new Error('fetchMeta was asked for no tree, and an item needs it');
  return m.tree;
}

function setsSeen(a: FetchAttribute): boolean {
  return (a.kind === 'BODY[]' && !a.peek) || a.kind === 'RFC822' || a.kind === 'RFC822.TEXT';
}

/** bodyItem once per item of a command, not once per message (its label is a string built each time). */
const bodyItems = new WeakMap<FetchAttribute, ReturnType<typeof bodyItem>>();
function bodyItemOf(a: FetchAttribute): ReturnType<typeof bodyItem> {
  let b = bodyItems.get(a);
  if (b === undefined) bodyItems.set(a, (b = bodyItem(a)));
  return b;
}

/** One message's `FETCH (...)` items, in the order asked, reading its bytes once if any item needs them. */
async function fetchItems(
  session: Session,
  sel: SelectedMailbox,
  backend: MailboxBackend,
  items: readonly FetchAttribute[],
  m: MessageMeta,
  recent: boolean,
  flagsChanged: boolean,
): Promise<ImapValue[]> {
  const tree = m.tree ?? { size: m.size - m.prefixLength, headerEnd: m.headerEnd };
  const bodies = items.map((a) => {
    const b = bodyItemOf(a);
    return b ? { ...b, plan: planSection(tree, m.prefixLength, b.section, b.partial) } : null;
  });
  const plans = bodies.flatMap((b) => (b?.plan ? [b.plan] : []));
  let source: Buffer = Buffer.alloc(0);
  let sourceStart = 0;
  if (plans.length) {
    // One read covering every section asked (a FETCH of BODY.PEEK[HEADER] reads the header alone).
    sourceStart = Math.min(...plans.map((p) => p.start));
    const end = Math.max(...plans.map((p) => p.end));
    if (end > sourceStart) {
      source = await backend.readBody(session.principal!, sel.snapshot.mailboxId, m.uid, sourceStart, end, m.ref);
    }
  }
  const out: ImapValue[] = [];
  items.forEach((a, i) => {
    const body = bodies[i];
    if (body) {
      out.push(atom(body.label), body.plan ? literal(sectionBytes(body.plan, source, sourceStart)) : null);
      return;
    }
    switch (a.kind) {
      case 'UID':
        return void out.push(atom('UID'), m.uid);
      case 'FLAGS':
        return void out.push(atom('FLAGS'), flagList(m.flags, recent));
      case 'INTERNALDATE':
        return void out.push(atom('INTERNALDATE'), formatDateTime(m.internalDate));
      case 'RFC822.SIZE':
        return void out.push(atom('RFC822.SIZE'), m.size);
      case 'ENVELOPE':
        return void out.push(atom('ENVELOPE'), envelopeValue(treeOf(m).envelope));
      case 'BODY':
        return void out.push(atom('BODY'), bodyValue(treeOf(m).body, false));
      case 'BODYSTRUCTURE':
        return void out.push(atom('BODYSTRUCTURE'), bodyValue(treeOf(m).body, true));
      case 'MODSEQ': // RFC 7162 §3.1.4.1: "MODSEQ" SP "(" mod-sequence-value ")"
        return void out.push(atom('MODSEQ'), [m.modseq]);
    }
  });
  if (flagsChanged) {
    // RFC 3501 §6.4.5: when a fetch sets \Seen, the new flags go back in the same response; with
    // CONDSTORE their MODSEQ too (RFC 7162 §3.1).
    if (!items.some((a) => a.kind === 'FLAGS')) out.push(atom('FLAGS'), flagList(m.flags, recent));
    if (condstore(session) && !items.some((a) => a.kind === 'MODSEQ')) out.push(atom('MODSEQ'), [m.modseq]);
  }
  return out;
}

async function fetch(
  session: Session,
  command: { set: SequenceSet; attributes: FetchAttribute[]; changedSince: bigint | null },
  backend: MailboxBackend,
  byUid: boolean,
): Promise<Outcome> {
  const sel = session.selected;
  if (!sel || !session.principal) return NOT_SELECTED;
  const uids = targets(sel, command.set, byUid);
  if (!Array.isArray(uids)) return uids;
  const items = [...command.attributes];
  // RFC 3501 §6.4.8: a UID FETCH answers with UID whether asked or not.
  if (byUid && !items.some((a) => a.kind === 'UID')) items.unshift({ kind: 'UID' });
  // RFC 7162 §3.1.4.1: CHANGEDSINCE implies MODSEQ; both are CONDSTORE enabling (§3.1).
  if (command.changedSince !== null && !items.some((a) => a.kind === 'MODSEQ')) items.push({ kind: 'MODSEQ' });
  if (items.some((a) => a.kind === 'MODSEQ')) session.enabled.add('CONDSTORE');
  // RFC 3501 §6.4.5: BODY[...] (not PEEK), RFC822 and RFC822.TEXT set \Seen, but not in EXAMINE (§6.3.2).
  const seen = !sel.readOnly && items.some(setsSeen);
  const recent = sel.recent;
  const name = byUid ? 'UID FETCH' : 'FETCH';
  if (!uids.length) return { status: 'OK', text: `${name} completed` };

  const flush = async (batch: MessageMeta[]): Promise<void> => {
    const changed = new Set<number>();
    if (seen) {
      const unseen = batch.filter((m) => !isSeen(m.flags)).map((m) => m.uid);
      const result = unseen.length ? await backend.markSeen(session.principal!, sel.snapshot.mailboxId, unseen) : null;
      for (const c of result?.changed ?? []) {
        const m = batch.find((x) => x.uid === c.uid);
        if (m) [m.flags, m.modseq] = [c.flags, c.modseq];
        changed.add(c.uid);
        // The FETCH below carries the new flags: the sync after the command need not repeat them.
        markReported(sel, c.uid, c.modseq);
      }
    }
    for (const m of batch) {
      const seq = seqOf(sel, m.uid);
      if (!seq) continue;
      let values;
      try {
        values = await fetchItems(session, sel, backend, items, m, recent.has(m.uid), changed.has(m.uid));
      } catch (err) {
        // Expunged by another session between the index read and the body read: as if never found.
        if (err instanceof BackendError && err.code === 'nonexistent') continue;
        throw err;
      }
      found++;
      for (const chunk of untaggedChunks([seq, atom('FETCH'), values])) {
        session.send(chunk);
        queued += chunk.length;
      }
      if (queued < FLUSH_BYTES) continue;
      // Many responses, one write: a syscall per message would cost more than the copying it saves.
      queued = 0;
      session.flush?.();
      const wait = session.writable?.();
      if (wait) await wait;
    }
    if (queued) session.flush?.();
    queued = 0;
  };
  let queued = 0;
  let found = 0;
  let batch: MessageMeta[] = [];
  const metas = backend.fetchMeta(session.principal, sel.snapshot.mailboxId, uids, {
    changedSince: command.changedSince,
    tree: needsTree(items),
  });
  for await (const m of metas) {
    batch.push(m);
    if (batch.length >= FETCH_BATCH) [await flush(batch), (batch = [])];
  }
  await flush(batch);
  // RFC 2180 §4.1.3, RFC 5530 §3: messages this session still numbers but another expunged cannot be
  // fetched; the others are answered, then NO [EXPUNGEISSUED] says some were not (as Dovecot does). The
  // EXPUNGE responses follow at the next command that allows them (RFC 3501 §7.4.1). A UID FETCH names UIDs,
  // and one that no longer exists is simply not answered (§6.4.8); with CHANGEDSINCE the unchanged messages
  // are left out on purpose (RFC 7162 §3.1.4.1).
  if (!byUid && command.changedSince === null && found < uids.length) {
    return { status: 'NO', code: { code: 'EXPUNGEISSUED' }, text: 'some of the requested messages no longer exist' };
  }
  return { status: 'OK', text: `${name} completed` };
}

export const fetchMessages: Handler<'FETCH'> = (s, c, b) => fetch(s, c, b, false);
export const uidFetchMessages: Handler<'UID FETCH'> = (s, c, b) => fetch(s, c, b, true);

// ---- SEARCH -----------------------------------------------------------------------------------------

const searchHandler =
  (byUid: boolean) =>
  async (session: Session, command: CommandOf<'SEARCH' | 'UID SEARCH'>, backend: MailboxBackend): Promise<Outcome> => {
    const sel = session.selected;
    if (!sel || !session.principal) return NOT_SELECTED;
    const user = session.principal;
    const { criteria } = command;
    // The parser already refused charsets other than US-ASCII and UTF-8 with NO [BADCHARSET].
    const withModseq = usesModseq(criteria);
    if (withModseq) session.enabled.add('CONDSTORE'); // RFC 7162 §3.1: SEARCH MODSEQ enables CONDSTORE
    const all = sel.uids;
    const maxSeq = all.length;
    const maxUid = all[all.length - 1] ?? 0;
    const pass = positionFilter(criteria, maxSeq, maxUid);
    let candidates = all.filter((uid, i) => pass(i + 1, uid));
    // A header key every match must pass narrows the candidates in the store first, when it can: a
    // SEARCH SUBJECT then reads the few messages that may match, not the whole mailbox. When that key is
    // the whole search, the store's certain matches need no reading at all.
    let certain: ReadonlySet<number> = new Set();
    for (const k of criteria.key === 'AND' ? criteria.operands : [criteria]) {
      if (!backend.narrowByHeader || !candidates.length) break;
      const hint = k.key === 'SUBJECT' ? { field: 'subject', value: k.value } : k.key === 'HEADER' ? k : null;
      if (!hint) continue;
      const fewer = await backend.narrowByHeader(
        user,
        sel.snapshot.mailboxId,
        candidates,
        hint.field.toLowerCase(),
        hint.value,
      );
      if (!fewer) continue;
      candidates = fewer.candidates;
      if (k === criteria) certain = new Set(fewer.matched);
    }
    const recent = sel.recent;
    const scope: SearchScope = {
      maxSeq,
      maxUid,
      read: (m, start, end) => backend.readBody(user, sel.snapshot.mailboxId, m.uid, start, end, m.ref),
    };
    const hits: number[] = [];
    for (const uid of certain) {
      const seq = seqOf(sel, uid);
      if (seq) hits.push(byUid ? uid : seq);
    }
    const uncertain = certain.size ? candidates.filter((uid) => !certain.has(uid)) : candidates;
    let highest = 0n;
    if (uncertain.length) {
      for await (const meta of backend.fetchMeta(user, sel.snapshot.mailboxId, uncertain, { changedSince: null })) {
        const seq = seqOf(sel, meta.uid);
        if (!seq) continue;
        const m = { ...meta, tree: treeOf(meta), seq, recent: recent.has(meta.uid) };
        if (!(await matchesSearch(criteria, m, scope))) continue;
        hits.push(byUid ? meta.uid : seq);
        if (meta.modseq > highest) highest = meta.modseq;
      }
    }
    if (certain.size) hits.sort((a, b) => a - b);
    // RFC 7162 §3.1.5: with MODSEQ in the criteria, the highest mod-sequence of the matches, if any.
    const tail: ImapValue[] = withModseq && hits.length ? [[atom('MODSEQ'), highest]] : [];
    session.send(untagged([atom('SEARCH'), ...hits, ...tail]));
    return { status: 'OK', text: `${byUid ? 'UID SEARCH' : 'SEARCH'} completed` };
  };

export const searchMessages: Handler<'SEARCH'> = searchHandler(false);
export const uidSearchMessages: Handler<'UID SEARCH'> = searchHandler(true);

// ---- STORE ------------------------------------------------------------------------------------------

/**
 * Untagged FETCH responses for flags a STORE changed (RFC 3501 §6.4.6), with UID for UID STORE
 * (§6.4.8) and UID and MODSEQ once CONDSTORE is on (RFC 7162 §3.1.3). .SILENT leaves out the FLAGS,
 * but with CONDSTORE the MODSEQ is still sent (RFC 7162 §3.1.3, its example of d105).
 */
function storeResponses(session: Session, sel: SelectedMailbox, result: StoreResult, silent: boolean, byUid: boolean) {
  const cs = condstore(session);
  if (silent && !cs) return;
  const recent = sel.recent;
  for (const c of result.changed) {
    const seq = seqOf(sel, c.uid);
    if (!seq) continue;
    const items: ImapValue[] = [];
    if (byUid || cs) items.push(atom('UID'), c.uid);
    if (!silent) items.push(atom('FLAGS'), flagList(c.flags, recent.has(c.uid)));
    if (cs) items.push(atom('MODSEQ'), [c.modseq]);
    session.send(untagged([seq, atom('FETCH'), items]));
  }
}

const storeHandler =
  (byUid: boolean) =>
  async (session: Session, command: CommandOf<'STORE' | 'UID STORE'>, backend: MailboxBackend): Promise<Outcome> => {
    const sel = session.selected;
    if (!sel || !session.principal) return NOT_SELECTED;
    if (sel.readOnly) return READ_ONLY; // RFC 3501 §6.3.2: EXAMINE permits no change of flags
    if (command.unchangedSince !== null) session.enabled.add('CONDSTORE'); // RFC 7162 §3.1
    const uids = targets(sel, command.set, byUid);
    if (!Array.isArray(uids)) return uids;
    const name = byUid ? 'UID STORE' : 'STORE';
    if (!uids.length) return { status: 'OK', text: `${name} completed` };
    const { op, flags, silent } = command.action;
    const result = await backend.store(session.principal, sel.snapshot.mailboxId, uids, {
      op,
      flags,
      unchangedSince: command.unchangedSince,
    });
    storeResponses(session, sel, result, silent, byUid);
    // Reported here (or, .SILENT, deliberately not: RFC 3501 §6.4.6): the sync must not send them again.
    for (const c of result.changed) markReported(sel, c.uid, c.modseq);
    if (result.modified.length) {
      // RFC 7162 §3.1.3: the messages UNCHANGEDSINCE kept from changing, as UIDs for UID STORE and as
      // sequence numbers for STORE.
      const set = byUid ? result.modified : result.modified.map((u) => seqOf(sel, u)).filter((n) => n > 0);
      return { status: 'OK', code: { code: 'MODIFIED', set }, text: 'conditional STORE failed for some messages' };
    }
    return { status: 'OK', text: `${name} completed` };
  };

export const storeMessages: Handler<'STORE'> = storeHandler(false);
export const uidStoreMessages: Handler<'UID STORE'> = storeHandler(true);

// ---- COPY and MOVE ----------------------------------------------------------------------------------

const copyHandler =
  (byUid: boolean) =>
  async (
    session: Session,
    command: CommandOf<'COPY' | 'UID COPY' | 'MOVE' | 'UID MOVE'>,
    backend: MailboxBackend,
  ): Promise<Outcome> => {
    const sel = session.selected;
    if (!sel || !session.principal) return NOT_SELECTED;
    const uids = targets(sel, command.set, byUid);
    if (!Array.isArray(uids)) return uids;
    const name = byUid ? 'UID COPY' : 'COPY';
    // RFC 4315 §3: no COPYUID when nothing was copied.
    if (!uids.length) return { status: 'OK', text: `${name} completed` };
    const r = await backend.copy(session.principal, sel.snapshot.mailboxId, uids, command.mailbox);
    if (!r.source.length) return { status: 'OK', text: `${name} completed` };
    return {
      status: 'OK',
      code: { code: 'COPYUID', uidValidity: r.uidValidity, source: r.source, dest: r.dest },
      text: `${name} completed`,
    };
  };

export const copyMessages: Handler<'COPY'> = copyHandler(false);
export const uidCopyMessages: Handler<'UID COPY'> = copyHandler(true);

const moveHandler =
  (byUid: boolean) =>
  async (
    session: Session,
    command: CommandOf<'COPY' | 'UID COPY' | 'MOVE' | 'UID MOVE'>,
    backend: MailboxBackend,
  ): Promise<Outcome> => {
    const sel = session.selected;
    if (!sel || !session.principal) return NOT_SELECTED;
    if (sel.readOnly) return READ_ONLY; // RFC 6851 §3.3: MOVE expunges, which EXAMINE does not permit
    const uids = targets(sel, command.set, byUid);
    if (!Array.isArray(uids)) return uids;
    const name = byUid ? 'UID MOVE' : 'MOVE';
    if (!uids.length) return { status: 'OK', text: `${name} completed` };
    const r = await backend.move(session.principal, sel.snapshot.mailboxId, uids, command.mailbox);
    if (r.source.length) {
      // RFC 6851 §4.3: with UIDPLUS, COPYUID comes in an untagged OK before the EXPUNGEs.
      const code = { code: 'COPYUID' as const, uidValidity: r.uidValidity, source: r.source, dest: r.dest };
      session.send(statusResponse(null, 'OK', 'moved', code));
      // imap/session.ts: `* n EXPUNGE` highest sequence number first, each valid when sent.
      announceExpunged(session, r.source);
    }
    return { status: 'OK', text: `${name} completed` };
  };

export const moveMessages: Handler<'MOVE'> = moveHandler(false);
export const uidMoveMessages: Handler<'UID MOVE'> = moveHandler(true);
