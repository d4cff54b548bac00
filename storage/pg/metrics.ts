// Read-only queries of the operations endpoints (docs/operations.md, "Metrics"): whether the database
// answers (GET /ready) and the webhook backlog (GET /metrics). Each is one cheap statement, run per scrape.
import type { Queryable } from './client.js';

/** Resolves when the database answers a query; rejects with its error otherwise. */
export async function pingDatabase(q: Queryable): Promise<void> {
  await q.query('SELECT 1');
}

export interface WebhookBacklog {
  /** Attempts still to be made (status pending), due or scheduled later. */
  pending: number;
  /** Of those, the ones whose time has come (the dispatchers have not taken them yet). */
  due: number;
}

/** Counted over the partial index webhook_deliveries_due_idx (pending rows only). */
export async function webhookBacklog(q: Queryable, now: Date): Promise<WebhookBacklog> {
  const [row] = await q.query<{ pending: string | number; due: string | number }>(
    `SELECT count(*) AS pending, count(*) FILTER (WHERE next_attempt_at <= $1) AS due
     FROM webhook_deliveries WHERE status = 'pending'`,
    [now],
  );
  return { pending: Number(row?.pending ?? 0), due: Number(row?.due ?? 0) };
}
