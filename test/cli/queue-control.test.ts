// Issue 17 item 9 end to end: `svc queue summary`, `hold`/`release` and `bounce` run as operators run them
// (`node --import ./bin/resolve-sources.ts bin/svc.ts queue ...` in a child process) on the data directory of a
// running service whose MTA delivers through a loopback DNS zone to an SMTP sink that answers 451 for slow.test and for
// later@ (deferred), 250 otherwise; a webhook receiver records the `failed` notifications.
import t, { type Test } from 'tap';
import type { TestService } from '../helpers/service.js';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { runSvc, type Run } from '../helpers/child.js';
import { HELD_RECHECK_MS, type SpoolEntry } from '../../storage/lmdb/spool.js';

function svcQueue(dataDir: string, ...args: string[]): Promise<Run> {
  return svcQueueWith({}, dataDir, ...args);
}

function svcQueueWith(extra: Record<string, string>, dataDir: string, ...args: string[]): Promise<Run> {
  return runSvc(['queue', ...args], { ...extra, SVC_DATA_DIR: dataDir });
}

interface World {
  svc: TestService;
  sink: SmtpSink;
  s: Sender;
  hook: WebhookReceiver;
}

async function world(t: Test): Promise<World> {
  const { zone, sink, svc } = await deliveryWorld(t, {
    sink: {
      answer: (rcpt) =>
        rcpt.endsWith('@slow.test') || rcpt.startsWith('later@')
          ? { code: 451, message: '4.3.0 Try again later' }
          : null,
    },
    env: { SVC_RETRY_DELAYS: '1h', SVC_ALLOW_PRIVATE_WEBHOOKS: '1' },
    webhooks: { pollMs: 20 },
  });
  for (const d of ['ok.test', 'slow.test', 'other.test']) zone.mx(d, 10, `mx.${d}`).a(`mx.${d}`, '127.0.0.1');
  const s = await sender(svc);
  const hook = await startWebhookReceiver(t);
  const ep = await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: hook.url('/failed'),
    events: ['failed'],
  });
  hook.secrets = { '/failed': ep.secret };
  return { svc, sink, s, hook };
}

const lines = (s: string) => s.split('\n').filter((l) => l !== '');

/** A spool entry as another process left it: a fresh read snapshot of the service's environment. */
function spooled(w: World, id: string): SpoolEntry | undefined {
  w.svc.running.storage.lmdb.root.resetReadTxn();
  return w.svc.running.storage.spool.get(id);
}

const statusOf = async (w: World, id: string) =>
  (await w.svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
    ?.status;
const waitStatus = (w: World, id: string, status: string) =>
  waitFor(async () => (await statusOf(w, id)) === status, { timeoutMs: 20_000, what: `message ${id} ${status}` });
const lastEvent = async (w: World, id: string) =>
  (await w.s.key.v1.messages.events({ id })).events.at(-1) as { type: string; detail: Record<string, unknown> };
const sentTo = (w: World, rcpt: string) =>
  w.sink.messages.filter((m) => m.rcptTo.some((r) => r.toLowerCase().endsWith(rcpt))).length;

t.test('summary, hold (through a restart), release, bounce by id and by domain', async (t) => {
  const w = await world(t);
  const { svc } = w;
  const q = (...args: string[]) => svcQueue(svc.dataDir, ...args);

  const held = await q('hold', '--domain', 'OK.test.');
  t.equal(held.code, 0, held.stderr);
  t.match(held.out, /^ok\.test: held at \S+; its messages stay queued and are not attempted until svc queue release/);

  const send = async (to: string | string[]) =>
    (await w.s.key.v1.services.sendEmail({ from: `ada@${w.s.domain}`, to, subject: 'x', text: 'x' })).providerMessageId;
  const a1 = await send('a@slow.test');
  const a2 = await send('b@slow.test');
  const b1 = await send('later@other.test');
  const h1 = await send('h@ok.test');
  const mixed = await send(['m@slow.test', 'n@ok.test']);
  for (const id of [a1, a2, b1]) await waitStatus(w, id, 'deferred');
  await waitFor(() => spooled(w, h1)?.heldMs !== undefined, { what: 'h1 parked by the lease' });
  await waitFor(
    () => {
      const e = spooled(w, mixed);
      return e?.envelopes?.find((v) => v.domain === 'slow.test')?.attempts === 1;
    },
    { what: 'the slow.test envelope of the mixed message tried' },
  );
  const m = spooled(w, mixed)!;
  t.ok(
    m.envelopes?.find((v) => v.domain === 'ok.test')?.heldMs !== undefined,
    'its ok.test envelope is held (per envelope)',
  );
  const h = spooled(w, h1)!;
  t.ok(h.nextAttemptMs > Date.now() + HELD_RECHECK_MS / 2, 'the held message is parked, not due');
  t.equal(h.attempts, 0, 'and never tried');
  t.equal(sentTo(w, '@ok.test'), 0, 'nothing reached the held domain');

  await t.test('summary: per destination and sender domain, deferred, held, oldest', async (t) => {
    const [json, text, list, sourced] = await Promise.all([
      q('summary', '--json'),
      q('summary'),
      q('list'),
      svcQueueWith({ SVC_SOURCE_ADDRESSES: `${w.s.domain}=192.0.2.11` }, svc.dataDir, 'summary', '--json'),
    ]);
    t.equal(json.code, 0, json.stderr);
    const s = JSON.parse(json.out) as Record<string, unknown> & {
      byDomain: Record<string, unknown>[];
      bySender: Record<string, unknown>[];
    };
    t.match(s, { total: 5, deferred: 4, held: 2, cancelled: 0, domains: 3, senders: 1 });
    t.match(s.heldDomains, [{ domain: 'ok.test', since: /Z$/ }]);
    t.same(
      s.byDomain.map((r) => [r.domain, r.messages, r.deferred, r.held]),
      [
        ['slow.test', 3, 3, 0],
        ['ok.test', 2, 0, 2],
        ['other.test', 1, 1, 0],
      ],
      'a message to two domains counts once in each',
    );
    for (const r of s.byDomain) t.ok(typeof r.oldestAgeMs === 'number' && r.oldestAgeMs < 120_000, 'oldestAgeMs');
    t.match(s.bySender, [{ messages: 5, deferred: 4, held: 2 }]);
    t.match(String(s.bySender[0]?.senderDomain), new RegExp(`${w.s.domain.replace(/\./g, '\\.')}$`));

    t.notOk('bySource' in s, 'no source address table without SVC_SOURCE_ADDRESSES');
    t.equal(sourced.code, 0, sourced.stderr);
    t.match(
      (JSON.parse(sourced.out) as { bySource: unknown }).bySource,
      [{ sourceAddress: '192.0.2.11', messages: 5, deferred: 4, held: 2 }],
      'by the local address deliveries leave from (the sending domain of the return path)',
    );

    t.equal(text.code, 0, text.stderr);
    const rows = lines(text.out);
    t.match(rows[0], /^DOMAIN\s+MESSAGES\s+DEFERRED\s+HELD\s+OLDEST$/);
    t.match(rows[1], /^slow\.test\s+3\s+3\s+0\s+\d+s$/);
    t.match(rows[2], /^ok\.test\s+2\s+0\s+2\s+\d+s$/);
    t.match(rows[3], /^other\.test\s+1\s+1\s+0\s+\d+s$/);
    t.match(rows[4], /^SENDER DOMAIN\s+MESSAGES/);
    t.match(rows.at(-1), /^5 queued, 4 deferred, 2 held, 0 cancelled; oldest \d+s; held domains: ok\.test$/);
    t.match(
      lines(list.out).find((l) => l.startsWith(`${h1} `)),
      /\bheld$/,
      'list shows the state',
    );
  });

  await t.test('bounce by domain and by id: failed with the reason, webhooks notified', async (t) => {
    const byDomain = await q('bounce', '--domain', 'slow.test');
    t.equal(byDomain.code, 0, byDomain.stderr);
    t.match(byDomain.out, new RegExp(`^${mixed}: left queued, also to ok\\.test`, 'm'));
    t.match(lines(byDomain.out).at(-1), /^2 messages for slow\.test bounced; .*1 also to other domains left queued$/);
    const byId = await q('bounce', b1);
    t.equal(byId.code, 0, byId.stderr);
    t.match(byId.out, new RegExp(`^${b1}: bounced at \\S+; the MTA records it failed \\("bounced by operator"\\)`));
    for (const id of [a1, a2, b1]) {
      await waitStatus(w, id, 'failed');
      t.match(
        await lastEvent(w, id),
        { type: 'failed', detail: { reason: 'bounced by operator' } },
        `${id}: the reason`,
      );
      await waitFor(() => spooled(w, id) === undefined, { what: `${id} gone from the spool` });
    }
    const hooks = await w.hook.waitFor(3, '/failed');
    t.same(hooks.map((x) => x.json.data.messageId).sort(), [a1, a2, b1].sort(), 'a webhook per bounced message');
    for (const x of hooks) {
      t.ok(x.signatureValid, 'signed');
      t.match(x.json, { type: 'failed', data: { detail: { reason: 'bounced by operator' } } });
    }
    const recorded = await svc.running.storage.db.query<{ status: string }>(
      `SELECT status FROM webhook_deliveries WHERE project_id = $1 AND event_type = 'failed'`,
      [w.s.projectId],
    );
    t.equal(recorded.length, 3, 'each delivery recorded');
    t.ok(spooled(w, mixed), 'the message also to ok.test is still queued');
    t.equal(await statusOf(w, h1), 'queued', 'the held one is untouched');
  });

  await t.test('the hold survives a restart; retry does not bypass it; release delivers', async (t) => {
    await svc.restart();
    const list = await q('hold');
    t.equal(list.code, 0, list.stderr);
    t.match(lines(list.out), [/^DOMAIN\s+HELD SINCE$/, /^ok\.test\s+\S+Z$/]);

    // Made due now by hand: the restarted MTA's lease reads the durable held set and parks it again.
    const retried = await q('retry', h1);
    t.equal(retried.code, 0, retried.stderr);
    await waitFor(() => (spooled(w, h1)?.nextAttemptMs ?? 0) > Date.now() + HELD_RECHECK_MS / 2, {
      what: 'h1 parked again after the restart',
    });
    t.equal(sentTo(w, '@ok.test'), 0, 'still nothing sent to ok.test');
    t.equal(await statusOf(w, h1), 'queued');

    const released = await q('release', '--domain', 'ok.test');
    t.equal(released.code, 0, released.stderr);
    t.match(released.out, /^ok\.test: released; 2 messages due now \(/);
    await waitStatus(w, h1, 'delivered');
    await waitFor(() => sentTo(w, 'n@ok.test') === 1, { what: 'the mixed message reached n@ok.test' });
    t.equal(sentTo(w, 'h@ok.test'), 1, 'delivered once');
    await waitFor(() => spooled(w, mixed)?.envelopes?.length === 1, { what: 'only the slow.test envelope left' });
    t.match(spooled(w, mixed)?.envelopes, [{ domain: 'slow.test' }]);

    const again = await q('release', '--domain', 'ok.test');
    t.equal(again.code, 1, 'releasing a domain not held fails');
    t.match(again.stderr, /^svc queue: "ok\.test" is not held/);
    const none = await q('hold');
    t.equal(none.out.trim(), 'no domain held');
  });
});

t.test('usage errors of the new subcommands: exit 2, one line', async (t) => {
  const w = { dataDir: '/nonexistent-svc-queue-dir' };
  const cases: [string[], RegExp][] = [
    [['release'], /^svc queue release: release needs --domain D$/],
    [['hold', 'x.test'], /^svc queue hold: hold takes --domain D, not an argument$/],
    [['bounce'], /^svc queue bounce: bounce \(or --domain\) takes exactly one message id$/],
    [['bounce', 'id1', '--domain', 'x.test'], /a message id or --domain, not both/],
    [['summary', 'x'], /^svc queue summary: summary takes no argument$/],
    [['hold', '--domain', ' '], /--domain needs a domain name/],
  ];
  const runs = await Promise.all(cases.map(([args]) => svcQueue(w.dataDir, ...args)));
  for (const [i, [args, re]] of cases.entries()) {
    t.equal(runs[i]!.code, 2, `${args.join(' ')}: exit 2`);
    t.match(runs[i]!.stderr.trimEnd(), re);
    t.equal(lines(runs[i]!.stderr).length, 1);
  }
});
