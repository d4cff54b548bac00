// Failed webhook attempts and their retries (docs/decisions.md #5): each attempt is a row with its
// status code, latency and error; the next is scheduled with backoff on the injected clock, which
// the tests advance instead of sleeping; the webhook-id stays the same; a restart in the middle of
// the retries still delivers; after 24 h the delivery is given up.
import t, { type Test } from 'tap';
import { startTestService, type TestService } from '../helpers/service.js';
import { startWebhookReceiver, type Answer } from '../helpers/webhook-receiver.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import type { WebhookDispatcherOptions } from '../../mta/webhooks/dispatcher.js';

interface Attempt {
  id: string;
  attempt: number;
  status: string;
  status_code: number | null;
  latency_ms: number | null;
  error: string | null;
  webhook_id: string;
  next_attempt_at: Date | null;
  attempted_at: Date | null;
  created_at: Date;
}

const HOUR = 3_600_000;

async function world(t: Test, answer: Answer, webhooks: WebhookDispatcherOptions = {}) {
  const svc = await startTestService(t, {
    env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' },
    mta: { pollMs: 20 },
    webhooks: { pollMs: 20, ...webhooks },
  });
  const s = await sender(svc);
  const hook = await startWebhookReceiver(t, answer);
  const w = await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: hook.url(),
    events: ['suppressed'],
  });
  hook.secret = w.secret;
  await s.owner.client.v1.suppressions.create({ project_id: s.projectId, address: 'held@dest.test' });
  return { svc, s, hook, endpointId: w.id };
}

/** A suppressed send: one `suppressed` event, no MTA delivery needed. */
const suppressedSend = async (s: Sender) =>
  (await s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'held@dest.test', subject: 'held', text: 'x' }))
    .providerMessageId;

const attemptsOf = (svc: TestService, endpointId: string) =>
  svc.running.storage.db.query<Attempt>(
    `SELECT id, attempt, status, status_code, latency_ms, error, webhook_id, next_attempt_at, attempted_at, created_at
     FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY attempt`,
    [endpointId],
  );

const waitAttempts = (svc: TestService, endpointId: string, check: (rows: Attempt[]) => boolean, what: string) =>
  waitFor(
    async () => {
      const rows = await attemptsOf(svc, endpointId);
      return check(rows) ? rows : null;
    },
    { timeoutMs: 20_000, what },
  );

t.test('500, then 200 once the clock makes the retry due: two rows, one webhook-id', async (t) => {
  const { svc, s, hook, endpointId } = await world(t, (_h, i) => (i === 0 ? 500 : 200));
  await suppressedSend(s);
  await hook.waitFor(1);
  const rows = await waitAttempts(
    svc,
    endpointId,
    (r) => r.length === 2,
    'the first attempt recorded and the second scheduled',
  );
  t.match(rows[0], {
    attempt: 1,
    status: 'retrying',
    status_code: 500,
    error: 'HTTP 500',
    latency_ms: Number,
    next_attempt_at: null,
  });
  t.ok(rows[0]!.latency_ms! >= 0);
  t.match(rows[1], {
    attempt: 2,
    status: 'pending',
    status_code: null,
    attempted_at: null,
    webhook_id: rows[0]!.webhook_id,
  });
  const wait = new Date(rows[1]!.next_attempt_at!).getTime() - new Date(rows[0]!.attempted_at!).getTime();
  t.ok(wait >= 1_000 && wait <= 5_000, `the second attempt is due within the first backoff, 5 s (in ${wait} ms)`);

  // Not before its time: a look for due attempts made after this point leaves the second one alone.
  const at = svc.clock.now();
  await waitFor(() => (svc.running.mta?.webhooks.polledAt() ?? -Infinity) >= at, { what: 'a dispatcher poll' });
  const still = await attemptsOf(svc, endpointId);
  t.equal(still[1]?.status, 'pending');
  t.equal(
    new Date(still[1]!.next_attempt_at!).getTime(),
    new Date(rows[1]!.next_attempt_at!).getTime(),
    'not claimed (a claim moves next_attempt_at to its lease)',
  );
  t.equal(hook.hooks.length, 1, 'no retry while the clock stands before it');
  svc.clock.advance(5_000);
  await hook.waitFor(2);
  const done = await waitAttempts(svc, endpointId, (r) => r[1]?.status === 'succeeded', 'the second attempt succeeded');
  t.match(done[1], { attempt: 2, status: 'succeeded', status_code: 200, error: null, latency_ms: Number });
  t.equal(done.length, 2, 'no third attempt');

  const [first, second] = hook.hooks;
  t.equal(second!.id, first!.id, 'webhook-id is the same on the retry (Standard Webhooks: receivers dedupe by it)');
  t.equal(second!.body, first!.body, 'and so is the body');
  t.ok(second!.timestamp >= first!.timestamp + 1, 'webhook-timestamp is the time of each attempt');
  t.ok(first!.signatureValid && second!.signatureValid, 'both signed');

  const listed = (await s.owner.client.v1.webhook_deliveries.list({ endpoint_id: endpointId })).rows;
  t.same(
    listed.map((r) => [r.attempt, r.status, r.status_code]),
    [
      [2, 'succeeded', 200],
      [1, 'retrying', 500],
    ],
    'the data layer, newest first',
  );
});

t.test('a refused connection is a failed attempt too, without a status code', async (t) => {
  const { svc, s, hook, endpointId } = await world(t, () => 503);
  await hook.close();
  await suppressedSend(s);
  const rows = await waitAttempts(
    svc,
    endpointId,
    (r) => r[0]?.status === 'retrying',
    'the refused connection recorded',
  );
  t.match(rows[0], { status: 'retrying', status_code: null, error: /ECONNREFUSED/ });
});

t.test('a restart in the middle of the retries still delivers, with the same webhook-id', async (t) => {
  let down = true;
  const { svc, s, hook, endpointId } = await world(t, () => (down ? 500 : 204));
  await suppressedSend(s);
  await waitAttempts(svc, endpointId, (r) => r.length === 2, 'attempt 1 failed, attempt 2 scheduled');
  svc.clock.advance(5_000);
  await waitAttempts(svc, endpointId, (r) => r.length === 3, 'attempt 2 failed, attempt 3 scheduled');

  await svc.restart();
  down = false;
  // Attempt 3 is due within 10 s of attempt 2: a pending row in Postgres, found by the new process.
  svc.clock.advance(10_000);
  const rows = await waitAttempts(
    svc,
    endpointId,
    (r) => r[2]?.status === 'succeeded',
    'attempt 3 succeeded after the restart',
  );
  t.same(
    rows.map((r) => [r.attempt, r.status, r.status_code]),
    [
      [1, 'retrying', 500],
      [2, 'retrying', 500],
      [3, 'succeeded', 204],
    ],
  );
  t.equal(hook.hooks.length, 3);
  t.same(new Set(hook.hooks.map((h) => h.id)).size, 1, 'one webhook-id across the attempts and the restart');
  t.ok(
    hook.hooks.every((h) => h.signatureValid),
    'the restarted process signs with the same (sealed) secret',
  );
});

t.test('an endpoint that never answers 2xx is given up 24 h after the event', async (t) => {
  // The jitter fixed at the middle of its range: with a random draw, any gap may be as short as a second (full jitter,
  // mta/webhooks/retry.ts), and the shape checked below held in most runs only.
  const { svc, s, hook, endpointId } = await world(t, () => 500, { random: () => 0.5 });
  const messageId = await suppressedSend(s);
  const [event] = await svc.running.storage.db.query<{ created_at: Date }>(
    `SELECT created_at FROM message_events WHERE message_id = $1`,
    [messageId],
  );
  const eventMs = new Date(event!.created_at).getTime();
  let rows = await waitAttempts(svc, endpointId, (r) => r.length === 2, 'the first retry scheduled');
  // Jump to each next attempt as it is scheduled, until none is.
  while (!rows.some((r) => r.status === 'failed')) {
    const pending = rows.find((r) => r.status === 'pending');
    if (pending) svc.clock.advance(Math.max(0, new Date(pending.next_attempt_at!).getTime() - svc.clock.now()) + 10);
    const n = rows.length;
    rows = await waitAttempts(
      svc,
      endpointId,
      (r) => r.length > n || r.some((x) => x.status === 'failed'),
      `attempt ${n} recorded`,
    );
    if (rows.length > 60) break;
  }
  const last = rows.at(-1)!;
  t.equal(last.status, 'failed', 'the last attempt is failed, no further one scheduled');
  t.ok(
    rows.slice(0, -1).every((r) => r.status === 'retrying' && r.status_code === 500),
    'every earlier attempt is retrying, with its status code',
  );
  const span = new Date(last.attempted_at!).getTime() - eventMs;
  t.ok(
    span >= 24 * HOUR && span < 24 * HOUR + 60_000,
    `the last attempt is 24 h after the event (${(span / HOUR).toFixed(2)} h)`,
  );
  t.ok(rows.length >= 10 && rows.length <= 40, `${rows.length} attempts`);
  // Exponential at first: the early gaps grow.
  const gaps = rows
    .slice(1)
    .map((r, i) => new Date(r.attempted_at!).getTime() - new Date(rows[i]!.attempted_at!).getTime());
  t.ok(
    gaps.slice(-3).every((g) => g > 60_000),
    'the late attempts are far apart',
  );
  t.equal(new Set(hook.hooks.map((h) => h.id)).size, 1, 'one webhook-id throughout');
  t.equal(hook.hooks.length, rows.length, 'each row was a request');
});
