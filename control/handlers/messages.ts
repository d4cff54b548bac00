// Message reads: docs/api.md §4.11 (get, events), §4.10 (the project's messages) and §4.14 (admin messages
// and stats); shapes per docs/decisions.md #4.
import { MESSAGE_STATUSES, type MessageEventType, type MessageStatus, type messageRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { ApiError, fail, paged, pageRequest } from '../errors.js';
import { authorizeProject } from '../authorize.js';
import { cancelUnsent, parseScheduledAt, rescheduleUnsent } from '../../core/schedule.js';
import {
  getMessage,
  listMessageEvents,
  listMessages,
  messageStats,
  type MessageEventRecord,
  type MessageRecord,
} from '../../storage/pg/message-reads.js';

const DAY_MS = 24 * 60 * 60_000;

export const messageJson = (m: MessageRecord) => ({
  id: m.id,
  projectId: m.projectId,
  status: m.status as MessageStatus,
  from: m.fromHeader,
  to: m.to,
  recipients: m.recipients.map((r) => ({ address: r.address, kind: r.kind, status: r.status as MessageStatus })),
  subject: m.subject,
  messageId: m.messageIdHeader,
  attempts: m.attempts,
  tags: m.tags,
  metadata: m.metadata,
  scheduledAt: m.scheduledAt ? m.scheduledAt.toISOString() : null,
  createdAt: m.createdAt.toISOString(),
  updatedAt: m.updatedAt.toISOString(),
});

const eventJson = (e: MessageEventRecord) => ({
  id: e.id,
  type: e.type as MessageEventType,
  createdAt: e.createdAt.toISOString(),
  detail: e.detail ?? null,
});

/** `?tag=name:value` (the route's pattern has checked it; neither part holds a colon). */
function tagFilter(tag: string | undefined): { name: string; value: string } | null {
  if (tag === undefined) return null;
  const colon = tag.indexOf(':');
  return { name: tag.slice(0, colon), value: tag.slice(colon + 1) };
}

const noSuchMessage = () => fail('not_found', 'No such message.');

/**
 * The message, if the caller may read it: a project key only its own project's (the app has already
 * checked messages:read), anyone else a project it has access to (docs/api.md §5.4: reads need membership).
 * Every other case is the same 404, so that a message's existence is never leaked: an unknown id, an
 * id that is not a UUID, another project's message, a soft-deleted project's.
 */
async function readableMessage(
  rc: RequestCtx,
  id: string,
  scope: 'messages:read' | 'messages:send' = 'messages:read',
): Promise<MessageRecord> {
  const { db } = rc.deps.storage;
  const p = rc.principal;
  if (!p) throw new Error('message reads are signed routes');
  const m = await getMessage(db, id);
  if (!m) throw noSuchMessage();
  try {
    await authorizeProject(db, p, m.projectId, undefined, scope);
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not_found') throw noSuchMessage();
    throw err;
  }
  return m;
}

/** Every status with its count, zero where there is none. */
function countsByStatus<R extends { status: string }>(
  rows: R[],
  pick: (r: R) => number,
): Record<MessageStatus, number> {
  const out = Object.fromEntries(MESSAGE_STATUSES.map((s) => [s, 0])) as Record<MessageStatus, number>;
  for (const r of rows) if (r.status in out) out[r.status as MessageStatus] = pick(r);
  return out;
}

export const messageHandlers: Handlers<typeof messageRoutes> = {
  async 'v1.messages.get'({ query }, rc) {
    return { row: messageJson(await readableMessage(rc, query.id)) };
  },

  async 'v1.messages.events'({ query }, rc) {
    const m = await readableMessage(rc, query.id);
    return { events: (await listMessageEvents(rc.deps.storage.db, m.id)).map(eventJson) };
  },

  async 'v1.messages.cancel'({ body }, rc) {
    const m = await readableMessage(rc, body.id, 'messages:send');
    rc.audit.projectId = m.projectId;
    rc.audit.targetId = m.id;
    await cancelUnsent(rc.deps, m, rc.now);
    return { row: messageJson((await getMessage(rc.deps.storage.db, m.id))!) };
  },

  async 'v1.messages.reschedule'({ body }, rc) {
    const m = await readableMessage(rc, body.id, 'messages:send');
    const at = parseScheduledAt(body.scheduledAt, rc.now, 'body.scheduledAt');
    rc.audit.projectId = m.projectId;
    rc.audit.targetId = m.id;
    await rescheduleUnsent(rc.deps, m, at, rc.now);
    return { row: messageJson((await getMessage(rc.deps.storage.db, m.id))!) };
  },

  async 'console.projects.messages'({ query }, rc) {
    const projectId = rc.access?.projectId;
    if (!projectId) throw new Error('route without a project target reached a project handler');
    const page = paged(
      await listMessages(
        rc.deps.storage.db,
        { projectId, status: query.status ?? null, tag: tagFilter(query.tag) },
        pageRequest(query),
      ),
    );
    return { messages: page.rows.map(messageJson), nextCursor: page.nextCursor };
  },

  async 'admin.messages.list'({ query }, rc) {
    const page = paged(
      await listMessages(
        rc.deps.storage.db,
        { projectId: query.projectId ?? null, status: query.status ?? null, tag: tagFilter(query.tag) },
        pageRequest(query),
      ),
    );
    return { messages: page.rows.map(messageJson), nextCursor: page.nextCursor };
  },

  async 'admin.stats'(_input, rc) {
    // "Last 24 h" is (now − 24 h, now] on the request clock, not SQL now(): the service clock is the
    // one every other time rule follows (and the one tests move).
    const s = await messageStats(rc.deps.storage.db, { since: new Date(rc.now.getTime() - DAY_MS), until: rc.now });
    return {
      projects: s.projects,
      suppressions: s.suppressions,
      messages: countsByStatus(s.byStatus, (r) => r.total),
      last24h: countsByStatus(s.byStatus, (r) => r.recent),
    };
  },
};
