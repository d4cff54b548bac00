// docs/decisions.md #86: where the control and the MTA share a process, an accepted message is leased at once, not
// at the worker's next poll. The poll here waits ten minutes, so a message that arrives within the wait's 10 s was
// taken because the control woke the worker.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

t.test('sendEmail and sendBatch wake the delivery worker of their process', async (t) => {
  const { sink, svc } = await deliveryWorld(t, { mta: { pollMs: 10 * 60_000 } });
  const s = await sender(svc);
  const worker = svc.running.mta!.worker;
  // The start's poll (after the lease recovery) is done: from here on only a wake polls within ten minutes.
  await waitFor(() => worker.polledAt() !== null, { what: 'the first poll' });
  // The VERP return path names the message (docs/decisions.md #10).
  const arrived = (id: string) => sink.messages.some((m) => m.mailFrom.includes(id.replace(/-/g, '')));

  const one = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'bob@dest.test',
    subject: 'Now',
    text: 'x',
  });
  t.ok(
    await waitFor(() => arrived(one.providerMessageId), { what: 'the sendEmail' }),
    'a lone sendEmail was delivered without waiting for the poll',
  );

  const batch = await s.key.v1.services.sendBatch({
    messages: [1, 2].map((i) => ({ from: `ada@${s.domain}`, to: `r${i}@dest.test`, subject: `B${i}`, text: 'x' })),
  });
  for (const r of batch.data)
    t.ok(
      await waitFor(() => arrived(r.providerMessageId), { what: `batch message ${r.providerMessageId}` }),
      `batch message ${r.providerMessageId} was delivered without waiting for the poll`,
    );
});
