// Accepting a message: idempotency, the daily quota, the suppression check, the message row and its
// first event, in one statement (and a transaction only for an idempotency key): no read-then-write races.
import { timeOrderedUuid } from '../../mail/uuid.js';
import type { Db, Queryable } from './client.js';
import { fanOutSql } from './webhooks.js';
import { ALONE, batched } from './batch.js';

export type AcceptStatus = 'queued' | 'suppressed';

export type AcceptOutcome =
  /**
   * webhooksDue: a recipient of this message was suppressed and the statement that accepted it wrote webhook attempts
   * (docs/decisions.md #88): a dispatcher in this process may be woken once it has committed.
   */
  | { kind: 'accepted'; messageId: string; status: AcceptStatus; webhooksDue: boolean }
  /** docs/decisions.md #3: the same key and body within 24 h: the original answer, nothing queued. */
  | { kind: 'replayed'; messageId: string; status: AcceptStatus }
  | { kind: 'key_reused' }
  | { kind: 'quota_exceeded' }
  /** The capability is no longer verified, or not as given (the caller looks it up again). */
  | { kind: 'sender_changed' };

export interface SendingCapability {
  outboundId: string;
  projectId: string;
  organizationId: string;
  domain: string;
  returnPathSubdomain: string;
  defaultDisplayName: string | null;
}

/** The verified outbound capability of exactly this domain, with its project's organization. */
export async function findSendingCapability(q: Queryable, domain: string): Promise<SendingCapability | null> {
  const rows = await q.query<SendingCapability>(
    `SELECT c.id AS "outboundId", c.project_id AS "projectId", p.organization_id AS "organizationId", c.domain,
       c.return_path_subdomain AS "returnPathSubdomain", c.default_display_name AS "defaultDisplayName"
     FROM outbound_capabilities c JOIN projects p ON p.id = c.project_id
     WHERE c.domain = $1 AND c.status = 'verified' AND p.deleted_at IS NULL`,
    [domain],
  );
  return rows[0] ?? null;
}

export interface NewMessage {
  id: string;
  /**
   * The sender's capability as the caller found it (perhaps cached): the statement accepts only
   * while it still stands as given, and reads the organization's plan itself.
   */
  sender: SendingCapability;
  dailyLimit: number;
  fromHeader: string;
  fromAddress: string;
  /** The (first `to`) recipient, normalized as suppressions store addresses. */
  to: string;
  /** A message to several recipients: all of them, distinct, in order (to, cc, bcc); null for one. */
  recipients?: readonly { address: string; kind: 'to' | 'cc' | 'bcc' }[] | null;
  subject: string;
  messageIdHeader: string;
  returnPath: string;
  sizeBytes: number;
  /** The template (modules/templates) and the version of it the message was rendered from, if any. */
  template?: { id: string; version: number } | null;
  /** docs/api.md §4.11: the tags (a JSON array) and metadata (a JSON object) as JSON text, or null. */
  tags?: string | null;
  metadata?: string | null;
  idempotency: { key: string; bodyHash: string; ttlMs: number } | null;
  now: Date;
  /** docs/api.md §4.11: when a scheduled message may leave (its spool entry is due then); null: at once. */
  scheduledAt?: Date | null;
  /**
   * The simulator's domain (mail/simulator.ts): its recipients count nothing against the daily allowance, and
   * `suppressed@` there is treated as on the suppression list. Absent: no simulator.
   */
  simulatorDomain?: string | null;
}

/** The UTC calendar day (docs/decisions.md #11) of an instant, as a date literal. */
export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

// One statement for all of it but the idempotency key, for one message or a batch of them: the
// sender check, the quota, the suppression check, the rows, their first events and, for suppressed
// recipients, the webhook fan-out. Every insert depends on `cap` (the capability still verified and
// as the caller composed the message with) and on `counted` (docs/decisions.md #13: every 200 counts,
// queued or suppressed; each recipient of a message counts one). The quota row's lock serializes an
// organization's concurrent statements; a statement adds all of its messages of an organization or none,
// so a free organization never passes `$20`, and the batch sends the messages of an organization it
// refused one at a time (exactly `dailyLimit` pass). Where a check refuses, nothing of that message is
// written.
//
// A message to one recipient (n = 1) is its own recipient: to_address, no message_recipients row. A message
// to several has its recipients in $24–$27 (message ordinal, address, kind, position; storage/pg/recipients.ts)
// and a row each; it is `suppressed` only when every one of them is, and each suppressed recipient has an
// event of its own.
//
// Parameters: per message arrays $1–$19, $21 (the idempotency key), $22, $23, $28 (the number of recipients), $29
// (scheduledAt) and $30 (the simulator's domain; see acceptParams), $20 the daily limit of the free plan, per recipient
// arrays $24–$27; `keyed`, per message arrays $31 (the body's hash) and $32 (when the key expires).
//
// Keyed (sends with an idempotency key, docs/decisions.md #93), the statement also takes their keys, in the same
// round trip: a key held (unexpired) as the statement starts answers its send from the holder (`held`: the same
// body a replay, another body key_reused) and the send writes nothing; the rest go on as unkeyed sends, and the key
// of each message written is taken with it (`keys`), so that a send refused (the quota, its sender changed) takes
// none. A key that a concurrent transaction took after the statement began, which `held` could not see, fails the
// statement when `keys` meets it (see there), and the batcher tries each send again alone, where `held` sees it.
const acceptSql = (keyed: boolean) => `
WITH ${keyed ? 'given' : 'req'} AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[],
    $9::text[], $10::text[], $11::int[], $12::timestamptz[], $13::uuid[], $14::int[], $15::date[], $16::uuid[],
    $17::text[], $18::text[], $19::text[], $22::text[], $23::text[], $28::int[], $29::timestamptz[], $30::text[],
    $21::text[]${keyed ? ', $31::text[], $32::timestamptz[]' : ''})
    WITH ORDINALITY AS q(id, project_id, organization_id, outbound_id, from_header, from_address, to_address, subject,
      message_id_header, return_path, size_bytes, at, template_id, template_version, day, event_id, domain,
      return_path_subdomain, display_name, tags, metadata, n, scheduled_at, simulator, idempotency_key,${
        keyed ? ' body_hash, key_expires_at,' : ''
      } i)
), ${
  keyed
    ? `held AS (
  SELECT given.i, k.body_hash, k.message_id, coalesce(m.status, 'queued') AS status FROM given
  JOIN idempotency_keys k ON k.project_id = given.project_id AND k.key = given.idempotency_key
    AND k.expires_at > given.at
  LEFT JOIN messages m ON m.id = k.message_id
), req AS (
  SELECT * FROM given WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.i = given.i)
), `
    : ''
}rcpt AS (
  SELECT * FROM unnest($24::int[], $25::text[], $26::text[], $27::int[]) AS r(i, address, kind, position)
), every AS (
  -- Each recipient of each message: the one of a message to one, or its rcpt rows.
  SELECT req.i, req.to_address AS address FROM req WHERE req.n = 1
  UNION ALL
  SELECT rcpt.i, rcpt.address FROM rcpt
), sim AS (
  -- Recipients at the simulator's domain (mail/simulator.ts): they count nothing against the allowance.
  SELECT every.i, every.address, split_part(split_part(every.address, '@', 1), '+', 1) AS outcome FROM every
  JOIN req ON req.i = every.i WHERE req.simulator IS NOT NULL AND split_part(every.address, '@', 2) = req.simulator
), charged AS (
  SELECT req.i, req.n - (SELECT count(*) FROM sim WHERE sim.i = req.i)::int AS n FROM req
), cap AS (
  SELECT req.i, o.plan FROM req
  JOIN outbound_capabilities c ON c.id = req.outbound_id AND c.project_id = req.project_id AND c.domain = req.domain
    AND c.status = 'verified' AND c.return_path_subdomain = req.return_path_subdomain
    AND c.default_display_name IS NOT DISTINCT FROM req.display_name
  JOIN projects p ON p.id = c.project_id AND p.organization_id = req.organization_id AND p.deleted_at IS NULL
  JOIN organizations o ON o.id = p.organization_id
), counted AS (
  INSERT INTO quota_days AS d (organization_id, day, accepted)
  SELECT req.organization_id, req.day, sum(charged.n)
  FROM req JOIN cap ON cap.i = req.i JOIN charged ON charged.i = req.i
  GROUP BY req.organization_id, req.day, cap.plan HAVING cap.plan = 'payg' OR sum(charged.n) <= $20::int
  ORDER BY req.organization_id, req.day -- one lock order for every statement: no deadlock between batches
  ON CONFLICT (organization_id, day) DO UPDATE SET accepted = d.accepted + excluded.accepted
  WHERE (SELECT plan FROM organizations WHERE id = d.organization_id) = 'payg'
    OR d.accepted + excluded.accepted <= $20::int
  RETURNING organization_id, day
), sup AS (
  SELECT every.i, every.address, s.reason FROM every JOIN req ON req.i = every.i
  JOIN suppressions s ON s.project_id = req.project_id AND s.address = every.address
  UNION ALL
  -- The simulator's suppressed@ is on every suppression list (and on no table).
  SELECT sim.i, sim.address, 'simulator' FROM sim JOIN req ON req.i = sim.i WHERE sim.outcome = 'suppressed'
    AND NOT EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = req.project_id AND s.address = sim.address)
), supn AS (
  SELECT i, count(*) AS n FROM sup GROUP BY i
), msg AS (
  INSERT INTO messages (id, project_id, organization_id, outbound_id, status, from_header, from_address, to_address,
    subject, message_id_header, return_path, idempotency_key, size_bytes, created_at, updated_at, template_id,
    template_version, tags, metadata, scheduled_at)
  SELECT req.id, req.project_id, req.organization_id, req.outbound_id,
    CASE WHEN coalesce(supn.n, 0) < req.n THEN 'queued' ELSE 'suppressed' END,
    req.from_header, req.from_address, req.to_address, req.subject, req.message_id_header, req.return_path,
    req.idempotency_key,
    req.size_bytes, req.at, req.at, req.template_id, req.template_version, req.tags::jsonb, req.metadata::jsonb,
    req.scheduled_at
  FROM req JOIN cap ON cap.i = req.i
  JOIN counted ON counted.organization_id = req.organization_id AND counted.day = req.day
  LEFT JOIN supn ON supn.i = req.i
  RETURNING id, status
), ${
  keyed
    ? `keys AS (
  -- A key held when the upsert meets it can only be one taken since the statement began (held saw none): its
  -- expires_at set to NULL breaks the column's NOT NULL, which fails the whole statement, this send's message with it.
  INSERT INTO idempotency_keys AS k (project_id, key, body_hash, message_id, created_at, expires_at)
  SELECT req.project_id, req.idempotency_key, req.body_hash, req.id, req.at, req.key_expires_at
  FROM msg JOIN req ON req.id = msg.id
  ORDER BY req.project_id, req.idempotency_key -- one lock order for every statement
  ON CONFLICT (project_id, key) DO UPDATE SET body_hash = excluded.body_hash, message_id = excluded.message_id,
    message_ids = NULL, created_at = excluded.created_at,
    expires_at = CASE WHEN k.expires_at <= excluded.created_at THEN excluded.expires_at END
), `
    : ''
}mr AS (
  INSERT INTO message_recipients (message_id, address, kind, position, status, updated_at)
  SELECT req.id, rcpt.address, rcpt.kind, rcpt.position, CASE WHEN sup.i IS NULL THEN 'queued' ELSE 'suppressed' END,
    req.at
  FROM rcpt JOIN req ON req.i = rcpt.i JOIN msg ON msg.id = req.id
  LEFT JOIN sup ON sup.i = rcpt.i AND sup.address = rcpt.address
), ev AS (
  INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
  SELECT req.event_id, req.id, req.project_id, 'queued', NULL::jsonb, req.at
  FROM msg JOIN req ON req.id = msg.id WHERE msg.status = 'queued'
  UNION ALL
  SELECT gen_random_uuid(), req.id, req.project_id, 'suppressed',
    jsonb_build_object('reason', sup.reason, 'recipient', sup.address), req.at
  FROM sup JOIN req ON req.i = sup.i JOIN msg ON msg.id = req.id
  RETURNING id, project_id, type, created_at AS at
), hooks AS (
  ${fanOutSql(`(SELECT * FROM ev WHERE type = 'suppressed') AS e`)}
  RETURNING 1
)
SELECT msg.status, cap.i IS NOT NULL AS "senderStands",
  msg.id IS NOT NULL AND supn.i IS NOT NULL AND EXISTS (SELECT 1 FROM hooks) AS "webhooksDue"${
    keyed ? ', held.body_hash AS "heldHash", held.message_id AS "heldId", held.status AS "heldStatus"' : ''
  }
FROM ${keyed ? 'given' : 'req'} AS send LEFT JOIN cap ON cap.i = send.i LEFT JOIN msg ON msg.id = send.id
  LEFT JOIN supn ON supn.i = send.i${keyed ? ' LEFT JOIN held ON held.i = send.i' : ''}
ORDER BY send.i`;
const ACCEPT_SQL = acceptSql(false);
const ACCEPT_KEYED_SQL = acceptSql(true);

/** $24–$27 of ACCEPT_SQL: the recipients of the messages to several, flattened. */
function recipientColumns(ms: readonly NewMessage[]): [number[], string[], string[], number[]] {
  const cols: [number[], string[], string[], number[]] = [[], [], [], []];
  ms.forEach((m, i) =>
    m.recipients?.forEach((r, p) => {
      cols[0].push(i + 1);
      cols[1].push(r.address);
      cols[2].push(r.kind);
      cols[3].push(p);
    }),
  );
  return cols;
}

/** ACCEPT_SQL's parameters for `ms`; `keyOf` gives the idempotency key of each row. */
function acceptParams(ms: readonly NewMessage[], keyOf: (m: NewMessage) => string | null): unknown[] {
  const col = <T>(f: (m: NewMessage) => T) => ms.map(f);
  return [
    col((m) => m.id),
    col((m) => m.sender.projectId),
    col((m) => m.sender.organizationId),
    col((m) => m.sender.outboundId),
    col((m) => m.fromHeader),
    col((m) => m.fromAddress),
    col((m) => m.to),
    col((m) => m.subject),
    col((m) => m.messageIdHeader),
    col((m) => m.returnPath),
    col((m) => m.sizeBytes),
    col((m) => m.now),
    col((m) => m.template?.id ?? null),
    col((m) => m.template?.version ?? null),
    col((m) => utcDay(m.now)),
    col(() => timeOrderedUuid()),
    col((m) => m.sender.domain),
    col((m) => m.sender.returnPathSubdomain),
    col((m) => m.sender.defaultDisplayName),
    ms[0]!.dailyLimit,
    col(keyOf),
    col((m) => m.tags ?? null),
    col((m) => m.metadata ?? null),
    ...recipientColumns(ms),
    col((m) => m.recipients?.length ?? 1),
    col((m) => m.scheduledAt ?? null),
    col((m) => m.simulatorDomain ?? null),
  ];
}

type AcceptRow = { status: AcceptStatus | null; senderStands: boolean; webhooksDue: boolean };

function acceptedOutcome(r: AcceptRow, m: NewMessage): AcceptOutcome {
  if (!r.senderStands) return { kind: 'sender_changed' };
  if (r.status === null) return { kind: 'quota_exceeded' };
  return { kind: 'accepted', messageId: m.id, status: r.status, webhooksDue: r.webhooksDue };
}

/** Accepts `ms` in one statement; an outcome per message, in order. `keyOf` gives the idempotency key of each row. */
async function acceptRows(
  q: Queryable,
  ms: readonly NewMessage[],
  keyOf: (m: NewMessage) => string | null = () => null,
): Promise<AcceptOutcome[]> {
  const rows = await q.query<AcceptRow>(ACCEPT_SQL, acceptParams(ms, keyOf));
  if (rows.length !== ms.length) throw new Error(`accept returned ${rows.length} rows for ${ms.length} messages`);
  return rows.map((r, i) => acceptedOutcome(r, ms[i]!));
}

// Concurrent sends without an idempotency key share statements (batch.ts), per database: one in
// flight, the next batch forming meanwhile (classic group commit; two in flight measured ~5% slower
// end to end, as batches were smaller). In a batch, a refused quota may be a batch too large for what
// is left today: those messages go alone.
export type AcceptBatch = (m: NewMessage) => Promise<AcceptOutcome>;

/**
 * A batcher over `accept` (messages in, an outcome each out): messages of one daily limit go together; a refused quota
 * in a batch of several goes again alone, as does every message of a batch that failed (storage/pg/batch.ts).
 */
function acceptBatcher(
  accept: (ms: readonly NewMessage[]) => Promise<AcceptOutcome[]>,
  keyOf?: (m: NewMessage) => string,
): AcceptBatch {
  return batched<NewMessage, AcceptOutcome>(
    async (ms) => {
      if (ms.some((m) => m.dailyLimit !== ms[0]!.dailyLimit)) return ms.map(() => ALONE);
      const out = await accept(ms);
      return ms.length === 1 ? out : out.map((o) => (o.kind === 'quota_exceeded' ? ALONE : o));
    },
    async (m) => (await accept([m]))[0]!,
    { max: 256, inFlight: 1, ...(keyOf ? { keyOf } : {}) },
  );
}

/** The batcher of a database; storage/caches.ts keeps one per storage handle. */
export const acceptBatch = (db: Db): AcceptBatch => acceptBatcher((ms) => acceptRows(db, ms));

/**
 * Accepts messages that carry idempotency keys (docs/decisions.md #3) in one statement, keys and all (ACCEPT_SQL's
 * keyed form): a key held by an earlier send answers with that send's message (the same body) or `key_reused`; the
 * rest are accepted as without keys, each taking its key with its message. An outcome per message, in order; the
 * caller never gives one key twice (idempotentBatch's keyOf).
 */
async function acceptKeyed(q: Queryable, ms: readonly NewMessage[]): Promise<AcceptOutcome[]> {
  const rows = await q.query<AcceptRow & { heldHash: string | null; heldId: string | null; heldStatus: string }>(
    ACCEPT_KEYED_SQL,
    [
      ...acceptParams(ms, (m) => m.idempotency!.key),
      ms.map((m) => m.idempotency!.bodyHash),
      ms.map((m) => new Date(m.now.getTime() + m.idempotency!.ttlMs)),
    ],
  );
  if (rows.length !== ms.length) throw new Error(`accept returned ${rows.length} rows for ${ms.length} messages`);
  return rows.map((r, i): AcceptOutcome => {
    const m = ms[i]!;
    if (r.heldId === null) return acceptedOutcome(r, m);
    const status = r.heldStatus === 'suppressed' ? 'suppressed' : 'queued';
    if (r.heldHash !== m.idempotency!.bodyHash) return { kind: 'key_reused' };
    // This very message: an earlier try of this send committed and its answer was lost (a batch whose statement
    // fails is tried again a send at a time, storage/pg/batch.ts). It stands accepted, and its spooled body must
    // stay (docs/decisions.md #91).
    if (r.heldId === m.id) return { kind: 'accepted', messageId: m.id, status, webhooksDue: false };
    return { kind: 'replayed', messageId: r.heldId, status };
  });
}

/**
 * Concurrent sends with an idempotency key share a statement (acceptKeyed), per database, as those without do
 * (acceptBatch): each used to be a transaction of its own, and a sender that gave every send a key (as a retrying
 * client should) went at a quarter of the rate (docs/decisions.md #91, #93). Two sends with the same key never share
 * one (an upsert may not touch a row twice): the second sees the first's row.
 */
export const idempotentBatch = (db: Db): AcceptBatch =>
  acceptBatcher(
    (ms) => acceptKeyed(db, ms),
    (m) => `${m.sender.projectId} ${m.idempotency!.key}`,
  );

/**
 * Accepts a message: one statement shared with concurrent sends (acceptBatch), or with an idempotency key one
 * shared with concurrent sends that have one (idempotentBatch). The caller spools the body durably before
 * (docs/decisions.md #15: the commit, and so the 200, come after it) and removes it again unless the outcome is
 * `accepted` + `queued`. A crash in between leaves a spooled body without a row, which the MTA drops; never a row
 * without its body. Spooling first also keeps the LMDB sync out of the time the quota row is locked.
 */
export async function acceptMessage(
  { caches }: { caches: { accept: AcceptBatch; acceptKeyed: AcceptBatch } },
  m: NewMessage,
): Promise<AcceptOutcome> {
  return m.idempotency ? caches.acceptKeyed(m) : caches.accept(m);
}

/** Messages accepted today (UTC) by the organization: the quota row. */
export async function acceptedToday(q: Queryable, organizationId: string, now: Date): Promise<number> {
  const rows = await q.query<{ accepted: number }>(
    'SELECT accepted FROM quota_days WHERE organization_id = $1 AND day = $2',
    [organizationId, utcDay(now)],
  );
  return rows[0]?.accepted ?? 0;
}

/** What accepting a batch (acceptMessages) came to: all of its messages, or none. */
export type BatchOutcome =
  /** webhooksDue: as for one message (AcceptOutcome), for any of them. */
  | { kind: 'accepted'; statuses: AcceptStatus[]; webhooksDue: boolean }
  /** docs/decisions.md #3, for the whole batch: the same key and body within 24 h, the original messages. */
  | { kind: 'replayed'; results: { messageId: string; status: AcceptStatus }[] }
  | { kind: 'key_reused' }
  | { kind: 'quota_exceeded' }
  | { kind: 'sender_changed' };

class BatchRefused extends Error {
  readonly outcome: BatchOutcome;
  constructor(outcome: BatchOutcome) {
    super(outcome.kind);
    this.outcome = outcome;
  }
}

/**
 * Accepts the messages of a sendBatch (docs/api.md §4.11) in one transaction, all or none: the batch's
 * idempotency key (naming every message, in order), then one ACCEPT_SQL statement for all of them; a refusal
 * of any message (the quota, a sender changed) rolls back the lot. The caller has spooled every body first
 * (acceptMessage's order) and takes them back unless the outcome is `accepted`.
 */
export async function acceptMessages(
  db: Db,
  ms: readonly NewMessage[],
  idempotency: { projectId: string; key: string; bodyHash: string; ttlMs: number } | null,
): Promise<BatchOutcome> {
  const now = ms[0]!.now;
  try {
    return await db.tx(async (q) => {
      if (idempotency) {
        const { projectId, key, bodyHash, ttlMs } = idempotency;
        const took = await q.query(
          `INSERT INTO idempotency_keys AS k
             (project_id, key, body_hash, message_id, message_ids, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5::uuid[], $6, $7)
           ON CONFLICT (project_id, key) DO UPDATE SET body_hash = excluded.body_hash, message_id = excluded.message_id,
             message_ids = excluded.message_ids, created_at = excluded.created_at, expires_at = excluded.expires_at
           WHERE k.expires_at <= $6
           RETURNING 1`,
          [projectId, key, bodyHash, ms[0]!.id, ms.map((m) => m.id), now, new Date(now.getTime() + ttlMs)],
        );
        if (took.length === 0) {
          const held = await q.query<{ body_hash: string; ids: string[] | null; statuses: (string | null)[] }>(
            `SELECT k.body_hash, k.message_ids AS ids, ARRAY(SELECT m.status FROM unnest(k.message_ids)
               WITH ORDINALITY AS u(id, o) LEFT JOIN messages m ON m.id = u.id ORDER BY u.o) AS statuses
             FROM idempotency_keys k WHERE k.project_id = $1 AND k.key = $2`,
            [projectId, key],
          );
          const h = held[0];
          if (!h || h.body_hash !== bodyHash || !h.ids) throw new BatchRefused({ kind: 'key_reused' });
          const statuses = h.statuses;
          throw new BatchRefused({
            kind: 'replayed',
            results: h.ids.map((id, i) => ({
              messageId: id,
              status: statuses[i] === 'suppressed' ? 'suppressed' : 'queued',
            })),
          });
        }
      }
      const outcomes = await acceptRows(q, ms, () => idempotency?.key ?? null);
      const refused = outcomes.find((o) => o.kind !== 'accepted');
      if (refused) throw new BatchRefused(refused.kind === 'sender_changed' ? refused : { kind: 'quota_exceeded' });
      return {
        kind: 'accepted',
        statuses: outcomes.map((o) => (o.kind === 'accepted' ? o.status : 'queued')),
        webhooksDue: outcomes.some((o) => o.kind === 'accepted' && o.webhooksDue),
      };
    });
  } catch (err) {
    if (err instanceof BatchRefused) return err.outcome;
    throw err;
  }
}
