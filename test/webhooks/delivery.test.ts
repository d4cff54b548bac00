// Issue 6 item 2, end to end: sendEmail → the MTA (loopback DNS zone, SMTP sink answering 250, 451
// or 550 per recipient) → message events → one webhook delivery per subscribed endpoint → a real
// HTTP receiver that checks every signature with its own Standard Webhooks implementation.
import t, { type Test } from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { TestService } from '../helpers/service.js';
import { startWebhookReceiver, type ReceivedHook } from '../helpers/webhook-receiver.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { fanOut } from '../../storage/pg/webhooks.js';

interface Attempt {
  endpoint_id: string;
  event_type: string;
  attempt: number;
  status: string;
  status_code: number | null;
  latency_ms: number | null;
  error: string | null;
  webhook_id: string;
}

async function world(t: Test, env: Record<string, string> = {}) {
  const w = await deliveryWorld(t, {
    env: { SVC_RETRY_DELAYS: '1h', SVC_ALLOW_PRIVATE_WEBHOOKS: '1', ...env },
    webhooks: { pollMs: 20 },
    sink: {
      answer: (rcpt) =>
        rcpt.startsWith('gone@')
          ? { code: 550, message: '5.1.1 <gone@dest.test>: Recipient address rejected: User unknown' }
          : rcpt.startsWith('later@')
            ? { code: 451, message: '4.3.0 Try again later' }
            : null,
    },
  });
  return { ...w, s: await sender(w.svc) };
}

const attemptsOf = (svc: TestService, projectId: string) =>
  svc.running.storage.db.query<Attempt>(
    `SELECT endpoint_id, event_type, attempt, status, status_code, latency_ms, error, webhook_id FROM webhook_deliveries
     WHERE project_id = $1 ORDER BY created_at, attempt`,
    [projectId],
  );

async function suppress(s: Sender, address: string) {
  await s.owner.client.v1.suppressions.create({ project_id: s.projectId, address });
}

t.test('delivered, bounced, deferred and suppressed each reach every subscribed endpoint, signed', async (t) => {
  const { svc, s } = await world(t);
  const hook = await startWebhookReceiver(t);
  const all = await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url('/all') });
  const bounces = await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: hook.url('/bounces'),
    events: ['bounced', 'failed'],
  });
  hook.secrets = { '/all': all.secret, '/bounces': bounces.secret };
  await suppress(s, 'blocked@dest.test');

  const send = async (to: string) =>
    (await s.key.v1.services.sendEmail({ from: `Ada <ada@${s.domain}>`, to, subject: `to ${to}`, text: 'x' }))
      .providerMessageId;
  const ids: Record<string, string> = {
    delivered: await send('ok@dest.test'),
    bounced: await send('gone@dest.test'),
    deferred: await send('later@dest.test'),
    suppressed: await send('blocked@dest.test'),
  };
  const got = await hook.waitFor(4, '/all');
  const bounced = await hook.waitFor(1, '/bounces');

  t.same(
    got.map((h) => h.json.type).sort(),
    ['bounced', 'deferred', 'delivered', 'suppressed'],
    'one request per event of a webhook kind; none for queued',
  );
  t.same(
    bounced.map((h) => h.json.type),
    ['bounced'],
    'the filtered endpoint gets only its kinds',
  );
  for (const h of [...got, ...bounced]) {
    t.ok(
      h.signatureValid,
      `${h.path} ${h.json.type}: the signature verifies (Standard Webhooks, the receiver's own code)`,
    );
    t.match(h.headers['content-type'], /^application\/json/);
    t.match(h.id, /^msg_[0-9a-f]{32}$/);
    t.ok(Math.abs(h.timestamp - svc.clock.now() / 1000) < 60, 'webhook-timestamp: Unix seconds of the service clock');
  }
  const byType = Object.fromEntries(got.map((h) => [h.json.type, h])) as Record<string, ReceivedHook>;
  t.match(byType.delivered!.json, {
    type: 'delivered',
    createdAt: /Z$/,
    data: {
      messageId: ids.delivered,
      projectId: s.projectId,
      to: 'ok@dest.test',
      from: `Ada <ada@${s.domain}>`,
      subject: 'to ok@dest.test',
      detail: { attempt: 1, reply: /^250/ },
    },
  });
  t.same(Object.keys(byType.delivered!.json).sort(), ['createdAt', 'data', 'type'], 'the body of docs/decisions.md #5');
  t.same(Object.keys(byType.delivered!.json.data).sort(), [
    'detail',
    'from',
    'messageId',
    'metadata',
    'projectId',
    'subject',
    'tags',
    'to',
  ]);
  // docs/api.md §4.11: tags and metadata in every payload, [] and {} for a message sent without.
  t.same([byType.delivered!.json.data.tags, byType.delivered!.json.data.metadata], [[], {}]);
  t.match(byType.bounced!.json.data, {
    messageId: ids.bounced,
    detail: { class: 'unknown_user', reply: /550 5\.1\.1/ },
  });
  t.match(byType.deferred!.json.data, { messageId: ids.deferred, detail: { class: 'temporary', nextAttemptAt: /Z$/ } });
  t.match(byType.suppressed!.json.data, {
    messageId: ids.suppressed,
    to: 'blocked@dest.test',
    detail: { reason: 'manual' },
  });
  // The event's own time, as /v1/messages/events shows it.
  const events = (await s.key.v1.messages.events({ id: ids.delivered! })).events;
  t.equal(byType.delivered!.json.createdAt, events.find((e) => e.type === 'delivered')?.createdAt);
  t.not(bounced[0]!.id, byType.bounced!.id, 'each endpoint has its own webhook-id for the same event');

  const rows = await waitFor(
    async () => {
      const r = await attemptsOf(svc, s.projectId);
      return r.length === 5 && r.every((x) => x.status === 'succeeded') ? r : null;
    },
    { what: 'five succeeded attempts' },
  );
  for (const r of rows)
    t.match(
      r,
      { attempt: 1, status: 'succeeded', status_code: 200, error: null, latency_ms: Number },
      `${r.event_type}: recorded`,
    );
  t.same(
    new Set(rows.map((r) => r.webhook_id)),
    new Set([...got, ...bounced].map((h) => h.id)),
    'rows carry the webhook-id sent',
  );

  // The read-only table through the data layer, newest first, scoped to the project.
  const listed = (await s.owner.client.v1.webhook_deliveries.list({ project_id: s.projectId })).rows;
  t.equal(listed.length, 5);
  t.match(listed[0], {
    project_id: s.projectId,
    status: 'succeeded',
    status_code: 200,
    next_attempt_at: null,
    attempted_at: /Z$/,
  });
  t.same(
    (await s.owner.client.v1.webhook_deliveries.list({ endpoint_id: bounces.id })).rows.map((r) => r.event_type),
    ['bounced'],
  );
  t.strictSame((await s.owner.client.v1.webhook_deliveries.get({ id: listed[0]!.id })).row, listed[0]);
  const other = await svc.signup();
  t.same((await other.client.v1.webhook_deliveries.list()).rows, [], 'another customer sees none');
});

t.test('a deleted endpoint gets nothing more, and a soft-deleted project fans out to none', async (t) => {
  const { svc, s } = await world(t);
  const hook = await startWebhookReceiver(t);
  const w = await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url() });
  hook.secret = w.secret;
  await suppress(s, 'x@dest.test');
  await s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'x@dest.test', subject: 's', text: 'x' });
  await hook.waitFor(1);
  await s.owner.client.console.projects.webhooks.delete({ id: s.projectId, webhookId: w.id });
  await s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'x@dest.test', subject: 's', text: 'x' });
  t.same(await attemptsOf(svc, s.projectId), [], 'its attempts went with it, and none was added');
  t.equal(hook.hooks.length, 1);

  // Mail of a deleted project may still be delivered (it was queued before); its webhooks are not called.
  await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url() });
  const [event] = await svc.running.storage.db.query<{ id: string; created_at: Date }>(
    `SELECT id, created_at FROM message_events WHERE project_id = $1 AND type = 'suppressed' LIMIT 1`,
    [s.projectId],
  );
  await s.owner.client.console.projects.delete({ id: s.projectId });
  await fanOut(svc.running.storage.db, [
    { id: event!.id, projectId: s.projectId, type: 'delivered', at: event!.created_at },
  ]);
  t.same(await attemptsOf(svc, s.projectId), [], 'a soft-deleted project fans out to none');
});

t.test('the host is resolved at every delivery and the checked address is the one connected to', async (t) => {
  // Without SVC_ALLOW_PRIVATE_WEBHOOKS a name is accepted at registration, then refused at delivery
  // when it resolves to loopback (DNS rebinding): nothing reaches the receiver.
  const { svc, zone, s } = await world(t, { SVC_ALLOW_PRIVATE_WEBHOOKS: '0' });
  const hook = await startWebhookReceiver(t);
  zone.a('hooks.rebind.test', '127.0.0.1');
  const w = await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: `http://hooks.rebind.test:${hook.port}/h`,
  });
  hook.secret = w.secret;
  await suppress(s, 'r@dest.test');
  await s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to: 'r@dest.test', subject: 's', text: 'x' });
  const [first] = await waitFor(
    async () => {
      const r = await attemptsOf(svc, s.projectId);
      return r[0]?.status === 'retrying' ? r : null;
    },
    { what: 'the refused attempt recorded' },
  );
  t.match(first, {
    status: 'retrying',
    status_code: null,
    error: /hooks\.rebind\.test resolves only to addresses webhooks may not reach: 127\.0\.0\.1 \(loopback\)/,
  });
  t.equal(hook.hooks.length, 0, 'no request reached the loopback receiver');

  // With it, the name is looked up through SVC_DNS_SERVERS (the system resolver knows nothing of
  // hooks.alias.test), and the request carries the name in Host.
  const open = await world(t);
  open.zone.a('hooks.alias.test', '127.0.0.1');
  const w2 = await open.s.owner.client.console.projects.webhooks.create({
    id: open.s.projectId,
    url: `http://hooks.alias.test:${hook.port}/alias`,
  });
  hook.secrets['/alias'] = w2.secret;
  await suppress(open.s, 'r@dest.test');
  await open.s.key.v1.services.sendEmail({ from: `ada@${open.s.domain}`, to: 'r@dest.test', subject: 's', text: 'x' });
  const [h] = await hook.waitFor(1, '/alias');
  t.equal(h!.headers.host, `hooks.alias.test:${hook.port}`);
  t.ok(h!.signatureValid);
  t.ok(open.zone.queriesFor('hooks.alias.test', 'A').length > 0, 'resolved through the zone');
});
