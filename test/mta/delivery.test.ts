// Issue 5 delivery, end to end through the real service: sendEmail → LMDB spool → MX resolution in a
// loopback DNS zone → a pooled SMTP connection with STARTTLS → an smtp-server sink answering 250, 4xx
// or 5xx per recipient; outcomes read back over the API.
import t, { type Test } from 'tap';
import { deliveryWorld, type DeliveryWorld } from '../helpers/delivery-world.js';
import { startTestService } from '../helpers/service.js';
import type { SinkOptions } from '../helpers/smtp-sink.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { verifyDkimAll } from '../helpers/dkim-verify.js';
import { UUID_V7 } from '../helpers/uuid-v7.js';
import { platformKeys } from '../../storage/platform-dkim.js';

interface World extends DeliveryWorld {
  s: Sender;
}

async function world(
  t: Test,
  env: Record<string, string> = {},
  sinkAnswer?: SinkOptions['answer'],
  sinkOpts: SinkOptions = {},
  senderDomain?: string,
): Promise<World> {
  const { svc, zone, sink } = await deliveryWorld(t, {
    env: { SVC_RETRY_DELAYS: '1m,5m', ...env },
    sink: { answer: sinkAnswer, ...sinkOpts },
  });
  const s = await sender(svc, { ed25519: true, domain: senderDomain });
  for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);
  return { svc, zone, sink, s };
}

/**
 * Issue 5: every delivered message is checked by an independent verifier, Debian's python3-dkim, against
 * the records the API told the customer to publish: both signatures (RSA and Ed25519) must pass.
 */
async function allSigned(t: Test, w: World): Promise<void> {
  const results = await verifyDkimAll(
    w.sink.messages.map((m) => m.raw),
    w.s.dkimTxt,
  );
  const bad = results.flatMap((sigs, i) => (sigs.length === 2 && sigs.every((x) => x.ok) ? [] : [{ i, sigs }]));
  t.same(bad, [], `python3-dkim: ${results.length} delivered messages, rsa-sha256 and ed25519-sha256 pass`);
}

// Waiting reads the database: polling the API would spend the key's rate limit (docs/decisions.md #7).
const statusOf = async (w: World, id: string) =>
  (await w.svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
    ?.status;
const eventsOf = async (w: World, id: string) =>
  (await w.s.key.v1.messages.events({ id })).events as {
    id: string;
    type: string;
    detail: Record<string, unknown> | null;
  }[];
/** Until the worker has finished a poll of the spool that began at `at` or later (on the service's clock). */
const polledSince = (w: World, at: number) =>
  waitFor(() => (w.svc.running.mta?.worker.polledAt() ?? -Infinity) >= at, { what: `a spool poll at ${at}` });
const waitStatus = (w: World, id: string, status: string) =>
  waitFor(async () => (await statusOf(w, id)) === status, { timeoutMs: 20_000, what: `message ${id} ${status}` });

t.test('delivered: STARTTLS, EHLO, VERP, two DKIM signatures, one reused connection, events', async (t) => {
  const w = await world(t);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await w.s.key.v1.services.sendEmail({
      from: `Ada <ada@${w.s.domain}>`,
      to: `bob${i}@Dest.TEST`,
      subject: `Hello ${i}`,
      text: `Hi ${i}`,
    });
    ids.push(r.providerMessageId);
  }
  const got = await w.sink.waitForMessages(5);
  for (const id of ids) await waitStatus(w, id, 'delivered');
  t.equal(got.length, 5, 'each message once');
  t.ok(
    got.every((m) => m.secure),
    'opportunistic STARTTLS taken',
  );
  t.ok(
    got.every((m) => m.helo === 'mta.test'),
    'EHLO SVC_HOSTNAME',
  );
  t.ok(
    got.every((m) =>
      new RegExp(`^b-[0-9a-f]{32}-[0-9a-f]{12}@bounces\\.${w.s.domain.replace(/\./g, '\\.')}$`).test(m.mailFrom),
    ),
    'VERP return path',
  );
  t.same(
    got
      .map((m) => m.rcptTo)
      .flat()
      .sort(),
    ids.map((_, i) => `bob${i}@dest.test`).sort(),
  );
  // The connections of the first five stay open (idle) and carry the next ones: no new TCP or TLS. One at a
  // time, so that none finds every idle connection busy (how many the first five opened depends on timing).
  const opened = w.sink.connections;
  for (const i of [5, 6, 7]) {
    const { providerMessageId } = await w.s.key.v1.services.sendEmail({
      from: `ada@${w.s.domain}`,
      to: `bob${i}@dest.test`,
      subject: 'again',
      text: 'x',
    });
    await waitStatus(w, providerMessageId, 'delivered');
  }
  await w.sink.waitForMessages(8);
  t.equal(w.sink.connections, opened, `idle connections reused (${opened} opened for 8 messages)`);

  const events = await eventsOf(w, ids[0]!);
  t.same(
    events.map((e) => e.type),
    ['queued', 'delivered'],
  );
  t.match(events[1]!.detail, { attempt: 1, host: 'mx.dest.test', tls: true, reply: /^250/ });
  // docs/decisions.md #73: the MTA's event ids are UUIDv7 too, later than the queued event's.
  const [queued, delivered] = events;
  t.match(delivered!.id, UUID_V7);
  t.ok(delivered!.id > queued!.id, 'the delivered event sorts after the queued one');
  const { row } = await w.s.key.v1.messages.get({ id: ids[0]! });
  t.equal(row.status, 'delivered');
  t.equal(row.attempts, 1);
  t.equal(w.svc.running.storage.spool.count(), 0, 'spool empty');
  const [cap] = await w.svc.running.storage.db.query<{ sent_count: string }>(
    'SELECT sent_count FROM outbound_capabilities WHERE id = $1',
    [w.s.outboundId],
  );
  t.equal(Number(cap!.sent_count), 8, 'sent_count counts deliveries');
  await allSigned(t, w);
});

t.test('one-click unsubscribe (RFC 8058): both headers, both signed', async (t) => {
  const w = await world(t);
  const url = 'https://example.test/unsubscribe?u=42&list=news';
  const r = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'u@dest.test',
    subject: 'News',
    text: 'x',
    unsubscribeUrl: url,
  });
  const [m] = await w.sink.waitForMessages(1);
  await waitStatus(w, r.providerMessageId, 'delivered');
  const head = m!.raw.toString('latin1').split('\r\n\r\n')[0]!;
  t.match(head, new RegExp(`^List-Unsubscribe: <${url.replace(/[?.]/g, '\\$&')}>\r$`, 'm'));
  t.match(head, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
  for (const h of head.replace(/\r\n[ \t]+/g, ' ').match(/^DKIM-Signature:.*$/gm) ?? []) {
    t.match(h, /\bh=[^;]*List-Unsubscribe-Post[^;]*;/i, 'h= covers List-Unsubscribe-Post');
    t.match(h, /\bh=[^;]*List-Unsubscribe[:;]/i, 'h= covers List-Unsubscribe');
  }
  await allSigned(t, w);
  // A non-ASCII URL goes out in its ASCII form, never as an encoded word that no receiver reads as a URL.
  // Long, it is still one line: never folded (RFC 8058 §3.1 receivers match the field as written).
  const token = 'é'.repeat(60);
  const r2 = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'u2@dest.test',
    subject: 'Nouvelles',
    text: 'x',
    unsubscribeUrl: `https://exämple.test/désabonner/${token}?u=é`,
  });
  await waitStatus(w, r2.providerMessageId, 'delivered');
  const m2 = (await w.sink.waitForMessages(2)).find((x) => x.raw.includes('u2@dest.test'));
  const head2 = m2!.raw.toString('latin1').split('\r\n\r\n')[0]!;
  const ascii = `https://xn--exmple-cua.test/d%C3%A9sabonner/${'%C3%A9'.repeat(60)}?u=%C3%A9`;
  t.ok(head2.split('\r\n').includes(`List-Unsubscribe: <${ascii}>`), 'the ASCII form, on one unfolded line');
  t.ok(head2.split('\r\n').includes('List-Unsubscribe-Post: List-Unsubscribe=One-Click'));
  t.notMatch(head2, /=\?utf-8\?/i, 'no encoded word');
  await allSigned(t, w);
  // A URL whose ASCII form cannot fit one header line is refused, naming the field.
  const long = await w.s.key.v1.services
    .sendEmail({
      from: `ada@${w.s.domain}`,
      to: 'u@dest.test',
      subject: 'News',
      text: 'x',
      unsubscribeUrl: `https://example.test/${'é'.repeat(200)}`,
    })
    .catch((err: { status: number; details?: unknown }) => err);
  t.equal((long as { status: number }).status, 400, 'an ASCII form over 978 characters');
  t.match((long as { details?: unknown }).details, [{ field: 'body.unsubscribeUrl' }]);
  for (const bad of [
    'http://example.test/u',
    'https://example.test/a b',
    'mailto:u@example.test',
    'https://example.test/<x>',
  ]) {
    const e = await w.s.key.v1.services
      .sendEmail({ from: `ada@${w.s.domain}`, to: 'u@dest.test', subject: 'News', text: 'x', unsubscribeUrl: bad })
      .catch((err: { status: number }) => err);
    t.equal((e as { status: number }).status, 400, `refused: ${bad}`);
  }
});

t.test('at most 10 connections at once to one MX host (the default), however many messages are due', async (t) => {
  const w = await world(t);
  const ids = await Promise.all(
    Array.from(
      { length: 60 },
      async (_, i) =>
        (
          await w.s.key.v1.services.sendEmail({
            from: `ada@${w.s.domain}`,
            to: `many${i}@dest.test`,
            subject: 'x',
            text: 'x',
          })
        ).providerMessageId,
    ),
  );
  await w.sink.waitForMessages(60);
  for (const id of ids) await waitStatus(w, id, 'delivered');
  t.ok(w.sink.maxOpen <= 10, `at most 10 open at once (saw ${w.sink.maxOpen})`);
  t.ok(w.sink.connections <= 16, `connections carried several messages each (${w.sink.connections} for 60)`);
  await allSigned(t, w);
});

t.test('5xx: bounced with the reply kept, a hard_bounce suppression, the next send suppressed', async (t) => {
  const w = await world(t, {}, (rcpt) =>
    rcpt.startsWith('gone@')
      ? { code: 550, message: '5.1.1 <gone@dest.test>: Recipient address rejected: User unknown' }
      : null,
  );
  const r = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'gone@dest.test',
    subject: 'x',
    text: 'x',
  });
  await waitStatus(w, r.providerMessageId, 'bounced');
  const events = await eventsOf(w, r.providerMessageId);
  t.same(
    events.map((e) => e.type),
    ['queued', 'bounced'],
  );
  t.match(events[1]!.detail, {
    class: 'unknown_user',
    reply: /550 5\.1\.1 <gone@dest\.test>: Recipient address rejected: User unknown/,
  });
  const rows = await w.svc.running.storage.db.query<{ reason: string }>(
    'SELECT reason FROM suppressions WHERE project_id = $1 AND address = $2',
    [w.s.projectId, 'gone@dest.test'],
  );
  t.same(
    rows.map((x) => x.reason),
    ['hard_bounce'],
  );
  const again = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'gone@dest.test',
    subject: 'x',
    text: 'x',
  });
  t.equal(again.status, 'suppressed');
  t.equal(w.sink.messages.length, 0);

  // A refusal of the content, not the address: bounced, but the address is not suppressed.
  w.sink.answer = () => ({ code: 550, message: '5.7.1 Message rejected as spam by Content Filtering' });
  const spam = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'fine@dest.test',
    subject: 'x',
    text: 'x',
  });
  await waitStatus(w, spam.providerMessageId, 'bounced');
  const none = await w.svc.running.storage.db.query(
    'SELECT 1 FROM suppressions WHERE project_id = $1 AND address = $2',
    [w.s.projectId, 'fine@dest.test'],
  );
  t.equal(none.length, 0, 'spam refusal suppresses nothing');
});

t.test(
  '4xx: deferred on the retry schedule (injected clock), then delivered; exhausted: failed + soft_bounce_max',
  async (t) => {
    let mood: 'busy' | 'ok' = 'busy';
    const w = await world(t, {}, () => (mood === 'busy' ? { code: 451, message: '4.3.0 Try again later' } : null));
    const r = await w.s.key.v1.services.sendEmail({
      from: `ada@${w.s.domain}`,
      to: 'later@dest.test',
      subject: 'x',
      text: 'x',
    });
    await waitStatus(w, r.providerMessageId, 'deferred');
    const e1 = await eventsOf(w, r.providerMessageId);
    t.match(e1.at(-1)!.detail, { attempt: 1, class: 'temporary', reply: /^451 4\.3\.0 Try again later/ });
    // Postgres is written first, then the spool: wait for the entry's new time.
    const entry = await waitFor(
      () => {
        const e = w.svc.running.storage.spool.get(r.providerMessageId);
        return e?.attempts === 1 ? e : null;
      },
      { what: 'the spool entry rescheduled' },
    );
    const wait = entry.nextAttemptMs - w.svc.clock.now();
    t.ok(wait > 50_000 && wait <= 60_000, `due again after the first delay, 1m (in ${wait} ms)`);
    mood = 'ok';
    w.svc.clock.advance(59_000);
    await polledSince(w, w.svc.clock.now());
    t.equal(w.svc.running.storage.spool.get(r.providerMessageId)?.nextAttemptMs, entry.nextAttemptMs, 'not leased');
    t.equal(w.sink.messages.length, 0, 'not before its time');
    w.svc.clock.advance(1_000);
    await waitStatus(w, r.providerMessageId, 'delivered');
    t.same(
      (await eventsOf(w, r.providerMessageId)).map((e) => e.type),
      ['queued', 'deferred', 'delivered'],
    );
    t.equal((await w.s.key.v1.messages.get({ id: r.providerMessageId })).row.attempts, 2);

    mood = 'busy';
    const g = await w.s.key.v1.services.sendEmail({
      from: `ada@${w.s.domain}`,
      to: 'never@dest.test',
      subject: 'x',
      text: 'x',
    });
    await waitStatus(w, g.providerMessageId, 'deferred');
    w.svc.clock.advance(60_000);
    await waitFor(
      async () =>
        (
          await w.svc.running.storage.db.query('SELECT 1 FROM message_events WHERE message_id = $1', [
            g.providerMessageId,
          ])
        ).length === 3,
      { what: 'second attempt' },
    );
    w.svc.clock.advance(5 * 60_000);
    await waitStatus(w, g.providerMessageId, 'failed');
    const ev = await eventsOf(w, g.providerMessageId);
    t.same(
      ev.map((e) => e.type),
      ['queued', 'deferred', 'deferred', 'failed'],
      'three attempts for two delays',
    );
    t.match(ev.at(-1)!.detail, { gaveUpAfter: 3 });
    const rows = await w.svc.running.storage.db.query<{ reason: string }>(
      'SELECT reason FROM suppressions WHERE project_id = $1 AND address = $2',
      [w.s.projectId, 'never@dest.test'],
    );
    t.same(
      rows.map((x) => x.reason),
      ['soft_bounce_max'],
    );
    t.ok(
      await waitFor(() => w.svc.running.storage.spool.get(g.providerMessageId) === undefined, {
        what: 'gone from the spool',
      }),
    );
    await allSigned(t, w);
  },
);

t.test('svc queue delete (spool cancel) ends a waiting message as failed, never dialled again', async (t) => {
  const w = await world(t, {}, () => ({ code: 451, message: '4.3.0 Try again later' }));
  const r = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'x@dest.test',
    subject: 'x',
    text: 'x',
  });
  await waitStatus(w, r.providerMessageId, 'deferred');
  const { spool } = w.svc.running.storage;
  await waitFor(() => spool.get(r.providerMessageId)?.attempts === 1, { what: 'rescheduled' });
  const refusedBefore = w.sink.refused.length;
  t.ok(await spool.cancel(r.providerMessageId, w.svc.clock.now()));
  await waitStatus(w, r.providerMessageId, 'failed');
  t.match((await eventsOf(w, r.providerMessageId)).at(-1)!.detail, { reason: 'cancelled by operator' });
  t.ok(await waitFor(() => spool.get(r.providerMessageId) === undefined, { what: 'removed' }));
  t.equal(w.sink.refused.length, refusedBefore, 'no new attempt');
  const rows = await w.svc.running.storage.db.query('SELECT 1 FROM suppressions WHERE project_id = $1', [
    w.s.projectId,
  ]);
  t.equal(rows.length, 0, 'a cancellation suppresses nothing');
});

t.test("a message over the receiver's SIZE limit bounces (too_large) without suppressing the address", async (t) => {
  const w = await world(t, {}, undefined, { size: 2_000 });
  const r = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'big@dest.test',
    subject: 'x',
    text: 'x'.repeat(5_000),
  });
  await waitStatus(w, r.providerMessageId, 'bounced');
  t.match((await eventsOf(w, r.providerMessageId)).at(-1)!.detail, { class: 'too_large', reply: /^552 5\.3\.4/ });
  const rows = await w.svc.running.storage.db.query('SELECT 1 FROM suppressions WHERE project_id = $1', [
    w.s.projectId,
  ]);
  t.equal(rows.length, 0);
  const ok = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'big@dest.test',
    subject: 'x',
    text: 'small',
  });
  await waitStatus(w, ok.providerMessageId, 'delivered');
  await allSigned(t, w);
});

t.test('routing: null MX and NXDOMAIN bounce at once, no MX falls back to A, no listener defers', async (t) => {
  const w = await world(t);
  w.zone.mx('nullmx.test', 0, '.');
  w.zone.soa('test');
  w.zone.a('implicit.test', '127.0.0.1');
  const send = async (to: string) =>
    (await w.s.key.v1.services.sendEmail({ from: `ada@${w.s.domain}`, to, subject: 'x', text: 'x' })).providerMessageId;
  const nullMx = await send('a@nullmx.test');
  const nx = await send('a@nowhere.test');
  const implicit = await send('a@implicit.test');
  await waitStatus(w, nullMx, 'bounced');
  t.match((await eventsOf(w, nullMx)).at(-1)!.detail, { class: 'bad_domain', reply: /^556 5\.1\.10/ });
  await waitStatus(w, nx, 'bounced');
  t.match((await eventsOf(w, nx)).at(-1)!.detail, { class: 'bad_domain' });
  await waitStatus(w, implicit, 'delivered');
  t.same(
    w.sink.messages.map((m) => m.rcptTo[0]),
    ['a@implicit.test'],
  );

  // A service whose SVC_OUTBOUND_PORT has no listener: the connection is refused, the message waits.
  const closed = await startTestService(t, {
    env: { SVC_DNS_SERVERS: w.zone.hostPort, SVC_OUTBOUND_PORT: '1', SVC_RETRY_DELAYS: '1m' },
    mta: { pollMs: 20 },
  });
  const s2 = await sender(closed);
  const c = await s2.key.v1.services.sendEmail({
    from: `ada@${s2.domain}`,
    to: 'a@dest.test',
    subject: 'x',
    text: 'x',
  });
  await waitFor(async () => (await s2.key.v1.messages.get({ id: c.providerMessageId })).row.status === 'deferred', {
    everyMs: 200,
    what: 'deferred',
  });
  const ev = (await s2.key.v1.messages.events({ id: c.providerMessageId })).events as {
    detail: Record<string, unknown>;
  }[];
  t.match(ev.at(-1)!.detail, { class: 'connection', error: /ECONNREFUSED|connect/i });
  await allSigned(t, w);
});

t.test('SVC_SOURCE_ADDRESSES: deliveries leave from the configured local address', async (t) => {
  const w = await world(t, { SVC_SOURCE_ADDRESSES: '127.0.0.3' });
  const r = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'a@dest.test',
    subject: 'x',
    text: 'x',
  });
  const [m] = await w.sink.waitForMessages(1);
  t.equal(m!.remoteAddress.replace(/^::ffff:/, ''), '127.0.0.3');
  await waitStatus(w, r.providerMessageId, 'delivered');
  await allSigned(t, w);
});

t.test('the notification outbox is delivered too (password reset mail), signed with the platform keys', async (t) => {
  // The notify domain is also a verified customer sending domain here: the platform keys sign all the same (one
  // rule; docs/operations.md, "Platform mail").
  const notifyDomain = `notify-${Date.now()}.test`;
  const w = await world(t, { SVC_NOTIFY_FROM: `no-reply@${notifyDomain}` }, undefined, {}, notifyDomain);
  w.zone.mx('people.test', 10, 'mx.dest.test');
  const user = await w.svc.signup(`reset-${Date.now()}@people.test`);
  await w.svc.client().auth.password.forgot({ email: user.email });
  const [m] = await w.sink.waitForMessages(1);
  t.same(m!.rcptTo, [user.email]);
  t.match(m!.raw.toString(), /reset/i);
  await waitFor(
    async () => {
      const rows = await w.svc.running.storage.db.query<{ sent_at: Date | null }>(
        'SELECT sent_at FROM notification_outbox WHERE recipient = $1',
        [user.email],
      );
      return rows[0]?.sent_at;
    },
    { what: 'outbox row marked sent' },
  );
  const platform = Object.fromEntries(
    (await platformKeys(w.svc.running.storage.db, notifyDomain)).map((k) => [k.host, k.txt]),
  );
  const [sigs] = await verifyDkimAll([m!.raw], platform);
  t.same(
    sigs!.map((x) => [x.domain, x.selector, x.ok]),
    [
      [notifyDomain, 'svc1', true],
      [notifyDomain, 'svc1e', true],
    ],
    'python3-dkim: the platform signatures of the notify domain pass',
  );
});
