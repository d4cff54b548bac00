// Issue 15 item 5 (a): Postgres commits a sendEmail, and the reply is lost on the way back (a connection
// reset after the commit). The service must not take the message back: its body stays in the spool, the row
// Postgres kept is delivered, once. With an idempotencyKey the service's own try again finds the key taken by this
// very message and answers it, and a client that sends again gets the same message, not a second one. The fault
// is real: a TCP proxy between the service and Postgres forwards the accepting statement (which commits by itself)
// and cuts the connection instead of forwarding the answer. Postgres only (PGlite has no socket to cut).
import t from 'tap';
import { SvcError } from '@svc-mail/sdk';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { createTestDatabase } from '../helpers/database.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { cuttingProxy } from '../helpers/cutting-proxy.js';

const serverUrl = process.env.SVC_DATABASE_URL;
if (!serverUrl) t.plan(0, 'skip: needs a real Postgres (SVC_DATABASE_URL); runs in the Postgres pass of .ci/run');
else await main(serverUrl);

async function main(serverUrl: string) {
  const database = await createTestDatabase(serverUrl);
  t.teardown(() => database.drop());
  const proxy = await cuttingProxy(new URL(database.url), 'INSERT INTO messages (');
  t.teardown(() => proxy.close());
  const proxied = new URL(database.url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);

  const { sink, svc } = await deliveryWorld(t, { env: { SVC_DATABASE_URL: proxied.toString() } });
  const s = await sender(svc);
  const countRows = async (subject: string) =>
    (
      await svc.running.storage.db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages WHERE subject = $1', [
        subject,
      ])
    )[0]!.n;
  const atSink = (subject: string) => sink.messages.filter((m) => m.raw.includes(`Subject: ${subject}`)).length;

  t.test('with an idempotencyKey: the answer lost, the service finds its commit, one delivery', async (t) => {
    const body = {
      from: `ada@${s.domain}`,
      to: 'r@dest.test',
      subject: 'Committed once',
      text: 'x',
      idempotencyKey: 'commit-reply-lost-1',
    };
    proxy.state.armed = true;
    // No retries by the SDK: what answers is the service's own try again, a send at a time, of a batch whose
    // statement failed (docs/decisions.md #91, #93), which finds the key taken by this very message.
    const first = await s.key.v1.services.sendEmail(body, { maxRetries: 0 });
    t.equal(proxy.state.cuts, 1, 'the answer to the committed statement was cut');
    t.equal(first.status, 'queued', 'the service found its commit and answered it');
    t.equal(await countRows(body.subject), 1, 'Postgres kept the row');
    const again = await s.key.v1.services.sendEmail(body);
    t.equal(again.providerMessageId, first.providerMessageId, "the client's retry replays the same message");
    t.equal(await countRows(body.subject), 1, 'the retry made no second row');
    await waitFor(() => atSink(body.subject) >= 1, { what: 'the delivery' });
    await waitFor(
      async () =>
        (
          await svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE subject = $1', [
            body.subject,
          ])
        )[0]?.status === 'delivered',
      { what: 'delivered' },
    );
    t.equal(atSink(body.subject), 1, 'delivered exactly once');
  });

  t.test('without one: the answer lost, the message still delivered, once', async (t) => {
    const body = { from: `ada@${s.domain}`, to: 'r@dest.test', subject: 'Committed, answer lost', text: 'x' };
    const cutsBefore = proxy.state.cuts;
    proxy.state.armed = true;
    const err = await s.key.v1.services.sendEmail(body).then(
      () => null,
      (e: unknown) => e,
    );
    t.equal(proxy.state.cuts, cutsBefore + 1, 'the answer to the accept statement was cut');
    t.ok(err instanceof SvcError && err.status >= 500, 'the client saw a failure');
    t.equal(await countRows(body.subject), 1, 'the row is there');
    await waitFor(() => atSink(body.subject) >= 1, { what: 'the delivery, its body kept in the spool' });
    t.equal(atSink(body.subject), 1, 'once');
  });
}
