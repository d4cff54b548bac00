// Issue 19, outbound transport security, end to end on loopback: the TLS facts of each attempt in its
// event and webhook, MTA-STS (RFC 8461) policies fetched over https from a server whose CA the service
// trusts through SVC_EXTRA_CA_CERTS, enforce and testing modes against a STARTTLS sink with a
// certificate for the MX names, the policy cache on an injected clock, and MX hosts on private
// addresses refused when SVC_ALLOW_PRIVATE_MX is off.
import t, { type Test } from 'tap';
import { createHash, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { TestService } from '../helpers/service.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { testClock } from '../helpers/clock.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { createResolver } from '../../mail/dns.js';
import { createTlsPolicy } from '../../mta/outbound/tls-policy.js';
import { makeCa, policyText, startPolicyServer, type PolicyServer } from './tls-fixtures.js';

interface World {
  svc: TestService;
  zone: DnsZone;
  sink: SmtpSink;
  s: Sender;
  policies: PolicyServer;
}

const MX_NAMES_IN_CERT = ['mx.enforce.test', 'mx.badmx.test', 'mx.plain.test', 'mx.dane-ta.test'];
const STS_HOSTS = ['enforce.test', 'badmx.test', 'badcert.test', 'testing.test', 'dane-ee.test'].map(
  (d) => `mta-sts.${d}`,
);

async function world(t: Test, env: Record<string, string> = {}): Promise<World> {
  const ca = await makeCa(t);
  const leaf = await ca.leaf([...MX_NAMES_IN_CERT, ...STS_HOSTS]);
  const caPem = await readFile(ca.caPath);
  const policies = await startPolicyServer(t, leaf);
  const { zone, sink, svc } = await deliveryWorld(t, {
    // The chain includes the CA, as a DANE-TA server's must (RFC 7672 §3.1.2).
    sink: { cert: Buffer.concat([leaf.cert, caPem]), key: leaf.key },
    env: {
      SVC_RETRY_DELAYS: '1m,5m',
      SVC_EXTRA_CA_CERTS: ca.caPath,
      SVC_MTA_STS_PORT: String(policies.port),
      SVC_ALLOW_PRIVATE_WEBHOOKS: '1',
      ...env,
    },
  });
  // A validating resolver's answers: DANE applies wherever TLSA records are published (RFC 7672 §2.2).
  zone.dnssec = true;
  for (const d of ['enforce', 'badmx', 'badcert', 'testing', 'plain', 'dane-ee', 'dane-ta', 'dane-bad'])
    zone.mx(`${d}.test`, 10, `mx.${d}.test`).a(`mx.${d}.test`, '127.0.0.1');
  for (const h of STS_HOSTS) zone.a(h, '127.0.0.1');
  const sts = (domain: string, id: string, text: string) => {
    zone.txt(`_mta-sts.${domain}`, `v=STSv1; id=${id};`);
    policies.policies.set(`mta-sts.${domain}`, text);
  };
  sts('enforce.test', 'e1', policyText('enforce', ['mx.enforce.test']));
  sts('badmx.test', 'b1', policyText('enforce', ['mail.elsewhere.test']));
  sts('badcert.test', 'c1', policyText('enforce', ['*.badcert.test']));
  sts('testing.test', 't1', policyText('testing', ['mx.testing.test']));
  // DANE-EE 3 1 1: SHA-256 of the server's SubjectPublicKeyInfo; no name check (RFC 7672 §3.1.1), and the
  // certificate is not for mx.dane-ee.test. Its MTA-STS policy names another host: DANE wins (RFC 8461 §2).
  const spki = new X509Certificate(leaf.cert).publicKey.export({ type: 'spki', format: 'der' });
  zone.tlsa('_25._tcp.mx.dane-ee.test', 3, 1, 1, createHash('sha256').update(spki).digest());
  zone.a('mta-sts.dane-ee.test', '127.0.0.1');
  sts('dane-ee.test', 'd1', policyText('enforce', ['mail.elsewhere.test']));
  // DANE-TA 2 0 1: SHA-256 of the CA certificate, which the server sends in its chain.
  zone.tlsa('_25._tcp.mx.dane-ta.test', 2, 0, 1, createHash('sha256').update(new X509Certificate(caPem).raw).digest());
  // A record that matches nothing.
  zone.tlsa('_25._tcp.mx.dane-bad.test', 3, 1, 1, Buffer.alloc(32, 7));
  const s = await sender(svc, { ed25519: true });
  for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);
  return { svc, zone, sink, s, policies };
}

const statusOf = async (w: { svc: TestService }, id: string) =>
  (await w.svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
    ?.status;
const waitStatus = (w: { svc: TestService }, id: string, status: string) =>
  waitFor(async () => (await statusOf(w, id)) === status, { timeoutMs: 20_000, what: `message ${id} ${status}` });
const lastDetail = async (w: { s: Sender }, id: string, type: string) => {
  const { events } = await w.s.key.v1.messages.events({ id });
  return (events as { type: string; detail: Record<string, unknown> }[]).filter((e) => e.type === type).at(-1)?.detail;
};
const send = async (w: { s: Sender }, to: string) =>
  (await w.s.key.v1.services.sendEmail({ from: `Ada <ada@${w.s.domain}>`, to, subject: `to ${to}`, text: 'x' }))
    .providerMessageId;

t.test('MTA-STS and the TLS facts of every attempt, in events and webhooks', async (t) => {
  const w = await world(t);
  const hook = await startWebhookReceiver(t);
  const created = await w.s.owner.client.console.projects.webhooks.create({ id: w.s.projectId, url: hook.url('/') });
  hook.secret = created.secret;

  const ids = {
    enforce: await send(w, 'ok@enforce.test'),
    badmx: await send(w, 'x@badmx.test'),
    badcert: await send(w, 'x@badcert.test'),
    testing: await send(w, 'ok@testing.test'),
    plain: await send(w, 'ok@plain.test'),
    daneEe: await send(w, 'ok@dane-ee.test'),
    daneTa: await send(w, 'ok@dane-ta.test'),
    daneBad: await send(w, 'x@dane-bad.test'),
  };
  await waitStatus(w, ids.enforce, 'delivered');
  await waitStatus(w, ids.testing, 'delivered');
  await waitStatus(w, ids.plain, 'delivered');
  await waitStatus(w, ids.badmx, 'deferred');
  await waitStatus(w, ids.badcert, 'deferred');
  await waitStatus(w, ids.daneEe, 'delivered');
  await waitStatus(w, ids.daneTa, 'delivered');
  await waitStatus(w, ids.daneBad, 'deferred');

  t.same(
    w.sink.messages.flatMap((m) => m.rcptTo).sort(),
    ['ok@dane-ee.test', 'ok@dane-ta.test', 'ok@enforce.test', 'ok@plain.test', 'ok@testing.test'],
    'nothing reached the sink for the domains whose policy failed',
  );
  t.ok(
    w.sink.messages.every((m) => m.secure),
    'every delivery over STARTTLS',
  );

  const enforce = await lastDetail(w, ids.enforce, 'delivered');
  t.match(
    enforce,
    {
      host: 'mx.enforce.test',
      ip: '127.0.0.1',
      tls: true,
      tlsVersion: /^TLSv1\.[23]$/,
      tlsCipher: /\w/,
      tlsVerified: 'webpki',
      tlsPolicy: 'mta-sts',
      tlsPolicyMode: 'enforce',
    },
    'enforce: delivered to the allowed MX with a certificate verified for its name',
  );
  t.notOk(enforce?.tlsFailures, 'no failure to report');

  const plain = await lastDetail(w, ids.plain, 'delivered');
  t.match(plain, { host: 'mx.plain.test', ip: '127.0.0.1', tls: true, tlsVerified: 'webpki', tlsPolicy: 'none' });
  t.notOk('tlsPolicyMode' in (plain ?? {}), 'no policy, no mode');

  const testing = await lastDetail(w, ids.testing, 'delivered');
  t.match(
    testing,
    { host: 'mx.testing.test', tls: true, tlsVerified: 'none', tlsPolicy: 'mta-sts', tlsPolicyMode: 'testing' },
    'testing: delivered although the certificate is not for mx.testing.test',
  );
  t.match(
    testing?.tlsFailures,
    [/certificate of mx\.testing\.test not verified \(ERR_TLS_CERT_ALTNAME_INVALID/],
    'testing: the failure enforce would have acted on is recorded',
  );

  const badmx = await lastDetail(w, ids.badmx, 'deferred');
  t.match(
    badmx,
    {
      class: 'connection',
      host: null,
      ip: null,
      tls: false,
      tlsPolicy: 'mta-sts',
      tlsPolicyMode: 'enforce',
      error: 'no MX host of badmx.test passes its TLS policy',
      tlsFailures: ['MX host mx.badmx.test does not match the MTA-STS policy of badmx.test (mx: mail.elsewhere.test)'],
      nextAttemptAt: /Z$/,
    },
    'enforce: an MX outside the policy is not used; the message waits',
  );

  const badcert = await lastDetail(w, ids.badcert, 'deferred');
  t.match(
    badcert,
    {
      host: 'mx.badcert.test',
      ip: '127.0.0.1',
      tls: true,
      tlsVerified: 'none',
      tlsPolicy: 'mta-sts',
      tlsPolicyMode: 'enforce',
      error: /MTA-STS enforce: certificate of mx\.badcert\.test not verified/,
      tlsFailures: [/certificate of mx\.badcert\.test not verified \(ERR_TLS_CERT_ALTNAME_INVALID/],
    },
    'enforce: a certificate not valid for the MX name defers, with the TLS that was negotiated',
  );

  t.match(
    await lastDetail(w, ids.daneEe, 'delivered'),
    { host: 'mx.dane-ee.test', tls: true, tlsVerified: 'dane', tlsPolicy: 'dane' },
    'DANE-EE 3 1 1 matched (no name check); DANE wins over the MTA-STS policy that names another host',
  );
  t.match(
    await lastDetail(w, ids.daneTa, 'delivered'),
    { host: 'mx.dane-ta.test', tls: true, tlsVerified: 'dane', tlsPolicy: 'dane' },
    'DANE-TA 2 0 1: the chain leads to the pinned CA and the certificate is for the MX name',
  );
  t.match(
    await lastDetail(w, ids.daneBad, 'deferred'),
    {
      host: 'mx.dane-bad.test',
      tls: true,
      tlsVerified: 'none',
      tlsPolicy: 'dane',
      error: /DANE: certificate of mx\.dane-bad\.test: no usable TLSA record/,
      tlsFailures: [/no usable TLSA record of mx\.dane-bad\.test matches/],
    },
    'DANE mismatch: deferred with the reason, nothing sent',
  );

  // The webhook payloads carry the same detail as the events.
  await hook.waitFor(8);
  const hooked = (id: string, type: string) =>
    hook.hooks.find((h) => h.json.type === type && h.json.data.messageId === id)?.json.data.detail;
  t.same(hooked(ids.enforce, 'delivered'), enforce, 'delivered webhook: the event detail, TLS facts included');
  t.same(hooked(ids.badcert, 'deferred'), badcert, 'deferred webhook: the event detail, TLS facts included');

  t.equal(w.policies.countFor('mta-sts.enforce.test'), 1, 'one policy fetch per domain');
  t.equal(w.policies.countFor('mta-sts.plain.test'), 0, 'no TXT record, no fetch');
});

t.test('DANE needs an authenticated MX RRset and authenticated TLSA records', async (t) => {
  const zone = await startDnsZone(t);
  zone.mx('d.test', 10, 'mx.d.test').a('mx.d.test', '127.0.0.1');
  zone.tlsa('_25._tcp.mx.d.test', 3, 1, 1, Buffer.alloc(32, 1));
  const clock = testClock();
  const resolver = createResolver({ servers: [{ host: zone.host, port: zone.port }], clock });
  const tls = createTlsPolicy({ resolver, clock, extraCaCerts: null, mtaStsPort: 443, allowPrivate: true });
  const hosts = [{ name: 'mx.d.test', addresses: ['127.0.0.1'] }];
  t.match(
    await tls.plan('d.test', hosts),
    { policy: 'none', hosts: [{ require: 'none' }] },
    'no AD bit: TLSA records are not even trusted',
  );
  t.equal(zone.queriesFor('_25._tcp.mx.d.test', 'TLSA').length, 0, 'and not looked up (RFC 7672 §2.2.1)');
  zone.dnssec = true;
  const secure = createResolver({ servers: [{ host: zone.host, port: zone.port }], clock });
  const daneTls = createTlsPolicy({ resolver: secure, clock, extraCaCerts: null, mtaStsPort: 443, allowPrivate: true });
  t.match(await daneTls.plan('d.test', hosts), {
    policy: 'dane',
    hosts: [{ require: 'dane', policy: 'dane', tlsa: [{ usage: 3, selector: 1, matchingType: 1 }] }],
  });
  t.equal(zone.queriesFor('_25._tcp.mx.d.test', 'TLSA')[0]?.name, '_25._tcp.mx.d.test', 'with AD: looked up');
  // The MX answer is cached (and authenticated); then the server fails for the TLSA lookup.
  const failing = createResolver({ servers: [{ host: zone.host, port: zone.port }], clock });
  const f = createTlsPolicy({ resolver: failing, clock, extraCaCerts: null, mtaStsPort: 443, allowPrivate: true });
  await failing.mxSecure('d.test');
  zone.behaviour = 'servfail';
  t.match(
    await f.plan('d.test', hosts),
    { hosts: [], failures: [/TLSA lookup of _25\._tcp\.mx\.d\.test failed \(SERVFAIL\)/] },
    'a failing TLSA lookup under a secure MX makes the host unusable',
  );
});

t.test('MX hosts on private addresses are refused without SVC_ALLOW_PRIVATE_MX', async (t) => {
  const { zone, sink, svc } = await deliveryWorld(t, { env: { SVC_RETRY_DELAYS: '1m', SVC_ALLOW_PRIVATE_MX: '0' } });
  zone.mx('private.test', 10, 'mx1.private.test').a('mx1.private.test', '127.0.0.1');
  zone.mx('private.test', 20, 'mx2.private.test').a('mx2.private.test', '10.1.2.3');
  zone.a('private.test', '127.0.0.1');
  const s = await sender(svc);
  const w = { svc, s };
  const id = await send(w, 'x@private.test');
  await waitStatus(w, id, 'bounced');
  const detail = await lastDetail(w, id, 'bounced');
  t.match(
    detail,
    {
      class: 'bad_domain',
      reply: /^550 5\.4\.4 MX hosts of private\.test are not public: mx1\.private\.test 127\.0\.0\.1 \(loopback\), mx2/,
      host: null,
    },
    'a permanent failure naming the hosts and why (RFC 5321 §5.1: no usable MX is an error)',
  );
  t.match(String(detail?.reply), /mx2\.private\.test 10\.1\.2\.3 \(private\)/);
  t.equal(sink.connections, 0, 'the loopback sink was never dialled');
});

t.test('policy cache: kept for max_age, refetched when the TXT id changes or the policy expires', async (t) => {
  const ca = await makeCa(t);
  const leaf = await ca.leaf(['mta-sts.cache.test']);
  const policies = await startPolicyServer(t, leaf);
  const zone = await startDnsZone(t);
  zone.ttl = 0; // the resolver must see each TXT change at once, its removal included
  zone.soa('', { ttl: 0, minimum: 0 });
  zone.a('mta-sts.cache.test', '127.0.0.1').txt('_mta-sts.cache.test', 'v=STSv1; id=one;');
  policies.policies.set('mta-sts.cache.test', policyText('enforce', ['mx.cache.test'], 600));
  const clock = testClock();
  clock.freeze();
  const resolver = createResolver({ servers: [{ host: zone.host, port: zone.port }], clock });
  const tls = createTlsPolicy({
    resolver,
    clock,
    extraCaCerts: ca.caPath,
    mtaStsPort: policies.port,
    allowPrivate: true,
  });
  const hosts = [{ name: 'mx.cache.test', addresses: ['127.0.0.1'] }];
  const fetches = () => policies.countFor('mta-sts.cache.test');

  t.match(await tls.plan('cache.test', hosts), { policy: 'mta-sts', mode: 'enforce', hosts: [{ require: 'webpki' }] });
  t.equal(fetches(), 1, 'first delivery: fetched');
  await tls.plan('cache.test', hosts);
  clock.advance(599_000);
  await tls.plan('cache.test', hosts);
  t.equal(fetches(), 1, 'same id within max_age: served from the cache');

  policies.policies.set('mta-sts.cache.test', policyText('testing', ['mx.cache.test'], 600));
  zone.remove('_mta-sts.cache.test').txt('_mta-sts.cache.test', 'v=STSv1; id=two;');
  t.match(await tls.plan('cache.test', hosts), { mode: 'testing' }, 'the new policy applies at once');
  t.equal(fetches(), 2, 'a new id: fetched again before the old policy expired');

  clock.advance(601_000);
  await tls.plan('cache.test', hosts);
  t.equal(fetches(), 3, 'past max_age: fetched again although the id is the same');

  // RFC 8461 §5.1: the record gone or the policy host down does not undo an unexpired policy.
  zone.remove('_mta-sts.cache.test');
  policies.policies.delete('mta-sts.cache.test');
  t.match(await tls.plan('cache.test', hosts), { policy: 'mta-sts', mode: 'testing' }, 'TXT gone: cached policy');
  zone.txt('_mta-sts.cache.test', 'v=STSv1; id=three;');
  t.match(
    await tls.plan('cache.test', hosts),
    { policy: 'mta-sts', mode: 'testing', note: /id three\) unavailable: mta-sts\.cache\.test answered HTTP 404/ },
    'new id but the fetch fails: the cached policy still applies, with the reason',
  );
  clock.advance(601_000);
  t.match(await tls.plan('cache.test', hosts), { policy: 'none' }, 'expired and not refetchable: no policy');
});

t.test('an MTA-STS policy host with an untrusted certificate is no policy', async (t) => {
  const ca = await makeCa(t);
  const other = await makeCa(t);
  const leaf = await other.leaf(['mta-sts.untrusted.test']);
  const policies = await startPolicyServer(t, leaf);
  const zone = await startDnsZone(t);
  zone.a('mta-sts.untrusted.test', '127.0.0.1').txt('_mta-sts.untrusted.test', 'v=STSv1; id=1;');
  policies.policies.set('mta-sts.untrusted.test', policyText('enforce', ['mx.untrusted.test']));
  const clock = testClock();
  const resolver = createResolver({ servers: [{ host: zone.host, port: zone.port }], clock });
  const tls = createTlsPolicy({
    resolver,
    clock,
    extraCaCerts: ca.caPath,
    mtaStsPort: policies.port,
    allowPrivate: true,
  });
  const plan = await tls.plan('untrusted.test', [{ name: 'mx.untrusted.test', addresses: ['127.0.0.1'] }]);
  t.match(plan, { policy: 'none', note: /unavailable: .*(self.signed|unable to verify|issuer)/i });
  t.equal(policies.requests.length, 0, 'no request was sent over the unverified connection');
});
