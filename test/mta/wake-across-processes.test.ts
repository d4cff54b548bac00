// docs/decisions.md #86 and #88 across processes: a control running alone (`svc start --role control`, as svc@control)
// wakes the delivery worker and the webhook dispatcher of another process on the same data directory through the
// wake files (storage/wake-signal.ts). This process runs the MTA, its worker and dispatcher polling every ten minutes,
// so a message delivered and a webhook sent within the wait's 10 s were taken because the child's control woke them.
//
// Postgres only (the PostgreSQL pass of .ci/run): the embedded database lives inside one process.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { ADMIN_KEY, listenEnv, listening, svc as svcChild } from '../helpers/child.js';
import { clientsFor, sharedWith } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { waitFor } from '../helpers/wait-for.js';

const TEN_MINUTES = 10 * 60_000;

t.test(
  'a control in another process wakes the delivery worker and the webhook dispatcher of this one',
  { skip: process.env.SVC_DATABASE_URL ? false : 'PGlite lives in one process: no second process can share it' },
  async (t) => {
    const { zone, sink, svc } = await deliveryWorld(t, {
      env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' },
      mta: { pollMs: TEN_MINUTES },
      webhooks: { pollMs: TEN_MINUTES },
    });
    const s = await sender(svc);
    const hook = await startWebhookReceiver(t);
    hook.secret = (
      await s.owner.client.console.projects.webhooks.create({
        id: s.projectId,
        url: hook.url('/'),
        events: ['suppressed'],
      })
    ).secret;

    // The control alone, on this process's data directory and database (as the systemd units share their env file).
    const control = svcChild(t, ['start', '--role', 'control'], {
      ...listenEnv(svc.dataDir),
      ...(await sharedWith(svc)),
      SVC_PLATFORM_ADMIN_KEY: ADMIN_KEY,
      SVC_DNS_SERVERS: zone.hostPort,
    });
    const url = String((await listening(control)).publicUrl);
    const key = clientsFor(() => url).client({ keyId: s.keyId, secret: s.keySecret });

    // The start's polls are done: from here on only a wake looks within ten minutes.
    const mta = svc.running.mta!;
    await waitFor(() => mta.worker.polledAt() !== null && mta.webhooks.polledAt() !== null, {
      what: 'the first polls',
    });

    const message = (to: string) => ({ from: `ada@${s.domain}`, to, subject: `to ${to}`, text: 'x' });
    const sent = await key.v1.services.sendEmail(message('bob@dest.test'));
    // The VERP return path names the message (docs/decisions.md #10).
    const hex = sent.providerMessageId.replace(/-/g, '');
    t.ok(
      await waitFor(() => sink.messages.some((m) => m.mailFrom.includes(hex)), { what: 'the delivery' }),
      "the other process's sendEmail was delivered without waiting for the poll",
    );

    // SVC_HOSTNAME is mta.test: the simulator's suppressed@ is on every suppression list.
    const suppressed = await key.v1.services.sendEmail(message('suppressed@simulator.mta.test'));
    t.equal(suppressed.status, 'suppressed');
    t.ok(
      await waitFor(
        () =>
          hook.hooks.some(
            (h) =>
              h.json.data.messageId === suppressed.providerMessageId &&
              h.json.type === 'suppressed' &&
              h.signatureValid,
          ),
        { what: 'the suppressed webhook' },
      ),
      "the other process's suppressed recipient reached the endpoint without waiting for the poll",
    );
  },
);
