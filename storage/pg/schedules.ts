// Scheduled messages (docs/api.md §4.11): the row side of cancelling and moving a message that has not started
// sending. core/schedule.ts has made sure of that in the spool first; these only change a row still `queued`.
import { randomUUID } from 'node:crypto';
import type { Db } from './client.js';
import { fanOutSql } from './webhooks.js';

// The message and its recipients still queued become `failed` (a suppressed recipient stays so), with one
// `failed` event `{ reason: "cancelled" }` and its webhooks, in one statement; nothing when the row is no
// longer queued (the MTA recorded the cancellation first).
const CANCEL_SQL = `
WITH m AS (
  UPDATE messages SET status = 'failed', updated_at = $2 WHERE id = $1 AND status = 'queued' RETURNING id, project_id
), r AS (
  UPDATE message_recipients SET status = 'failed', updated_at = $2
  WHERE message_id IN (SELECT id FROM m) AND status = 'queued'
), ev AS (
  INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
  SELECT $3, m.id, m.project_id, 'failed', '{"reason": "cancelled"}'::jsonb, $2 FROM m
  RETURNING id, project_id, type, created_at AS at
), hooks AS (
  ${fanOutSql('ev AS e')}
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM hooks) AS "webhooksDue"`;

/**
 * webhooksDue: the cancellation wrote webhook attempts (a dispatcher in this process may be woken, docs/decisions.md
 * #88).
 */
export async function cancelMessage(db: Db, id: string, at: Date): Promise<{ webhooksDue: boolean }> {
  const rows = await db.query<{ webhooksDue: boolean }>(CANCEL_SQL, [id, at, randomUUID()]);
  return rows[0]!;
}

export async function rescheduleMessage(db: Db, id: string, scheduledAt: Date, at: Date): Promise<void> {
  await db.query(`UPDATE messages SET scheduled_at = $2, updated_at = $3 WHERE id = $1 AND status = 'queued'`, [
    id,
    scheduledAt,
    at,
  ]);
}
