// The RCPT policy of the MX listener (docs/api.md §6 item 5, docs/decisions.md #10, #19), as a function
// over storage. In order:
// 1. the exact VERP return path of a message we sent: accepted for its DSN or ARF report;
// 2. a live inbox on a verified inbound capability: accepted, unless the inbox is at or over its limit
//    (552 5.2.2 "mailbox is full");
// 3. a verified inbound domain with no such inbox: 550 5.1.1;
// 4. anything else: 550 5.7.1, so that we never relay (RFC 5321 §3.6.2, §7.1); an address shaped like a
//    VERP return path keeps its 550 5.1.1 of before (it names a message we do not know).
// What was accepted is remembered per transaction for DATA (recipientsOf).
import type { SMTPServerEnvelope } from 'smtp-server';
import type { Storage } from '../../storage/index.js';
import { reportedMessage, type ReportedMessage } from '../../storage/pg/reports.js';
import { findInboundRecipient } from '../../storage/pg/inboxes.js';
import { decodeReturnPath, returnPathMac } from '../../mail/verp.js';
import { normalizeLocalpart } from '../../mail/localpart.js';
import { normalizeDomain } from '../../mail/domain-names.js';
import { MAILBOX_FULL, MAILBOX_UNKNOWN, RELAY_DENIED } from '../../mail/smtp-reply.js';

export interface InboxRecipient {
  kind: 'inbox';
  /** The address as given in RCPT TO (for the Received field's "for" clause). */
  address: string;
  inboxId: string;
  inboxMailboxId: string;
  /** Where mail failing DMARC under p=reject goes; INBOX when the inbox has no \Junk mailbox. */
  junkMailboxId: string;
}

export interface ReportRecipient {
  kind: 'report';
  address: string;
  message: ReportedMessage;
}

export type Recipient = InboxRecipient | ReportRecipient;

/**
 * The sent message whose exact return path `address` is, or null. A tag that is not ours is refused before
 * anything is looked up (docs/decisions.md #53); an address of before the tag names only the message that was
 * sent from exactly it.
 */
export async function reportRecipient(storage: Storage, address: string): Promise<ReportedMessage | null> {
  const verp = decodeReturnPath(address, returnPathMac(storage.sealer));
  if (!verp || verp.signed === false) return null;
  const m = await reportedMessage(storage.db, verp.messageId);
  // The whole address must be the one we sent from: the id alone at another domain names nothing.
  return m && m.returnPath.toLowerCase() === address.toLowerCase() ? m : null;
}

/** RFC 5321 §4.1.2: the domain is after the last "@" (a quoted local part may hold one). */
function splitAddress(address: string): { localpart: string; domain: string } | null {
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return null;
  return { localpart: address.slice(0, at), domain: address.slice(at + 1) };
}

/** Decides one RCPT TO: resolves with what it names, or throws the SmtpReply that refuses it. */
export async function decideRecipient(storage: Storage, address: string): Promise<Recipient> {
  const report = await reportRecipient(storage, address);
  if (report) return { kind: 'report', address, message: report };
  const parts = splitAddress(address);
  const localpart = parts && normalizeLocalpart(parts.localpart);
  // An address literal or a malformed domain is nothing we receive for.
  const domain = parts && normalizeDomain(parts.domain);
  const found = domain ? await findInboundRecipient(storage.db, localpart ?? '', domain) : null;
  if (!found) throw decodeReturnPath(address, returnPathMac(storage.sealer)) ? MAILBOX_UNKNOWN : RELAY_DENIED;
  const inbox = localpart ? found.inbox : null;
  if (!inbox) throw MAILBOX_UNKNOWN;
  // At or over: the inbox takes nothing more; a message already accepted at DATA may have passed it.
  if (inbox.usedBytes >= inbox.storageLimitBytes) throw MAILBOX_FULL;
  return {
    kind: 'inbox',
    address,
    inboxId: inbox.id,
    inboxMailboxId: inbox.inboxMailboxId,
    junkMailboxId: inbox.junkMailboxId ?? inbox.inboxMailboxId,
  };
}

// Per transaction: smtp-server gives every transaction (after MAIL, RSET or a finished DATA) a new
// envelope object, so what one transaction accepted never leaks into the next.
const accepted = new WeakMap<SMTPServerEnvelope, Map<string, Recipient>>();

/** Records an accepted recipient on the transaction's envelope (a repeated address counts once). */
export function remember(envelope: SMTPServerEnvelope, r: Recipient): void {
  let m = accepted.get(envelope);
  if (!m) accepted.set(envelope, (m = new Map()));
  m.set(r.address.toLowerCase(), r);
}

/** The recipients accepted in this transaction, each inbox once (two spellings of one inbox file one copy). */
export function recipientsOf(envelope: SMTPServerEnvelope): { inboxes: InboxRecipient[]; reports: ReportRecipient[] } {
  const inboxes = new Map<string, InboxRecipient>();
  const reports: ReportRecipient[] = [];
  for (const r of accepted.get(envelope)?.values() ?? []) {
    if (r.kind === 'report') reports.push(r);
    else if (!inboxes.has(r.inboxId)) inboxes.set(r.inboxId, r);
  }
  return { inboxes: [...inboxes.values()], reports };
}
