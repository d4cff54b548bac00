// A tenant ready to send: an organization with a project whose domain has a verified outbound
// capability (verified by the platform key, so no DNS is needed), and an API key that sends and reads.
import { randomUUID } from 'node:crypto';
import type { SignedUp, TestService } from './service.js';
import type { Client } from '@svc-mail/sdk';

export interface Sender {
  owner: SignedUp;
  orgId: string;
  projectId: string;
  key: Client;
  keyId: string;
  keySecret: string;
  domain: string;
  outboundId: string;
  /** The DKIM TXT records the API told the customer to publish: host → value. */
  dkimTxt: Record<string, string>;
}

/** What sender() needs of a service: an in-process TestService, or clients of a child process. */
export type Clients = Pick<TestService, 'signup' | 'admin' | 'client'>;

export async function sender(
  svc: Clients,
  opts: { displayName?: string; ed25519?: boolean; domain?: string } = {},
): Promise<Sender> {
  const owner = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Sender Org' });
  const { project } = await owner.client.console.projects.create({ name: 'sender', organizationId: organization.id });
  const domain = opts.domain ?? `s-${randomUUID().slice(0, 8)}.test`;
  const claim = await owner.client.console.projects.domains.create({ id: project.id, domain });
  const withOut = await owner.client.console.projects.domains.outbound.create({
    id: project.id,
    domainId: claim.id,
    ...(opts.ed25519 ? { ed25519: true } : {}),
  });
  const cap = withOut.outbound[0]!;
  await svc.admin().admin.senderDomains.markVerified({ id: claim.id });
  if (opts.displayName)
    await owner.client.console.projects.outbound.displayName({
      id: project.id,
      capId: cap.id,
      displayName: opts.displayName,
    });
  const k = await owner.client.console.projects.apiKeys.create({
    id: project.id,
    label: 'send',
    scopes: ['messages:send', 'messages:read'],
  });
  const dkimTxt: Record<string, string> = {};
  for (const r of [cap.dnsRecords.dkim, cap.dnsRecords.dkimEd25519])
    if (r) dkimTxt[r.host.replace(/\.$/, '')] = r.value;
  return {
    owner,
    orgId: organization.id,
    projectId: project.id,
    key: svc.client({ keyId: k.keyId, secret: k.secret }),
    keyId: k.keyId,
    keySecret: k.secret,
    domain,
    outboundId: cap.id,
    dkimTxt,
  };
}

/** The return path and the Message-ID (with its angle brackets) a sent message went out with. */
export async function sentAs(
  svc: Pick<TestService, 'running'>,
  id: string,
): Promise<{ returnPath: string; messageIdHeader: string }> {
  const rows = await svc.running.storage.db.query<{ returnPath: string; messageIdHeader: string }>(
    'SELECT return_path AS "returnPath", message_id_header AS "messageIdHeader" FROM messages WHERE id = $1',
    [id],
  );
  const row = rows[0];
  if (!row) throw new Error(`no message ${id}`);
  return { returnPath: row.returnPath, messageIdHeader: `<${row.messageIdHeader}>` };
}
