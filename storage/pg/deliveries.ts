// What the MTA reads and writes in Postgres around a delivery: the current status of spooled messages,
// the DKIM keys of a capability, and the outcomes of attempts, written in batches (one statement for
// many deliveries: a status update, an event, maybe a suppression and the capability's sent count).
import { timeOrderedUuid } from '../../mail/uuid.js';
import type { Db, Queryable } from './client.js';
import { fanOutSql, WEBHOOK_EVENT_TYPES } from './webhooks.js';
import { lockMessages, messageStatusOf } from './recipients.js';

export type FinalStatus = 'delivered' | 'bounced' | 'failed';
export type OutcomeStatus = FinalStatus | 'deferred';

/** Message statuses from which the MTA still delivers. */
export const DELIVERABLE = new Set(['queued', 'deferred']);

export interface SpooledStatus {
  status: string;
  /** For a message to several recipients (`multi` of messageStatuses): each recipient's status. */
  recipients?: Map<string, string>;
}

/**
 * The statuses of spooled messages; for those in `multi` (messages to several recipients), each recipient's
 * too (a recipient suppressed, bounced by a report or cancelled is not sent again).
 */
export async function messageStatuses(
  q: Queryable,
  ids: readonly string[],
  multi: readonly string[] = [],
): Promise<Map<string, SpooledStatus>> {
  if (ids.length === 0) return new Map();
  // Each id a probe of the primary key, whatever plan Postgres keeps (docs/decisions.md #82): the LIMIT keeps the
  // subquery from being flattened into a join, which a plan made while the table was small makes a scan of it.
  const rows = await q.query<{ id: string; status: string; recipients: Record<string, string> | null }>(
    `SELECT m.id, m.status, ${
      multi.length
        ? `CASE WHEN m.id = ANY($2::uuid[]) THEN (SELECT json_object_agg(r.address, r.status)
             FROM message_recipients r WHERE r.message_id = m.id) END`
        : 'NULL'
    } AS recipients
     FROM unnest($1::uuid[]) AS k(id) CROSS JOIN LATERAL (SELECT id, status FROM messages WHERE id = k.id LIMIT 1) m`,
    multi.length ? [ids, multi] : [ids],
  );
  return new Map(
    rows.map((r) => [
      r.id,
      r.recipients ? { status: r.status, recipients: new Map(Object.entries(r.recipients)) } : { status: r.status },
    ]),
  );
}

export interface CapabilityKeys {
  /** dkim_version: changes whenever the keys do (a rotation promoted), so a cache can tell it is stale. */
  version: number;
  domain: string;
  rsa: { selector: string; sealed: string };
  ed25519: { selector: string; sealed: string } | null;
}

export async function capabilityKeys(q: Queryable, outboundId: string): Promise<CapabilityKeys | null> {
  const rows = await q.query<{
    v: number;
    domain: string;
    s: string;
    p: string;
    es: string | null;
    ep: string | null;
  }>(
    `SELECT dkim_version AS v, domain, dkim_selector AS s, dkim_private_sealed AS p, ed25519_selector AS es,
       ed25519_private_sealed AS ep
     FROM outbound_capabilities WHERE id = $1`,
    [outboundId],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    version: r.v,
    domain: r.domain,
    rsa: { selector: r.s, sealed: r.p },
    ed25519: r.es && r.ep ? { selector: r.es, sealed: r.ep } : null,
  };
}

/** The capability's dkim_version alone (null when it no longer exists): the key cache's cheap staleness check. */
export async function capabilityKeyVersion(q: Queryable, outboundId: string): Promise<number | null> {
  const rows = await q.query<{ v: number }>('SELECT dkim_version AS v FROM outbound_capabilities WHERE id = $1', [
    outboundId,
  ]);
  return rows[0]?.v ?? null;
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
  /**
   * The recipient of a message to several (its message_recipients row; the message's status is then derived
   * from its recipients'); absent for a message to one.
   */
  recipient?: string;
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
  /** The event's id (made at write when absent): an outcome whose event is already recorded changes nothing. */
  eventId?: string;
}

// One statement for a batch of outcomes (one round trip; its CTEs commit together): the status
// updates, one event each, their webhook fan-out (storage/pg/webhooks.ts), the suppressions and the
// capabilities' sent counts. Per outcome arrays: $1 message, $2 status, $3 attempts, $4 at, $5 event
// id, $6 project, $7 detail, $8–$10 the suppression (address, reason, detail; null for none), $11
// the capability whose sent count grows (null unless delivered), $12 the recipient of a message to several
// (null for a message to one, whose row is its recipient). Such a message's status is derived from its
// recipients (storage/pg/recipients.ts): the rows as they are, with this batch's outcomes over them.
//
// Applied once per event id: an outcome whose event is already there changes nothing (ON CONFLICT DO NOTHING,
// and every other effect follows only the events this statement inserted). So a batch written again after its
// connection was lost, whose first commit may or may not have landed, is neither lost nor counted twice
// (mta/outbound/outcomes.ts, docs/decisions.md #64).
const OUTCOMES_SQL = `
WITH u AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[], $5::uuid[], $6::uuid[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::uuid[], $12::text[])
    AS u(id, status, attempts, at, event_id, project_id, detail, sup_address, sup_reason, sup_detail, sent_by,
      recipient)
), ev AS (
  INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
  SELECT u.event_id, u.id, u.project_id, u.status, u.detail::jsonb, u.at FROM u
  ON CONFLICT (id) DO NOTHING
  RETURNING id, project_id, type, created_at AS at
), applied AS (
  -- The outcomes whose event this statement inserted: every effect below follows these alone.
  SELECT u.* FROM u JOIN ev ON ev.id = u.event_id
), multi AS (
  SELECT * FROM applied WHERE recipient IS NOT NULL
), rupd AS (
  UPDATE message_recipients r SET status = multi.status, attempts = multi.attempts, updated_at = multi.at
  FROM multi WHERE r.message_id = multi.id AND r.address = multi.recipient
), derived AS (
  SELECT r.message_id AS id, ${messageStatusOf('coalesce(multi.status, r.status)')} AS status,
    max(coalesce(multi.attempts, r.attempts)) AS attempts, max(multi.at) AS at
  FROM message_recipients r LEFT JOIN multi ON multi.id = r.message_id AND multi.recipient = r.address
  WHERE r.message_id IN (SELECT id FROM multi) GROUP BY r.message_id
), upd AS (
  UPDATE messages m SET status = x.status, attempts = x.attempts, updated_at = x.at
  FROM (SELECT id, status, attempts, at FROM applied WHERE recipient IS NULL
    UNION ALL SELECT id, status, attempts, at FROM derived) x
  WHERE m.id = x.id
), hooks AS (
  ${fanOutSql(`(SELECT * FROM ev WHERE type IN (${WEBHOOK_EVENT_TYPES.map((t) => `'${t}'`).join(', ')})) AS e`)}
  RETURNING 1
), sup AS (
  INSERT INTO suppressions (project_id, address, reason, detail, created_at)
  SELECT project_id, sup_address, sup_reason, sup_detail, at FROM applied WHERE sup_address IS NOT NULL
  ON CONFLICT (project_id, address) DO NOTHING
), senders AS MATERIALIZED (
  -- The capabilities' rows locked in id order before any is updated: several MTA processes write outcome batches
  -- at once, and an UPDATE ... FROM locks rows in whatever order its plan meets them, so two batches naming the
  -- same capabilities could each hold one the other waits for (deadlock, 40P01). A locking SELECT takes its locks
  -- after its sort; the UPDATE below then waits on no row this statement does not already hold.
  SELECT c.id FROM outbound_capabilities c WHERE c.id IN (SELECT sent_by FROM u) ORDER BY c.id FOR NO KEY UPDATE
), sent AS (
  UPDATE outbound_capabilities c SET sent_count = c.sent_count + s.n
  FROM (SELECT sent_by AS id, count(*) AS n FROM applied WHERE sent_by IS NOT NULL GROUP BY sent_by) s
  JOIN senders ON senders.id = s.id
  WHERE c.id = s.id
)
SELECT (SELECT count(*) FROM hooks)::int AS hooks`;

/**
 * Writes a batch of outcomes in one statement. A message appears at most once per batch, or once per
 * recipient for a message to several (the worker holds one attempt per message at a time). A batch with
 * recipients of messages to several is a transaction that first locks those messages (lockMessages); the
 * common batch is the one statement alone. Resolves, once committed, with the number of webhook attempts it wrote.
 */
export async function recordOutcomes(db: Db, outcomes: readonly Outcome[]): Promise<number> {
  if (outcomes.length === 0) return 0;
  const col = <T>(f: (o: Outcome) => T) => outcomes.map(f);
  const multi = outcomes.filter((o) => o.recipient !== undefined).map((o) => o.messageId);
  const params = [
    col((o) => o.messageId),
    col((o) => o.status),
    col((o) => o.attempts),
    col((o) => o.at),
    col((o) => o.eventId ?? timeOrderedUuid()),
    col((o) => o.projectId),
    col((o) => JSON.stringify(o.detail)),
    col((o) => o.suppress?.address ?? null),
    col((o) => o.suppress?.reason ?? null),
    col((o) => o.suppress?.detail ?? null),
    col((o) => (o.status === 'delivered' && o.outboundId ? o.outboundId : null)),
    col((o) => o.recipient ?? null),
  ];
  const hooksOf = (rows: { hooks: number }[]) => rows[0]!.hooks;
  if (multi.length === 0) return hooksOf(await db.query<{ hooks: number }>(OUTCOMES_SQL, params));
  return db.tx(async (q) => {
    await lockMessages(q, multi);
    return hooksOf(await q.query<{ hooks: number }>(OUTCOMES_SQL, params));
  });
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
     ), rcpts AS (
       -- A message to several: its recipients still pending end with it (storage/pg/recipients.ts).
       UPDATE message_recipients r SET status = 'failed', updated_at = $2 FROM upd
       WHERE r.message_id = upd.id AND r.status IN ('queued', 'sending', 'deferred')
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
