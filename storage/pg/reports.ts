// Asynchronous reports about sent messages (DSN bounces and delays, ARF complaints), received at the
// VERP return path: the message they name, and their effect, in one transaction with the webhook fan-out.
import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from './client.js';
import { fanOut } from './webhooks.js';

export interface ReportedMessage {
  id: string;
  projectId: string;
  status: string;
  returnPath: string;
  to: string;
}

export async function reportedMessage(q: Queryable, id: string): Promise<ReportedMessage | null> {
  const rows = await q.query<ReportedMessage>(
    `SELECT id, project_id AS "projectId", status, return_path AS "returnPath", to_address AS "to"
     FROM messages WHERE id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

export interface Report {
  messageId: string;
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
  const eventId = randomUUID();
  return db.tx(async (q) => {
    if (r.type !== 'deferred') {
      // The message's row lock orders concurrent reports of one message: the second sees the first's event.
      await q.query('SELECT 1 FROM messages WHERE id = $1 FOR UPDATE', [r.messageId]);
      const seen = await q.query(
        // Events of reports carry their source (mta/inbound/reports.ts): dsn, arf or text.
        `SELECT 1 FROM message_events WHERE message_id = $1 AND type = $2
           AND detail->>'source' IN ('dsn', 'arf', 'text') LIMIT 1`,
        [r.messageId, r.type],
      );
      if (seen.length) return false;
    }
    if (r.type === 'bounced') {
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
