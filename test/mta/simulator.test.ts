// Issue 17 item 2: the mailbox simulator. Sends to delivered@, bounced@, deferred@, complained@ and suppressed@
// at simulator.<SVC_HOSTNAME> are never sent out (the sink and DNS see nothing); each ends as its name says,
// with its events and webhooks; none counts against the daily allowance; and the simulator's bounces and
// complaints suppress no one, so the same addresses work again in the next run.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

t.test('each simulator address: its outcome, events and webhooks; nothing sent, nothing counted', async (t) => {
  const { sink, svc } = await deliveryWorld(t, { env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' }, webhooks: { pollMs: 20 } });
  const s = await sender(svc);
  const hook = await startWebhookReceiver(t);
  hook.secret = (await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url() })).secret;
  const sim = 'simulator.mta.test'; // SVC_HOSTNAME is mta.test in the test service
  const send = (to: string | string[]) =>
    s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to, subject: 'Simulated', text: 'x' });
  const status = async (id: string) => (await s.key.v1.messages.get({ id })).row.status;
  const events = async (id: string) => (await s.key.v1.messages.events({ id })).events;

  const sent = {
    delivered: await send(`delivered@${sim}`),
    bounced: await send(`bounced@${sim}`),
    deferred: await send(`deferred+run-1@${sim}`),
    complained: await send(`complained@${sim}`),
    suppressed: await send(`suppressed@${sim}`),
  };
  t.equal(sent.suppressed.status, 'suppressed', 'suppressed@: refused at once, as a listed address is');
  for (const k of ['delivered', 'bounced', 'deferred', 'complained'] as const)
    t.equal(sent[k].status, 'queued', `${k}@: queued`);

  for (const k of ['delivered', 'bounced', 'deferred', 'complained'] as const)
    await waitFor(async () => (await status(sent[k].providerMessageId)) !== 'queued', { what: `${k}@ attempted` });
  t.equal(await status(sent.delivered.providerMessageId), 'delivered', 'delivered@: delivered');
  t.equal(await status(sent.bounced.providerMessageId), 'bounced', 'bounced@: bounced');
  t.equal(await status(sent.deferred.providerMessageId), 'deferred', 'deferred+label@: deferred');
  t.equal(await status(sent.complained.providerMessageId), 'delivered', 'complained@: delivered first');
  await waitFor(async () => (await events(sent.complained.providerMessageId)).some((e) => e.type === 'complained'), {
    what: 'the complaint',
  });

  const bounce = (await events(sent.bounced.providerMessageId)).find((e) => e.type === 'bounced');
  t.match(bounce?.detail, { host: 'simulator', class: 'unknown_user', reply: /simulated bounce/ }, 'a 5.1.1 reply');
  const delivered = (await events(sent.delivered.providerMessageId)).find((e) => e.type === 'delivered');
  t.match(delivered?.detail, { host: 'simulator', reply: /^250 / }, 'a 250 reply from the simulator');
  const suppressedEv = (await events(sent.suppressed.providerMessageId)).find((e) => e.type === 'suppressed');
  t.match(suppressedEv?.detail, { reason: 'simulator' }, 'suppressed@: the reason says the simulator');

  // Webhooks: one of each kind of event.
  const got = await hook.waitFor(5);
  await waitFor(
    () =>
      ['delivered', 'bounced', 'deferred', 'complained', 'suppressed'].every((type) =>
        hook.hooks.some((h) => h.json.type === type),
      ),
    { what: 'a webhook of each type' },
  );
  t.ok(
    got.every((h) => h.signatureValid),
    'signed webhooks',
  );

  t.equal(sink.messages.length, 0, 'nothing reached a real MX');
  const detail = await s.owner.client.console.organizations.get({ id: s.orgId });
  t.equal(detail.usage.usedToday, 0, 'none counted against the daily allowance');
  const listed = await s.owner.client.console.projects.suppressions.list({ id: s.projectId });
  t.same(listed.suppressions, [], 'no one suppressed');

  // The same addresses work again (no suppression from the first run), and a real recipient beside the
  // simulator's in one message counts one and is delivered.
  t.equal((await send(`bounced@${sim}`)).status, 'queued', 'bounced@ again: queued, not suppressed');
  const mixed = await send([`delivered@${sim}`, 'bob@dest.test']);
  await waitFor(async () => (await status(mixed.providerMessageId)) === 'delivered', { what: 'the mixed message' });
  t.equal(sink.messages.length, 1, 'only the real recipient reached the sink');
  t.same(sink.messages[0]!.rcptTo, ['bob@dest.test'], 'addressed to the real recipient alone');
  const after = await s.owner.client.console.organizations.get({ id: s.orgId });
  t.equal(after.usage.usedToday, 1, 'the real recipient counted one');
});
