// Fixtures of the inbox tests (docs/api.md §4.5): a service with a loopback DNS zone, an organization whose
// project has a verified claim and a verified inbound capability, and the storage steps a test takes where
// no route does yet (the first login belongs to the IMAP server, usage to the MX).
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import type { Client } from '@svc-mail/sdk';
import { startTestService, type TestService, type TestServiceOptions } from '../helpers/service.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';

export const MX_HOST = 'mx.inboxes.test';
/** Longer than the 10 s verify throttle of docs/api.md §8. */
const PAST_THROTTLE_MS = 11_000;

export interface Tenant {
  client: Client;
  projectId: string;
  organizationId: string;
}

export interface InboxEnv {
  svc: TestService;
  zone: DnsZone;
  owner: Tenant;
  claimId: string;
  capId: string;
  /** The capability's domain. */
  domain: string;
}

export async function tenant(svc: TestService, name = 'Org'): Promise<Tenant> {
  const u = await svc.signup();
  const { organization } = await u.client.console.organizations.create({ name });
  const { project } = await u.client.console.projects.create({
    name: `${name} project`,
    organizationId: organization.id,
  });
  return { client: u.client, projectId: project.id, organizationId: organization.id };
}

/** A claim of the tenant's project with receiving on `subdomain` (or the apex); verified unless told not. */
export async function inboundCapability(
  e: { svc: TestService; zone: DnsZone },
  who: Tenant,
  opts: { claimId?: string; subdomain?: string; verify?: boolean } = {},
): Promise<{ claimId: string; capId: string; domain: string }> {
  const p = who.client.console.projects;
  let claimId = opts.claimId;
  if (!claimId) {
    const claim = await p.domains.create({ id: who.projectId, domain: `in-${randomBytes(5).toString('hex')}.com` });
    e.zone.txt(claim.dnsRecords.ownership.host, claim.dnsRecords.ownership.value);
    e.svc.clock.advance(PAST_THROTTLE_MS);
    await p.domains.verify({ id: who.projectId, domainId: claim.id });
    claimId = claim.id;
  }
  const before = (await p.domains.get({ id: who.projectId, domainId: claimId })).inbound.map((i) => i.id);
  const after = await p.domains.inbound.create({ id: who.projectId, domainId: claimId, subdomain: opts.subdomain });
  const cap = after.inbound.find((i) => !before.includes(i.id))!;
  if (opts.verify !== false) {
    e.zone.mx(cap.domain, 10, MX_HOST);
    await p.inbound.verify({ id: who.projectId, capId: cap.id });
  }
  return { claimId, capId: cap.id, domain: cap.domain };
}

export async function inboxEnv(t: Test, opts: TestServiceOptions = {}): Promise<InboxEnv> {
  const zone = await startDnsZone(t);
  const svc = await startTestService(t, {
    ...opts,
    env: { SVC_DNS_SERVERS: zone.hostPort, SVC_MX_HOST: MX_HOST, ...opts.env },
  });
  const owner = await tenant(svc, 'Owner');
  return { svc, zone, owner, ...(await inboundCapability({ svc, zone }, owner)) };
}

/** The inbox routes of the env's capability, for its owner (or another caller). */
export const inboxes = (e: InboxEnv, who: Tenant | Client = e.owner) =>
  ('client' in who ? who.client : who).console.projects.inbound.inboxes;

/** Path fields of the env's capability, for calls through the SDK. */
export const at = (e: InboxEnv) => ({ id: e.owner.projectId, capId: e.capId });

/**
 * What the first login does to the row (docs/api.md §3; the login itself is the IMAP server's): the initial
 * password is no longer kept, and billing starts if nothing started it. Through the test's own storage handle.
 */
export async function simulateFirstLogin(e: InboxEnv, inboxId: string, at: Date): Promise<void> {
  await e.svc.running.storage.db.query(
    `UPDATE inboxes SET initial_password_sealed = NULL, billing_started_at = COALESCE(billing_started_at, $2)
     WHERE id = $1`,
    [inboxId, at],
  );
}

/** A stored column of the inbox row, read through the test's storage handle. */
export async function inboxRow(e: InboxEnv, inboxId: string) {
  const [row] = await e.svc.running.storage.db.query<{
    passwordHash: string | null;
    credentialsVersion: number;
    deletedAt: Date | null;
    usedBytes: number;
    billingStartedAt: Date | null;
  }>(
    `SELECT password_hash AS "passwordHash", credentials_version AS "credentialsVersion", deleted_at AS "deletedAt",
       used_bytes AS "usedBytes", billing_started_at AS "billingStartedAt" FROM inboxes WHERE id = $1`,
    [inboxId],
  );
  return row!;
}

/** A minimal RFC 5322 message, base64 as the import route takes it. */
export function message(o: { subject?: string; messageId?: string | null; date?: string | null; body?: string } = {}) {
  const lines = [
    'From: Alice <alice@example.com>',
    'To: bob@example.net',
    `Subject: ${o.subject ?? 'Hello'}`,
    ...(o.date === null ? [] : [`Date: ${o.date ?? 'Tue, 01 Jul 2003 10:52:37 +0200'}`]),
    ...(o.messageId === null ? [] : [`Message-ID: <${o.messageId ?? randomBytes(8).toString('hex')}@example.com>`]),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    o.body ?? 'Hello Bob.',
    '',
  ];
  return Buffer.from(lines.join('\r\n'), 'latin1').toString('base64');
}
