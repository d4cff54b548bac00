// A sendEmail spools its body before its row commits (core/send.ts), so a busy MTA can lease a message whose row is
// not there yet. The worker looks for such a row again a few times while it holds the lease, and delivers the
// message as soon as the row is there, without putting it back in the spool; a row still missing after those
// looks sends the message down the orphan path (put back for 250 ms). The waits are long here, so that the test
// decides when the row lands.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { composeMessage } from '../../mail/compose.js';

const LEASE_MS = 10 * 60_000;

t.test('a leased message whose row commits meanwhile is delivered without going back to the spool', async (t) => {
  const { sink, svc } = await deliveryWorld(t, {
    mta: { pollMs: 10, leaseMs: LEASE_MS, uncommittedWaitsMs: [400, 800, 800] },
  });
  const s = await sender(svc);
  const { db, spool } = svc.running.storage;
  const putBack: { id: string; inMs: number }[] = [];
  const real = spool.reschedule.bind(spool);
  spool.reschedule = (id, at, attempts, envelopes) => {
    putBack.push({ id, inMs: at - svc.clock.now() });
    return real(id, at, attempts, envelopes);
  };
  t.teardown(() => {
    spool.reschedule = real;
  });

  // What core/send.ts spools, and then the row its accept statement commits.
  const spoolOne = async (subject: string) => {
    const id = randomUUID();
    const now = svc.clock.now();
    const raw = await composeMessage({
      from: { name: 'Ada', address: `ada@${s.domain}` },
      to: 'r@dest.test',
      subject,
      text: 'x',
      messageId: `${id}@${s.domain}`,
      date: new Date(now),
    });
    const mailFrom = `b-${id}@${s.domain}`;
    await spool.enqueue(
      {
        id,
        projectId: s.projectId,
        domain: 'dest.test',
        mailFrom,
        rcptTo: 'r@dest.test',
        outboundId: s.outboundId,
        nextAttemptMs: now,
        attempts: 0,
        createdMs: now,
      },
      raw,
    );
    const commit = () =>
      db.query(
        `INSERT INTO messages (id, project_id, organization_id, outbound_id, status, from_header, from_address,
           to_address, subject, message_id_header, return_path, size_bytes, attempts, created_at, updated_at)
         VALUES ($1, $2, $3, $4, 'queued', $5, $5, 'r@dest.test', $6, $7, $8, $9, 0, now(), now())`,
        [
          id,
          s.projectId,
          s.orgId,
          s.outboundId,
          `ada@${s.domain}`,
          subject,
          `<${id}@${s.domain}>`,
          mailFrom,
          raw.length,
        ],
      );
    return { id, commit };
  };
  const leased = (id: string) => (spool.get(id)?.nextAttemptMs ?? 0) > svc.clock.now() + LEASE_MS / 2;
  const status = async (id: string) =>
    (await db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]?.status;

  const late = await spoolOne('committed late');
  await waitFor(() => leased(late.id), { what: 'the message leased before its row' });
  await late.commit();
  await waitFor(async () => (await status(late.id)) === 'delivered', { what: 'the message delivered' });
  t.equal(sink.messages.filter((m) => m.raw.includes('committed late')).length, 1, 'delivered once');
  t.same(
    putBack.filter((p) => p.id === late.id),
    [],
    'never put back in the spool',
  );

  const never = await spoolOne('never committed');
  await waitFor(() => putBack.some((p) => p.id === never.id), {
    what: 'the message put back after the looks',
    timeoutMs: 15_000,
  });
  const back = putBack.find((p) => p.id === never.id)!;
  t.ok(back.inMs > 0 && back.inMs <= 250, `put back for the orphan recheck (${back.inMs} ms)`);
  t.equal(await status(never.id), undefined, 'and nothing recorded');
});
