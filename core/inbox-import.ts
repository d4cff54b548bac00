// Import into an inbox (docs/api.md §4.5 import rules, docs/decisions.md #20): base64 messages filed into
// INBOX, Sent, Drafts or Trash, each stored with the index fields every reader uses (mail/mime-tree.ts:
// envelope, structure, Message-ID), counted toward the inbox's storage, and stored once per inbox.
//
// Once per inbox: a message is skipped when its Message-ID (or, without one, the SHA-256 of the raw message)
// is already in the inbox, whichever way it came in. A first look finds those already there; the import key
// stored with each imported message (unique per inbox, storage/pg/migrations/0009) settles the rest, so two
// concurrent imports of the same message store it once and the second counts it as skipped.
import { createHash } from 'node:crypto';
import { fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { liveInbox } from './inboxes.js';
import type { Mailbox, SpecialUse } from '../mail/mail-store.js';
import { parseMimeTree, type MimeTree } from '../mail/mime-tree.js';
import type { Inbound } from '../storage/pg/domains.js';
import { messagesPresent } from '../storage/pg/inboxes.js';

/** docs/api.md §8: at most 200 messages per call (the route's schema refuses more, importing nothing). */
export const MAX_IMPORT_BATCH = 200;

export type ImportFolder = 'inbox' | 'sent' | 'drafts' | 'trash';

export interface ImportEntry {
  /** The RFC 5322 message, base64. */
  raw: string;
  folder?: ImportFolder;
  /** Sets \Seen. */
  read?: boolean;
  /** ISO 8601: the INTERNALDATE; else the message's Date field, else the time of import. */
  date?: string;
}

/** Why an entry was not imported: not base64, nothing in it, no RFC 5322 header, or over the storage limit. */
export type ImportFailure = 'not_base64' | 'empty' | 'not_a_message' | 'mailbox_full';

export interface ImportResult {
  total: number;
  imported: number;
  skipped: number;
  failed: number;
  /** Each failed entry, by its index in the call. */
  failures: { index: number; reason: ImportFailure }[];
}

/** Where each folder files its messages: INBOX by name (RFC 9051 §5.1), the others by RFC 6154 role. */
const FOLDERS: Record<ImportFolder, { name: string; specialUse: SpecialUse | null }> = {
  inbox: { name: 'INBOX', specialUse: null },
  sent: { name: 'Sent', specialUse: '\\Sent' },
  drafts: { name: 'Drafts', specialUse: '\\Drafts' },
  trash: { name: 'Trash', specialUse: '\\Trash' },
};

// RFC 4648 §4: the base64 alphabet, padding only at the end. Line breaks and spaces (RFC 2045 §6.8 wraps at
// 76 characters) are dropped first.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
// RFC 5322 §2.2, §3.6.8: a header field starts with a field name (printable ASCII but ":") and a colon.
const FIELD_START = /^[\x21-\x39\x3b-\x7e]+[ \t]*:/;

const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');

function decodeBase64(raw: string): Buffer | null {
  const clean = raw.replace(/[\r\n\t ]/g, '');
  if (!BASE64.test(clean) || clean.length % 4 === 1) return null;
  const unpadded = clean.replace(/=+$/, '');
  if (clean.length !== unpadded.length && clean.length % 4 !== 0) return null;
  return Buffer.from(clean, 'base64');
}

/**
 * A message is what starts with a header field and has at least one field a mail client shows (RFC 5322
 * §3.6: originator, destination, date, subject or Message-ID); anything else is not a message.
 */
function isMessage(raw: Buffer, tree: MimeTree): boolean {
  if (!FIELD_START.test(raw.subarray(0, 1000).toString('latin1'))) return false;
  const e = tree.envelope;
  return Boolean(e.from || e.sender || e.to || e.cc || e.bcc || e.date || e.subject || tree.messageId);
}

interface Parsed {
  index: number;
  entry: ImportEntry;
  raw: Buffer;
  tree: MimeTree;
  /** SHA-256 of the raw message: its blob address. */
  hash: string;
  importKey: string;
}

type Prepared = Parsed | { index: number; reason: ImportFailure };

function prepare(entry: ImportEntry, index: number): Prepared {
  const raw = decodeBase64(entry.raw);
  if (!raw) return { index, reason: 'not_base64' };
  if (raw.length === 0) return { index, reason: 'empty' };
  const tree = parseMimeTree(raw);
  if (!isMessage(raw, tree)) return { index, reason: 'not_a_message' };
  const hash = sha256(raw);
  // Hashed so that a Message-ID of any length fits the unique index; the prefix keeps the two kinds apart.
  const importKey = tree.messageId ? `mid:${sha256(tree.messageId)}` : `sha256:${hash}`;
  return { index, entry, raw, tree, hash, importKey };
}

async function folderMailboxes(deps: CoreDeps, inboxId: string): Promise<(f: ImportFolder) => Promise<Mailbox>> {
  const { store } = deps.storage.mail;
  let boxes = await store.mailboxes(inboxId);
  return async (folder) => {
    const want = FOLDERS[folder];
    const find = () =>
      boxes.find((m) => (want.specialUse ? m.specialUse === want.specialUse : m.name.toUpperCase() === 'INBOX'));
    let box = find();
    if (!box) {
      // Every inbox is created with all four (storage/pg/inboxes.ts); this only mends one made otherwise.
      await store.createMailbox(inboxId, want.name, want.specialUse);
      boxes = await store.mailboxes(inboxId);
      box = find();
    }
    if (!box) throw new Error(`inbox ${inboxId} has no ${want.name} mailbox`);
    return box;
  };
}

export async function importMessages(
  deps: CoreDeps,
  cap: Inbound,
  inboxId: string,
  entries: readonly ImportEntry[],
  now: Date,
): Promise<ImportResult> {
  if (entries.length > MAX_IMPORT_BATCH) {
    throw fail('invalid_request', `At most ${MAX_IMPORT_BATCH} messages per call; nothing was imported.`);
  }
  const inbox = await liveInbox(deps, cap, inboxId);
  const { db, mail } = deps.storage;
  const result: ImportResult = { total: entries.length, imported: 0, skipped: 0, failed: 0, failures: [] };
  const failed = (index: number, reason: ImportFailure) => {
    result.failed++;
    result.failures.push({ index, reason });
  };

  const prepared = entries.map(prepare);
  const parsed = prepared.filter((p): p is Parsed => 'raw' in p);
  const present = await messagesPresent(db, inbox.id, {
    importKeys: parsed.map((p) => p.importKey),
    messageIds: parsed.flatMap((p) => (p.tree.messageId ? [p.tree.messageId] : [])),
    blobAddresses: parsed.filter((p) => !p.tree.messageId).map((p) => p.hash),
  });
  const seenKeys = new Set(present.flatMap((r) => (r.importKey ? [r.importKey] : [])));
  const seenIds = new Set(present.flatMap((r) => (r.messageId ? [r.messageId] : [])));
  const seenHashes = new Set(present.filter((r) => !r.messageId).map((r) => r.blobAddress));
  const mailboxFor = await folderMailboxes(deps, inbox.id);

  // One at a time, in the order given: UIDs follow the call's order and the limit is reached predictably.
  for (const p of prepared) {
    if (!('raw' in p)) {
      failed(p.index, p.reason);
      continue;
    }
    const id = p.tree.messageId;
    if (seenKeys.has(p.importKey) || (id ? seenIds.has(id) : seenHashes.has(p.hash))) {
      result.skipped++;
      continue;
    }
    seenKeys.add(p.importKey);
    const mailbox = await mailboxFor(p.entry.folder ?? 'inbox');
    // RFC 9051 §2.3.3 INTERNALDATE: the date given, else the message's own Date field, else now.
    const internalDate = p.entry.date ? new Date(p.entry.date) : p.tree.date ? new Date(p.tree.date) : now;
    const blob = await mail.blobs.put(p.raw);
    let outcome;
    try {
      outcome = await mail.store.append({
        mailboxId: mailbox.id,
        blob,
        internalDate,
        flags: p.entry.read ? ['\\Seen'] : [],
        messageId: id,
        envelope: p.tree.envelope,
        structure: p.tree,
        importKey: p.importKey,
        enforceLimit: true,
      });
    } finally {
      // append took a reference of its own (mail/blob-store.ts): the put's is ours to give back.
      await mail.blobs.release(blob.address);
    }
    switch (outcome.kind) {
      case 'appended':
        result.imported++;
        break;
      case 'duplicate':
        result.skipped++;
        break;
      case 'over_quota':
        failed(p.index, 'mailbox_full');
        break;
      case 'no_mailbox':
        throw fail('not_found', 'The inbox was deleted during the import.', { imported: result.imported });
    }
  }
  return result;
}
