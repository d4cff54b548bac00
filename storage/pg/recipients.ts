// The recipients of a message sent to several (docs/api.md §4.11, migration 0015): each has its own status,
// and the message's status is derived from theirs by the one rule below, which every writer of a recipient's
// status (delivery outcomes, reports, cancellation) applies in the same statement. A message to one recipient
// has no rows: its own status is its recipient's.
import type { Queryable } from './client.js';

/**
 * docs/api.md §3, the status of a message to several recipients, as an SQL aggregate over the recipient
 * statuses `s` (one row per recipient). Suppressed recipients are skipped: they count only when every
 * recipient is suppressed. Of the others: any `deferred` makes `deferred`; otherwise any still `queued` or
 * `sending` makes `queued` when none has been tried yet, else `sending`; once all are done, `delivered` when
 * every one was delivered, `bounced` when none was and one bounced, `failed` when none was and none bounced, and
 * `sending` when some were delivered and others not (the furthest state all of them reached).
 */
export const messageStatusOf = (s: string) => `CASE
    WHEN bool_and(${s} = 'suppressed') THEN 'suppressed'
    WHEN bool_or(${s} = 'deferred') THEN 'deferred'
    WHEN bool_or(${s} IN ('queued', 'sending'))
      THEN CASE WHEN bool_and(${s} IN ('queued', 'suppressed')) THEN 'queued' ELSE 'sending' END
    WHEN bool_and(${s} IN ('delivered', 'suppressed')) THEN 'delivered'
    WHEN bool_or(${s} = 'delivered') THEN 'sending'
    WHEN bool_or(${s} = 'bounced') THEN 'bounced'
    ELSE 'failed' END`;

export interface RecipientRecord {
  address: string;
  kind: 'to' | 'cc' | 'bcc';
  status: string;
}

/**
 * Takes the row locks of messages (in id order: one lock order for every writer) before their recipients are
 * written: a transaction that then derives a message's status reads every recipient as committed, so two
 * writers of different recipients of one message never both derive it from a stale view.
 */
export async function lockMessages(q: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  // One probe of the primary key an id, in the array's order (docs/decisions.md #82).
  await q.query(
    `SELECT 1 FROM unnest($1::uuid[]) AS k(id)
       CROSS JOIN LATERAL (SELECT 1 FROM messages WHERE id = k.id LIMIT 1 FOR UPDATE) m`,
    [[...new Set(ids)].sort()],
  );
}

/** SQL of a message's recipients as a JSON array in order ([] for a message to one), for `m`, a messages row. */
export const RECIPIENTS_JSON = (m: string) => `coalesce((SELECT json_agg(json_build_object('address', r.address,
  'kind', r.kind, 'status', r.status) ORDER BY r.position) FROM message_recipients r WHERE r.message_id = ${m}.id),
  json_build_array(json_build_object('address', ${m}.to_address, 'kind', 'to', 'status', ${m}.status)))`;
