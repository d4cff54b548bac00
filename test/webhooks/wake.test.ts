// docs/decisions.md #88: the writers of events wake the webhook dispatcher of their process once they have committed
// webhook attempts. The dispatcher's poll here waits ten minutes, so a webhook that arrives within the wait's 10 s was
// sent because a writer woke it: the MTA's (a delivery's outcome, the simulator's complaint and a DSN to the MX
// listener) and the control's (a suppressed recipient of sendEmail and sendBatch, a cancelled scheduled message); an
// event that no endpoint takes wakes nobody.
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * A service whose dispatcher polls every ten minutes, its start's poll done (from then on only a wake looks for
 * attempts within the wait), a sender, a webhook receiver with no endpoint yet, and the wakes counted.
 */
async function world(t: Test) {
  const { sink, svc } = await deliveryWorld(t, {
    env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' },
    webhooks: { pollMs: 10 * 60_000 },
  });
  const s = await sender(svc);
  const hook = await startWebhookReceiver(t);
  await waitFor(() => svc.running.mta!.webhooks.polledAt() !== null, { what: 'the first poll' });
  let woken = 0;
  t.teardown(svc.running.storage.webhooksDue.onWake(() => woken++));
  const hooksOf = (id: string, type: string) =>
    hook.hooks.filter((h) => h.json.data.messageId === id && h.json.type === type && h.signatureValid);
  return { sink, svc, s, hook, hooksOf, woken: () => woken };
}

t.test('delivery outcomes and reports wake the webhook dispatcher of their process', async (t) => {
  const { sink, svc, s, hook, hooksOf, woken } = await world(t);
  const endpoint = await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url('/') });
  hook.secret = endpoint.secret;

  const send = async (to: string) =>
    (await s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to, subject: `to ${to}`, text: 'x' }))
      .providerMessageId;

  const delivered = await send('bob@dest.test');
  t.ok(
    await waitFor(() => hooksOf(delivered, 'delivered').length === 1, { what: 'the delivered webhook' }),
    'the delivered event reached the endpoint without waiting for the poll',
  );

  // From here the endpoint takes complaints and bounces alone: a delivery's outcome writes no attempt and wakes nobody.
  await s.owner.client.console.projects.webhooks.delete({ id: s.projectId, webhookId: endpoint.id });
  const complaints = await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: hook.url('/'),
    events: ['complained', 'bounced'],
  });
  hook.secret = complaints.secret;

  // SVC_HOSTNAME is mta.test in the test service: the simulator's complained@ is delivered, then complained about.
  const complained = await send('complained@simulator.mta.test');
  t.ok(
    await waitFor(() => hooksOf(complained, 'complained').length === 1, { what: 'the complained webhook' }),
    'the complaint (a report) reached the endpoint without waiting for the poll',
  );

  // A DSN to the VERP return path of a delivered message, through the MX listener (swaks, a real SMTP client).
  const gone = await send('gone@dest.test');
  const verp = (await waitFor(() => sink.messages.find((m) => m.mailFrom.includes(gone.replace(/-/g, '')))))!.mailFrom;
  const dsn = [
    'From: MAILER-DAEMON@mx.dest.test',
    `To: ${verp}`,
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="B1"',
    '',
    '--B1',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.dest.test',
    '',
    'Final-Recipient: rfc822; gone@dest.test',
    'Action: failed',
    'Status: 5.1.1',
    '',
    '--B1--',
    '',
  ].join('\r\n');
  await new Promise<void>((resolve, reject) => {
    const smtp = `127.0.0.1:${svc.running.ports.smtp}`;
    const child = execFile('swaks', ['--server', smtp, '--from', '<>', '--to', verp, '--data', '-'], (err) =>
      err ? reject(err) : resolve(),
    );
    child.stdin!.end(dsn);
  });
  t.ok(
    await waitFor(() => hooksOf(gone, 'bounced').length === 1, { what: 'the bounced webhook' }),
    'the bounce report reached the endpoint without waiting for the poll',
  );

  // An outcome whose event no endpoint takes wrote no attempt, and wakes nobody.
  const before = woken();
  const quiet = await send('carol@dest.test');
  await waitFor(
    async () =>
      (await svc.running.storage.db.query(`SELECT 1 FROM messages WHERE id = $1 AND status = 'delivered'`, [quiet]))
        .length === 1,
    { what: 'the unsubscribed delivery' },
  );
  t.equal(woken(), before, 'no wake for a batch that wrote no attempt');
});

t.test("the control's suppressed recipients and cancellations wake its process's dispatcher", async (t) => {
  const { svc, s, hook, hooksOf, woken } = await world(t);
  // SVC_HOSTNAME is mta.test in the test service: the simulator's suppressed@ is on every suppression list.
  const suppressedTo = 'suppressed@simulator.mta.test';
  const message = (to: string) => ({ from: `ada@${s.domain}`, to, subject: `to ${to}`, text: 'x' });

  // An endpoint that takes bounces alone: a suppressed recipient writes no attempt, and wakes nobody (the wake comes
  // before the answer, so it would have been counted by now).
  const bounces = await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: hook.url('/'),
    events: ['bounced'],
  });
  const unheard = await s.key.v1.services.sendEmail(message(suppressedTo));
  t.equal(unheard.status, 'suppressed');
  t.equal(woken(), 0, 'no wake for a suppression that wrote no attempt');
  await s.owner.client.console.projects.webhooks.delete({ id: s.projectId, webhookId: bounces.id });
  hook.secret = (await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url('/') })).secret;

  const one = await s.key.v1.services.sendEmail(message(suppressedTo));
  t.ok(
    await waitFor(() => hooksOf(one.providerMessageId, 'suppressed').length === 1, {
      what: 'the suppressed webhook',
    }),
    "sendEmail's suppressed recipient reached the endpoint without waiting for the poll",
  );

  // Nothing in this test is delivered, so no outcome of the MTA's wakes the dispatcher in its stead.
  const batch = await s.key.v1.services.sendBatch({ messages: [message(suppressedTo), message(suppressedTo)] });
  const inBatch = batch.data[1]!.providerMessageId;
  t.ok(
    await waitFor(() => hooksOf(inBatch, 'suppressed').length === 1, { what: "the batch's suppressed webhook" }),
    "sendBatch's suppressed recipient reached the endpoint without waiting for the poll",
  );

  const scheduled = await s.key.v1.services.sendEmail({
    ...message('carol@dest.test'),
    scheduledAt: new Date(svc.clock.now() + 60 * 60_000).toISOString(),
  });
  await s.key.v1.messages.cancel({ id: scheduled.providerMessageId });
  t.ok(
    await waitFor(() => hooksOf(scheduled.providerMessageId, 'failed').length === 1, {
      what: 'the cancelled webhook',
    }),
    "a cancelled message's failed event reached the endpoint without waiting for the poll",
  );
  t.equal(hooksOf(unheard.providerMessageId, 'suppressed').length, 0, 'none for the suppression no endpoint took');
});
