// Webmail fixtures: a service with a loopback DNS zone, a tenant whose domain receives (a verified inbound
// capability) and, unless told not, sends (a verified outbound capability in the same project), inboxes with a
// known password, messages put straight into a mailbox, and a cookie-keeping client of the webmail's JSON API.
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { createInbox } from '../../storage/pg/inboxes.js';
import { markInboundVerified } from '../../storage/pg/domains.js';
import { hashPassword } from '../../core/passwords.js';
import { parseMimeTree } from '../../mail/mime-tree.js';
import type { Mailbox } from '../../mail/mail-store.js';
import { startTestService, type TestService, type TestServiceOptions } from './service.js';
import { startDnsZone, type DnsZone } from './dns-zone.js';

export const PASSWORD = 'webmail password 1';

export interface WebmailEnv {
  svc: TestService;
  zone: DnsZone;
  domain: string;
  projectId: string;
  capabilityId: string;
}

export interface WebmailInbox {
  id: string;
  address: string;
  mailboxes: Record<string, Mailbox>;
}

export async function webmailEnv(t: Test, opts: TestServiceOptions & { outbound?: boolean } = {}): Promise<WebmailEnv> {
  const zone = await startDnsZone(t);
  const svc = await startTestService(t, { ...opts, env: { SVC_DNS_SERVERS: zone.hostPort, ...opts.env } });
  const owner = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Webmail Org' });
  const { project } = await owner.client.console.projects.create({ name: 'mail', organizationId: organization.id });
  const domain = `w-${randomUUID().slice(0, 8)}.test`;
  const p = owner.client.console.projects;
  const claim = await p.domains.create({ id: project.id, domain });
  if (opts.outbound !== false) await p.domains.outbound.create({ id: project.id, domainId: claim.id });
  await svc.admin().admin.senderDomains.markVerified({ id: claim.id });
  const withIn = await p.domains.inbound.create({ id: project.id, domainId: claim.id });
  const cap = withIn.inbound.find((i) => i.domain === domain)!;
  await markInboundVerified(svc.running.storage.db, cap.id, new Date(svc.clock.now()));
  return { svc, zone, domain, projectId: project.id, capabilityId: cap.id };
}

export async function webmailInbox(e: WebmailEnv, localpart: string, password = PASSWORD): Promise<WebmailInbox> {
  const made = await createInbox(e.svc.running.storage.db, {
    capabilityId: e.capabilityId,
    localpart,
    type: 'individual',
    passwordHash: await hashPassword(password, 10),
    initialPasswordSealed: null,
    now: new Date(e.svc.clock.now()),
  });
  if (!made) throw new Error(`inbox ${localpart} exists`);
  return {
    id: made.inbox.id,
    address: `${localpart}@${e.domain}`,
    mailboxes: Object.fromEntries(made.mailboxes.map((m) => [m.name, m])),
  };
}

/** Stores `raw` in a mailbox as the MX would (envelope and structure computed once). */
export async function putMessage(e: WebmailEnv, mailboxId: string, raw: string | Buffer, flags: string[] = []) {
  const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.replace(/\r?\n/g, '\r\n'));
  const { blobs, store } = e.svc.running.storage.mail;
  const tree = parseMimeTree(bytes);
  const blob = await blobs.put(bytes);
  const out = await store.append({
    mailboxId,
    blob,
    internalDate: new Date(e.svc.clock.now()),
    flags,
    messageId: tree.messageId,
    envelope: tree.envelope,
    structure: tree,
  });
  await blobs.release(blob.address);
  if (out.kind !== 'appended') throw new Error(`append: ${out.kind}`);
  return out.id;
}

export interface WebmailHttp {
  csrf: string;
  cookie: string;
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  json<T = any>(method: string, path: string, body?: unknown): Promise<T>;
}

/** A browser-like client of the JSON API: keeps the cookie, sends the CSRF token on changes. */
export function webmailHttp(baseUrl: () => string): WebmailHttp {
  const c: WebmailHttp = {
    csrf: '',
    cookie: '',
    async call(method, path, body, headers = {}) {
      const res = await fetch(`${baseUrl()}${path.startsWith('/') ? path : `/webmail/v1/${path}`}`, {
        method,
        headers: {
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(c.cookie ? { cookie: c.cookie } : {}),
          ...(method !== 'GET' && c.csrf ? { 'x-csrf-token': c.csrf } : {}),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
      });
      const set = res.headers.get('set-cookie');
      if (set) c.cookie = set.split(';')[0]!;
      return res;
    },
    async json(method, path, body) {
      const res = await c.call(method, path, body);
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text);
    },
  };
  return c;
}

export async function signIn(baseUrl: () => string, address: string, password = PASSWORD): Promise<WebmailHttp> {
  const c = webmailHttp(baseUrl);
  const out = await c.json<{ csrfToken: string }>('POST', 'session', { address, password });
  c.csrf = out.csrfToken;
  return c;
}
