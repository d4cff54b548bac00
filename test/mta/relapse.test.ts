// An entry leased again while its attempt is finishing (mta/outbound/worker.ts, `relapsed`): the attempt puts it
// back when it is done. A poll can lease it again while that put-back is being made durable (the entry is due
// once the write commits, before the sync resolves); it must then be put back once more, or it stays leased
// with no one working on it until the lease runs out. Seen in the benchmark as a few messages left `queued` (the
// put-back after a spooled message whose row had not committed yet). Here the spool's reschedule is held after
// each commit until a poll has leased the entry again and has that lease in hand, which makes that interleaving
// certain; the clock is the test's.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

const LEASE_MS = 60 * 60_000;

t.test('an entry leased again during its put-back is put back again and delivered', async (t) => {
  let tries = 0;
  const { sink, svc } = await deliveryWorld(t, {
    env: { SVC_RETRY_DELAYS: '1m' },
    mta: { pollMs: 10, leaseMs: LEASE_MS },
    // The first attempt is deferred; the next one is accepted.
    sink: { answer: () => (tries++ === 0 ? { code: 451, message: '4.3.0 try again later' } : null) },
  });
  const { spool } = svc.running.storage;
  // Leases of each id as the poll gets them back. A lease is in the spool once it commits, but the poll learns of
  // it only after the sync: waiting for the spool alone let the attempt finish first, and the poll then took the
  // lease for a fresh attempt (right too, but not the interleaving this test is for).
  const realLease = spool.lease.bind(spool);
  const leases = new Map<string, number>();
  spool.lease = async (nowMs, limit, leaseUntilMs) => {
    const out = await realLease(nowMs, limit, leaseUntilMs);
    for (const e of out) leases.set(e.id, (leases.get(e.id) ?? 0) + 1);
    return out;
  };
  const real = spool.reschedule.bind(spool);
  let held = 0;
  spool.reschedule = async (id, at, attempts, envelopes) => {
    const before = leases.get(id) ?? 0;
    await real(id, at, attempts, envelopes);
    // The first two: the deferral's reschedule (made due at once by moving the clock past it) and the put-back.
    if (held >= 2) return;
    if (held++ === 0) svc.clock.advance(61_000);
    await waitFor(() => (leases.get(id) ?? 0) > before, { what: `a poll leasing ${id} again` });
  };
  t.teardown(() => {
    spool.reschedule = real;
    spool.lease = realLease;
  });

  const s = await sender(svc);
  const { providerMessageId: id } = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'r@dest.test',
    subject: 'relapse',
    text: 'x',
  });
  await waitFor(
    async () =>
      (await svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
        ?.status === 'delivered',
    { what: 'the second attempt delivered', timeoutMs: 15_000 },
  );
  t.equal(held, 2, 'the deferral and the put-back were both overtaken by a lease');
  t.equal(sink.messages.length, 1, 'delivered once');
  t.equal(tries, 2, 'in two attempts');
});
