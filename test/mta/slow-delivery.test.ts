// A delivery in progress longer than the worker's slowMs is logged once at warn with what it is waiting for
// (mta/outbound/worker.ts), so that a stuck delivery can be told from a slow receiver and placed.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { startTarpit } from '../helpers/tarpit.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { logLines } from '../helpers/log-lines.js';

t.test('a delivery waiting on a silent MX is reported once, naming the address it is connecting to', async (t) => {
  const { log, lines } = logLines();
  const { zone, sink, svc } = await deliveryWorld(t, {
    env: { SVC_RETRY_DELAYS: '1m' },
    mta: { pollMs: 20, slowMs: 300, pool: { connectTimeoutMs: 2_000 } },
    log,
  });
  // Up at the TCP level, silent above it: the attempt waits for a greeting until its connect timeout.
  const pit = await startTarpit(t, '127.0.0.6', sink.port);
  zone.mx('silent.test', 10, 'mx.silent.test').a('mx.silent.test', '127.0.0.6');
  const s = await sender(svc);
  const { providerMessageId: id } = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'a@silent.test',
    subject: 'hi',
    text: 'x',
  });
  const slow = () => lines.filter((l) => l.msg === 'delivery still in progress' && l.messageId === id);
  await waitFor(() => slow().length > 0, { what: 'the slow-delivery warning' });
  t.equal(pit.accepted, 1, 'the MX was dialled');
  t.match(slow()[0], { level: 40, stage: 'connecting to 127.0.0.6' }, 'at warn, naming the address');
  t.ok((slow()[0]!.ms as number) >= 300, 'after slowMs');
  await waitFor(
    async () =>
      (await svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
        ?.status === 'deferred',
    { what: 'the attempt deferred at its timeout' },
  );
  t.equal(slow().length, 1, 'said once for the attempt');
});
