// Issue 15 item 5 (d): the reconciler. A message whose spooled copy is lost (here: removed from the spool, as
// a lost disk would) stays `deferred` in Postgres with nobody to end it. Once its whole retry schedule and a
// day more have passed with no change, the reconciler ends it `failed` with a reason, an event and its
// webhook; a message still inside its schedule is left alone. The clock is the test's.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

const zone = await startDnsZone(t);
zone.mx('dest.test', 10, 'mx.dest.test').a('mx.dest.test', '127.0.0.1');
// Nothing listens on port 1 (below the ephemeral range, so no server beside this test gets it): every attempt is
// refused and deferred.
const svc = await startTestService(t, {
  env: {
    SVC_DNS_SERVERS: zone.hostPort,
    SVC_OUTBOUND_PORT: '1',
    SVC_RETRY_DELAYS: '1h,2h',
    SVC_ALLOW_PRIVATE_WEBHOOKS: '1',
  },
  // A lease (60 min) longer than the orphan recheck (10 min), so a test can tell a leased entry from a handled one.
  mta: { pollMs: 20, leaseMs: 60 * 60_000 },
});
const s = await sender(svc);
await s.owner.client.console.projects.webhooks.create({
  id: s.projectId,
  url: 'http://127.0.0.1:9/hook',
  events: ['failed'],
});
const { db, spool } = svc.running.storage;
const status = async (id: string) =>
  (await db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]?.status;

const send = async (subject: string) =>
  (await s.key.v1.services.sendEmail({ from: `a@${s.domain}`, to: 'r@dest.test', subject, text: 'x' }))
    .providerMessageId;

t.test('a deferred message whose spooled copy is gone ends failed once past its schedule', async (t) => {
  const lost = await send('lost');
  await waitFor(async () => (await status(lost)) === 'deferred', { what: 'the first attempt deferred' });
  // The copy is lost; nothing in the spool will ever try it again.
  await spool.remove(lost);
  const worker = svc.running.mta!.worker;
  t.equal(await worker.reconcile(), 0, 'within its schedule (3 h) and a day: left alone');
  svc.clock.advance(28 * 60 * 60_000);
  const kept = await send('still inside its schedule');
  await waitFor(async () => (await status(kept)) === 'deferred', { what: 'the other one deferred' });
  t.equal(await worker.reconcile(), 1, 'past it: one lost message');
  t.equal(await status(lost), 'failed');
  t.equal(await status(kept), 'deferred', 'the recent one is untouched');
  const [ev] = await db.query<{ type: string; detail: { reason: string } }>(
    "SELECT type, detail FROM message_events WHERE message_id = $1 AND type = 'failed'",
    [lost],
  );
  t.match(ev?.detail.reason, /^lost: /, 'the event says why');
  const hooks = await db.query('SELECT 1 FROM webhook_deliveries WHERE event_type = $1 AND attempt = 1', ['failed']);
  t.equal(hooks.length, 1, 'and its webhook is on its way');
  t.equal(await worker.reconcile(), 0, 'a second pass finds nothing');
});

t.test('a spooled body without a row: kept while a commit could still land, dropped after a day', async (t) => {
  const id = '0b9d7c5e-1111-4a2b-9c3d-5e6f7a8b9c0d';
  const at = svc.clock.now();
  await spool.enqueue(
    {
      id,
      projectId: s.projectId,
      domain: 'dest.test',
      mailFrom: `b-x@bounces.${s.domain}`,
      rcptTo: 'r@dest.test',
      outboundId: s.outboundId,
      nextAttemptMs: at,
      attempts: 0,
      createdMs: at,
    },
    Buffer.from('Subject: orphan\r\n\r\nx\r\n'),
  );
  svc.clock.advance(10 * 60_000);
  // Handled: rescheduled to its next look for a row, 10 minutes on (leased, it would be 60), or dropped.
  const now = svc.clock.now();
  await waitFor(
    () => {
      const e = spool.get(id);
      return !e || (e.nextAttemptMs > now && e.nextAttemptMs <= now + 11 * 60_000);
    },
    { what: 'the orphan looked at' },
  );
  t.ok(spool.body(id), 'ten minutes without a row: still kept (the row decides, not the age)');
  svc.clock.advance(25 * 60 * 60_000);
  await waitFor(() => !spool.body(id), { what: 'dropped after a day' });
  t.notOk(spool.body(id), 'a day without a row: dropped');
});

t.test('svc queue lost: what the reconciler ended, from Postgres', async (t) => {
  const { svc: run, exitWithin } = await import('../helpers/child.js');
  if (!svc.databaseUrl) {
    const child = run(t, ['queue', 'lost'], { SVC_DATA_DIR: svc.dataDir });
    t.equal(
      (await exitWithin(child, 'svc queue lost on the embedded database')).code,
      1,
      'on the embedded database: exit 1',
    );
    t.match(child.stderr(), /needs SVC_DATABASE_URL/);
    return;
  }
  const child = run(t, ['queue', 'lost', '--json'], { SVC_DATA_DIR: svc.dataDir, SVC_DATABASE_URL: svc.databaseUrl });
  t.equal((await exitWithin(child, 'svc queue lost --json')).code, 0, child.stderr());
  const rows = child
    .stdout()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { id: string; domain: string });
  t.equal(rows.length, 1, 'the one lost message');
  t.equal(rows[0]?.domain, 'dest.test');
});
