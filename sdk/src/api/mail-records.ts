// Schemas of the records sending leaves behind: messages, their events (docs/api.md §2.2, docs/decisions.md #4),
// suppressions (docs/api.md §2.2, §6 rule 4) and webhook endpoints (§6 rule 2). A leaf module (it imports
// only ./types.js), so that the message routes, the project detail and the data-layer registry can
// all use these shapes without importing each other.
import { Type } from '@sinclair/typebox';
import { Nullable, Timestamp } from './types.js';

/** docs/api.md §2.2 MessageStatus. */
export const MESSAGE_STATUSES = [
  'queued',
  'sending',
  'delivered',
  'deferred',
  'bounced',
  'failed',
  'suppressed',
] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];
export const MessageStatusSchema = Type.Union(MESSAGE_STATUSES.map((s) => Type.Literal(s)));

/** docs/decisions.md #4: event types are the statuses plus `complained`. */
export const MESSAGE_EVENT_TYPES = [...MESSAGE_STATUSES, 'complained'] as const;
export type MessageEventType = (typeof MESSAGE_EVENT_TYPES)[number];
export const MessageEventTypeSchema = Type.Union(MESSAGE_EVENT_TYPES.map((s) => Type.Literal(s)));

const TAG_TEXT = '^[A-Za-z0-9_-]{1,256}$';
/** docs/api.md §4.11: a tag of a message, name and value each 1 to 256 of A-Z a-z 0-9 _ -. */
export const Tag = Type.Object(
  { name: Type.String({ pattern: TAG_TEXT }), value: Type.String({ pattern: TAG_TEXT }) },
  { additionalProperties: false },
);
/** docs/api.md §4.11: a message's metadata, string values only (at most 2 KB as JSON). */
export const Metadata = Type.Record(Type.String(), Type.String());

/** docs/api.md §4.11: a recipient of a message, with its own delivery status. */
export const MessageRecipient = Type.Object({
  address: Type.String(),
  kind: Type.Union([Type.Literal('to'), Type.Literal('cc'), Type.Literal('bcc')]),
  status: MessageStatusSchema,
});

/**
 * docs/decisions.md #4: the row of GET /v1/messages/get. The same row is what /v1/messages/list, the
 * project's message views and the admin message list carry.
 */
export const Message = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  status: MessageStatusSchema,
  /** The From header as sent, display name included. */
  from: Type.String(),
  /** The first `to` recipient. */
  to: Type.String(),
  /** Every recipient (to, cc, bcc, each address once) with its own status; the message's status derives from them. */
  recipients: Type.Array(MessageRecipient),
  subject: Type.String(),
  /** The Message-ID header, angle brackets included. */
  messageId: Type.String(),
  /** Delivery attempts made so far. */
  attempts: Type.Integer({ minimum: 0 }),
  /** As given to sendEmail (docs/api.md §4.11); [] and {} for a message sent without. */
  tags: Type.Array(Tag),
  metadata: Metadata,
  /** docs/api.md §4.11: when a scheduled message may leave; null for one sent at once. */
  scheduledAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const MessageEvent = Type.Object({
  id: Type.String(),
  type: MessageEventTypeSchema,
  createdAt: Timestamp,
  /** What the event adds (the remote SMTP reply of an attempt, a suppression reason), or null. */
  detail: Type.Unknown(),
});

/** docs/api.md §2.2 SuppressionReason (§6 rule 4). */
export const SUPPRESSION_REASONS = ['hard_bounce', 'soft_bounce_max', 'complaint', 'manual'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];
export const SuppressionReasonSchema = Type.Union(SUPPRESSION_REASONS.map((s) => Type.Literal(s)));

/**
 * A suppression as the console shows it (docs/api.md §2.2: address, reason, detail). `address` is stored
 * normalized: the local part as given, the domain in lower case.
 */
export const Suppression = Type.Object({
  id: Type.String(),
  address: Type.String(),
  reason: SuppressionReasonSchema,
  detail: Nullable(Type.String()),
  createdAt: Timestamp,
});

/** docs/api.md §2.2 WebhookEvent: the message event kinds a webhook subscribes to (§6 rule 2). */
export const WEBHOOK_EVENTS = ['delivered', 'deferred', 'bounced', 'failed', 'suppressed', 'complained'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
export const WebhookEventSchema = Type.Union(WEBHOOK_EVENTS.map((s) => Type.Literal(s)));

/**
 * A webhook endpoint (docs/api.md §2.2: id, url, events; the secret only in the answer to its creation).
 * `events` is as registered: empty means every kind (docs/decisions.md #5).
 */
export const Webhook = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(WebhookEventSchema),
  createdAt: Timestamp,
});
