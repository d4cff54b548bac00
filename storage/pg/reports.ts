// Asynchronous reports about sent messages (DSN bounces and delays, ARF complaints), received at the
// VERP return path: the message they name, and their effect, in one transaction with the webhook fan-out.
import { timeOrderedUuid } from '../../mail/uuid.js';
import type { Db, Queryable } from './client.js';
import { fanOut } from './webhooks.js';
import { lockMessages, messageStatusOf } from './recipients.js';

export interface ReportedMessage {
  id: string;
  projectId: string;
  status: string;
  returnPath: string;
  to: string;
  /** A message to several: its recipients that were sent (not suppressed), in order; null for a message to one. */
  recipients: string[] | null;
}

export async function reportedMessage(q: Queryable, id: string): Promise<ReportedMessage | null> {
  const rows = await q.query<ReportedMessage>(
    `SELECT id, project_id AS "projectId", status, return_path AS "returnPath", to_address AS "to",
       (SELECT array_agg(r.address ORDER BY r.position) FROM message_recipients r
        WHERE r.message_id = m.id AND r.status <> 'suppressed') AS recipients
     FROM messages m WHERE id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

export interface Report {
  messageId: string;
  /** The recipient of a message to several the report is about (its status changes, not the others'). */
  recipient?: string;
  projectId: string;
  type: 'bounced' | 'deferred' | 'complained';
  detail: Record<string, unknown>;
  suppress?: { address: string; reason: 'hard_bounce' | 'complaint'; detail: string };
  at: Date;
}

/**
 * Records one report: its event; for a bounce, the status `bounced` (unless the message already ended
 * as bounced or failed); the suppression if any; the webhook deliveries of the event. A final report
 * (bounced, complained) counts once per message (docs/decisions.md #53): a second one, a retransmission or
 * a copy, records nothing and answers false. Delays may come again.
 */
export async function recordReport(db: Db, r: Report): Promise<boolean> {
  const eventId = timeOrderedUuid();
  return db.tx(async (q) => {
    if (r.type !== 'deferred') {
      // The message's row lock orders concurrent reports of one message: the second sees the first's event.
      await lockMessages(q, [r.messageId]);
      const seen = await q.query(
        // Events of reports carry their source (mta/inbound/reports.ts): dsn, arf or text. A message to
        // several counts one final report per recipient.
        `SELECT 1 FROM message_events WHERE message_id = $1 AND type = $2
           AND detail->>'source' IN ('dsn', 'arf', 'text')
           AND ($3::text IS NULL OR detail->>'recipient' = $3) LIMIT 1`,
        [r.messageId, r.type, r.recipient ?? null],
      );
      if (seen.length) return false;
    }
    if (r.recipient !== undefined) {
      // A message to several: the recipient bounces, and the message's status is derived again from all of
      // them, under the message's lock taken above (storage/pg/recipients.ts).
      if (r.type === 'bounced') {
        await q.query(
          `UPDATE message_recipients SET status = 'bounced', updated_at = $3
           WHERE message_id = $1 AND address = $2 AND status NOT IN ('bounced', 'failed', 'suppressed')`,
          [r.messageId, r.recipient, r.at],
        );
        await q.query(
          `UPDATE messages m SET status = d.status, updated_at = $2
           FROM (SELECT ${messageStatusOf('status')} AS status FROM message_recipients WHERE message_id = $1) d
           WHERE m.id = $1 AND m.status IS DISTINCT FROM d.status`,
          [r.messageId, r.at],
        );
      }
    } else if (r.type === 'bounced') {
      await q.query(
        `UPDATE messages SET status = 'bounced', updated_at = $2
         WHERE id = $1 AND status NOT IN ('bounced', 'failed', 'suppressed')`,
        [r.messageId, r.at],
      );
    }
    await q.query(
      `INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6)`,
      [eventId, r.messageId, r.projectId, r.type, JSON.stringify(r.detail), r.at],
    );
    if (r.suppress) {
      await q.query(
        `INSERT INTO suppressions (project_id, address, reason, detail, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (project_id, address) DO NOTHING`,
        [r.projectId, r.suppress.address, r.suppress.reason, r.suppress.detail.slice(0, 500), r.at],
      );
    }
    await fanOut(q, [{ id: eventId, projectId: r.projectId, type: r.type, at: r.at }]);
    return true;
  });
}
