// Reads of sent messages: the message reads of docs/api.md §4.11 (scope messages:read), the project view of
// §4.10 and the admin views of §4.14. Shapes per docs/decisions.md #4; `limit` per #6.
//
// /v1/messages/get and /v1/messages/events have the shape of the data layer (/v1/<table>/<verb>).
// The data-layer registry (api/data-layer.ts) holds the `messages` table with `list` only: its `get`
// is the route below (docs/decisions.md #4), whose row is the table's row, so no second route is
// generated at that path. `events` is no data-layer verb; the table `message_events` has its own
// list and get. `cancel` and `reschedule` (scope messages:send) act on a message that has not started sending
// (docs/api.md §4.11 scheduling); they are no data-layer verbs either (the messages table has no writes).
import { Type, type TInteger } from '@sinclair/typebox';
import { Cursor, Limit, Nullable, Obj, routes } from './types.js';
import { ADMIN_AUTH } from './admin.js';
import { PROJECT_AUTH } from './projects.js';
import { MESSAGE_STATUSES, Message, MessageEvent, MessageStatusSchema, type MessageStatus } from './mail-records.js';

export {
  MESSAGE_EVENT_TYPES,
  MESSAGE_STATUSES,
  Message,
  MessageEvent,
  MessageStatusSchema,
  type MessageEventType,
  type MessageStatus,
} from './mail-records.js';

// A message id that is not a UUID names no message: 404, as an unknown one (not 400), so the answer
// is the same for every id that is not the caller's.
const ById = Obj({ id: Type.String({ minLength: 1, maxLength: 200 }) });
/** `?tag=name:value`: the messages sent with this tag (docs/api.md §4.11). */
const TagFilter = Type.String({ pattern: '^[A-Za-z0-9_-]{1,256}:[A-Za-z0-9_-]{1,256}$' });
const Messages = Type.Object({ messages: Type.Array(Message), nextCursor: Nullable(Type.String()) });
/** Every status as a key, zero included, so a client never has to tell "none" from "absent". */
const StatusCounts = Type.Object(
  Object.fromEntries(MESSAGE_STATUSES.map((s) => [s, Type.Integer({ minimum: 0 })])) as Record<MessageStatus, TInteger>,
  { additionalProperties: false },
);

export const messageRoutes = routes({
  'v1.messages.get': {
    method: 'GET',
    path: '/v1/messages/get',
    auth: PROJECT_AUTH,
    scope: 'messages:read',
    summary:
      "A message's current status and metadata. A project key reads its own project's messages; an account " +
      'or organization token those of projects it can see; 404 for any other id.',
    query: ById,
    response: Type.Object({ row: Message }),
  },
  'v1.messages.events': {
    method: 'GET',
    path: '/v1/messages/events',
    auth: PROJECT_AUTH,
    scope: 'messages:read',
    summary: "A message's full event history, oldest first; 404 as for /v1/messages/get.",
    query: ById,
    response: Type.Object({ events: Type.Array(MessageEvent) }),
  },
  'v1.messages.cancel': {
    method: 'POST',
    path: '/v1/messages/cancel',
    auth: ['project_api_key', 'platform_admin'],
    scope: 'messages:send',
    summary:
      'Cancel a message that has not started sending (a scheduled one, say): it ends failed with an event whose ' +
      'detail is { reason: "cancelled" }. 409 once it is sending or done; 404 for an id the caller may not read.',
    body: ById,
    response: Type.Object({ row: Message }),
  },
  'v1.messages.reschedule': {
    method: 'POST',
    path: '/v1/messages/reschedule',
    auth: ['project_api_key', 'platform_admin'],
    scope: 'messages:send',
    summary:
      'Move a message that has not started sending to scheduledAt (in the future, at most 30 days ahead). 409 once ' +
      'it is sending or done.',
    body: Obj({
      id: Type.String({ minLength: 1, maxLength: 200 }),
      scheduledAt: Type.String({ minLength: 10, maxLength: 40 }),
    }),
    response: Type.Object({ row: Message }),
  },
  'console.projects.messages': {
    method: 'GET',
    path: '/console/v1/projects/{id}/messages',
    auth: PROJECT_AUTH,
    target: { kind: 'project', in: 'params', field: 'id' },
    scope: 'project:admin',
    summary: "The project's recent messages, newest first; optionally of one status and with one tag (name:value).",
    params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
    query: Obj({
      limit: Type.Optional(Limit),
      cursor: Type.Optional(Cursor),
      status: Type.Optional(MessageStatusSchema),
      tag: Type.Optional(TagFilter),
    }),
    response: Messages,
  },
  'admin.messages.list': {
    method: 'GET',
    path: '/admin/v1/messages',
    auth: ADMIN_AUTH,
    summary:
      'Recent messages across projects, newest first; optionally of one project, of one status and with one tag ' +
      '(name:value).',
    query: Obj({
      limit: Type.Optional(Limit),
      cursor: Type.Optional(Cursor),
      projectId: Type.Optional(Type.String({ format: 'uuid' })),
      status: Type.Optional(MessageStatusSchema),
      tag: Type.Optional(TagFilter),
    }),
    response: Messages,
  },
  'admin.stats': {
    method: 'GET',
    path: '/admin/v1/stats',
    auth: ADMIN_AUTH,
    summary:
      'Platform counters: live projects, suppressions, messages by status, and messages created in the last 24 h by ' +
      'status.',
    response: Type.Object({
      projects: Type.Integer({ minimum: 0 }),
      suppressions: Type.Integer({ minimum: 0 }),
      messages: StatusCounts,
      last24h: StatusCounts,
    }),
  },
});
