// Inboxes under an inbound capability (docs/api.md §4.5, §3): create with a generated password, list, soft
// delete with the purge of its mail, the storage limit, a new password. Import is core/inbox-import.ts. The
// caller has already checked that the principal may act on `projectId`.
//
// Passwords (docs/decisions.md #12): the inbox keeps a memory-hard hash for logins and, until the first login
// clears it, the initial password sealed with the master key and bound to the row (docs/decisions.md #35), so
// the listing can show it again. A password change or a deletion moves the inbox's credentials version and
// publishes an inbox notice, which ends its IMAP and webmail sessions (mail/mail-store.ts, "Inbox notices").
import { randomUUID } from 'node:crypto';
import { fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { hashPassword } from './passwords.js';
import { GB } from './inbox-billing.js';
import { generatePassword } from '../mail/generated-password.js';
import { localpartProblem, normalizeLocalpart } from '../mail/localpart.js';
import { getInbound, type Inbound } from '../storage/pg/domains.js';
import {
  createInbox as insertInbox,
  findLiveInbox,
  inboxIdsOfCapabilities,
  inboxMessageUids,
  listLiveInboxes,
  setInboxPassword,
  setStorageLimit as updateStorageLimit,
  softDeleteInbox,
  unpurgedInboxes,
  type Inbox,
  type InboxType,
} from '../storage/pg/inboxes.js';

/** docs/api.md §8, docs/decisions.md #17: whole GB of 2^30 bytes, 1 to 1024. */
export const MIN_LIMIT_GB = 1;
export const MAX_LIMIT_GB = 1024;

/** Expunged per mail-store call when a deletion purges an inbox: one transaction each, bounded. */
const PURGE_BATCH = 500;

/** The associated data that binds a sealed initial password to its inbox row (docs/decisions.md #35). */
const sealAad = (inboxId: string) => `inbox-initial-password:${inboxId}`;

export interface InboxView {
  inbox: Inbox;
  /** The full address: localpart@capability domain. */
  address: string;
}

export interface ListedInboxView extends InboxView {
  /** The generated password until the first login, then null (docs/api.md §3). */
  initialPassword: string | null;
}

/**
 * The inbound capability of the project (and, under the nested alias path, of the claim named there).
 * 404 otherwise, as for the capability routes (core/domains.ts).
 */
export async function inboundCapability(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
): Promise<Inbound> {
  const cap = await getInbound(deps.storage.db, projectId, capId);
  if (!cap || (claimId !== undefined && cap.claimId !== claimId))
    throw fail('not_found', 'No such inbound capability.');
  return cap;
}

/** The live inbox of the capability; 404 for another capability's, a deleted one, or none. */
export async function liveInbox(deps: CoreDeps, cap: Inbound, inboxId: string): Promise<Inbox> {
  const inbox = await findLiveInbox(deps.storage.db, cap.id, inboxId);
  if (!inbox) throw fail('not_found', 'No such inbox.');
  return inbox;
}

export async function createInbox(
  deps: CoreDeps,
  cap: Inbound,
  input: { localpart: string; type?: InboxType },
  a: { passwordLogN: number; now: Date },
): Promise<InboxView & { initialPassword: string }> {
  const localpart = normalizeLocalpart(input.localpart);
  if (localpart === null) {
    const problem = localpartProblem(input.localpart);
    throw fail(
      'invalid_request',
      `${JSON.stringify(input.localpart)} is not a valid local part: an RFC 5321 §4.1.2 Dot-string of at most ` +
        "64 characters (letters, digits and !#$%&'*+-/=?^_`{|}~, dots between them).",
      { field: 'body.localpart', problem },
    );
  }
  // docs/api.md §4.5: receiving must be verified before an address can take mail.
  if (cap.status !== 'verified') throw fail('invalid_request', `Verify the MX record of ${cap.domain} first.`);
  const password = generatePassword();
  const id = randomUUID();
  const created = await insertInbox(deps.storage.db, {
    id,
    capabilityId: cap.id,
    localpart,
    type: input.type ?? 'individual',
    passwordHash: await hashPassword(password, a.passwordLogN),
    initialPasswordSealed: deps.storage.sealer.seal(password, sealAad(id)),
    now: a.now,
  });
  if (!created) throw fail('conflict', `${localpart}@${cap.domain} already exists.`);
  return { inbox: created.inbox, address: `${created.inbox.localpart}@${cap.domain}`, initialPassword: password };
}

export async function listInboxes(deps: CoreDeps, cap: Inbound): Promise<ListedInboxView[]> {
  const { sealer } = deps.storage;
  return (await listLiveInboxes(deps.storage.db, cap.id)).map(({ initialPasswordSealed, ...inbox }) => ({
    inbox,
    address: `${inbox.localpart}@${cap.domain}`,
    initialPassword: initialPasswordSealed ? sealer.open(initialPasswordSealed, sealAad(inbox.id)) : null,
  }));
}

/**
 * docs/api.md §3: the inbox stops receiving, frees its address and ends its sessions in one committed step;
 * then its stored mail is expunged through the mail store, which gives the bodies' blob references back
 * (never a cascading SQL delete, which would leave the blob store's counts too high).
 */
export async function deleteInbox(deps: CoreDeps, cap: Inbound, inboxId: string, now: Date): Promise<void> {
  const inbox = await liveInbox(deps, cap, inboxId);
  const { db, mail } = deps.storage;
  if (!(await softDeleteInbox(db, mail.changes, inbox.id, now))) throw fail('not_found', 'No such inbox.');
  await purgeInboxMail(deps, inbox.id);
}

/**
 * Expunges every message of an inbox. After the soft delete no append can add one (the mail store refuses
 * a deleted inbox), so one pass empties it.
 */
export async function purgeInboxMail(deps: CoreDeps, inboxId: string): Promise<number> {
  const { db, mail } = deps.storage;
  let purged = 0;
  for (const { mailboxId, uids } of await inboxMessageUids(db, inboxId)) {
    for (let i = 0; i < uids.length; i += PURGE_BATCH) {
      purged += (await mail.store.expunge(mailboxId, uids.slice(i, i + PURGE_BATCH))).expunged.length;
    }
  }
  return purged;
}

/**
 * docs/decisions.md #50: before an inbound capability goes (removed, or with its domain claim), each of its
 * inboxes is deleted as `DELETE …/inboxes/{id}` deletes one (its sessions end, its billed days stay) and its
 * mail purged through the mail store. Idempotent: an inbox already deleted is only purged again.
 */
export async function retireInboxes(deps: CoreDeps, capabilityIds: string[], now: Date): Promise<void> {
  const { db, mail } = deps.storage;
  for (const id of await inboxIdsOfCapabilities(db, capabilityIds)) {
    await softDeleteInbox(db, mail.changes, id, now);
    await purgeInboxMail(deps, id);
  }
}

/** The sweep (bin/start.ts): finishes purges that a crash interrupted. Answers how many inboxes it emptied. */
export async function finishInterruptedPurges(deps: CoreDeps, limit = 100): Promise<number> {
  const ids = await unpurgedInboxes(deps.storage.db, limit);
  for (const id of ids) await purgeInboxMail(deps, id);
  return ids.length;
}

/**
 * The storage limit in whole GB (docs/api.md §4.5): checked here rather than by the route's schema, so that
 * every wrong value (0, 1.5, 1025, "2", null) gets the code the API guide names.
 */
export function storageLimitBytes(limitGb: unknown): number {
  if (typeof limitGb !== 'number' || !Number.isInteger(limitGb) || limitGb < MIN_LIMIT_GB || limitGb > MAX_LIMIT_GB) {
    throw fail(
      'invalid_storage_limit',
      `limitGb must be a whole number from ${MIN_LIMIT_GB} to ${MAX_LIMIT_GB} (GB of 2^30 bytes).`,
      { field: 'body.limitGb', value: limitGb ?? null },
    );
  }
  return limitGb * GB;
}

export async function setStorageLimit(deps: CoreDeps, cap: Inbound, inboxId: string, limitGb: unknown) {
  const limitBytes = storageLimitBytes(limitGb);
  const inbox = await liveInbox(deps, cap, inboxId);
  const storage = await updateStorageLimit(deps.storage.db, inbox.id, limitBytes);
  if (!storage) throw fail('not_found', 'No such inbox.');
  return storage;
}

/**
 * A new generated password, answered once. The old one stops working and every session ends; the listing's
 * initial password stays as it was (it shows what the inbox was created with, until its first login).
 */
export async function newInboxPassword(
  deps: CoreDeps,
  cap: Inbound,
  inboxId: string,
  a: { passwordLogN: number },
): Promise<string> {
  const inbox = await liveInbox(deps, cap, inboxId);
  const password = generatePassword();
  const hash = await hashPassword(password, a.passwordLogN);
  if (!(await setInboxPassword(deps.storage.db, deps.storage.mail.changes, inbox.id, hash)))
    throw fail('not_found', 'No such inbox.');
  return password;
}
