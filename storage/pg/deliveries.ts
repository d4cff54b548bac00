// What the MTA reads and writes in Postgres around a delivery: the current status of spooled messages,
// the DKIM keys of a capability, and the outcomes of attempts, written in batches (one statement for
// many deliveries: a status update, an event, maybe a suppression and the capability's sent count).
import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from './client.js';
import { fanOutSql, WEBHOOK_EVENT_TYPES } from './webhooks.js';

export type FinalStatus = 'delivered' | 'bounced' | 'failed';
export type OutcomeStatus = FinalStatus | 'deferred';

/** Message statuses from which the MTA still delivers. */
export const DELIVERABLE = new Set(['queued', 'deferred']);

export async function messageStatuses(q: Queryable, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await q.query<{ id: string; status: string }>(
    'SELECT id, status FROM messages WHERE id = ANY($1::uuid[])',
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r.status]));
}

export interface CapabilityKeys {
  domain: string;
  rsa: { selector: string; sealed: string };
  ed25519: { selector: string; sealed: string } | null;
}

export async function capabilityKeys(q: Queryable, outboundId: string): Promise<CapabilityKeys | null> {
  const rows = await q.query<{ domain: string; s: string; p: string; es: string | null; ep: string | null }>(
    `SELECT domain, dkim_selector AS s, dkim_private_sealed AS p, ed25519_selector AS es, ed25519_private_sealed AS ep
     FROM outbound_capabilities WHERE id = $1`,
    [outboundId],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    domain: r.domain,
    rsa: { selector: r.s, sealed: r.p },
    ed25519: r.es && r.ep ? { selector: r.es, sealed: r.ep } : null,
  };
}

/** The verified capability of a sending domain, for platform mail (SVC_NOTIFY_FROM's domain). */
export async function verifiedCapabilityOf(q: Queryable, domain: string): Promise<string | null> {
  const rows = await q.query<{ id: string }>(
    `SELECT id FROM outbound_capabilities WHERE domain = $1 AND status = 'verified'`,
    [domain],
  );
  return rows[0]?.id ?? null;
}

export interface Outcome {
  messageId: string;
  projectId: string;
  status: OutcomeStatus;
  /** Attempts made so far, this one included. */
  attempts: number;
  /** The event's detail: our classification and the remote reply. */
  detail: Record<string, unknown>;
  /** A suppression to add (docs/api.md §6.4); an existing one for the address is kept. */
  suppress?: { address: string; reason: 'hard_bounce' | 'soft_bounce_max'; detail: string };
  /** Set on delivery: the capability whose sent count grows (it then blocks its own deletion). */
  outboundId?: string | null;
  at: Date;
}

// One statement for a batch of outcomes (one round trip; its CTEs commit together): the status
// updates, one event each, their webhook fan-out (storage/pg/webhooks.ts), the suppressions and the
// capabilities' sent counts. Per outcome arrays: $1 message, $2 status, $3 attempts, $4 at, $5 event
// id, $6 project, $7 detail, $8–$10 the suppression (address, reason, detail; null for none), $11
// the capability whose sent count grows (null unless delivered).
const OUTCOMES_SQL = `
WITH u AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[], $5::uuid[], $6::uuid[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::uuid[])
    AS u(id, status, attempts, at, event_id, project_id, detail, sup_address, sup_reason, sup_detail, sent_by)
), upd AS (
  UPDATE messages m SET status = u.status, attempts = u.attempts, updated_at = u.at FROM u WHERE m.id = u.id
), ev AS (
  INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
  SELECT u.event_id, u.id, u.project_id, u.status, u.detail::jsonb, u.at FROM u
  RETURNING id, project_id, type, created_at AS at
), hooks AS (
  ${fanOutSql(`(SELECT * FROM ev WHERE type IN (${WEBHOOK_EVENT_TYPES.map((t) => `'${t}'`).join(', ')})) AS e`)}
), sup AS (
  INSERT INTO suppressions (project_id, address, reason, detail, created_at)
  SELECT u.project_id, u.sup_address, u.sup_reason, u.sup_detail, u.at FROM u WHERE u.sup_address IS NOT NULL
  ON CONFLICT (project_id, address) DO NOTHING
), sent AS (
  UPDATE outbound_capabilities c SET sent_count = c.sent_count + s.n
  FROM (SELECT sent_by AS id, count(*) AS n FROM u WHERE sent_by IS NOT NULL GROUP BY sent_by) s WHERE c.id = s.id
)
SELECT 1`;

/**
 * Writes a batch of outcomes in one statement. A message appears at most once per batch (the worker
 * holds one attempt per message at a time).
 */
export async function recordOutcomes(db: Db, outcomes: readonly Outcome[]): Promise<void> {
  if (outcomes.length === 0) return;
  const col = <T>(f: (o: Outcome) => T) => outcomes.map(f);
  await db.query(OUTCOMES_SQL, [
    col((o) => o.messageId),
    col((o) => o.status),
    col((o) => o.attempts),
    col((o) => o.at),
    col(() => randomUUID()),
    col((o) => o.projectId),
    col((o) => JSON.stringify(o.detail)),
    col((o) => o.suppress?.address ?? null),
    col((o) => o.suppress?.reason ?? null),
    col((o) => o.suppress?.detail ?? null),
    col((o) => (o.status === 'delivered' && o.outboundId ? o.outboundId : null)),
  ]);
}

/** A message ended `failed` by the reconciler (failLostMessages). */
export interface LostMessage {
  id: string;
  projectId: string;
  status: string;
  updatedAt: Date;
}

/**
 * Messages still `queued` or `deferred` whose last change is older than `before` (issue 15 item 5 d): past
 * the whole retry schedule no MTA holds them any more (a spool entry lost with a disk, a body that never made
 * it), so nobody would ever end them. Each ends `failed` with `reason` in its event, fanned out to webhooks,
 * in one statement; at most `limit` a call, oldest first, skipping rows another transaction holds.
 */
export async function failLostMessages(
  db: Db,
  a: { before: Date; at: Date; reason: string; limit: number },
): Promise<LostMessage[]> {
  return db.query<LostMessage>(
    `WITH lost AS (
       SELECT id, status, updated_at FROM messages
       WHERE status IN ('queued', 'deferred') AND updated_at < $1
       ORDER BY updated_at LIMIT $4 FOR UPDATE SKIP LOCKED
     ), upd AS (
       UPDATE messages m SET status = 'failed', updated_at = $2 FROM lost WHERE m.id = lost.id
       RETURNING m.id, m.project_id
     ), ev AS (
       INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
       SELECT gen_random_uuid(), upd.id, upd.project_id, 'failed', $3::jsonb, $2 FROM upd
       RETURNING id, project_id, type, created_at AS at
     ), hooks AS (
       ${fanOutSql('ev AS e')}
     )
     SELECT upd.id, upd.project_id AS "projectId", lost.status, lost.updated_at AS "updatedAt"
     FROM upd JOIN lost ON lost.id = upd.id`,
    [a.before, a.at, JSON.stringify({ reason: a.reason }), a.limit],
  );
}

/** The messages failLostMessages ended since `since`, newest first: the operator's `svc queue lost`. */
export async function lostMessages(
  q: Queryable,
  since: Date,
  limit: number,
): Promise<{ id: string; projectId: string; domain: string; endedAt: Date }[]> {
  return q.query(
    `SELECT m.id, m.project_id AS "projectId", split_part(m.to_address, '@', 2) AS domain, e.created_at AS "endedAt"
     FROM message_events e JOIN messages m ON m.id = e.message_id
     WHERE e.type = 'failed' AND e.detail->>'reason' LIKE 'lost:%' AND e.created_at >= $1
     ORDER BY e.created_at DESC LIMIT $2`,
    [since, limit],
  );
}
