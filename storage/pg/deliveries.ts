// What the MTA reads and writes in Postgres around a delivery: the current status of spooled messages,
// the DKIM keys of a capability, and the outcomes of attempts, written in batches (one transaction for
// many deliveries: a status update, an event, maybe a suppression and the capability's sent count).
import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from './client.js';
import { fanOut } from './webhooks.js';

export type FinalStatus = 'delivered' | 'bounced' | 'failed';
export type OutcomeStatus = FinalStatus | 'deferred';

/** Message statuses from which the MTA still delivers. */
export const DELIVERABLE = new Set(['queued', 'deferred']);

export async function messageStatuses(q: Queryable, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await q.query<{ id: string; status: string }>('SELECT id, status FROM messages WHERE id = ANY($1::uuid[])', [ids]);
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
  return { domain: r.domain, rsa: { selector: r.s, sealed: r.p }, ed25519: r.es && r.ep ? { selector: r.es, sealed: r.ep } : null };
}

/** The verified capability of a sending domain, for platform mail (SVC_NOTIFY_FROM's domain). */
export async function verifiedCapabilityOf(q: Queryable, domain: string): Promise<string | null> {
  const rows = await q.query<{ id: string }>(`SELECT id FROM outbound_capabilities WHERE domain = $1 AND status = 'verified'`, [domain]);
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
  /** A suppression to add (spec §6.4); an existing one for the address is kept. */
  suppress?: { address: string; reason: 'hard_bounce' | 'soft_bounce_max'; detail: string };
  /** Set on delivery: the capability whose sent count grows (it then blocks its own deletion). */
  outboundId?: string | null;
  at: Date;
}

/**
 * Writes a batch of outcomes in one transaction, one statement per table. A message appears at most
 * once per batch (the worker holds one attempt per message at a time).
 */
export async function recordOutcomes(db: Db, outcomes: readonly Outcome[]): Promise<void> {
  if (outcomes.length === 0) return;
  const col = <T>(f: (o: Outcome) => T) => outcomes.map(f);
  const suppress = outcomes.filter((o) => o.suppress);
  const sent = outcomes.filter((o) => o.status === 'delivered' && o.outboundId).map((o) => o.outboundId as string);
  // Event ids are made here so that the webhook fan-out can name the events it was inserted with.
  const eventIds = outcomes.map(() => randomUUID());
  await db.tx(async (q) => {
    await q.query(
      `UPDATE messages m SET status = u.status, attempts = u.attempts, updated_at = u.at
       FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[]) AS u(id, status, attempts, at)
       WHERE m.id = u.id`,
      [col((o) => o.messageId), col((o) => o.status), col((o) => o.attempts), col((o) => o.at)],
    );
    await q.query(
      `INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
       SELECT u.id, u.message_id, u.project_id, u.type, u.detail::jsonb, u.at
       FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::timestamptz[]) AS u(id, message_id, project_id, type, detail, at)`,
      [eventIds, col((o) => o.messageId), col((o) => o.projectId), col((o) => o.status), col((o) => JSON.stringify(o.detail)), col((o) => o.at)],
    );
    // The webhook deliveries of these events, in the same transaction (storage/pg/webhooks.ts).
    await fanOut(q, outcomes.map((o, i) => ({ id: eventIds[i]!, projectId: o.projectId, type: o.status, at: o.at })));
    if (suppress.length) {
      await q.query(
        `INSERT INTO suppressions (project_id, address, reason, detail, created_at)
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
         ON CONFLICT (project_id, address) DO NOTHING`,
        [suppress.map((o) => o.projectId), suppress.map((o) => o.suppress!.address), suppress.map((o) => o.suppress!.reason),
          suppress.map((o) => o.suppress!.detail), suppress.map((o) => o.at)],
      );
    }
    if (sent.length) {
      await q.query(
        `UPDATE outbound_capabilities c SET sent_count = c.sent_count + u.n
         FROM (SELECT id, count(*) AS n FROM unnest($1::uuid[]) AS id GROUP BY id) u WHERE c.id = u.id`,
        [sent],
      );
    }
  });
}
