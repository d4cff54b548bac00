// docs/api.md §4.5 inboxes under an inbound capability: HTTP shapes around core/inboxes.ts and
// core/inbox-import.ts. Each route answers at …/inbound/{capId}/inboxes and under the claim's path too.
import type { inboxRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import type { Access } from '../authorize.js';
import type { Inbox } from '../../storage/pg/inboxes.js';
import type { Inbound } from '../../storage/pg/domains.js';
import {
  createInbox,
  deleteInbox,
  inboundCapability,
  listInboxes,
  newInboxPassword,
  setStorageLimit,
} from '../../core/inboxes.js';
import { importMessages, type ImportEntry } from '../../core/inbox-import.js';

/** A live inbox, which always has its capability (the check inboxes_live_has_capability, migration 0011). */
function inboxJson(inbox: Inbox, address: string) {
  if (inbox.capabilityId === null) throw new Error(`live inbox ${inbox.id} without a capability`);
  return {
    id: inbox.id,
    capabilityId: inbox.capabilityId,
    localpart: inbox.localpart,
    address,
    type: inbox.type,
    createdAt: inbox.createdAt.toISOString(),
  };
}

interface CapPath {
  capId: string;
  domainId?: string;
}

function capability(rc: RequestCtx, p: CapPath): Promise<Inbound> {
  const projectId = (rc.access as Access | null)?.projectId;
  if (!projectId) throw new Error('inbox route without a project target');
  return inboundCapability(rc.deps, projectId, p.capId, p.domainId);
}

async function create(rc: RequestCtx, p: CapPath, body: { localpart: string; type?: 'individual' | 'group' }) {
  const cap = await capability(rc, p);
  const made = await createInbox(rc.deps, cap, body, { passwordLogN: rc.deps.passwordLogN, now: rc.now });
  rc.audit.targetId = made.inbox.id;
  return { inbox: inboxJson(made.inbox, made.address), initialPassword: made.initialPassword };
}

async function list(rc: RequestCtx, p: CapPath) {
  const views = await listInboxes(rc.deps, await capability(rc, p));
  return {
    inboxes: views.map((v) => ({
      ...inboxJson(v.inbox, v.address),
      initialPassword: v.initialPassword,
      storageUsedBytes: v.inbox.usedBytes,
      storageLimitBytes: v.inbox.storageLimitBytes,
    })),
  };
}

async function remove(rc: RequestCtx, p: CapPath & { inboxId: string }) {
  await deleteInbox(rc.deps, await capability(rc, p), p.inboxId, rc.now);
  return { ok: true as const };
}

async function storage(rc: RequestCtx, p: CapPath & { inboxId: string }, limitGb: unknown) {
  return { storage: await setStorageLimit(rc.deps, await capability(rc, p), p.inboxId, limitGb) };
}

async function importJson(rc: RequestCtx, p: CapPath & { inboxId: string }, body: { messages: ImportEntry[] }) {
  return importMessages(rc.deps, await capability(rc, p), p.inboxId, body.messages, rc.now);
}

async function password(rc: RequestCtx, p: CapPath & { inboxId: string }) {
  const cap = await capability(rc, p);
  return { password: await newInboxPassword(rc.deps, cap, p.inboxId, { passwordLogN: rc.deps.passwordLogN }) };
}

export const inboxHandlers: Handlers<typeof inboxRoutes> = {
  'console.projects.inbound.inboxes.create': ({ params, body }, rc) => create(rc, params, body),
  'console.projects.inbound.inboxes.list': ({ params }, rc) => list(rc, params),
  'console.projects.inbound.inboxes.delete': ({ params }, rc) => remove(rc, params),
  'console.projects.inbound.inboxes.storage': ({ params, body }, rc) => storage(rc, params, body.limitGb),
  'console.projects.inbound.inboxes.import': ({ params, body }, rc) => importJson(rc, params, body),
  'console.projects.inbound.inboxes.password': ({ params }, rc) => password(rc, params),
  'console.projects.domains.inbound.inboxes.create': ({ params, body }, rc) => create(rc, params, body),
  'console.projects.domains.inbound.inboxes.list': ({ params }, rc) => list(rc, params),
  'console.projects.domains.inbound.inboxes.delete': ({ params }, rc) => remove(rc, params),
  'console.projects.domains.inbound.inboxes.storage': ({ params, body }, rc) => storage(rc, params, body.limitGb),
  'console.projects.domains.inbound.inboxes.import': ({ params, body }, rc) => importJson(rc, params, body),
  'console.projects.domains.inbound.inboxes.password': ({ params }, rc) => password(rc, params),
};
