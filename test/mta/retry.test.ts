// mta/outbound/retry.ts: the default SVC_RETRY_DELAYS schedule (docs/decisions.md #16) walked failure by
// failure with exact times, the give-up point, the total span RFC 5321 §4.5.4.1 asks for, and a
// custom list.
import t from 'tap';
import { loadConfig } from '../../config/load.js';
import { nextAttempt } from '../../mta/outbound/retry.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const T0 = Date.UTC(2025, 0, 6, 9, 30, 0);

t.test('the default schedule, one failure at a time', async (t) => {
  const { retryDelaysMs } = loadConfig({});
  // docs/decisions.md #16: 1m,5m,15m,30m,1h,2h,4h,8h,16h,24h,24h,24h,16h.
  const expectedWaits = [
    1 * MIN,
    5 * MIN,
    15 * MIN,
    30 * MIN,
    1 * HOUR,
    2 * HOUR,
    4 * HOUR,
    8 * HOUR,
    16 * HOUR,
    24 * HOUR,
    24 * HOUR,
    24 * HOUR,
    16 * HOUR,
  ];
  t.equal(retryDelaysMs.length, 13, '13 delays, so 14 attempts');

  // Each attempt fails at the moment it starts (now = its scheduled time), so the times add up exactly.
  let now = T0;
  const attemptTimes = [T0];
  for (let n = 1; n <= expectedWaits.length; n++) {
    const next = nextAttempt({ attempts: n, firstAttemptMs: T0, nowMs: now, delaysMs: retryDelaysMs });
    t.same(
      next,
      { action: 'retry', atMs: now + expectedWaits[n - 1]! },
      `failure ${n} → retry in ${expectedWaits[n - 1]! / MIN} min`,
    );
    if (next.action !== 'retry') break;
    now = next.atMs;
    attemptTimes.push(now);
  }
  t.same(
    nextAttempt({ attempts: 1, firstAttemptMs: T0, nowMs: T0, delaysMs: retryDelaysMs }),
    { action: 'retry', atMs: T0 + MIN },
    'the first failure retries after one minute',
  );
  t.same(
    nextAttempt({ attempts: 13, firstAttemptMs: T0, nowMs: now - 16 * HOUR, delaysMs: retryDelaysMs }),
    { action: 'retry', atMs: now },
    'the 13th failure still retries, 16 h later: the 14th attempt',
  );
  t.same(
    nextAttempt({ attempts: 14, firstAttemptMs: T0, nowMs: now, delaysMs: retryDelaysMs }),
    { action: 'give_up' },
    'the 14th failure, with the delays used up, gives up',
  );
  t.same(
    nextAttempt({ attempts: 15, firstAttemptMs: T0, nowMs: now, delaysMs: retryDelaysMs }),
    { action: 'give_up' },
    'and stays given up',
  );

  t.equal(attemptTimes.length, 14);
  const span = attemptTimes.at(-1)! - T0;
  t.equal(span, 4 * DAY + 23 * HOUR + 51 * MIN, 'first to last attempt: 4 d 23 h 51 min');
  t.ok(span >= 4.5 * DAY && span <= 5.5 * DAY, 'about 5 days (RFC 5321 §4.5.4.1: at least 4-5 days)');
});

t.test('delays are measured from the end of the failed attempt, not from the schedule', async (t) => {
  const delaysMs = loadConfig({}).retryDelaysMs;
  // The third attempt was due at T0 + 6 min but ran 40 s late and took 30 s to fail.
  const now = T0 + 6 * MIN + 70_000;
  t.same(nextAttempt({ attempts: 3, firstAttemptMs: T0, nowMs: now, delaysMs }), {
    action: 'retry',
    atMs: now + 15 * MIN,
  });
  // After a two-day outage of the MTA, the fourth attempt still gets its own 30 minutes, not an
  // immediate retry for every scheduled time that passed meanwhile.
  const late = T0 + 2 * DAY;
  t.same(nextAttempt({ attempts: 4, firstAttemptMs: T0, nowMs: late, delaysMs }), {
    action: 'retry',
    atMs: late + 30 * MIN,
  });
});

t.test('a custom short list', async (t) => {
  const delaysMs = loadConfig({ SVC_RETRY_DELAYS: '10s,1m' }).retryDelaysMs;
  t.same(delaysMs, [10_000, 60_000]);
  t.same(nextAttempt({ attempts: 1, firstAttemptMs: T0, nowMs: T0 + 500, delaysMs }), {
    action: 'retry',
    atMs: T0 + 10_500,
  });
  t.same(nextAttempt({ attempts: 2, firstAttemptMs: T0, nowMs: T0 + 11_000, delaysMs }), {
    action: 'retry',
    atMs: T0 + 71_000,
  });
  t.same(nextAttempt({ attempts: 3, firstAttemptMs: T0, nowMs: T0 + 72_000, delaysMs }), { action: 'give_up' });
  t.same(
    nextAttempt({ attempts: 1, firstAttemptMs: T0, nowMs: T0, delaysMs: [] }),
    { action: 'give_up' },
    'an empty list never retries',
  );
  t.same(
    nextAttempt({ attempts: 1, firstAttemptMs: T0, nowMs: T0, delaysMs: [0] }),
    { action: 'retry', atMs: T0 },
    'a zero delay retries at once',
  );
});

t.test('deterministic: the same input gives the same time', async (t) => {
  const delaysMs = loadConfig({}).retryDelaysMs;
  const input = { attempts: 9, firstAttemptMs: T0, nowMs: T0 + DAY, delaysMs };
  const first = nextAttempt(input);
  for (let i = 0; i < 20; i++) t.same(nextAttempt(input), first);
  t.same(first, { action: 'retry', atMs: T0 + DAY + 16 * HOUR });
});

t.test('programming errors throw', async (t) => {
  const delaysMs = [MIN];
  for (const attempts of [0, -1, 1.5, Number.NaN]) {
    t.throws(
      () => nextAttempt({ attempts, firstAttemptMs: T0, nowMs: T0, delaysMs }),
      RangeError,
      `attempts ${attempts}`,
    );
  }
  t.throws(() => nextAttempt({ attempts: 1, firstAttemptMs: T0, nowMs: Number.NaN, delaysMs }), RangeError);
  t.throws(() => nextAttempt({ attempts: 1, firstAttemptMs: T0, nowMs: T0, delaysMs: [-1] }), RangeError);
});
