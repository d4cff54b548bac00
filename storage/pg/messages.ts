// Accepting a message: idempotency, the daily quota, the suppression check, the message row and its
// first event, in one statement (and a transaction only for an idempotency key): no read-then-write races.
import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from './client.js';
import { fanOutSql } from './webhooks.js';

export type AcceptStatus = 'queued' | 'suppressed';

export type AcceptOutcome =
  | { kind: 'accepted'; messageId: string; status: AcceptStatus }
  /** gaps-filled.md #3: the same key and body within 24 h: the original answer, nothing queued. */
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
  /** The recipient, normalized as suppressions store addresses. */
  to: string;
  subject: string;
  messageIdHeader: string;
  returnPath: string;
  sizeBytes: number;
  /** The template (modules/templates) and the version of it the message was rendered from, if any. */
  template?: { id: string; version: number } | null;
  idempotency: { key: string; bodyHash: string; ttlMs: number } | null;
  now: Date;
}

class Refused extends Error {
  constructor(readonly outcome: AcceptOutcome) {
    super(outcome.kind);
  }
}

/** The UTC calendar day (gaps-filled.md #11) of an instant, as a date literal. */
export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

// One statement for all of it but the idempotency key: the sender check, the quota, the suppression
// check, the row, its first event and, for a suppressed message, its webhook fan-out. Every insert
// depends on `cap` (the capability still verified and as the caller composed the message with) and
// on `counted` (gaps-filled.md #13: every 200 counts, queued or suppressed). The quota row's lock
// serializes the organization's concurrent sends, so exactly `dailyLimit` pass on a free plan; when
// either refuses, nothing is written.
const ACCEPT_SQL = `
WITH cap AS (
  SELECT o.plan FROM outbound_capabilities c JOIN projects p ON p.id = c.project_id JOIN organizations o ON o.id = p.organization_id
  WHERE c.id = $4::uuid AND c.project_id = $2::uuid AND p.organization_id = $3::uuid AND c.domain = $19::text AND c.status = 'verified'
    AND p.deleted_at IS NULL AND c.return_path_subdomain = $20::text AND c.default_display_name IS NOT DISTINCT FROM $21::text
), counted AS (
  INSERT INTO quota_days AS d (organization_id, day, accepted) SELECT $3::uuid, $16::date, 1 FROM cap
  ON CONFLICT (organization_id, day) DO UPDATE SET accepted = d.accepted + 1 WHERE (SELECT plan FROM cap) = 'payg' OR d.accepted < $17::int
  RETURNING accepted
), sup AS (
  SELECT reason FROM suppressions WHERE project_id = $2::uuid AND address = $7::text
), msg AS (
  INSERT INTO messages (id, project_id, organization_id, outbound_id, status, from_header, from_address, to_address, subject,
    message_id_header, return_path, idempotency_key, size_bytes, created_at, updated_at, template_id, template_version)
  SELECT $1::uuid, $2::uuid, $3::uuid, $4::uuid, CASE WHEN EXISTS (SELECT 1 FROM sup) THEN 'suppressed' ELSE 'queued' END,
    $5::text, $6::text, $7::text, $8::text, $9::text, $10::text, $11::text, $12::int, $13::timestamptz, $13::timestamptz, $14::uuid, $15::int
  WHERE EXISTS (SELECT 1 FROM counted)
  RETURNING status
), ev AS (
  INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
  SELECT $18::uuid, $1::uuid, $2::uuid, msg.status, (SELECT jsonb_build_object('reason', reason) FROM sup LIMIT 1), $13::timestamptz FROM msg
  RETURNING id, project_id, type, created_at AS at
), hooks AS (
  ${fanOutSql(`(SELECT * FROM ev WHERE type = 'suppressed') AS e`)}
)
SELECT (SELECT status FROM msg) AS status, EXISTS (SELECT 1 FROM cap) AS "senderStands"`;

async function insertAccepted(q: Queryable, m: NewMessage): Promise<AcceptOutcome> {
  const s = m.sender;
  const rows = await q.query<{ status: AcceptStatus | null; senderStands: boolean }>(ACCEPT_SQL, [
    m.id, s.projectId, s.organizationId, s.outboundId, m.fromHeader, m.fromAddress, m.to, m.subject, m.messageIdHeader,
    m.returnPath, m.idempotency?.key ?? null, m.sizeBytes, m.now, m.template?.id ?? null, m.template?.version ?? null,
    utcDay(m.now), m.dailyLimit, randomUUID(), s.domain, s.returnPathSubdomain, s.defaultDisplayName,
  ]);
  const r = rows[0];
  if (!r?.senderStands) return { kind: 'sender_changed' };
  if (r.status === null) return { kind: 'quota_exceeded' };
  return { kind: 'accepted', messageId: m.id, status: r.status };
}

/**
 * Accepts a message: one statement (one round trip), or with an idempotency key a transaction that
 * takes the key first. The caller spools the body durably BEFORE (gaps-filled.md #15: the commit,
 * and so the 200, come after it) and removes it again unless the outcome is `accepted` + `queued`.
 * A crash in between leaves a spooled body without a row, which the MTA drops; never a row without
 * its body. Spooling first also keeps the LMDB sync out of the time the quota row is locked.
 */
export async function acceptMessage(db: Db, m: NewMessage): Promise<AcceptOutcome> {
  if (!m.idempotency) return insertAccepted(db, m);
  const { key, bodyHash, ttlMs } = m.idempotency;
  try {
    return await db.tx(async (q) => {
      // Takes the key when it is new or expired. A concurrent holder blocks this insert until it
      // commits (then this sees its row) or rolls back (then this takes the key).
      const took = await q.query(
        `INSERT INTO idempotency_keys AS k (project_id, key, body_hash, message_id, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (project_id, key) DO UPDATE SET body_hash = excluded.body_hash, message_id = excluded.message_id,
           created_at = excluded.created_at, expires_at = excluded.expires_at
         WHERE k.expires_at <= $5
         RETURNING 1`,
        [m.sender.projectId, key, bodyHash, m.id, m.now, new Date(m.now.getTime() + ttlMs)],
      );
      if (took.length === 0) {
        const held = await q.query<{ body_hash: string; message_id: string; status: string }>(
          `SELECT k.body_hash, k.message_id, coalesce(msg.status, 'queued') AS status FROM idempotency_keys k
           LEFT JOIN messages msg ON msg.id = k.message_id WHERE k.project_id = $1 AND k.key = $2`,
          [m.sender.projectId, key],
        );
        const h = held[0];
        if (!h || h.body_hash !== bodyHash) throw new Refused({ kind: 'key_reused' });
        throw new Refused({ kind: 'replayed', messageId: h.message_id, status: h.status === 'suppressed' ? 'suppressed' : 'queued' });
      }
      const outcome = await insertAccepted(q, m);
      // The key was taken in this transaction: a refusal must give it back.
      if (outcome.kind !== 'accepted') throw new Refused(outcome);
      return outcome;
    });
  } catch (err) {
    if (err instanceof Refused) return err.outcome;
    throw err;
  }
}

/** Messages accepted today (UTC) by the organization: the quota row. */
export async function acceptedToday(q: Queryable, organizationId: string, now: Date): Promise<number> {
  const rows = await q.query<{ accepted: number }>('SELECT accepted FROM quota_days WHERE organization_id = $1 AND day = $2', [organizationId, utcDay(now)]);
  return rows[0]?.accepted ?? 0;
}
