// core/inbox-billing.ts: the inboxUsage of docs/decisions.md #18 on explicit dates.
import t from 'tap';
import { GB, activeDays, inboxCents, inboxUsage } from '../../core/inbox-billing.js';

const d = (s: string): Date => new Date(s);
const inbox = (started: string | null, deleted: string | null = null, limitGb = 1) => ({
  billingStartedAt: started ? d(started) : null,
  deletedAt: deleted ? d(deleted) : null,
  limitBytes: limitGb * GB,
});

t.test('rounding and the cap', async (t) => {
  t.equal(inboxCents(0), 0);
  t.equal(inboxCents(1), 3, '3.33 → 3');
  t.equal(inboxCents(2), 7, '6.67 → 7');
  t.equal(inboxCents(15), 50);
  t.equal(inboxCents(29), 97);
  t.equal(inboxCents(30), 100);
  t.equal(inboxCents(31), 100, 'capped at 100');
});

t.test('days of a 31-day month, both ends included', async (t) => {
  const now = d('2024-07-31T23:59:59Z');
  t.equal(activeDays(inbox('2024-07-01T00:00:00Z'), now), 31);
  t.equal(activeDays(inbox('2024-06-15T12:00:00Z'), now), 31, 'started last month: from the 1st');
  t.equal(activeDays(inbox('2024-07-31T23:00:00Z'), now), 1, 'started today: one day');
  t.equal(activeDays(inbox('2024-07-17T08:00:00Z'), d('2024-07-17T08:00:01Z')), 1);
  const usage = inboxUsage([inbox('2024-07-01T00:00:00Z')], now);
  t.equal(usage.billedCents, 100, '31 days is still at most 100');
  t.equal(usage.monthStart, '2024-07-01');
});

t.test('February of a leap year', async (t) => {
  const now = d('2024-02-29T10:00:00Z');
  t.equal(activeDays(inbox('2024-01-20T00:00:00Z'), now), 29);
  t.equal(inboxCents(29), 97);
  t.same(inboxUsage([inbox('2024-01-20T00:00:00Z')], now), {
    activeInboxes: 1,
    billedCents: 97,
    storageOverageGb: 0,
    storageBilledCents: 0,
    totalBilledCents: 97,
    monthStart: '2024-02-01',
  });
  t.equal(inboxUsage([], d('2024-03-01T00:00:00Z')).monthStart, '2024-03-01', 'the month turns at 00:00 UTC');
  t.equal(inboxUsage([], d('2024-02-29T23:59:59.999Z')).monthStart, '2024-02-01');
});

t.test('deletion mid-month keeps its billed days and stops the storage charge', async (t) => {
  const now = d('2024-07-20T12:00:00Z');
  const deleted = inbox('2024-07-01T09:00:00Z', '2024-07-15T18:00:00Z', 5);
  t.equal(activeDays(deleted, now), 15);
  t.same(inboxUsage([deleted], now), {
    activeInboxes: 0,
    billedCents: 50,
    storageOverageGb: 0,
    storageBilledCents: 0,
    totalBilledCents: 50,
    monthStart: '2024-07-01',
  });
  t.equal(activeDays(inbox('2024-06-01T00:00:00Z', '2024-07-01T00:30:00Z'), now), 1, 'deleted on the 1st: one day');
  t.equal(activeDays(inbox('2024-06-01T00:00:00Z', '2024-06-30T23:59:59Z'), now), 0, 'deleted last month');
  t.equal(activeDays(inbox('2024-05-01T00:00:00Z', '2024-05-02T00:00:00Z'), now), 0, 'started and deleted before');
});

t.test('an inbox never used is free, but its reserved storage is not', async (t) => {
  const now = d('2024-07-20T12:00:00Z');
  t.same(inboxUsage([inbox(null, null, 3)], now), {
    activeInboxes: 0,
    billedCents: 0,
    storageOverageGb: 2,
    storageBilledCents: 100,
    totalBilledCents: 100,
    monthStart: '2024-07-01',
  });
  t.equal(activeDays(inbox(null, '2024-07-10T00:00:00Z'), now), 0, 'never used, then deleted');
  t.equal(activeDays(inbox('2024-07-21T00:00:00Z'), now), 0, 'a start after now has not happened yet');
});

t.test('several inboxes add up', async (t) => {
  const now = d('2024-07-10T12:00:00Z');
  const usage = inboxUsage(
    [
      inbox('2024-07-10T01:00:00Z'), // 1 day → 3
      inbox('2024-06-01T00:00:00Z', null, 2), // 10 days → 33, 1 GB over
      inbox('2024-07-05T00:00:00Z', '2024-07-06T00:00:00Z', 10), // 2 days → 7, deleted: no storage
      inbox(null, null, 4), // unused: 0, 3 GB over
    ],
    now,
  );
  t.same(usage, {
    activeInboxes: 2,
    billedCents: 43,
    storageOverageGb: 4,
    storageBilledCents: 200,
    totalBilledCents: 243,
    monthStart: '2024-07-01',
  });
});
