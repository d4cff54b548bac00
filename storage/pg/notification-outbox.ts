// The durable outbox of platform mail (password resets, invitations). Control-plane handlers
// enqueue inside their own transaction; the MTA claims due rows and delivers them.
import type { Queryable } from './client.js';

export interface OutboxRow {
  id: string;
  kind: string;
  sender: string;
  recipient: string;
  subject: string;
  bodySealed: string;
  createdAt: Date;
  attempts: number;
  sentAt: Date | null;
}

export async function enqueueNotification(
  q: Queryable,
  n: { id: string; kind: string; sender: string; recipient: string; subject: string; bodySealed: string; now: Date },
): Promise<void> {
  await q.query(
    `INSERT INTO notification_outbox (id, kind, sender, recipient, subject, body_sealed, created_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
    [n.id, n.kind, n.sender, n.recipient, n.subject, n.bodySealed, n.now],
  );
}

export async function listNotifications(q: Queryable, filter: { recipient?: string; pendingOnly?: boolean } = {}): Promise<OutboxRow[]> {
  return q.query<OutboxRow>(
    `SELECT id, kind, sender, recipient, subject, body_sealed AS "bodySealed", created_at AS "createdAt", attempts, sent_at AS "sentAt"
     FROM notification_outbox
     WHERE ($1::text IS NULL OR lower(recipient) = lower($1)) AND (NOT $2::boolean OR sent_at IS NULL)
     ORDER BY created_at, id`,
    [filter.recipient ?? null, filter.pendingOnly ?? false],
  );
}
