// Dedicated IPs (SVC_SOURCE_ADDRESSES with `address@ehlo-name`): each delivery leaves from the address of its
// sending domain and greets with that address's EHLO name, on a connection of its own, through the real
// service to a loopback sink that records the client's address and EHLO name. 127.0.0.2 is on lo on Linux.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

t.test('each source address greets with its own EHLO name; the default one too', async (t) => {
  const dedicated = `ded-${randomUUID().slice(0, 8)}.test`;
  const { sink, svc } = await deliveryWorld(t, {
    env: { SVC_HOSTNAME: 'mta.test', SVC_SOURCE_ADDRESSES: `127.0.0.1@mta-a.test,${dedicated}=127.0.0.2@mta-b.test` },
  });
  const shared = await sender(svc);
  const own = await sender(svc, { domain: dedicated });
  const send = (s: typeof shared, subject: string) =>
    s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'a@dest.test', subject, text: 'x' });
  const a = await send(shared, 'from the default address');
  const b = await send(own, 'from the dedicated address');
  await sink.waitForMessages(2);
  const by = (subject: string) => sink.messages.find((m) => m.raw.toString().includes(`Subject: ${subject}`));
  const fromDefault = by('from the default address');
  const fromDedicated = by('from the dedicated address');
  t.equal(fromDefault?.remoteAddress.replace(/^::ffff:/, ''), '127.0.0.1', 'default domain: from 127.0.0.1');
  t.equal(fromDefault?.helo, 'mta-a.test', 'default domain: EHLO mta-a.test');
  t.equal(fromDedicated?.remoteAddress.replace(/^::ffff:/, ''), '127.0.0.2', `${dedicated}: from 127.0.0.2`);
  t.equal(fromDedicated?.helo, 'mta-b.test', `${dedicated}: EHLO mta-b.test`);
  t.not(fromDefault?.sessionId, fromDedicated?.sessionId, 'two sources never share a session');

  // A second message of each reuses its own source's connection, never the other's.
  await send(own, 'again from the dedicated address');
  await send(shared, 'again from the default address');
  await sink.waitForMessages(4);
  t.equal(by('again from the dedicated address')?.helo, 'mta-b.test');
  t.equal(by('again from the dedicated address')?.remoteAddress.replace(/^::ffff:/, ''), '127.0.0.2');
  t.equal(by('again from the default address')?.helo, 'mta-a.test');
  t.equal(by('again from the default address')?.remoteAddress.replace(/^::ffff:/, ''), '127.0.0.1');
  for (const [s, id] of [
    [shared, a.providerMessageId],
    [own, b.providerMessageId],
  ] as const)
    await waitFor(async () => (await s.key.v1.messages.get({ id })).row.status === 'delivered', {
      everyMs: 200,
      what: `${id} delivered`,
    });
});

t.test('without @name an address greets with SVC_HOSTNAME, as before', async (t) => {
  const { sink, svc } = await deliveryWorld(t, {
    env: { SVC_HOSTNAME: 'mta.test', SVC_SOURCE_ADDRESSES: '127.0.0.3' },
  });
  const s = await sender(svc);
  await s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'a@dest.test', subject: 'x', text: 'x' });
  const [m] = await sink.waitForMessages(1);
  t.equal(m?.remoteAddress.replace(/^::ffff:/, ''), '127.0.0.3');
  t.equal(m?.helo, 'mta.test');
});
