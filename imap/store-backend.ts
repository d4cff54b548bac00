// The MailboxBackend (imap/backend.ts) over the mail store: storage.mail (the message rows, the blob
// store, the change feed), storage/pg/imap-mailboxes.ts for the folder tree, and core/inbox-auth.ts for
// logins (docs/conventions.md #1). The one module of imap/ that knows storage; no SQL here either.
//
// Names: hierarchy delimiter "/"; "INBOX" in any case is the inbox (RFC 3501 §5.1), and so is the first
// level of "inbox/x". A trailing "/" on CREATE only says the name will have inferiors (§6.3.3).
import type { CoreDeps } from '../core/deps.js';
import { credentialOf, inboxLogin } from '../core/inbox-auth.js';
import { parseMimeTree, type MimeTree } from '../mail/mime-tree.js';
import type { BlobRead } from '../mail/blob-store.js';
import type { Mailbox } from '../mail/mail-store.js';
import { liveInboxHash } from '../storage/pg/inbox-logins.js';
import {
  copyMessages,
  createMailboxPath,
  deleteMailbox,
  envelopeCandidates,
  hasInferiors,
  imapMessageRows,
  inboxQuota,
  mailboxById,
  mailboxByName,
  mailboxCounts,
  mailboxUids,
  recentAfter,
  renameMailboxTree,
  setSubscribed,
  type EnvelopeTextField,
  type ImapMessageRow,
  type ImapStoreDeps,
} from '../storage/pg/imap-mailboxes.js';
import {
  BackendError,
  type CopyResult,
  type MailboxBackend,
  type MailboxChange,
  type MailboxInfo,
  type MessageMeta,
  type Principal,
  type QuotaRoot,
  type StoreResult,
} from './backend.js';

const INBOX = 'INBOX';
/** FETCH metadata is read in pages of this many messages, so `1:*` on a large mailbox is never one read. */
const META_PAGE = 1000;

/** The stored name of a mailbox as given by a client; throws BackendError for a name we cannot hold. */
export function canonicalName(name: string, opts: { trailingDelimiter?: boolean } = {}): string {
  let n = name;
  if (opts.trailingDelimiter && n.endsWith('/')) n = n.slice(0, -1);
  const levels = n.split('/');
  if (levels[0]?.toUpperCase() === INBOX) levels[0] = INBOX;
  n = levels.join('/');
  // RFC 3501 §5.1: no empty levels; no control characters (the store refuses them too).
  if (!n || levels.some((l) => l === '') || /[\x00-\x1f\x7f]/.test(n) || n.length > 1000) {
    throw new BackendError('cannot', 'not a valid mailbox name');
  }
  return n;
}

function isMimeTree(v: unknown): v is MimeTree {
  return (
    typeof v === 'object' && v !== null && (v as MimeTree).version === 1 && typeof (v as MimeTree).body === 'object'
  );
}

/** Where a message's bytes are: MessageMeta.ref of the metadata this backend hands out. */
interface BodyRef {
  blobAddress: string;
  prefix: Buffer;
}

/**
 * The row as FETCH and SEARCH see it. The tree stays as stored, its offsets over the body alone: the
 * protocol layer (imap/fetch-sections.ts) moves them past the prefix, and only it, so nothing here shifts.
 */
function metaOf(m: ImapMessageRow, tree: MimeTree | null, headerEnd: number): MessageMeta {
  const ref: BodyRef = { blobAddress: m.blobAddress, prefix: m.prefix };
  return {
    uid: Number(m.uid),
    modseq: BigInt(m.modseq),
    flags: m.flags,
    internalDate: new Date(m.internalMs),
    size: Number(m.size),
    tree,
    headerEnd,
    prefixLength: m.prefix.length,
    ref,
  };
}

/** Header fields SEARCH compares with the stored envelope, and where the envelope keeps them. */
const ENVELOPE_TEXT: Record<string, EnvelopeTextField | undefined> = {
  subject: 'subject',
  date: 'date',
  'message-id': 'messageId',
  'in-reply-to': 'inReplyTo',
};

const isRef = (v: unknown): v is BodyRef =>
  typeof v === 'object' && v !== null && typeof (v as BodyRef).blobAddress === 'string';

/**
 * Where served octets [start, end) of a message lie (the receipt prefix, then the stored body): within the
 * prefix, that slice of it; else the blob's range to read, with the prefix's part of the range to go in
 * front of it (`before`, so that the served bytes are one copy: mail/blob-store.ts `read`).
 */
function locate(ref: BodyRef, start: number, end: number): { prefix: Buffer } | { blob: BlobRead } {
  const p = ref.prefix.length;
  const from = Math.max(0, start);
  const to = Math.max(from, end);
  if (to <= p) return { prefix: ref.prefix.subarray(from, to) };
  const before = from < p ? ref.prefix.subarray(from) : undefined;
  return { blob: { address: ref.blobAddress, start: Math.max(0, from - p), end: to - p, before } };
}

/** \Recent is a session flag (RFC 3501 §2.3.2): never stored, silently left out of STORE and APPEND. */
const storable = (flags: readonly string[]) => flags.filter((f) => f.toLowerCase() !== '\\recent');

export interface StoreBackendOptions {
  /** scrypt cost of the dummy hash an unknown address is checked against (tests lower it). */
  passwordLogN?: number;
}

export function createStoreBackend(deps: CoreDeps, opts: StoreBackendOptions = {}): MailboxBackend {
  const { storage, ctx } = deps;
  const { db } = storage;
  const { blobs, store, changes } = storage.mail;
  const imapDeps: ImapStoreDeps = {
    db,
    blobs,
    feed: changes,
    onError: (err) => ctx.log.warn({ err }, 'imap: after-commit step failed'),
  };
  const now = () => new Date(ctx.clock.now());
  // What each principal logged in with, to notice a changed password or a deleted inbox.
  const credentials = new WeakMap<Principal, string>();

  async function mailbox(user: Principal, name: string): Promise<Mailbox> {
    const found = await mailboxByName(db, user.id, canonicalName(name));
    if (!found) throw new BackendError('nonexistent', 'no such mailbox');
    return found;
  }

  async function ownMailbox(user: Principal, mailboxId: string): Promise<Mailbox> {
    const found = await mailboxById(db, mailboxId);
    if (!found || found.inboxId !== user.id) throw new BackendError('nonexistent', 'the mailbox no longer exists');
    return found;
  }

  async function bodyOf(m: { blobAddress: string }): Promise<Buffer> {
    const body = await blobs.get(m.blobAddress);
    if (!body) throw new BackendError('unavailable', 'the message body is missing');
    return body;
  }

  /**
   * A row stored without a MIME tree (none is, today: delivery, import and APPEND all store one) gets it
   * parsed from its body on each read, so FETCH and SEARCH need no second path.
   */
  async function treeOf(m: { blobAddress: string }): Promise<MimeTree> {
    return parseMimeTree(await bodyOf(m));
  }

  /** Served octets [start, end): the prefix, then the body, joining only the parts the range touches. */
  function served(prefix: Buffer, body: Buffer, start: number, end: number): Buffer {
    const from = Math.max(0, start);
    const to = Math.max(from, end);
    if (to <= prefix.length) return prefix.subarray(from, to);
    if (from >= prefix.length) return body.subarray(from - prefix.length, to - prefix.length);
    return Buffer.concat([prefix.subarray(from), body.subarray(0, to - prefix.length)]);
  }

  async function copyOrMove(
    user: Principal,
    mailboxId: string,
    uids: readonly number[],
    target: string,
    move: boolean,
  ) {
    const to = await mailbox(user, target);
    const out = await copyMessages(imapDeps, {
      fromId: mailboxId,
      toId: to.id,
      uids,
      move,
      enforceLimit: !move,
      now: now(),
    });
    if (out.kind === 'over_quota') throw new BackendError('over-quota', 'the inbox is over its storage limit');
    if (out.kind === 'no_mailbox') throw new BackendError('nonexistent', 'no such mailbox');
    return { uidValidity: out.uidValidity, source: out.source, dest: out.dest } satisfies CopyResult;
  }

  const backend: MailboxBackend = {
    async authenticate(username, password, meta) {
      const result = await inboxLogin(deps, {
        address: username,
        password,
        ip: meta.remoteAddress,
        now: now(),
        passwordLogN: opts.passwordLogN,
      });
      if (result.kind === 'throttled') {
        throw new BackendError('unavailable', 'too many failed logins; try again later');
      }
      if (result.kind === 'failed') return null;
      const principal: Principal = { id: result.principal.inboxId, username: result.principal.address };
      credentials.set(principal, result.principal.credential);
      return principal;
    },

    async checkPrincipal(user) {
      // The seam for a credentials version on inboxes: compare it here instead of the hash fingerprint.
      const hash = await liveInboxHash(db, user.id);
      return hash !== null && credentialOf(hash) === credentials.get(user);
    },

    async listMailboxes(user) {
      const rows = await store.mailboxes(user.id);
      const names = new Set(rows.map((r) => r.name));
      const infos: MailboxInfo[] = rows.map((r) => ({
        name: r.name,
        specialUse: r.specialUse,
        subscribed: r.subscribed,
        selectable: true,
        hasChildren: false,
      }));
      // Superiors that exist only as the parents of others (a rename can leave them): \Noselect.
      for (const r of rows) {
        const levels = r.name.split('/');
        for (let i = 1; i < levels.length; i++) {
          const parent = levels.slice(0, i).join('/');
          if (!names.has(parent)) {
            names.add(parent);
            infos.push({ name: parent, specialUse: null, subscribed: false, selectable: false, hasChildren: true });
          }
        }
      }
      for (const info of infos) info.hasChildren = [...names].some((n) => n.startsWith(`${info.name}/`));
      return infos.sort((a, b) => (a.name === INBOX ? -1 : b.name === INBOX ? 1 : a.name < b.name ? -1 : 1));
    },

    async createMailbox(user, name) {
      const n = canonicalName(name, { trailingDelimiter: true });
      if (n === INBOX) throw new BackendError('already-exists', 'INBOX always exists');
      if (!(await createMailboxPath(db, user.id, n, now()))) {
        throw new BackendError('already-exists', 'a mailbox of that name exists');
      }
    },

    async deleteMailbox(user, name) {
      const n = canonicalName(name);
      // RFC 3501 §6.3.4: deleting INBOX is an error.
      if (n === INBOX) throw new BackendError('cannot', 'INBOX cannot be deleted');
      const mb = await mailbox(user, n);
      // The roles every inbox has (issue 12) stay: the MX, the webmail and clients file mail into them.
      if (mb.specialUse) throw new BackendError('cannot', `${mb.specialUse} mailboxes cannot be deleted`);
      // RFC 5530 §3 HASCHILDREN: we keep no \Noselect shells, so a mailbox with inferiors stays.
      if (await hasInferiors(db, user.id, n)) {
        throw new BackendError('has-children', 'delete the mailboxes inside it first');
      }
      if (!(await deleteMailbox(imapDeps, mb.id))) throw new BackendError('nonexistent', 'no such mailbox');
    },

    async renameMailbox(user, from, to) {
      const src = canonicalName(from);
      const dst = canonicalName(to);
      if (dst === INBOX || dst.startsWith(`${src}/`)) {
        throw new BackendError(dst === INBOX ? 'already-exists' : 'cannot', 'cannot rename to that name');
      }
      if (src === INBOX) {
        // RFC 3501 §6.3.5: renaming INBOX moves its messages to a new mailbox and leaves INBOX empty;
        // its inferiors stay where they are.
        const inbox = await mailbox(user, INBOX);
        if (!(await createMailboxPath(db, user.id, dst, now()))) {
          throw new BackendError('already-exists', 'a mailbox of that name exists');
        }
        const uids = await mailboxUids(db, inbox.id);
        if (uids.length) await copyOrMove(user, inbox.id, uids, dst, true);
        return;
      }
      const outcome = await renameMailboxTree(db, user.id, src, dst, now());
      if (outcome === 'nonexistent') throw new BackendError('nonexistent', 'no such mailbox');
      if (outcome === 'exists') throw new BackendError('already-exists', 'a mailbox of that name exists');
    },

    async setSubscribed(user, name, subscribed) {
      if (!(await setSubscribed(db, user.id, canonicalName(name), subscribed))) {
        throw new BackendError('nonexistent', 'no such mailbox');
      }
    },

    async status(user, name) {
      const mb = await mailbox(user, name);
      const [counts, after, uids] = await Promise.all([
        mailboxCounts(db, mb.id),
        recentAfter(db, mb.id, false),
        mailboxUids(db, mb.id),
      ]);
      return {
        messages: counts.messages,
        recent: uids.filter((u) => u > after).length,
        unseen: counts.unseen,
        uidNext: Number(mb.uidNext),
        uidValidity: Number(mb.uidValidity),
        highestModseq: BigInt(mb.highestModseq),
        size: counts.size,
      };
    },

    async select(user, name, { readOnly }) {
      // The mailbox row (its HIGHESTMODSEQ) before the UIDs: a message appended in between is in the map
      // and comes again as a change the sync skips, never missed.
      const mb = await mailbox(user, name);
      const uids = await mailboxUids(db, mb.id);
      const counts = await mailboxCounts(db, mb.id);
      // EXAMINE looks without taking (RFC 3501 §6.3.2: no change to the mailbox's state).
      const after = await recentAfter(db, mb.id, !readOnly);
      const recentUids = uids.filter((u) => u > after);
      return {
        mailboxId: mb.id,
        messages: uids.length,
        recent: recentUids.length,
        recentUids,
        unseen: counts.unseen,
        uidNext: Number(mb.uidNext),
        uidValidity: Number(mb.uidValidity),
        highestModseq: BigInt(mb.highestModseq),
        size: counts.size,
        uids,
        keywords: counts.keywords,
        readOnly,
        firstUnseenUid: counts.firstUnseenUid,
      };
    },

    async *fetchMeta(user, mailboxId, uids, opts) {
      const withTree = opts.tree !== false;
      const changedSince = opts.changedSince !== null ? Number(opts.changedSince) : null;
      // The next page is asked for while this one is answered, so the database and the socket overlap.
      const page = (i: number) =>
        i < uids.length
          ? imapMessageRows(db, mailboxId, uids.slice(i, i + META_PAGE), { changedSince, tree: withTree })
          : null;
      // The first page is asked for together with the ownership check, one round trip instead of two;
      // nothing of it is used before the check has passed.
      let next = page(0);
      try {
        await ownMailbox(user, mailboxId);
      } catch (err) {
        next?.catch(() => {});
        throw err;
      }
      for (let i = 0; next; i += META_PAGE) {
        const rows = await next;
        next = page(i + META_PAGE);
        const metas: MessageMeta[] = [];
        for (const r of rows) {
          let tree: MimeTree | null = null;
          if (withTree || r.headerEnd === null) {
            const stored: unknown = r.structure === null ? null : JSON.parse(r.structure);
            tree = isMimeTree(stored) ? stored : await treeOf(r);
          }
          metas.push(metaOf(r, withTree ? tree : null, tree ? tree.body.bodyStart : (r.headerEnd as number)));
        }
        if (metas.length) yield metas;
      }
    },

    async readBody(user, mailboxId, uid, start, end, ref) {
      if (isRef(ref)) {
        // The metadata this backend gave out for this session's mailbox: no second look-up of the row,
        // and of the body only the range (with a blob store that reads ranges).
        const where = locate(ref, start, end);
        if ('prefix' in where) return where.prefix;
        const { address, start: from, end: to, before } = where.blob;
        if (blobs.read) {
          // The prefix goes into the same buffer as the body's range: one copy of the served bytes.
          const served = await blobs.read(address, from, to, before);
          if (served) return served;
        } else {
          const body = (await blobs.get(address))?.subarray(from, to);
          if (body) return before ? Buffer.concat([before, body]) : body;
        }
        // Released meanwhile: the message was expunged (or its body is lost); the row says which.
      }
      await ownMailbox(user, mailboxId);
      const [m] = await store.messages(mailboxId, { uids: [uid] });
      if (!m) throw new BackendError('nonexistent', 'the message was expunged');
      // The blob store has no range read: the whole body is fetched and the range sliced from it.
      return served(m.prefix, await bodyOf(m), start, end);
    },

    async readBodies(user, mailboxId, ranges, alloc) {
      const out: Array<Buffer | null> = new Array(ranges.length).fill(null);
      // The ranges a blob store that reads many at once is asked for: those past the prefix, with a ref.
      const reads: BlobRead[] = [];
      const at: number[] = [];
      for (let i = 0; i < ranges.length; i++) {
        const { start, end, ref } = ranges[i]!;
        if (!blobs.readMany || !isRef(ref)) continue;
        const where = locate(ref, start, end);
        if ('prefix' in where) {
          out[i] = where.prefix;
          continue;
        }
        reads.push(where.blob);
        at.push(i);
      }
      if (reads.length) {
        const got = await blobs.readMany!(reads, alloc);
        for (let j = 0; j < got.length; j++) out[at[j]!] = got[j]!;
      }
      // The rest one at a time: all of them with a store that has no readMany; else the bodies released
      // meanwhile, looked up again by their row (which says whether the message was expunged).
      for (let i = 0; i < ranges.length; i++) {
        if (out[i]) continue;
        const r = ranges[i]!;
        try {
          out[i] = await backend.readBody(user, mailboxId, r.uid, r.start, r.end, blobs.readMany ? undefined : r.ref);
        } catch (err) {
          if (!(err instanceof BackendError && err.code === 'nonexistent')) throw err;
        }
      }
      return out;
    },

    async narrowByHeader(user, mailboxId, uids, field, needle) {
      // The stored envelope holds these fields' first value as written (imap/search-eval.ts reads the
      // same); an ASCII needle can be looked for there by Postgres (storage/pg/imap-mailboxes.ts).
      const column = ENVELOPE_TEXT[field];
      if (!column || !/^[\x20-\x7e]*$/.test(needle)) return null;
      // Asked together with the ownership check (one round trip), and used only once it has passed.
      const found = envelopeCandidates(db, mailboxId, uids, column, needle);
      try {
        await ownMailbox(user, mailboxId);
      } catch (err) {
        found.catch(() => {});
        throw err;
      }
      return found;
    },

    markSeen(user, mailboxId, uids) {
      return backend.store(user, mailboxId, uids, { op: 'add', flags: ['\\Seen'], unchangedSince: null });
    },

    async append(user, name, message) {
      const mb = await mailbox(user, name);
      let tree: MimeTree | null = null;
      try {
        tree = parseMimeTree(message.bytes);
      } catch {
        tree = null; // an unparseable message is still stored; FETCH then shows it as one text part
      }
      const blob = await blobs.put(message.bytes);
      try {
        const out = await store.append({
          mailboxId: mb.id,
          blob,
          internalDate: message.internalDate ?? now(),
          flags: storable(message.flags),
          messageId: tree?.messageId ?? null,
          envelope: tree?.envelope,
          structure: tree ?? undefined,
          // RFC 9208 §4.3: APPEND past the limit is refused (Sent and Drafts count like any mailbox).
          enforceLimit: true,
        });
        if (out.kind === 'over_quota') throw new BackendError('over-quota', 'the inbox is over its storage limit');
        if (out.kind === 'no_mailbox') throw new BackendError('nonexistent', 'no such mailbox');
        if (out.kind === 'duplicate') throw new BackendError('cannot', 'the message is already stored');
        return { uidValidity: Number(out.uidValidity), uid: Number(out.uid) };
      } finally {
        // Our own reference: the message row holds one of its own.
        await blobs.release(blob.address).catch(imapDeps.onError);
      }
    },

    async store(user, mailboxId, uids, req) {
      await ownMailbox(user, mailboxId);
      let out;
      try {
        out = await store.setFlags(
          mailboxId,
          uids,
          { mode: req.op, flags: storable(req.flags) },
          req.unchangedSince !== null ? { unchangedSince: Number(req.unchangedSince) } : {},
        );
      } catch (err) {
        if (err instanceof TypeError) throw new BackendError('cannot', err.message);
        throw err;
      }
      const modseq = BigInt(out.modseq ?? 0);
      return {
        changed: out.changed.map((c) => ({ uid: Number(c.uid), flags: c.flags, modseq })),
        modified: out.modified.map(Number),
      } satisfies StoreResult;
    },

    copy: (user, mailboxId, uids, target) => copyOrMove(user, mailboxId, uids, target, false),
    move: (user, mailboxId, uids, target) => copyOrMove(user, mailboxId, uids, target, true),

    async expunge(user, mailboxId, uids) {
      await ownMailbox(user, mailboxId);
      const which = uids ?? (await mailboxUids(db, mailboxId));
      if (!which.length) return [];
      const out = await store.expunge(mailboxId, which, { deletedOnly: true });
      return out.expunged.map(Number);
    },

    async quotaRoots(user, name) {
      await mailbox(user, name);
      return [await backend.quota(user, '')];
    },

    async quota(user, root) {
      // One quota root per inbox, named "" (RFC 9208 §3.2 lets a server name its roots).
      if (root !== '') throw new BackendError('nonexistent', 'no such quota root');
      const q = await inboxQuota(db, user.id);
      if (!q) throw new BackendError('nonexistent', 'the inbox no longer exists');
      // RFC 9208 §5.1: STORAGE in units of 1024 octets.
      const usage = Math.ceil(q.usedBytes / 1024);
      const limit = Math.floor(q.limitBytes / 1024);
      return { name: '', resources: [{ name: 'STORAGE', usage, limit }] } satisfies QuotaRoot;
    },

    async changesSince(user, mailboxId, since) {
      const rows = await store.changesSince(mailboxId, Number(since));
      // The journal of a deleted mailbox goes with it: no rows and no mailbox means it is gone.
      if (!rows.length) await ownMailbox(user, mailboxId);
      return rows.map((c): MailboxChange => {
        const modseq = BigInt(c.modseq);
        const uid = Number(c.uid);
        if (c.kind === 'append') return { kind: 'added', uid, modseq };
        if (c.kind === 'expunge') return { kind: 'expunged', uid, modseq };
        return { kind: 'flags', uid, flags: c.flags ?? [], modseq };
      });
    },

    async watch(user, mailboxId, onChange) {
      return changes.subscribe({ mailboxId }, () => onChange());
    },

    async waitForChange(user, mailboxId, signal) {
      if (signal.aborted) return;
      let wake = () => {};
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const stop = await backend.watch(user, mailboxId, () => wake());
      const onAbort = () => wake();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        await woken;
      } finally {
        signal.removeEventListener('abort', onAbort);
        stop();
      }
    },
  };
  return backend;
}
