// Inboxes to receive into, for MX tests: a tenant whose domain has a verified inbound capability (the
// claim verified with the platform key, the capability marked verified in storage: no DNS needed), and
// inboxes created through storage/pg/inboxes.ts createInbox. Also the readers a test checks them with.
import { randomUUID } from 'node:crypto';
import type { Client } from '@svc-mail/sdk';
import type { Storage } from '../../storage/index.js';
import { createInbox, findInbox, type Inbox } from '../../storage/pg/inboxes.js';
import { markInboundVerified } from '../../storage/pg/domains.js';
import type { Mailbox, StoredMessage } from '../../mail/mail-store.js';
import type { Clients } from './sender.js';

export interface InboundDomain {
  domain: string;
  projectId: string;
  capabilityId: string;
  owner: Client;
}

/**
 * A fresh project with `domain` claimed and verified, and an inbound capability on it, marked verified
 * in `storage` unless `verify` is false (then it stays pending).
 */
export async function inboundDomain(
  svc: Clients,
  storage: Storage,
  opts: { domain?: string; verify?: boolean; now?: Date } = {},
): Promise<InboundDomain> {
  const owner = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Receiving Org' });
  const { project } = await owner.client.console.projects.create({ name: 'mail', organizationId: organization.id });
  const domain = opts.domain ?? `r-${randomUUID().slice(0, 8)}.test`;
  const claim = await owner.client.console.projects.domains.create({ id: project.id, domain });
  await svc.admin().admin.senderDomains.markVerified({ id: claim.id });
  const withIn = await owner.client.console.projects.domains.inbound.create({ id: project.id, domainId: claim.id });
  const cap = withIn.inbound.find((i) => i.domain === domain);
  if (!cap) throw new Error(`no inbound capability for ${domain}`);
  if (opts.verify !== false) await markInboundVerified(storage.db, cap.id, opts.now ?? new Date());
  return { domain, projectId: project.id, capabilityId: cap.id, owner: owner.client };
}

export interface TestInbox {
  inbox: Inbox;
  address: string;
  /** Mailboxes by name: INBOX, Sent, Drafts, Trash, Junk. */
  mailboxes: Record<string, Mailbox>;
}

export async function addInbox(
  storage: Storage,
  d: Pick<InboundDomain, 'capabilityId' | 'domain'>,
  localpart: string,
  now = new Date(),
): Promise<TestInbox> {
  const made = await createInbox(storage.db, {
    capabilityId: d.capabilityId,
    localpart,
    type: 'individual',
    passwordHash: null,
    initialPasswordSealed: null,
    now,
  });
  if (!made) throw new Error(`inbox ${localpart}@${d.domain} exists`);
  return {
    inbox: made.inbox,
    address: `${localpart}@${d.domain}`,
    mailboxes: Object.fromEntries(made.mailboxes.map((m) => [m.name, m])),
  };
}

/** The inbox row as it is now. */
export async function inboxNow(storage: Storage, id: string): Promise<Inbox> {
  const i = await findInbox(storage.db, id);
  if (!i) throw new Error(`no inbox ${id}`);
  return i;
}

export interface ReadMessage extends StoredMessage {
  /** The stored body (from the blob store). */
  body: Buffer;
  /** What IMAP serves as the message: the prefix, then the body. */
  full: Buffer;
}

/** The messages of a mailbox with their bodies. */
export async function readMailbox(storage: Storage, mailboxId: string): Promise<ReadMessage[]> {
  const rows = await storage.mail.store.messages(mailboxId);
  return Promise.all(
    rows.map(async (m) => {
      const body = await storage.mail.blobs.get(m.blobAddress);
      if (!body) throw new Error(`message ${m.uid}: blob ${m.blobAddress} missing`);
      return { ...m, body, full: Buffer.concat([m.prefix, body]) };
    }),
  );
}
