// A slow or dead endpoint never delays other endpoints or other projects (issue 6 item 2): it holds
// at most `perEndpoint` requests in flight, each cut at the timeout and retried, while every other
// endpoint's deliveries go straight through.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

t.test('a hanging endpoint takes two slots and its timeouts; the others are delivered meanwhile', async (t) => {
  // A short timeout stands in for the 10 s one, so the test can also watch the attempts time out.
  const svc = await startTestService(t, {
    env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' },
    mta: { pollMs: 20 },
    webhooks: { pollMs: 20, timeoutMs: 6_000, perEndpoint: 2 },
  });
  const hook = await startWebhookReceiver(t, (h) => (h.path === '/slow' ? 'hang' : 200));
  const setUp = async (s: Sender, paths: string[]) => {
    for (const path of paths) {
      const w = await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url(path) });
      hook.secrets[path] = w.secret;
    }
    await s.owner.client.v1.suppressions.create({ project_id: s.projectId, address: 'held@dest.test' });
  };
  const a = await sender(svc);
  const b = await sender(svc);
  await setUp(a, ['/slow', '/fast']);
  await setUp(b, ['/other-project']);
  const send = (s: Sender) =>
    s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'held@dest.test', subject: 'x', text: 'x' });

  for (let i = 0; i < 5; i++) await send(a);
  await send(b);
  await hook.waitFor(5, '/fast');
  await hook.waitFor(1, '/other-project');
  const slow = hook.on('/slow');
  t.equal(slow.length, 2, 'the hanging endpoint holds two requests, no more');
  t.equal(hook.open.get('/slow'), 2, 'both still unanswered while every other delivery is done');
  const attempts = await svc.running.storage.db.query<{ status: string }>(
    `SELECT d.status FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
     WHERE w.url LIKE '%/slow'`,
  );
  t.same(
    attempts.map((r) => r.status),
    ['pending', 'pending', 'pending', 'pending', 'pending'],
    'no attempt of the slow endpoint ended yet',
  );

  // Each hanging request ends at the timeout as a failed attempt; the next ones take the freed slots.
  const timedOut = await waitFor(
    async () => {
      const rows = await svc.running.storage.db.query<{
        status: string;
        status_code: number | null;
        error: string | null;
        latency_ms: number;
      }>(
        `SELECT d.status, d.status_code, d.error, d.latency_ms
         FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
         WHERE w.url LIKE '%/slow' AND d.status = 'retrying'`,
      );
      return rows.length >= 2 ? rows : null;
    },
    { timeoutMs: 20_000, what: 'the slow attempts timed out' },
  );
  for (const r of timedOut) t.match(r, { status: 'retrying', status_code: null, error: 'no answer within 6 s' });
  t.ok(
    timedOut.every((r) => r.latency_ms >= 5_900),
    'latency is the time waited',
  );
  await waitFor(() => hook.on('/slow').length >= 4, { what: 'the next two slow attempts' });
  t.ok((hook.maxOpen.get('/slow') ?? 0) <= 2, `never more than two in flight to it (${hook.maxOpen.get('/slow')})`);
  hook.release();
});
