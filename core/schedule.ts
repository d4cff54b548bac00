// Scheduled sending (docs/api.md §4.11): `scheduledAt` on a send, and cancelling or moving a message that has
// not started sending. The spool decides what "started" means: an entry the MTA has leased, or tried once, has
// started; the checks and the change happen in one LMDB write transaction (storage/lmdb/spool.ts
// `holdUnsent`), the MTA's lease is one too, so a message is never both cancelled and sent. Postgres is
// written after: the row (status, scheduled_at) and the cancellation's event.
import { MAX_SCHEDULE_DAYS } from '@svc-mail/sdk';
import type { CoreDeps } from './deps.js';
import { fail } from './errors.js';
import { cancelMessage, rescheduleMessage } from '../storage/pg/schedules.js';

const DAY_MS = 24 * 60 * 60_000;

// ISO 8601 / RFC 3339 §5.6 date-time, with its offset (a time without one names no instant).
const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-](\d{2}):(\d{2}))$/i;

/**
 * `scheduledAt` as an instant: an ISO 8601 time with an offset, after `now` and at most MAX_SCHEDULE_DAYS
 * ahead; a 400 naming `field` otherwise.
 */
export function parseScheduledAt(raw: string, now: Date, field: string): Date {
  const bad = (message: string) => fail('invalid_request', `scheduledAt ${message}.`, [{ field, message }]);
  const m = ISO.exec(raw);
  const [y, mo, d, h, mi, s, , oh, om] = (m ?? []).slice(1).map((x) => (x === undefined ? 0 : Number(x)));
  const daysIn = m ? new Date(Date.UTC(y!, mo!, 0)).getUTCDate() : 0;
  if (!m || mo! < 1 || mo! > 12 || d! < 1 || d! > daysIn || h! > 23 || mi! > 59 || s! > 59 || oh! > 23 || om! > 59)
    throw bad('must be an ISO 8601 time with its offset, e.g. 2030-01-31T09:00:00Z');
  const at = new Date(raw);
  if (Number.isNaN(at.getTime())) throw bad('must be an ISO 8601 time with its offset, e.g. 2030-01-31T09:00:00Z');
  if (at.getTime() <= now.getTime()) throw bad('must be in the future');
  if (at.getTime() > now.getTime() + MAX_SCHEDULE_DAYS * DAY_MS)
    throw bad(`must be at most ${MAX_SCHEDULE_DAYS} days ahead`);
  return at;
}

const started = () => fail('conflict', 'The message has already started sending or is done.');

/**
 * Cancels a message that has not started sending (the caller has checked it may): the spool entry is marked
 * cancelled while unleased and untried, the row becomes `failed` with an event `{ reason: "cancelled" }`, and
 * the entry goes. Should this process stop in between, the MTA finds the mark and records the same.
 */
export async function cancelUnsent(deps: CoreDeps, m: { id: string; status: string }, now: Date): Promise<void> {
  const { spool, db } = deps.storage;
  if (m.status !== 'queued') throw started();
  if ((await spool.holdUnsent(m.id, { cancelAtMs: now.getTime() })) !== 'held') throw started();
  const { webhooksDue } = await cancelMessage(db, m.id, now);
  await spool.remove(m.id);
  // Its `failed` event's webhooks go now from a dispatcher in this process, not at its next poll (#88).
  if (webhooksDue) deps.storage.webhooksDue.wake();
}

/** Moves a message that has not started sending to `at` (already checked by parseScheduledAt). */
export async function rescheduleUnsent(
  deps: CoreDeps,
  m: { id: string; status: string },
  at: Date,
  now: Date,
): Promise<void> {
  const { spool, db } = deps.storage;
  if (m.status !== 'queued') throw started();
  if ((await spool.holdUnsent(m.id, { moveToMs: at.getTime() })) !== 'held') throw started();
  await rescheduleMessage(db, m.id, at, now);
}
