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

export async function listNotifications(
  q: Queryable,
  filter: { recipient?: string; pendingOnly?: boolean } = {},
): Promise<OutboxRow[]> {
  return q.query<OutboxRow>(
    `SELECT id, kind, sender, recipient, subject, body_sealed AS "bodySealed", created_at AS "createdAt", attempts,
       sent_at AS "sentAt"
     FROM notification_outbox
     WHERE ($1::text IS NULL OR lower(recipient) = lower($1)) AND (NOT $2::boolean OR sent_at IS NULL)
     ORDER BY created_at, id`,
    [filter.recipient ?? null, filter.pendingOnly ?? false],
  );
}

// The MTA's side: claim due rows, then mark each sent or failed.

export type ClaimedNotification = Omit<OutboxRow, 'sentAt'>;

/**
 * Takes up to `limit` due notifications and moves their next attempt to `leaseUntil` in the same
 * statement (SKIP LOCKED: two MTA nodes never take the same row). `attempts` counts this one.
 */
export async function claimNotifications(
  q: Queryable,
  now: Date,
  limit: number,
  leaseUntil: Date,
): Promise<ClaimedNotification[]> {
  return q.query<ClaimedNotification>(
    `UPDATE notification_outbox o SET next_attempt_at = $3, attempts = o.attempts + 1
     WHERE o.id IN (SELECT id FROM notification_outbox WHERE sent_at IS NULL AND next_attempt_at <= $1
                    ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING o.id, o.kind, o.sender, o.recipient, o.subject, o.body_sealed AS "bodySealed",
       o.created_at AS "createdAt", o.attempts`,
    [now, limit, leaseUntil],
  );
}

export async function notificationSent(q: Queryable, id: string, at: Date): Promise<void> {
  await q.query('UPDATE notification_outbox SET sent_at = $2, last_error = NULL WHERE id = $1', [id, at]);
}

/** A failed attempt: try again at `nextAt`, or never (null: given up, kept with its error for operators). */
export async function notificationFailed(q: Queryable, id: string, error: string, nextAt: Date | null): Promise<void> {
  await q.query(
    `UPDATE notification_outbox SET last_error = $2, next_attempt_at = coalesce($3::timestamptz, 'infinity')
     WHERE id = $1`,
    [id, error.slice(0, 1000), nextAt],
  );
}
