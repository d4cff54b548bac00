// The MTA's outcome writer (mta/outbound/outcomes.ts) against a real deadlock and a real loss of its connection:
// a batch that Postgres aborts for a conflict with another statement, or whose connection is ended under it, is
// written again, not failed, and counted once. Failing it would leave its messages, which were delivered, to be
// sent a second time when their lease ends.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { startTestService } from '../helpers/service.js';
import { sender, type Sender } from '../helpers/sender.js';
import { deliveredOutcome, seedSendingMessages } from '../helpers/sending-messages.js';
import { waitFor, waitForLockWait } from '../helpers/wait-for.js';
import { createOutcomeWriter } from '../../mta/outbound/outcomes.js';
import { openPostgres, type Db } from '../../storage/pg/client.js';
import { cuttingProxy } from '../helpers/cutting-proxy.js';

// Without SVC_DATABASE_URL the first two tests are skipped, not passed: a deadlock and a backend ended under a
// statement need a second connection, which the embedded database does not have; the SVC_DATABASE_URL pass of
// .ci/run runs them on a real Postgres.
const skip = process.env.SVC_DATABASE_URL ? false : 'needs a real Postgres (a second connection): set SVC_DATABASE_URL';

/** A logger at warn whose lines (JSON text) the test reads. */
function warnLog() {
  const logged: string[] = [];
  return { logged, log: pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) }) };
}

t.test('a batch aborted by a deadlock is written again, once', { skip }, async (t) => {
  const svc = await startTestService(t);
  const db = svc.running.storage.db;
  const [a, b] = [await sender(svc), await sender(svc)].sort((x, y) => (x.outboundId < y.outboundId ? -1 : 1)) as [
    Sender,
    Sender,
  ];
  const messages = [...(await seedSendingMessages(db, a, 1)), ...(await seedSendingMessages(db, b, 1))];

  // Another connection holds the second capability's row; the batch locks the first (in id order) and waits for
  // the second; then the other connection asks for the first. Postgres finds the cycle in the one that waited a
  // deadlock_timeout (1 s by default): the batch, since the other waits 10 s before it looks.
  const other = openPostgres(svc.databaseUrl!, 1);
  t.teardown(() => other.close());
  const { log, logged } = warnLog();
  const writer = createOutcomeWriter(db, log);
  let written: Promise<void> | undefined;
  await other.tx(async (q) => {
    await q.query("SET LOCAL deadlock_timeout = '10s'");
    await q.query('UPDATE outbound_capabilities SET sent_count = sent_count WHERE id = $1', [b.outboundId]);
    written = Promise.all(messages.map((m) => writer.write(deliveredOutcome(m)))).then(() => undefined);
    await waitForLockWait(db, 'the batch waiting for the held row');
    await q.query('UPDATE outbound_capabilities SET sent_count = sent_count WHERE id = $1', [a.outboundId]);
  });
  await written;

  t.match(logged.join(''), /"code":"40P01"/, 'the batch met the deadlock');
  const counts = await db.query<{ n: number }>(
    'SELECT sent_count::int AS n FROM outbound_capabilities WHERE id = ANY($1::uuid[])',
    [[a.outboundId, b.outboundId]],
  );
  t.same(
    counts.map((c) => c.n),
    [1, 1],
    'each capability counted its delivery once',
  );
  const events = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM message_events WHERE type = 'delivered' AND message_id = ANY($1::uuid[])
     GROUP BY message_id`,
    [messages.map((m) => m.messageId)],
  );
  t.same(
    events.map((e) => e.n),
    [1, 1],
    'one delivered event per message',
  );
  const statuses = await db.query<{ status: string }>('SELECT status FROM messages WHERE id = ANY($1::uuid[])', [
    messages.map((m) => m.messageId),
  ]);
  t.same(
    statuses.map((s) => s.status),
    ['delivered', 'delivered'],
    'both messages delivered',
  );
});

t.test('a batch whose connection is lost is written again on a new one, and counted once', { skip }, async (t) => {
  const svc = await startTestService(t);
  const db = svc.running.storage.db;
  const s = await sender(svc);
  const [m] = await seedSendingMessages(db, s, 1);
  const other = openPostgres(svc.databaseUrl!, 1);
  t.teardown(() => other.close());
  const { log, logged } = warnLog();
  const writer = createOutcomeWriter(db, log, { retryDelayMs: { first: 50, max: 100 } });

  // Another connection holds the capability's row, so the batch waits on it; its backend is then ended, as a
  // Postgres restart would end it. The writer must write the batch again, which waits too until the row is free.
  let written: Promise<void> | undefined;
  await other.tx(async (q) => {
    await q.query('SELECT 1 FROM outbound_capabilities WHERE id = $1 FOR UPDATE', [s.outboundId]);
    written = writer.write(deliveredOutcome(m!));
    const waiting = async () =>
      (
        await db.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%message_events%'`,
        )
      )[0]?.pid;
    const pid = await waitFor(waiting, { what: 'the batch waiting for the held row' });
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(() => logged.some((l) => l.includes('connection to Postgres was lost')) || null, {
      what: 'the writer seeing the loss',
    });
    await waitFor(async () => ((await waiting()) !== pid ? await waiting() : null), {
      what: 'the batch written again, on another connection',
    });
  });
  await written;

  t.match(logged.join(''), /"code":"57P01"/, 'the batch lost its connection');
  const [cap] = await db.query<{ n: number }>('SELECT sent_count::int AS n FROM outbound_capabilities WHERE id = $1', [
    s.outboundId,
  ]);
  t.equal(cap!.n, 1, 'the delivery counted once');
  const events = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM message_events WHERE type = 'delivered' AND message_id = $1`,
    [m!.messageId],
  );
  t.equal(events[0]!.n, 1, 'one delivered event');
  const [row] = await db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [m!.messageId]);
  t.equal(row!.status, 'delivered');
});

t.test('a Postgres that does not answer is waited out, until a stop gives up', async (t) => {
  // Nothing listens on port 1 (below the ephemeral range, never another test's server): every connection is
  // refused, as while Postgres restarts.
  const db = openPostgres('postgres://postgres@127.0.0.1:1/none', 1);
  t.teardown(() => db.close());
  const { log, logged } = warnLog();
  const writer = createOutcomeWriter(db, log, { retryDelayMs: { first: 20, max: 50 } });
  let settled = false;
  const written = writer
    .write({
      messageId: randomUUID(),
      projectId: randomUUID(),
      status: 'delivered',
      attempts: 1,
      detail: {},
      at: new Date(),
    })
    .then(
      () => 'written',
      (err: { code?: string }) => err.code,
    )
    .finally(() => (settled = true));
  await waitFor(() => logged.filter((l) => l.includes('connection to Postgres was lost')).length >= 3 || null, {
    what: 'three writes refused',
  });
  t.notOk(settled, 'the batch is still being written');
  const stopping = Date.now();
  await writer.idle(Date.now() + 100);
  t.equal(await written, 'ECONNREFUSED', 'and fails once a stop gives up on it');
  t.ok(Date.now() - stopping < 2_000, 'soon after');
});

t.test(
  'a batch whose reply is lost after its commit is written again and changes nothing more',
  { skip },
  async (t) => {
    const svc = await startTestService(t);
    const db = svc.running.storage.db;
    const s = await sender(svc);
    const [m] = await seedSendingMessages(db, s, 1);
    // The writer's connection goes through a proxy that forwards the outcome statement and drops Postgres's answer.
    const proxy = await cuttingProxy(new URL(svc.databaseUrl!), 'INSERT INTO message_events');
    t.teardown(() => proxy.close());
    const proxied = new URL(svc.databaseUrl!);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    const through = openPostgres(proxied.toString(), 1);
    t.teardown(() => through.close());
    const { log, logged } = warnLog();
    const writer = createOutcomeWriter(through, log, { retryDelayMs: { first: 50, max: 100 } });

    proxy.state.armed = true;
    await writer.write(deliveredOutcome(m!));

    t.equal(proxy.state.cuts, 1, 'the answer to the committed batch was lost');
    t.ok(
      logged.some((l) => l.includes('connection to Postgres was lost')),
      'the writer saw the loss and wrote again',
    );
    const [cap] = await db.query<{ n: number }>(
      'SELECT sent_count::int AS n FROM outbound_capabilities WHERE id = $1',
      [s.outboundId],
    );
    t.equal(cap!.n, 1, 'the delivery counted once');
    const events = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM message_events WHERE type = 'delivered' AND message_id = $1`,
      [m!.messageId],
    );
    t.equal(events[0]!.n, 1, 'one delivered event');
  },
);

t.test('outcomes written within the linger share one statement; a full batch does not wait for it', async (t) => {
  const svc = await startTestService(t);
  const db = svc.running.storage.db;
  const s = await sender(svc);
  const messages = await seedSendingMessages(db, s, 3);
  let statements = 0;
  const counting: Db = Object.assign(Object.create(db) as Db, {
    query: (sql: string, params?: unknown[]) => {
      if (sql.includes('INSERT INTO message_events')) statements++;
      return db.query(sql, params);
    },
  });
  // Each outcome in a turn of its own, as deliveries finish: group commit alone would write the first by itself.
  const writer = createOutcomeWriter(counting, pino({ level: 'silent' }), { lingerMs: 2_000 });
  const written: Promise<void>[] = [];
  for (const m of messages) {
    written.push(writer.write(deliveredOutcome(m)));
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(written);
  t.equal(statements, 1, 'three outcomes, one statement');

  // 64 waiting (FULL_BATCH) go at once: a linger longer than the test's timeout would fail it otherwise.
  const many = await seedSendingMessages(db, s, 64);
  const slow = createOutcomeWriter(counting, pino({ level: 'silent' }), { lingerMs: 10 * 60_000 });
  const all = many.map((m) => slow.write(deliveredOutcome(m)));
  await Promise.all(all);
  t.equal(statements, 2, 'the 64 in one more statement');
});
