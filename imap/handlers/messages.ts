// The message commands of the selected state (RFC 3501 §6.4): FETCH, SEARCH, STORE, COPY, their UID
// forms (§6.4.8), MOVE (RFC 6851) and the CONDSTORE parts of them (RFC 7162 §3.1). They run over the
// Session and the MailboxBackend only: the pure work — ENVELOPE and BODYSTRUCTURE, section ranges,
// search keys — lives in imap/render-*.ts, imap/fetch-sections.ts and imap/search-eval.ts.
import type { CommandOf, FetchAttribute, Section } from '../command-types.js';
import type { Handler, Outcome } from '../commands.js';
import type { MailboxBackend, MessageMeta, StoreResult } from '../backend.js';
import { announceExpunged, markReported, seqOf, type SelectedMailbox, type Session } from '../session.js';
import {
  atom,
  formatDateTime,
  literal,
  ResponseBuffer,
  sectionLabel,
  statusResponse,
  untagged,
  writeUntagged,
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

const FETCH = atom('FETCH');
const ITEM = {
  UID: atom('UID'),
  FLAGS: atom('FLAGS'),
  INTERNALDATE: atom('INTERNALDATE'),
  'RFC822.SIZE': atom('RFC822.SIZE'),
  ENVELOPE: atom('ENVELOPE'),
  BODY: atom('BODY'),
  BODYSTRUCTURE: atom('BODYSTRUCTURE'),
  MODSEQ: atom('MODSEQ'),
} as const;

/** A FETCH's items as worked out once per command: each body item's section and the atom it is answered as. */
interface FetchPlan {
  items: readonly FetchAttribute[];
  bodies: ReadonlyArray<{ section: Section; partial: SectionPlan['partial']; label: ImapValue } | null>;
  hasBody: boolean;
  hasFlags: boolean;
  hasModseq: boolean;
}

function fetchPlan(items: readonly FetchAttribute[]): FetchPlan {
  const bodies = items.map((a) => {
    const b = bodyItemOf(a);
    return b && { section: b.section, partial: b.partial, label: atom(b.label) };
  });
  return {
    items,
    bodies,
    hasBody: bodies.some((b) => b !== null),
    hasFlags: items.some((a) => a.kind === 'FLAGS'),
    hasModseq: items.some((a) => a.kind === 'MODSEQ'),
  };
}

/** One message of a FETCH: its sections' plans and the one range of its bytes that covers them all. */
interface Planned {
  m: MessageMeta;
  seq: number;
  plans: Array<SectionPlan | null> | null;
  start: number;
  end: number;
}

function planMessage(plan: FetchPlan, m: MessageMeta, seq: number): Planned {
  if (!plan.hasBody) return { m, seq, plans: null, start: 0, end: 0 };
  const tree = m.tree ?? { size: m.size - m.prefixLength, headerEnd: m.headerEnd };
  const plans: Array<SectionPlan | null> = [];
  // One read covering every section asked (a FETCH of BODY.PEEK[HEADER] reads the header alone).
  let start = Infinity;
  let end = 0;
  for (const b of plan.bodies) {
    const p = b && planSection(tree, m.prefixLength, b.section, b.partial);
    plans.push(p);
    if (!p) continue;
    if (p.start < start) start = p.start;
    if (p.end > end) end = p.end;
  }
  return { m, seq, plans, start: end > start ? start : 0, end: end > start ? end : 0 };
}

/** One message's `FETCH (...)` items, in the order asked; `source` is octets [start, end) of it. */
function fetchItems(
  session: Session,
  plan: FetchPlan,
  p: Planned,
  source: Buffer,
  recent: boolean,
  flagsChanged: boolean,
): ImapValue[] {
  const { m } = p;
  const out: ImapValue[] = [];
  const { items } = plan;
  for (let i = 0; i < items.length; i++) {
    const a = items[i]!;
    const body = plan.bodies[i];
    if (body) {
      const section = p.plans![i];
      out.push(body.label, section ? literal(sectionBytes(section, source, p.start)) : null);
      continue;
    }
    switch (a.kind) {
      case 'UID':
        out.push(ITEM.UID, m.uid);
        break;
      case 'FLAGS':
        out.push(ITEM.FLAGS, flagList(m.flags, recent));
        break;
      case 'INTERNALDATE':
        out.push(ITEM.INTERNALDATE, formatDateTime(m.internalDate));
        break;
      case 'RFC822.SIZE':
        out.push(ITEM['RFC822.SIZE'], m.size);
        break;
      case 'ENVELOPE':
        out.push(ITEM.ENVELOPE, envelopeValue(treeOf(m).envelope));
        break;
      case 'BODY':
        out.push(ITEM.BODY, bodyValue(treeOf(m).body, false));
        break;
      case 'BODYSTRUCTURE':
        out.push(ITEM.BODYSTRUCTURE, bodyValue(treeOf(m).body, true));
        break;
      case 'MODSEQ': // RFC 7162 §3.1.4.1: "MODSEQ" SP "(" mod-sequence-value ")"
        out.push(ITEM.MODSEQ, [m.modseq]);
        break;
    }
  }
  if (flagsChanged) {
    // RFC 3501 §6.4.5: when a fetch sets \Seen, the new flags go back in the same response; with
    // CONDSTORE their MODSEQ too (RFC 7162 §3.1).
    if (!plan.hasFlags) out.push(ITEM.FLAGS, flagList(m.flags, recent));
    if (condstore(session) && !plan.hasModseq) out.push(ITEM.MODSEQ, [m.modseq]);
  }
  return out;
}

/** The ranges of `planned` (those that read any) in one call, null for a message expunged meanwhile. */
async function readRanges(
  session: Session,
  sel: SelectedMailbox,
  backend: MailboxBackend,
  planned: readonly Planned[],
  alloc: (size: number) => Buffer,
): Promise<Array<Buffer | null>> {
  const wanted = planned.filter((p) => p.end > p.start);
  const got: Array<Buffer | null> = wanted.length
    ? await backend.readBodies(
        session.principal!,
        sel.snapshot.mailboxId,
        wanted.map((p) => ({ uid: p.m.uid, start: p.start, end: p.end, ref: p.m.ref })),
        alloc,
      )
    : [];
  const out: Array<Buffer | null> = [];
  let j = 0;
  for (const p of planned) out.push(p.end > p.start ? got[j++]! : NO_BYTES);
  return out;
}

const NO_BYTES = Buffer.alloc(0);

/** The bytes of one readBodies call at most (a message larger than that is read alone). */
const READ_BYTES = 256 * 1024;
/** The memory a FETCH's responses may hold before it waits for the socket to have written them all. */
const HOLD_BYTES = 2 * 1024 * 1024;

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
  const plan = fetchPlan(items);

  // The responses are written into few buffers and sent every FLUSH_BYTES: many responses, one write (a
  // syscall per message would cost more than the copying it saves). The bodies are read into the same
  // buffer's memory, reused once the socket has written it: at once when it has, else after a wait once
  // HOLD_BYTES are in use (with a session that cannot tell, never: fresh memory each time).
  const out = new ResponseBuffer();
  /** Sends what is written; `reuse` where no body read into `out` is still to be written. */
  const send = async (reuse: boolean): Promise<void> => {
    for (const b of out.take()) session.send(b);
    session.flush?.();
    const wait = session.writable?.();
    if (wait) await wait;
    if (!reuse) return;
    const sent = session.drained?.();
    if (sent === undefined || (sent !== null && out.held < HOLD_BYTES)) return;
    await sent;
    out.recycle();
  };

  /** Reads the group's bytes in one call and writes its responses. */
  const answer = async (group: Planned[], changed: ReadonlySet<number>): Promise<void> => {
    const sources = await readRanges(session, sel, backend, group, out.alloc);
    for (let i = 0; i < group.length; i++) {
      const source = sources[i];
      if (!source) continue; // expunged meanwhile: as if never found
      const p = group[i]!;
      found++;
      writeUntagged(out, [
        p.seq,
        FETCH,
        fetchItems(session, plan, p, source, recent.has(p.m.uid), changed.has(p.m.uid)),
      ]);
      if (out.length >= FLUSH_BYTES) await send(false);
    }
    await send(true);
  };

  const flush = async (batch: MessageMeta[]): Promise<void> => {
    const changed = new Set<number>();
    if (seen) {
      const unseen = batch.filter((m) => !isSeen(m.flags)).map((m) => m.uid);
      const result = unseen.length ? await backend.markSeen(session.principal!, sel.snapshot.mailboxId, unseen) : null;
      if (result?.changed.length) {
        const byUid = new Map(batch.map((m) => [m.uid, m]));
        for (const c of result.changed) {
          const m = byUid.get(c.uid);
          if (m) [m.flags, m.modseq] = [c.flags, c.modseq];
          changed.add(c.uid);
          // The FETCH below carries the new flags: the sync after the command need not repeat them.
          markReported(sel, c.uid, c.modseq);
        }
      }
    }
    // The batch in groups of at most READ_BYTES to read, each read in one call.
    let group: Planned[] = [];
    let bytes = 0;
    for (const m of batch) {
      const seq = seqOf(sel, m.uid);
      if (!seq) continue;
      const p = planMessage(plan, m, seq);
      if (group.length && bytes + (p.end - p.start) > READ_BYTES) {
        await answer(group, changed);
        [group, bytes] = [[], 0];
      }
      group.push(p);
      bytes += p.end - p.start;
    }
    if (group.length) await answer(group, changed);
  };
  let found = 0;
  const pages = backend.fetchMeta(session.principal, sel.snapshot.mailboxId, uids, {
    changedSince: command.changedSince,
    tree: needsTree(items),
  });
  for await (const page of pages) {
    for (let i = 0; i < page.length; i += FETCH_BATCH) await flush(page.slice(i, i + FETCH_BATCH));
  }
  if (out.length) await send(false);
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
      for await (const page of backend.fetchMeta(user, sel.snapshot.mailboxId, uncertain, { changedSince: null })) {
        for (const meta of page) {
          const seq = seqOf(sel, meta.uid);
          if (!seq) continue;
          const m = { ...meta, tree: treeOf(meta), seq, recent: recent.has(meta.uid) };
          if (!(await matchesSearch(criteria, m, scope))) continue;
          hits.push(byUid ? meta.uid : seq);
          if (meta.modseq > highest) highest = meta.modseq;
        }
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
