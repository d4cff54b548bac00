// Webhook endpoints and their delivery attempts (docs/api.md §4.8, §6 rules 2-3; docs/decisions.md #5).
//
// Fan-out is transactional: the first attempt of every (event, endpoint) pair is inserted by the
// statement after the one that inserts the events, in the same transaction (recordOutcomes,
// acceptMessage). Tailing message_events by seq instead would miss events: a bigserial is taken at
// insert, not at commit, so a reader can see seq 11 committed before seq 10.
//
// The dispatcher (mta/webhooks/dispatcher.ts) claims due attempts with FOR UPDATE SKIP LOCKED and a
// lease (next_attempt_at moved ahead), so several MTA nodes share the work and a crash only delays it.
import type { Queryable } from './client.js';
import { isUuid } from '../../mail/uuid.js';

/** docs/api.md §2.2 WebhookEvent: the message event types a webhook may subscribe to. */
export const WEBHOOK_EVENT_TYPES = ['delivered', 'deferred', 'bounced', 'failed', 'suppressed', 'complained'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
const KINDS: ReadonlySet<string> = new Set(WEBHOOK_EVENT_TYPES);

/** The associated data an endpoint's secret is sealed with: it opens only for its own row. */
export const webhookSecretAad = (endpointId: string) => `webhook:${endpointId}`;

export interface WebhookEndpoint {
  id: string;
  projectId: string;
  url: string;
  events: WebhookEventType[];
  createdAt: Date;
}

const COLUMNS = `id, project_id AS "projectId", url, events, created_at AS "createdAt"`;

/**
 * Adds an endpoint unless the project already has `max`; null then. The count and the insert are one
 * statement (two concurrent registrations may still both pass at max - 1: the limit is a guard
 * against runaway fan-out, not an exact quota).
 */
export async function insertWebhookEndpoint(
  q: Queryable,
  e: {
    id: string;
    projectId: string;
    url: string;
    events: readonly string[];
    secretSealed: string;
    now: Date;
    max: number;
  },
): Promise<WebhookEndpoint | null> {
  const rows = await q.query<WebhookEndpoint>(
    `INSERT INTO webhook_endpoints (id, project_id, url, events, secret_sealed, created_at)
     SELECT $1, $2, $3, $4, $5, $6 WHERE (SELECT count(*) FROM webhook_endpoints WHERE project_id = $2) < $7
     RETURNING ${COLUMNS}`,
    [e.id, e.projectId, e.url, e.events, e.secretSealed, e.now, e.max],
  );
  return rows[0] ?? null;
}

export async function listWebhookEndpoints(q: Queryable, projectId: string): Promise<WebhookEndpoint[]> {
  return q.query<WebhookEndpoint>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE project_id = $1 ORDER BY created_at, id`,
    [projectId],
  );
}

/** Changes the url and/or events of an endpoint of the project (absent: kept); null when there is no such endpoint. */
export async function updateWebhookEndpoint(
  q: Queryable,
  projectId: string,
  id: string,
  patch: { url?: string; events?: readonly string[] },
): Promise<WebhookEndpoint | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<WebhookEndpoint>(
    `UPDATE webhook_endpoints SET url = coalesce($3, url), events = coalesce($4::text[], events)
     WHERE id = $1 AND project_id = $2 RETURNING ${COLUMNS}`,
    [id, projectId, patch.url ?? null, patch.events ?? null],
  );
  return rows[0] ?? null;
}

export type UpsertedEndpoint =
  { kind: 'inserted'; endpoint: WebhookEndpoint } | { kind: 'updated'; endpoint: WebhookEndpoint } | { kind: 'limit' };

/**
 * Inserts an endpoint, or updates the events of the project's endpoint at the same url (the natural key
 * of docs/api.md §4.1's upsert; the oldest, were there several). Run it in a transaction: it locks the
 * project's row so that concurrent upserts of one url make one endpoint. `e` is the row to insert.
 */
export async function upsertWebhookEndpoint(
  q: Queryable,
  e: {
    id: string;
    projectId: string;
    url: string;
    events: readonly string[];
    secretSealed: string;
    now: Date;
    max: number;
  },
): Promise<UpsertedEndpoint> {
  await q.query('SELECT 1 FROM projects WHERE id = $1 FOR UPDATE', [e.projectId]);
  const rows = await q.query<WebhookEndpoint>(
    `UPDATE webhook_endpoints SET events = $3 WHERE id = (
       SELECT id FROM webhook_endpoints WHERE project_id = $1 AND url = $2 ORDER BY created_at, id LIMIT 1
     ) RETURNING ${COLUMNS}`,
    [e.projectId, e.url, e.events],
  );
  if (rows[0]) return { kind: 'updated', endpoint: rows[0] };
  const endpoint = await insertWebhookEndpoint(q, e);
  return endpoint ? { kind: 'inserted', endpoint } : { kind: 'limit' };
}

/** Deletes an endpoint of the project, and with it its attempts (pending ones are never made). */
export async function deleteWebhookEndpoint(q: Queryable, projectId: string, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  return (
    (await q.query('DELETE FROM webhook_endpoints WHERE id = $1 AND project_id = $2 RETURNING id', [id, projectId]))
      .length > 0
  );
}

/** A new message event, as the fan-out needs it. */
export interface FannedEvent {
  id: string;
  projectId: string;
  type: string;
  at: Date;
}

/**
 * Inserts the first attempt, due at once, for every event of a webhook kind and every endpoint of
 * its project subscribed to it (an empty `events` list subscribes to all). Call it in the
 * transaction that inserts the events: one statement, none when no event is of a webhook kind.
 * Endpoints of a soft-deleted project get nothing.
 */
export async function fanOut(q: Queryable, events: readonly FannedEvent[]): Promise<void> {
  const kinds = events.filter((e) => KINDS.has(e.type));
  if (kinds.length === 0) return;
  await q.query(
    fanOutSql('unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[]) AS e(id, project_id, type, at)'),
    [kinds.map((e) => e.id), kinds.map((e) => e.projectId), kinds.map((e) => e.type), kinds.map((e) => e.at)],
  );
}

/**
 * The fan-out statement over `events`, a FROM item with columns (id, project_id, type, at): also a
 * data-modifying CTE of a statement that inserts the events (acceptMessage), so they commit together.
 */
export function fanOutSql(events: string): string {
  // gen_random_uuid() sits in a subquery's select list, which the planner never flattens, so
  // each row gets its own; the webhook-id is derived from the first attempt's id.
  return `INSERT INTO webhook_deliveries
       (id, webhook_id, endpoint_id, project_id, event_id, event_type, attempt, status, next_attempt_at, created_at)
     SELECT d.id, 'msg_' || replace(d.id::text, '-', ''), d.endpoint_id, d.project_id, d.event_id, d.type, 1,
       'pending', d.at, d.at
     FROM (
       SELECT gen_random_uuid() AS id, w.id AS endpoint_id, e.project_id, e.id AS event_id, e.type, e.at
       FROM ${events}
       JOIN webhook_endpoints w
         ON w.project_id = e.project_id AND (cardinality(w.events) = 0 OR e.type = ANY (w.events))
       JOIN projects p ON p.id = e.project_id AND p.deleted_at IS NULL
     ) d`;
}

/** A claimed attempt with everything its request needs. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  attempt: number;
  endpointId: string;
  url: string;
  secretSealed: string;
  eventId: string;
  eventType: WebhookEventType;
  eventAt: Date;
  detail: unknown;
  messageId: string;
  projectId: string;
  to: string;
  from: string;
  subject: string;
  /** docs/api.md §4.11: the message's tags and metadata, [] and {} when it has none. */
  tags: { name: string; value: string }[];
  metadata: Record<string, string>;
}

export interface ClaimOptions {
  now: Date;
  /** Attempts to take at most (the dispatcher's free room). */
  limit: number;
  /** Attempts in flight per endpoint at most. */
  perEndpoint: number;
  /** Attempts this dispatcher has in flight, per endpoint: endpoints at perEndpoint are skipped. */
  busy: ReadonlyMap<string, number>;
  /** Attempts this dispatcher has in flight (never taken twice, even when their lease has run out). */
  inFlight: readonly string[];
  /** The lease: claimed attempts become due again at this time if nobody records them. */
  leaseUntil: Date;
}

/**
 * Takes due attempts, at most `perEndpoint` per endpoint counting those in flight, and moves them
 * to `leaseUntil` in the same statement (SKIP LOCKED: two dispatchers never take the same row).
 * Candidates are read a few times over `limit` so that one endpoint's backlog does not fill the
 * batch and leave other endpoints waiting for the next poll.
 */
export async function claimWebhookDeliveries(q: Queryable, o: ClaimOptions): Promise<ClaimedDelivery[]> {
  if (o.limit <= 0) return [];
  const full = [...o.busy].filter(([, n]) => n >= o.perEndpoint).map(([id]) => id);
  const busy = [...o.busy].filter(([, n]) => n > 0 && n < o.perEndpoint);
  return q.query<ClaimedDelivery>(
    `WITH due AS (
       SELECT d.id, d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d
       WHERE d.status = 'pending' AND d.next_attempt_at <= $1
         AND d.endpoint_id <> ALL ($2::uuid[]) AND d.id <> ALL ($3::uuid[])
       ORDER BY d.next_attempt_at LIMIT $4
       FOR UPDATE SKIP LOCKED
     ), ranked AS (
       SELECT due.id, due.next_attempt_at,
         row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt_at, due.id)
           + coalesce(b.n, 0) AS slot
       FROM due LEFT JOIN unnest($5::uuid[], $6::int[]) AS b(endpoint_id, n) ON b.endpoint_id = due.endpoint_id
     ), picked AS (
       SELECT id FROM ranked WHERE slot <= $7 ORDER BY next_attempt_at, id LIMIT $8
     )
     UPDATE webhook_deliveries d SET next_attempt_at = $9
     FROM picked, webhook_endpoints w, message_events e, messages m
     WHERE d.id = picked.id AND w.id = d.endpoint_id AND e.id = d.event_id AND m.id = e.message_id
     RETURNING d.id, d.webhook_id AS "webhookId", d.attempt, d.endpoint_id AS "endpointId", w.url,
       w.secret_sealed AS "secretSealed", e.id AS "eventId", e.type AS "eventType", e.created_at AS "eventAt", e.detail,
       m.id AS "messageId", m.project_id AS "projectId",
       m.to_address AS "to", m.from_header AS "from", m.subject, coalesce(m.tags, '[]'::jsonb) AS tags,
       coalesce(m.metadata, '{}'::jsonb) AS metadata`,
    [
      o.now,
      full,
      o.inFlight,
      o.limit * 4,
      busy.map(([id]) => id),
      busy.map(([, n]) => n),
      o.perEndpoint,
      o.limit,
      o.leaseUntil,
    ],
  );
}

export interface AttemptResult {
  id: string;
  status: 'succeeded' | 'retrying' | 'failed';
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  attemptedAt: Date;
  /** For `retrying`: when the next attempt is due. */
  nextAt?: Date;
}

/**
 * Records an attempt and, when it is to be retried, inserts the next one: one statement, so both or
 * neither. Only a still-pending row is recorded: an attempt whose lease ran out and which another
 * dispatcher already recorded changes nothing (the unique attempt number guards the insert too).
 */
export async function recordWebhookAttempt(q: Queryable, r: AttemptResult): Promise<void> {
  await q.query(
    `WITH done AS (
       UPDATE webhook_deliveries SET status = $2, status_code = $3, latency_ms = $4, error = $5, attempted_at = $6,
         next_attempt_at = NULL
       WHERE id = $1 AND status = 'pending'
       RETURNING webhook_id, endpoint_id, project_id, event_id, event_type, attempt
     )
     INSERT INTO webhook_deliveries
       (id, webhook_id, endpoint_id, project_id, event_id, event_type, attempt, status, next_attempt_at, created_at)
     SELECT gen_random_uuid(), webhook_id, endpoint_id, project_id, event_id, event_type, attempt + 1, 'pending', $7, $6
     FROM done WHERE $7::timestamptz IS NOT NULL
     ON CONFLICT (event_id, endpoint_id, attempt) DO NOTHING`,
    [
      r.id,
      r.status,
      r.statusCode,
      r.latencyMs,
      r.error?.slice(0, 1000) ?? null,
      r.attemptedAt,
      r.status === 'retrying' ? (r.nextAt ?? r.attemptedAt) : null,
    ],
  );
}

/** Gives claimed attempts back (a stopping dispatcher): due again at `at`, their attempt not spent. */
export async function releaseWebhookDeliveries(q: Queryable, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await q.query(
    `UPDATE webhook_deliveries SET next_attempt_at = $2 WHERE id = ANY ($1::uuid[]) AND status = 'pending'`,
    [ids, at],
  );
}
