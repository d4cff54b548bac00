// Connection pools per MX address (docs/operations.md, "Connections"), through the real service: many
// recipient domains hosted by one provider share its sessions under SVC_MAX_SESSIONS_PER_HOST, and an MX
// address that does not answer is remembered for SVC_MX_FAILURE_TTL, so a dead host costs one timeout,
// not one per message. 127.0.0.2 and up are on lo on Linux.
import t, { type Test } from 'tap';
import type { TestService } from '../helpers/service.js';
import type { DnsZone } from '../helpers/dns-zone.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { startTarpit } from '../helpers/tarpit.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { makeCa, policyText, startPolicyServer } from './tls-fixtures.js';

interface World {
  svc: TestService;
  zone: DnsZone;
  sink: SmtpSink;
  s: Sender;
}

const CONNECT_TIMEOUT_MS = 1500;

async function world(
  t: Test,
  env: Record<string, string> = {},
  idleMs = 10_000,
  tls?: { cert: Buffer; key: Buffer },
): Promise<World> {
  const { zone, sink, svc } = await deliveryWorld(t, {
    sink: tls,
    env: { SVC_RETRY_DELAYS: '1m,5m', ...env },
    mta: { pollMs: 20, pool: { connectTimeoutMs: CONNECT_TIMEOUT_MS, idleMs } },
  });
  const s = await sender(svc);
  return { svc, zone, sink, s };
}

const statusOf = async (w: World, id: string) =>
  (await w.svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
    ?.status;
const waitStatus = (w: World, id: string, status: string) =>
  waitFor(async () => (await statusOf(w, id)) === status, { timeoutMs: 20_000, what: `message ${id} ${status}` });
const lastEvent = async (w: World, id: string) => {
  const rows = await w.svc.running.storage.db.query<{ type: string; detail: Record<string, unknown> | null }>(
    'SELECT type, detail FROM message_events WHERE message_id = $1 ORDER BY seq DESC LIMIT 1',
    [id],
  );
  return rows[0];
};
const send = async (w: World, to: string, subject = 'hi') =>
  (await w.s.key.v1.services.sendEmail({ from: `ada@${w.s.domain}`, to, subject, text: 'x' })).providerMessageId;

t.test('twenty domains of one provider share at most SVC_MAX_SESSIONS_PER_HOST sessions', async (t) => {
  const w = await world(t, { SVC_MAX_SESSIONS_PER_HOST: '3' });
  w.zone.a('mx.provider.test', '127.0.0.1');
  const domains = Array.from({ length: 20 }, (_, i) => `hosted${i}.test`);
  for (const d of domains) w.zone.mx(d, 10, 'mx.provider.test');
  // One batch: 60 messages spooled at once, so the worker sends them all concurrently.
  const messages = domains.flatMap((d) =>
    [1, 2, 3].map((n) => ({ from: `ada@${w.s.domain}`, to: `u${n}@${d}`, subject: `to ${d} #${n}`, text: 'x' })),
  );
  const res = await w.s.key.v1.services.sendBatch({ messages });
  const got = await w.sink.waitForMessages(60);
  for (const r of res.data) await waitStatus(w, r.providerMessageId, 'delivered');
  t.equal(got.length, 60, 'every message once');
  t.ok(w.sink.connections <= 3, `at most 3 connections in all (got ${w.sink.connections})`);
  t.ok(w.sink.maxOpen <= 3, `at most 3 open at once (got ${w.sink.maxOpen})`);
  const bySession = new Map<string, Set<string>>();
  for (const m of got) {
    const set = bySession.get(m.sessionId) ?? new Set<string>();
    set.add(m.rcptTo[0]!.split('@')[1]!);
    bySession.set(m.sessionId, set);
  }
  t.ok(bySession.size <= 3, `${bySession.size} sessions carried the 60 messages`);
  t.ok(
    [...bySession.values()].some((s) => s.size > 1),
    'a session carried mail for several recipient domains',
  );
  t.ok(
    [...bySession.keys()].every((id) => got.filter((m) => m.sessionId === id).length > 1),
    'several messages per session',
  );
});

t.test('a dead first MX costs one timeout; within the TTL the next MX is tried at once; after it, again', async (t) => {
  // Idle sessions close at once, so that each message needs a new connection and the MX hosts are tried anew.
  const w = await world(t, {}, 20);
  // mx1 accepts TCP and never greets (the client waits for its connect timeout); mx2 is the sink.
  const pit = await startTarpit(t, '127.0.0.3', w.sink.port);
  w.zone.mx('deadfirst.test', 10, 'mx1.deadfirst.test').a('mx1.deadfirst.test', '127.0.0.3');
  w.zone.mx('deadfirst.test', 20, 'mx2.deadfirst.test').a('mx2.deadfirst.test', '127.0.0.1');

  let started = Date.now();
  const first = await send(w, 'a@deadfirst.test', 'first');
  await waitStatus(w, first, 'delivered');
  t.equal(pit.accepted, 1, 'the first message dialled the dead host once');
  t.ok(Date.now() - started >= CONNECT_TIMEOUT_MS, 'and waited for its timeout');
  const firstEvent = await lastEvent(w, first);
  t.match(firstEvent?.detail, { ip: '127.0.0.1' }, 'delivered through the second MX');

  await waitFor(() => w.sink.open === 0, { what: 'the idle session closed' });
  started = Date.now();
  const next = [await send(w, 'b@deadfirst.test', 'second'), await send(w, 'c@deadfirst.test', 'third')];
  for (const id of next) await waitStatus(w, id, 'delivered');
  t.equal(pit.accepted, 1, 'within the TTL the dead host is not dialled again');
  t.ok(Date.now() - started < CONNECT_TIMEOUT_MS, `no timeout waited for (${Date.now() - started} ms)`);

  await waitFor(() => w.sink.open === 0, { what: 'the idle session closed' });
  t.equal(w.sink.connections, 3, 'each message had a new connection to the second MX');
  w.svc.clock.advance(61_000);
  const later = await send(w, 'd@deadfirst.test', 'after the TTL');
  await waitStatus(w, later, 'delivered');
  t.equal(pit.accepted, 2, 'after the TTL the dead host is tried again');
});

t.test('every MX failed lately: deferred at once with the reason, no dial', async (t) => {
  const w = await world(t);
  const pit = await startTarpit(t, '127.0.0.4', w.sink.port);
  w.zone.mx('alldead.test', 10, 'mx.alldead.test').a('mx.alldead.test', '127.0.0.4');

  const first = await send(w, 'a@alldead.test');
  await waitStatus(w, first, 'deferred');
  t.equal(pit.accepted, 1, 'the first attempt dialled the host');
  t.match((await lastEvent(w, first))?.detail, { error: /127\.0\.0\.4/ });

  const started = Date.now();
  const second = await send(w, 'b@alldead.test');
  await waitStatus(w, second, 'deferred');
  t.ok(Date.now() - started < CONNECT_TIMEOUT_MS, 'deferred without waiting for a timeout');
  t.equal(pit.accepted, 1, 'not dialled again');
  const ev = await lastEvent(w, second);
  t.equal(ev?.type, 'deferred');
  t.match(ev?.detail, { error: /every MX host of alldead\.test failed to answer within the last 60 s/ });
});

t.test('a session is shared only by domains that require the same TLS of the host', async (t) => {
  // One MX host with a certificate for its name, trusted through SVC_EXTRA_CA_CERTS; two domains without a
  // policy and two whose MTA-STS policy (enforce) names that host.
  const ca = await makeCa(t);
  const leaf = await ca.leaf(['mx.shared.test', 'mta-sts.sts1.test', 'mta-sts.sts2.test']);
  const policies = await startPolicyServer(t, leaf);
  const w = await world(t, { SVC_EXTRA_CA_CERTS: ca.caPath, SVC_MTA_STS_PORT: String(policies.port) }, 10_000, {
    cert: leaf.cert,
    key: leaf.key,
  });
  w.zone.a('mx.shared.test', '127.0.0.1');
  for (const d of ['plain1.test', 'plain2.test', 'sts1.test', 'sts2.test']) w.zone.mx(d, 10, 'mx.shared.test');
  for (const d of ['sts1.test', 'sts2.test']) {
    w.zone.txt(`_mta-sts.${d}`, 'v=STSv1; id=1;').a(`mta-sts.${d}`, '127.0.0.1');
    policies.policies.set(`mta-sts.${d}`, policyText('enforce', ['mx.shared.test']));
  }
  // One at a time, each after the last is delivered, so that an idle session is there to be reused.
  const session: Record<string, string> = {};
  const ids: Record<string, string> = {};
  for (const d of ['plain1.test', 'sts1.test', 'plain2.test', 'sts2.test']) {
    const id = (ids[d] = await send(w, `u@${d}`, `to ${d}`));
    await waitStatus(w, id, 'delivered');
    session[d] = w.sink.messages.find((m) => m.rcptTo[0] === `u@${d}`)!.sessionId;
  }
  t.equal(session['plain2.test'], session['plain1.test'], 'the domains without a policy share a session');
  t.equal(session['sts2.test'], session['sts1.test'], 'the MTA-STS enforce domains share a session');
  t.not(session['sts1.test'], session['plain1.test'], 'an enforce domain never rides the opportunistic session');
  t.equal(w.sink.connections, 2, 'two sessions in all');
  // Each message's event says what its own domain required, not what the session was opened for.
  t.match((await lastEvent(w, ids['sts2.test']!))?.detail, {
    tlsPolicy: 'mta-sts',
    tlsPolicyMode: 'enforce',
    tlsVerified: 'webpki',
  });
  t.match((await lastEvent(w, ids['plain2.test']!))?.detail, { tlsPolicy: 'none' });
});
