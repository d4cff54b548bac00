// The webmail's operations (docs/api.md §4.15) over the mail store: sessions of one inbox, folders, a page of
// messages, reading a message and its parts, flags, moves, Trash. Every call takes the session and reaches the
// session's own inbox only: message and folder ids are looked up together with the inbox id
// (storage/pg/webmail.ts), so another inbox's id is "not found", never a leak.
import { createHash, randomBytes } from 'node:crypto';
import type { CoreDeps } from './deps.js';
import { ApiError, fail } from './errors.js';
import { inboxLogin } from './inbox-auth.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { findEntity, parseMimeTree, transferDecode, type MimeEntity, type MimeTree } from '../mail/mime-tree.js';
import { decodeCharset } from '../mail/mime-header.js';
import type { Mailbox, StoredMessage } from '../mail/mail-store.js';
import { htmlText } from '../mail/html-text.js';
import { inboxCredentials, setInboxPassword } from '../storage/pg/inboxes.js';
import { liveInboxHash } from '../storage/pg/inbox-logins.js';
import { copyMessages } from '../storage/pg/imap-mailboxes.js';
import {
  deleteWebmailSession,
  extendWebmailSession,
  findWebmailSession,
  foldersWithCounts,
  inboxSendingState,
  insertWebmailSession,
  mailboxOfInbox,
  messageOfInbox,
  messagePage,
} from '../storage/pg/webmail.js';

/** A session lives this long after its last use (slid forward at most every SLIDE_MS). */
export const SESSION_IDLE_MS = 12 * 3_600_000;
const SLIDE_MS = 5 * 60_000;
export const PAGE_SIZE_DEFAULT = 50;

export interface WebmailSession {
  inboxId: string;
  address: string;
  csrfToken: string;
  /** SHA-256 of the cookie's token: the row's key. */
  tokenHash: string;
}

const tokenHashOf = (token: string) => createHash('sha256').update(token).digest('base64url');
const newToken = () => randomBytes(32).toString('base64url');

async function openSession(deps: CoreDeps, inboxId: string, now: Date): Promise<{ token: string; csrfToken: string }> {
  const creds = await inboxCredentials(deps.storage.db, inboxId);
  if (!creds || creds.deleted) throw fail('unauthorized', 'Wrong address or password.');
  const token = newToken();
  const csrfToken = newToken();
  await insertWebmailSession(deps.storage.db, {
    tokenHash: tokenHashOf(token),
    inboxId,
    credentialsVersion: creds.credentialsVersion,
    csrfToken,
    now,
    expiresAt: new Date(now.getTime() + SESSION_IDLE_MS),
  });
  return { token, csrfToken };
}

/**
 * Signs in with the IMAP login (core/inbox-auth.ts: the same throttles, and the first login clears the initial
 * password and starts billing). Answers the cookie's token and the CSRF token.
 */
export async function webmailSignIn(
  deps: CoreDeps,
  a: { address: string; password: string; ip: string; now: Date; passwordLogN?: number },
): Promise<{ token: string; csrfToken: string; address: string }> {
  const result = await inboxLogin(deps, a);
  if (result.kind === 'throttled') {
    throw new ApiError(
      'rate_limited',
      'Too many failed sign-ins; try again later.',
      { retryAfterSeconds: 30 },
      {
        'Retry-After': '30',
      },
    );
  }
  if (result.kind === 'failed') throw fail('unauthorized', 'Wrong address or password.');
  const opened = await openSession(deps, result.principal.inboxId, a.now);
  return { ...opened, address: result.principal.address };
}

/** The live session of a cookie token, or null (unknown, expired, or its inbox's password changed). */
export async function webmailSession(deps: CoreDeps, token: string, now: Date): Promise<WebmailSession | null> {
  if (!/^[A-Za-z0-9_-]{20,100}$/.test(token)) return null;
  const tokenHash = tokenHashOf(token);
  const row = await findWebmailSession(deps.storage.db, tokenHash, now);
  if (!row) return null;
  const expires = new Date(row.expiresAt).getTime();
  if (expires - now.getTime() < SESSION_IDLE_MS - SLIDE_MS) {
    await extendWebmailSession(deps.storage.db, tokenHash, new Date(now.getTime() + SESSION_IDLE_MS));
  }
  return { inboxId: row.inboxId, address: row.address, csrfToken: row.csrfToken, tokenHash };
}

export async function webmailSignOut(deps: CoreDeps, s: WebmailSession): Promise<void> {
  await deleteWebmailSession(deps.storage.db, s.tokenHash);
}

/**
 * The inbox's own password change: checks the current one, stores the new one (which ends every session of the
 * inbox, IMAP ones too, through the credentials version) and opens a new session for this browser.
 */
export async function changeWebmailPassword(
  deps: CoreDeps,
  s: WebmailSession,
  a: { currentPassword: string; newPassword: string; now: Date; passwordLogN: number },
): Promise<{ token: string; csrfToken: string }> {
  const hash = await liveInboxHash(deps.storage.db, s.inboxId);
  if (!hash || !(await verifyPassword(a.currentPassword, hash)))
    throw fail('unauthorized', 'The current password is wrong.');
  const next = await hashPassword(a.newPassword, a.passwordLogN);
  if (!(await setInboxPassword(deps.storage.db, deps.storage.mail.changes, s.inboxId, next)))
    throw fail('unauthorized', 'The inbox no longer exists.');
  await deleteWebmailSession(deps.storage.db, s.tokenHash);
  return openSession(deps, s.inboxId, a.now);
}

/** Whether the inbox can send, and if not, a sentence that says why (shown in the compose view). */
export async function sendingState(
  deps: CoreDeps,
  s: WebmailSession,
): Promise<{ canSend: boolean; reason: string | null; projectId: string | null }> {
  const st = await inboxSendingState(deps.storage.db, s.inboxId);
  if (!st) return { canSend: false, reason: 'The inbox no longer exists.', projectId: null };
  if (st.outboundVerified) return { canSend: true, reason: null, projectId: st.projectId };
  return {
    canSend: false,
    projectId: st.projectId,
    reason: st.outboundElsewhere
      ? `${st.domain} sends from another project than this inbox's, so the webmail cannot send from ${st.address}.`
      : `${st.domain} has no verified sending (outbound) setup in this inbox's project, so mail cannot be sent ` +
        `from ${st.address}. Ask the project's owner to add and verify outbound sending for ${st.domain}.`,
  };
}

// ---- folders --------------------------------------------------------------------------------------------------

const roleOf = (m: Mailbox) =>
  m.name === 'INBOX' ? 'inbox' : m.specialUse ? m.specialUse.slice(1).toLowerCase() : null;
const ORDER = ['inbox', 'drafts', 'sent', 'junk', 'trash'];

export async function webmailFolders(deps: CoreDeps, s: WebmailSession) {
  const rows = await foldersWithCounts(deps.storage.db, s.inboxId);
  const rank = (r: Mailbox) => {
    const i = ORDER.indexOf(roleOf(r) ?? '');
    return i < 0 ? ORDER.length : i;
  };
  rows.sort((a, b) => rank(a) - rank(b) || (a.name < b.name ? -1 : 1));
  return rows.map((r) => ({ id: r.id, name: r.name, role: roleOf(r), total: r.total, unread: r.unread }));
}

export async function ownFolder(deps: CoreDeps, s: WebmailSession, folderId: string): Promise<Mailbox> {
  const mb = await mailboxOfInbox(deps.storage.db, s.inboxId, folderId);
  if (!mb) throw fail('not_found', 'No such folder.');
  return mb;
}

export async function folderByRole(deps: CoreDeps, s: WebmailSession, role: string): Promise<Mailbox> {
  const all = await deps.storage.mail.store.mailboxes(s.inboxId);
  const mb = all.find((m) => roleOf(m) === role);
  if (!mb) throw fail('conflict', `The inbox has no ${role} folder.`);
  return mb;
}

// ---- messages -------------------------------------------------------------------------------------------------

function isMimeTree(v: unknown): v is MimeTree {
  return (
    typeof v === 'object' && v !== null && (v as MimeTree).version === 1 && typeof (v as MimeTree).body === 'object'
  );
}

async function bodyOf(deps: CoreDeps, m: StoredMessage): Promise<Buffer> {
  const body = await deps.storage.mail.blobs.get(m.blobAddress);
  if (!body) throw fail('not_found', 'The message body is missing.');
  return body;
}

async function treeOf(deps: CoreDeps, m: StoredMessage): Promise<MimeTree> {
  return isMimeTree(m.structure) ? m.structure : parseMimeTree(await bodyOf(deps, m));
}

const addr = (list: { name: string; address: string }[] | undefined) =>
  (list ?? []).map((a) => ({ name: a.name || null, address: a.address }));

function listItem(m: StoredMessage, tree: MimeTree | null) {
  const d = tree?.display;
  const date = tree?.date ?? new Date(m.internalDate).toISOString();
  return {
    id: m.id,
    folderId: m.mailboxId,
    subject: d?.subject ?? '',
    from: addr(d?.from),
    to: addr(d?.to),
    date: new Date(date).toISOString(),
    preview: tree?.preview ?? '',
    seen: m.flags.includes('\\Seen'),
    flagged: m.flags.includes('\\Flagged'),
    answered: m.flags.includes('\\Answered'),
    hasAttachments: tree?.hasAttachments ?? false,
    size: Number(m.size),
  };
}

export async function webmailMessages(
  deps: CoreDeps,
  s: WebmailSession,
  folderId: string,
  q: { page?: number; pageSize?: number; q?: string },
) {
  const mb = await ownFolder(deps, s, folderId);
  const page = q.page ?? 1;
  const pageSize = q.pageSize ?? PAGE_SIZE_DEFAULT;
  const search = q.q?.trim() || null;
  const { rows, total } = await messagePage(deps.storage.db, mb.id, {
    offset: (page - 1) * pageSize,
    limit: pageSize,
    search,
  });
  return {
    messages: rows.map((m) => listItem(m, isMimeTree(m.structure) ? m.structure : null)),
    total,
    page,
    pageSize,
  };
}

export async function ownMessage(deps: CoreDeps, s: WebmailSession, id: string): Promise<StoredMessage> {
  const m = await messageOfInbox(deps.storage.db, s.inboxId, id);
  if (!m) throw fail('not_found', 'No such message.');
  return m;
}

/** Leaves of the tree in document order, not descending into attached messages. */
function leaves(e: MimeEntity, out: MimeEntity[] = []): MimeEntity[] {
  if (e.children) for (const c of e.children) leaves(c, out);
  else out.push(e);
  return out;
}

function paramOf(e: MimeEntity, name: string): string | null {
  return e.params.find(([k]) => k.toLowerCase() === name)?.[1] ?? null;
}

const isInlineText = (e: MimeEntity, sub: string) =>
  e.type === 'text' && e.subtype === sub && e.disposition?.type !== 'attachment' && !e.filename;

/** What a reader is offered to download: parts marked attachment, named parts and non-text leaves, not cid: images. */
function isDownload(e: MimeEntity): boolean {
  if (e.type === 'multipart') return false;
  if (e.disposition?.type === 'attachment') return true;
  if (e.id && e.type === 'image' && e.disposition?.type !== 'attachment') return false;
  if (e.filename) return true;
  return e.type !== 'text';
}

export function decodedPart(body: Buffer, e: MimeEntity): Buffer {
  return transferDecode(body.subarray(e.bodyStart, e.bodyEnd), e.encoding);
}

const partText = (body: Buffer, e: MimeEntity) => decodeCharset(decodedPart(body, e), paramOf(e, 'charset'));

export interface OpenedMessage {
  message: StoredMessage;
  tree: MimeTree;
  body: Buffer;
  text: string;
  html: string | null;
  attachments: { part: string; filename: string; contentType: string; size: number }[];
  /** Parts with a Content-ID (RFC 2392 cid: URLs), by id without angle brackets. */
  cids: Map<string, MimeEntity>;
}

export async function openMessage(deps: CoreDeps, s: WebmailSession, id: string): Promise<OpenedMessage> {
  const message = await ownMessage(deps, s, id);
  const body = await bodyOf(deps, message);
  const tree = isMimeTree(message.structure) ? message.structure : parseMimeTree(body);
  const all = leaves(tree.body);
  const textPart = all.find((e) => isInlineText(e, 'plain'));
  const htmlPart = all.find((e) => isInlineText(e, 'html'));
  const html = htmlPart ? partText(body, htmlPart) : null;
  const text = textPart ? partText(body, textPart) : html ? htmlText(html) : '';
  const cids = new Map<string, MimeEntity>();
  for (const e of all) if (e.id) cids.set(e.id.replace(/^<|>$/g, ''), e);
  const attachments = all
    .filter((e) => e.part && isDownload(e))
    .map((e) => ({
      part: e.part!,
      filename: e.filename ?? `part-${e.part}.${e.subtype || 'bin'}`,
      contentType: `${e.type}/${e.subtype}`,
      size: e.size,
    }));
  return { message, tree, body, text, html, attachments, cids };
}

/** A part of the message to download, decoded. */
export async function messagePart(deps: CoreDeps, s: WebmailSession, id: string, part: string) {
  const message = await ownMessage(deps, s, id);
  const body = await bodyOf(deps, message);
  const tree = await treeOf(deps, message);
  const path = /^\d+(\.\d+)*$/.test(part) ? part.split('.').map(Number) : null;
  const e = path ? findEntity(tree, path) : null;
  if (!e || e.type === 'multipart') throw fail('not_found', 'No such part.');
  return {
    bytes: decodedPart(body, e),
    filename: e.filename ?? `part-${part}.${e.subtype || 'bin'}`,
    contentType: `${e.type}/${e.subtype}`,
  };
}

export async function setMessageFlags(
  deps: CoreDeps,
  s: WebmailSession,
  id: string,
  want: { seen?: boolean; flagged?: boolean },
) {
  const m = await ownMessage(deps, s, id);
  const { store } = deps.storage.mail;
  const add: string[] = [];
  const remove: string[] = [];
  if (want.seen !== undefined) (want.seen ? add : remove).push('\\Seen');
  if (want.flagged !== undefined) (want.flagged ? add : remove).push('\\Flagged');
  let flags = m.flags;
  if (add.length)
    flags =
      (await store.setFlags(m.mailboxId, [Number(m.uid)], { mode: 'add', flags: add })).changed[0]?.flags ?? flags;
  if (remove.length)
    flags =
      (await store.setFlags(m.mailboxId, [Number(m.uid)], { mode: 'remove', flags: remove })).changed[0]?.flags ??
      flags;
  return { seen: flags.includes('\\Seen'), flagged: flags.includes('\\Flagged') };
}

export async function addFlag(deps: CoreDeps, m: StoredMessage, flag: string): Promise<void> {
  if (!m.flags.includes(flag))
    await deps.storage.mail.store.setFlags(m.mailboxId, [Number(m.uid)], { mode: 'add', flags: [flag] });
}

async function moveTo(deps: CoreDeps, m: StoredMessage, to: Mailbox, now: Date) {
  const out = await copyMessages(
    {
      db: deps.storage.db,
      blobs: deps.storage.mail.blobs,
      feed: deps.storage.mail.changes,
      onError: (err) => deps.ctx.log.warn({ err }, 'webmail: after-commit step failed'),
    },
    { fromId: m.mailboxId, toId: to.id, uids: [Number(m.uid)], move: true, enforceLimit: false, now },
  );
  if (out.kind !== 'copied') throw fail('not_found', 'No such message.');
  const destUid = out.dest[0];
  if (destUid === undefined) throw fail('not_found', 'No such message.');
  const [moved] = await deps.storage.mail.store.messages(to.id, { uids: [destUid] });
  if (!moved) throw fail('not_found', 'No such message.');
  return { id: moved.id, folderId: to.id };
}

export async function moveMessage(deps: CoreDeps, s: WebmailSession, id: string, folderId: string, now: Date) {
  const m = await ownMessage(deps, s, id);
  const to = await ownFolder(deps, s, folderId);
  if (to.id === m.mailboxId) return { id: m.id, folderId: to.id };
  return moveTo(deps, m, to, now);
}

async function expungeOne(deps: CoreDeps, m: StoredMessage) {
  await deps.storage.mail.store.expunge(m.mailboxId, [Number(m.uid)]);
}

/** To Trash; from Trash, for good. */
export async function deleteMessage(deps: CoreDeps, s: WebmailSession, id: string, now: Date) {
  const m = await ownMessage(deps, s, id);
  const trash = await folderByRole(deps, s, 'trash');
  if (m.mailboxId === trash.id) {
    await expungeOne(deps, m);
    return { trashed: false };
  }
  await moveTo(deps, m, trash, now);
  return { trashed: true };
}

/** Removes a draft the session owns (a replaced or sent draft); quietly nothing when it is gone already. */
export async function dropDraft(deps: CoreDeps, s: WebmailSession, id: string): Promise<void> {
  const m = await messageOfInbox(deps.storage.db, s.inboxId, id);
  const drafts = await folderByRole(deps, s, 'drafts');
  if (m && m.mailboxId === drafts.id) await expungeOne(deps, m);
}

export async function emptyFolder(deps: CoreDeps, s: WebmailSession, folderId: string) {
  const mb = await ownFolder(deps, s, folderId);
  const role = roleOf(mb);
  if (role !== 'trash' && role !== 'junk') throw fail('conflict', 'Only Trash and Junk can be emptied.');
  const rows = await deps.storage.mail.store.messages(mb.id);
  let removed = 0;
  for (let i = 0; i < rows.length; i += 500) {
    const out = await deps.storage.mail.store.expunge(
      mb.id,
      rows.slice(i, i + 500).map((r) => Number(r.uid)),
    );
    removed += out.expunged.length;
  }
  return { removed };
}

export { listItem as webmailListItem };
