// Issue 16 item 5: scheduledAt. A scheduled message is queued and durable at once and leaves no earlier than its
// time (the injectable clock moves it, the worker's polls are waited on); POST /v1/messages/cancel ends one that
// has not started sending `failed` with { reason: "cancelled" }; /v1/messages/reschedule moves it; both are 409
// once it has started or is done.
import t, { type Test } from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { TestService } from '../helpers/service.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { sender, type Sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';
import { waitFor } from '../helpers/wait-for.js';

interface World {
  svc: TestService;
  sink: SmtpSink;
  s: Sender;
}

const MIN = 60_000;

async function world(t: Test): Promise<World> {
  const { sink, svc } = await deliveryWorld(t);
  return { svc, sink, s: await sender(svc) };
}

const iso = (ms: number) => new Date(ms).toISOString();
/** Resolves once the worker has polled the spool at or after the clock's now: what was due then was taken. */
const polled = (w: World) => {
  const at = w.svc.clock.now();
  return waitFor(() => (w.svc.running.mta?.worker.polledAt() ?? -Infinity) >= at, { what: `a spool poll at ${at}` });
};
const read = (w: World, id: string) => w.s.key.v1.messages.get({ id }).then((r) => r.row);
// The VERP return path names the message (docs/decisions.md #10); its headers do not (#53).
const arrived = (w: World, id: string) => w.sink.messages.some((m) => m.mailFrom.includes(id.replace(/-/g, '')));
const send = (w: World, extra: Record<string, unknown>) =>
  w.s.key.v1.services.sendEmail({ from: `ada@${w.s.domain}`, to: 'bob@dest.test', subject: 'Hi', text: 'x', ...extra });

t.test('scheduledAt: refusals, and a message that leaves no earlier than its time', async (t) => {
  const w = await world(t);
  const now = w.svc.clock.now();
  for (const [what, v] of [
    ['in the past', iso(now - MIN)],
    ['now', iso(now)],
    ['more than 30 days ahead', iso(now + 30 * 24 * 60 * MIN + MIN)],
    ['without an offset', iso(now + 60 * MIN).slice(0, 19)],
    ['not a date', 'tomorrow at nine'],
    ['February 30', '2099-02-30T09:00:00Z'],
    ['hour 24', '2099-01-01T24:00:00Z'],
  ] as const) {
    const e = await errorOf(send(w, { scheduledAt: v }));
    t.equal(e.status, 400, `${what}: 400`);
    t.same(
      (e.details as { field: string }[]).map((d) => d.field),
      ['body.scheduledAt'],
      `${what}: names body.scheduledAt`,
    );
  }
  t.same(await w.svc.running.storage.db.query('SELECT id FROM messages'), [], 'nothing queued');

  const at = now + 60 * MIN;
  // An offset other than Z names the same instant.
  const local = new Date(at + 2 * 60 * MIN).toISOString().replace('Z', '+02:00');
  const r = await send(w, { scheduledAt: local, to: ['bob@dest.test', 'carl@dest.test'] });
  t.equal(r.status, 'queued', 'accepted at once');
  let row = await read(w, r.providerMessageId);
  t.equal(row.scheduledAt, iso(at), 'the read shows scheduledAt');
  t.equal(row.status, 'queued');
  t.ok(w.svc.running.storage.spool.get(r.providerMessageId), 'durable in the spool');
  const plain = await send(w, {});
  t.equal((await read(w, plain.providerMessageId)).scheduledAt, null, 'null for a message sent at once');
  await waitFor(() => arrived(w, plain.providerMessageId), { what: 'the unscheduled one' });

  await polled(w);
  t.notOk(arrived(w, r.providerMessageId), 'not sent before its time');
  w.svc.clock.advance(59 * MIN);
  await polled(w);
  t.notOk(arrived(w, r.providerMessageId), 'a minute before: still not');
  w.svc.clock.advance(MIN);
  await waitFor(() => arrived(w, r.providerMessageId), { what: 'the scheduled one at its time' });
  await waitFor(async () => (await read(w, r.providerMessageId)).status === 'delivered', { what: 'delivered' });
  row = await read(w, r.providerMessageId);
  t.equal(row.scheduledAt, iso(at));

  const done = await errorOf(w.s.key.v1.messages.cancel({ id: r.providerMessageId }));
  t.same([done.status, done.code], [409, 'conflict'], 'cancelling a delivered message: 409');
  const moved = await errorOf(
    w.s.key.v1.messages.reschedule({ id: r.providerMessageId, scheduledAt: iso(w.svc.clock.now() + MIN) }),
  );
  t.equal(moved.status, 409, 'rescheduling a delivered message: 409');
});

t.test('cancel: failed with { reason: "cancelled" }, never sent; twice is 409', async (t) => {
  const w = await world(t);
  const now = w.svc.clock.now();
  const r = await send(w, { scheduledAt: iso(now + 10 * MIN), cc: 'carl@dest.test' });
  const res = await w.s.key.v1.messages.cancel({ id: r.providerMessageId });
  t.equal(res.row.status, 'failed', 'answers the failed row');
  t.same(
    res.row.recipients.map((x) => x.status),
    ['failed', 'failed'],
  );
  const ev = (await w.s.key.v1.messages.events({ id: r.providerMessageId })).events;
  t.same(
    ev.map((e) => [e.type, e.detail]),
    [
      ['queued', null],
      ['failed', { reason: 'cancelled' }],
    ],
  );
  t.equal(w.svc.running.storage.spool.get(r.providerMessageId), undefined, 'gone from the spool');
  w.svc.clock.advance(11 * MIN);
  await polled(w);
  t.notOk(arrived(w, r.providerMessageId), 'never sent');
  t.equal((await errorOf(w.s.key.v1.messages.cancel({ id: r.providerMessageId }))).status, 409, 'again: 409');

  t.equal(
    (await errorOf(w.s.key.v1.messages.cancel({ id: '00000000-0000-4000-8000-000000000000' }))).status,
    404,
    'an unknown id: 404',
  );
  const other = await sender(w.svc);
  const theirs = await other.key.v1.services.sendEmail({
    from: `x@${other.domain}`,
    to: 'bob@dest.test',
    subject: 'Hi',
    text: 'x',
    scheduledAt: iso(w.svc.clock.now() + 10 * MIN),
  });
  t.equal(
    (await errorOf(w.s.key.v1.messages.cancel({ id: theirs.providerMessageId }))).status,
    404,
    "another project's message: 404",
  );
  const k = await w.s.owner.client.console.projects.apiKeys.create({ id: w.s.projectId, scopes: ['messages:read'] });
  const reader = w.svc.client({ keyId: k.keyId, secret: k.secret });
  const later = await send(w, { scheduledAt: iso(w.svc.clock.now() + 10 * MIN) });
  t.equal(
    (await errorOf(reader.v1.messages.cancel({ id: later.providerMessageId }))).status,
    403,
    'messages:read: 403',
  );

  // A message the MTA has leased (sending) cannot be cancelled.
  const { spool } = w.svc.running.storage;
  await spool.lease(w.svc.clock.now() + 10 * MIN, 10, w.svc.clock.now() + 60 * MIN);
  t.equal((await errorOf(w.s.key.v1.messages.cancel({ id: later.providerMessageId }))).status, 409, 'leased: 409');
  t.equal((await read(w, later.providerMessageId)).status, 'queued', 'and it stays queued');
});

t.test('reschedule: moved earlier and later; the rules of scheduledAt', async (t) => {
  const w = await world(t);
  const now = w.svc.clock.now();
  const early = await send(w, { scheduledAt: iso(now + 120 * MIN) });
  const late = await send(w, { scheduledAt: iso(now + 5 * MIN), to: ['x@dest.test', 'y@dest.test'] });
  const bad = await errorOf(w.s.key.v1.messages.reschedule({ id: early.providerMessageId, scheduledAt: iso(now - 1) }));
  t.same([bad.status, (bad.details as { field: string }[])[0]!.field], [400, 'body.scheduledAt'], 'the past: 400');
  const r1 = await w.s.key.v1.messages.reschedule({ id: early.providerMessageId, scheduledAt: iso(now + 10 * MIN) });
  t.equal(r1.row.scheduledAt, iso(now + 10 * MIN), 'the row shows the new time');
  await w.s.key.v1.messages.reschedule({ id: late.providerMessageId, scheduledAt: iso(now + 60 * MIN) });

  w.svc.clock.advance(6 * MIN);
  await polled(w);
  t.notOk(arrived(w, late.providerMessageId), 'moved later: not at its first time');
  t.notOk(arrived(w, early.providerMessageId));
  w.svc.clock.advance(4 * MIN);
  await waitFor(() => arrived(w, early.providerMessageId), { what: 'moved earlier: sent at its new time' });
  t.notOk(arrived(w, late.providerMessageId));
  w.svc.clock.advance(50 * MIN);
  await waitFor(() => arrived(w, late.providerMessageId), { what: 'the later one at its new time' });
  await waitFor(async () => (await read(w, early.providerMessageId)).status === 'delivered', { what: 'delivered' });
  t.equal(
    (await errorOf(w.s.key.v1.messages.reschedule({ id: early.providerMessageId, scheduledAt: iso(now + 100 * MIN) })))
      .status,
    409,
    'a delivered message: 409',
  );

  // sendBatch takes scheduledAt per message.
  const b = await w.s.key.v1.services
    .sendBatch({
      messages: [
        {
          from: `ada@${w.s.domain}`,
          to: 'p@dest.test',
          subject: 'Hi',
          text: 'x',
          scheduledAt: iso(w.svc.clock.now() + MIN),
        },
        { from: `ada@${w.s.domain}`, to: 'q@dest.test', subject: 'Hi', text: 'x', scheduledAt: 'soon' },
      ],
    })
    .catch((e: unknown) => e as { status: number; details: { field: string }[] });
  t.same(
    'details' in b ? b.details.map((d) => d.field) : [],
    ['body.messages[1].scheduledAt'],
    'a batch item with a bad scheduledAt is named',
  );
});

t.test(
  'a message whose body is gone from the spool when it is due fails with the reason, and is not sent',
  async (t) => {
    const w = await world(t);
    const now = w.svc.clock.now();
    const r = await send(w, { scheduledAt: iso(now + 10 * MIN) });
    // A damaged spool: the entry without its body (the worker reads it only to sign).
    const bodies = w.svc.running.storage.lmdb.root.openDB<Buffer, string>({ name: 'bodies', encoding: 'binary' });
    t.ok(await bodies.remove(r.providerMessageId), 'the body removed');
    w.svc.clock.advance(11 * MIN);
    await waitFor(async () => (await read(w, r.providerMessageId)).status === 'failed', { what: 'the message failed' });
    const ev = (await w.s.key.v1.messages.events({ id: r.providerMessageId })).events;
    t.same(
      ev.map((e) => [e.type, e.detail]),
      [
        ['queued', null],
        ['failed', { reason: 'message body missing from the spool', recipient: 'bob@dest.test' }],
      ],
    );
    t.equal(w.svc.running.storage.spool.get(r.providerMessageId), undefined, 'gone from the spool');
    t.notOk(arrived(w, r.providerMessageId), 'never sent');
  },
);
