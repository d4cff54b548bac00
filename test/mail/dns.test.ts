// The resolver (mta/dns.ts) against a real dns2 server on loopback (test/helpers/dns-zone.ts): record
// types, split TXT strings, NXDOMAIN vs NODATA, timeouts and the one retry, SERVFAIL, TCP fallback,
// caching on the injected clock (positive by TTL, negative at most 60 s), fresh lookups, CNAME chains,
// and the running service resolving through SVC_DNS_SERVERS.
import t, { type Test } from 'tap';
import dgram from 'node:dgram';
import net from 'node:net';
import { Packet } from 'dns2';
import { createResolver } from '../../mail/dns.js';
import { DnsError, type DnsFailure, type Resolver } from '../../mail/resolver.js';
import { parseHostPort, type HostPort } from '../../config/schema.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';
import { testClock, type TestClock } from '../helpers/clock.js';
import { startTestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const SECOND = 1000;

interface Setup {
  zone: DnsZone;
  clock: TestClock;
  resolver: Resolver;
}

const hostPort = (s: string): HostPort => parseHostPort(s, 53) as HostPort;

/** A fresh zone and a resolver aimed at it, on a frozen clock the test moves. */
async function setup(t: Test, timeoutMs = 1000): Promise<Setup> {
  const zone = await startDnsZone(t);
  const clock = testClock();
  clock.freeze();
  const resolver = createResolver({ servers: [hostPort(zone.hostPort)], clock, timeoutMs });
  return { zone, clock, resolver };
}

/** The DnsError a lookup fails with; a lookup that succeeds fails the test. */
async function dnsError(t: Test, p: Promise<unknown>): Promise<DnsError | null> {
  try {
    const value = await p;
    t.fail(`expected a DnsError, got ${JSON.stringify(value)}`);
    return null;
  } catch (err) {
    t.type(err, DnsError);
    return err instanceof DnsError ? err : null;
  }
}

async function failsWith(t: Test, p: Promise<unknown>, failure: DnsFailure): Promise<DnsError | null> {
  const err = await dnsError(t, p);
  t.equal(err?.failure, failure, `fails with ${failure}`);
  return err;
}

t.test('each record type', async (t) => {
  const { zone, resolver } = await setup(t);
  zone
    .txt('example.test', 'v=spf1 -all')
    .txt('example.test', 'google-site-verification=abc')
    .mx('example.test', 20, 'MX2.Example.Test.')
    .mx('example.test', 10, 'mx1.example.test')
    .a('example.test', '192.0.2.1')
    .a('example.test', '192.0.2.2')
    .aaaa('example.test', '2001:db8::1')
    .cname('www.example.test', 'Web.Example.Test.');

  t.same(
    (await resolver.txt('example.test')).sort(),
    ['google-site-verification=abc', 'v=spf1 -all'],
    'one value per TXT record',
  );
  t.strictSame(
    await resolver.mx('example.test'),
    [
      { exchange: 'mx1.example.test', priority: 10 },
      { exchange: 'mx2.example.test', priority: 20 },
    ],
    'MX sorted by priority, exchange lower-case without trailing dot',
  );
  t.same((await resolver.a('example.test')).sort(), ['192.0.2.1', '192.0.2.2']);
  t.strictSame(await resolver.aaaa('example.test'), ['2001:db8::1']);
  t.equal(await resolver.cname('www.example.test'), 'web.example.test', 'CNAME target lower-case without trailing dot');
  t.equal(await resolver.cname('example.test'), null, 'no CNAME at a name that has other records (NODATA)');
  t.equal(await resolver.cname('missing.example.test'), null, 'no CNAME at a name that does not exist (NXDOMAIN)');
  t.strictSame(
    zone.queries.map((q) => q.transport),
    zone.queries.map(() => 'udp'),
    'all over UDP',
  );
});

t.test('TXT strings of one record are joined; separate records stay separate', async (t) => {
  const { zone, resolver } = await setup(t);
  // A DKIM key as DNS providers publish it: several character-strings in one record.
  const p = 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA' + 'x'.repeat(330);
  zone.txt('sel._domainkey.example.test', 'v=DKIM1; k=rsa; ', `p=${p}`);
  t.strictSame(
    await resolver.txt('sel._domainkey.example.test'),
    [`v=DKIM1; k=rsa; p=${p}`],
    'RFC 7208 §3.3: concatenated without spaces',
  );

  // One string over 255 bytes is split by the zone into character-strings of at most 255.
  const long = 'a'.repeat(255) + 'b'.repeat(255) + 'c'.repeat(10);
  zone.txt('long.example.test', long);
  t.strictSame(await resolver.txt('long.example.test'), [long]);

  zone.txt('two.example.test', 'first').txt('two.example.test', 'second');
  t.same((await resolver.txt('two.example.test')).sort(), ['first', 'second']);
});

t.test('an answer over 512 bytes comes truncated over UDP and complete over TCP', async (t) => {
  const { zone, resolver } = await setup(t);
  const big = 'k'.repeat(700);
  zone.txt('big.example.test', big);
  t.strictSame(await resolver.txt('big.example.test'), [big]);
  t.strictSame(
    zone.queriesFor('big.example.test').map((q) => q.transport),
    ['udp', 'tcp'],
    'UDP first, then TCP',
  );
});

t.test('NXDOMAIN and NODATA are told apart', async (t) => {
  const { zone, resolver } = await setup(t);
  zone.a('host.example.test', '192.0.2.1').txt('_svc-verify.deep.example.test', 'x');

  const nx = await failsWith(t, resolver.txt('Nothing.Example.Test.'), 'NXDOMAIN');
  t.equal(nx?.absent, true);
  t.equal(nx?.host, 'nothing.example.test', 'the error names the normalized host');
  t.equal(nx?.type, 'TXT');

  const nodata = await failsWith(t, resolver.txt('host.example.test'), 'NODATA');
  t.equal(nodata?.absent, true);
  await failsWith(t, resolver.mx('host.example.test'), 'NODATA');
  await failsWith(t, resolver.aaaa('host.example.test'), 'NODATA');
  // RFC 8020: a name with descendants exists even without records of its own.
  await failsWith(t, resolver.a('deep.example.test'), 'NODATA');

  // An answer, not a bug: the error carries its message but no stack frames, and leaves the limit as it was.
  const limit = Error.stackTraceLimit;
  t.equal(nx?.stack, `DnsError: ${nx?.message}`, 'no stack frames');
  t.equal(Error.stackTraceLimit, limit);
  t.match(new Error('x').stack, /\n\s+at /, 'other errors keep theirs');
});

t.test('a silent server: TIMEOUT after exactly two attempts, within about twice the timeout', async (t) => {
  const { zone, resolver } = await setup(t, 200);
  zone.behaviour = 'silent';
  zone.txt('example.test', 'v=spf1 -all');
  const started = Date.now();
  const err = await failsWith(t, resolver.txt('example.test'), 'TIMEOUT');
  const elapsed = Date.now() - started;
  t.equal(err?.absent, false, 'a timeout is not an absence');
  t.ok(elapsed >= 380 && elapsed < 1000, `settled in ${elapsed} ms (2 × 200 ms)`);
  t.equal(zone.queriesFor('example.test', 'TXT').length, 2, 'one retry');

  // A timeout is never cached: the next lookup asks again and gets the answer.
  zone.behaviour = 'normal';
  t.strictSame(await resolver.txt('example.test'), ['v=spf1 -all']);
  t.equal(zone.queriesFor('example.test', 'TXT').length, 3);
});

t.test('two servers, the first silent: the second answers', async (t) => {
  const first = await startDnsZone(t);
  const second = await startDnsZone(t);
  first.behaviour = 'silent';
  second.a('example.test', '192.0.2.7');
  const clock = testClock();
  const resolver = createResolver({
    servers: [hostPort(first.hostPort), hostPort(second.hostPort)],
    clock,
    timeoutMs: 200,
  });
  const started = Date.now();
  t.strictSame(await resolver.a('example.test'), ['192.0.2.7']);
  t.ok(Date.now() - started < 1000, 'answered after one timeout');
  t.equal(first.queries.length, 1, 'the first server was asked once');
  t.equal(second.queries.length, 1, 'then the second');
});

t.test(
  'SERVFAIL and REFUSED fail with SERVFAIL, are not cached, and move to another server if there is one',
  async (t) => {
    const { zone, resolver } = await setup(t);
    zone.a('example.test', '192.0.2.1');
    zone.behaviour = 'servfail';
    const err = await failsWith(t, resolver.a('example.test'), 'SERVFAIL');
    t.equal(err?.absent, false);
    t.equal(zone.queries.length, 1, 'the only server is not asked the same question twice');
    zone.behaviour = 'refused';
    await failsWith(t, resolver.a('example.test'), 'SERVFAIL');
    zone.behaviour = 'normal';
    t.strictSame(await resolver.a('example.test'), ['192.0.2.1'], 'not cached');
    t.equal(zone.queries.length, 3);

    const failing = await startDnsZone(t);
    failing.behaviour = 'servfail';
    const both = createResolver({
      servers: [hostPort(failing.hostPort), hostPort(zone.hostPort)],
      clock: testClock(),
      timeoutMs: 1000,
    });
    t.strictSame(await both.a('example.test'), ['192.0.2.1'], 'the second server answers');
    t.equal(failing.queries.length, 1);
  },
);

t.test('a truncated UDP answer is asked again over TCP', async (t) => {
  const { zone, resolver } = await setup(t);
  zone.behaviour = 'truncate';
  zone.mx('example.test', 10, 'mx.example.test');
  t.strictSame(await resolver.mx('example.test'), [{ exchange: 'mx.example.test', priority: 10 }]);
  t.strictSame(
    zone.queriesFor('example.test', 'MX').map((q) => q.transport),
    ['udp', 'tcp'],
  );
  await failsWith(t, resolver.txt('missing.example.test'), 'NXDOMAIN');
  t.strictSame(
    zone.queriesFor('missing.example.test').map((q) => q.transport),
    ['udp', 'tcp'],
    'negative answers too',
  );
});

t.test('a TCP leg that never answers is bounded by the same timeout', async (t) => {
  // UDP answers every query truncated; TCP on the same port reads the query and says nothing.
  const tcp = net.createServer((s) => s.resume());
  const held = new Set<net.Socket>();
  tcp.on('connection', (s) => (held.add(s), s.on('close', () => held.delete(s))));
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const port = (tcp.address() as net.AddressInfo).port;
  const udp = dgram.createSocket('udp4');
  let udpQueries = 0;
  udp.on('message', (msg, rinfo) => {
    udpQueries++;
    const response = Packet.createResponseFromRequest(Packet.parse(msg));
    response.header.tc = 1;
    udp.send(response.toBuffer(), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => udp.bind(port, '127.0.0.1', resolve));
  t.teardown(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => tcp.close(r));
    await new Promise<void>((r) => udp.close(() => r()));
  });

  const resolver = createResolver({ servers: [{ host: '127.0.0.1', port }], clock: testClock(), timeoutMs: 200 });
  const started = Date.now();
  await failsWith(t, resolver.txt('example.test'), 'TIMEOUT');
  const elapsed = Date.now() - started;
  t.ok(elapsed >= 380 && elapsed < 1000, `settled in ${elapsed} ms`);
  t.equal(udpQueries, 2, 'two attempts');
  // The server sees the close a moment after the client destroys its socket.
  t.ok(
    await waitFor(() => held.size === 0, { timeoutMs: 2000, what: 'TCP connections closed' }),
    'the TCP connections were closed',
  );
});

t.test('positive answers are cached for their TTL, at most an hour', async (t) => {
  const { zone, clock, resolver } = await setup(t);
  zone.ttl = 120;
  zone.txt('example.test', 'one');
  t.strictSame(await resolver.txt('example.test'), ['one']);
  t.strictSame(await resolver.txt('EXAMPLE.test.'), ['one'], 'same key whatever the case and trailing dot');
  t.equal(zone.queries.length, 1, 'the second lookup made no query');
  clock.advance(119 * SECOND);
  await resolver.txt('example.test');
  t.equal(zone.queries.length, 1, 'still cached at 119 s');
  clock.advance(2 * SECOND);
  await resolver.txt('example.test');
  t.equal(zone.queries.length, 2, 'asked again at 121 s');

  zone.ttl = 86_400;
  zone.a('long.example.test', '192.0.2.1');
  await resolver.a('long.example.test');
  clock.advance(3599 * SECOND);
  await resolver.a('long.example.test');
  t.equal(zone.queriesFor('long.example.test').length, 1, 'cached at 3599 s');
  clock.advance(2 * SECOND);
  await resolver.a('long.example.test');
  t.equal(zone.queriesFor('long.example.test').length, 2, 'a one-day TTL is capped at an hour');

  zone.ttl = 0;
  zone.a('zero.example.test', '192.0.2.1');
  await resolver.a('zero.example.test');
  await resolver.a('zero.example.test');
  t.equal(zone.queriesFor('zero.example.test').length, 2, 'TTL 0 is not cached');
});

t.test('negative answers are cached at most 60 s, even when the SOA says more', async (t) => {
  const { zone, clock, resolver } = await setup(t);
  zone.soa('', { minimum: 3600, ttl: 3600 });
  zone.a('host.example.test', '192.0.2.1');
  for (const [name, failure] of [
    ['missing.example.test', 'NXDOMAIN'],
    ['host.example.test', 'NODATA'],
  ] as const) {
    await failsWith(t, resolver.txt(name), failure);
    clock.advance(59 * SECOND);
    await failsWith(t, resolver.txt(name), failure);
    t.equal(zone.queriesFor(name, 'TXT').length, 1, `${failure} cached at 59 s`);
    clock.advance(2 * SECOND);
    await failsWith(t, resolver.txt(name), failure);
    t.equal(zone.queriesFor(name, 'TXT').length, 2, `${failure} asked again at 61 s`);
  }
  // The point of the cap: a record published after a miss is seen within a minute.
  zone.txt('missing.example.test', 'now here');
  clock.advance(61 * SECOND);
  t.strictSame(await resolver.txt('missing.example.test'), ['now here']);
});

t.test('negative answers are cached for less when the SOA says less (RFC 2308 §5)', async (t) => {
  const { zone, clock, resolver } = await setup(t);
  zone.soa('short.test', { minimum: 10, ttl: 300 });
  zone.soa('shortttl.test', { minimum: 300, ttl: 5 });
  const cases = [
    ['x.short.test', 10],
    ['x.shortttl.test', 5],
  ] as const;
  for (const [name, seconds] of cases) {
    await failsWith(t, resolver.a(name), 'NXDOMAIN');
    clock.advance((seconds - 1) * SECOND);
    await failsWith(t, resolver.a(name), 'NXDOMAIN');
    t.equal(zone.queriesFor(name).length, 1, `cached at ${seconds - 1} s`);
    clock.advance(2 * SECOND);
    await failsWith(t, resolver.a(name), 'NXDOMAIN');
    t.equal(zone.queriesFor(name).length, 2, `asked again at ${seconds + 1} s`);
  }

  // Without an SOA in the answer: 60 s.
  zone.remove('', 'SOA');
  await failsWith(t, resolver.a('nosoa.test'), 'NXDOMAIN');
  clock.advance(59 * SECOND);
  await failsWith(t, resolver.a('nosoa.test'), 'NXDOMAIN');
  t.equal(zone.queriesFor('nosoa.test').length, 1, 'cached at 59 s without an SOA');
  clock.advance(2 * SECOND);
  await failsWith(t, resolver.a('nosoa.test'), 'NXDOMAIN');
  t.equal(zone.queriesFor('nosoa.test').length, 2, 'asked again at 61 s');
});

t.test('fresh bypasses the cache and refreshes it', async (t) => {
  const { zone, resolver } = await setup(t);
  zone.txt('_svc-verify.example.test', 'old');
  t.strictSame(await resolver.txt('_svc-verify.example.test'), ['old']);
  zone.remove('_svc-verify.example.test').txt('_svc-verify.example.test', 'new');
  t.strictSame(await resolver.txt('_svc-verify.example.test'), ['old'], 'cached');
  t.strictSame(
    await resolver.txt('_svc-verify.example.test', { fresh: true }),
    ['new'],
    'fresh sees what is published now',
  );
  t.strictSame(await resolver.txt('_svc-verify.example.test'), ['new'], 'and the cache now holds it');
  t.equal(zone.queries.length, 2);

  await failsWith(t, resolver.txt('later.example.test'), 'NXDOMAIN');
  zone.txt('later.example.test', 'published');
  await failsWith(t, resolver.txt('later.example.test'), 'NXDOMAIN');
  t.strictSame(
    await resolver.txt('later.example.test', { fresh: true }),
    ['published'],
    'fresh past a cached NXDOMAIN',
  );
});

t.test('CNAME chains in the answer are followed', async (t) => {
  const { zone, clock, resolver } = await setup(t);
  zone.ttl = 600;
  zone.cname('www.example.test', 'Alias.Example.Test.').cname('alias.example.test', 'web.host.test');
  zone.ttl = 100;
  zone.txt('web.host.test', 'hello').a('web.host.test', '192.0.2.9');
  t.strictSame(await resolver.txt('www.example.test'), ['hello'], 'TXT of the target');
  t.strictSame(await resolver.a('www.example.test'), ['192.0.2.9'], 'A of the target');
  t.equal(await resolver.cname('www.example.test'), 'alias.example.test', 'cname() returns the first hop');
  await failsWith(t, resolver.mx('www.example.test'), 'NODATA');

  clock.advance(101 * SECOND);
  await resolver.a('www.example.test');
  t.equal(zone.queriesFor('www.example.test', 'A').length, 2, 'cached for the shortest TTL in the chain');

  zone.cname('dangling.example.test', 'nowhere.example.test');
  await failsWith(t, resolver.a('dangling.example.test'), 'NXDOMAIN');
  t.equal(await resolver.cname('dangling.example.test'), 'nowhere.example.test');

  zone.cname('loop1.example.test', 'loop2.example.test').cname('loop2.example.test', 'loop1.example.test');
  await failsWith(t, resolver.a('loop1.example.test'), 'NODATA');
});

t.test('names are normalized before the query; concurrent lookups share one query', async (t) => {
  const { zone, resolver } = await setup(t);
  zone.a('example.test', '192.0.2.1');
  const answers = await Promise.all([
    resolver.a('Example.TEST.'),
    resolver.a('example.test'),
    resolver.a('EXAMPLE.test'),
  ]);
  t.strictSame(answers, [['192.0.2.1'], ['192.0.2.1'], ['192.0.2.1']]);
  t.strictSame(
    zone.queries,
    [{ name: 'example.test', type: 'A', transport: 'udp' }],
    'one query, for the normalized name',
  );

  await failsWith(t, resolver.a(`${'a'.repeat(64)}.example.test`), 'NXDOMAIN');
  await failsWith(t, resolver.a('a..example.test'), 'NXDOMAIN');
  t.equal(zone.queries.length, 1, 'a name that cannot exist is not asked about');
});

t.test('the running service resolves through SVC_DNS_SERVERS', async (t) => {
  const zone = await startDnsZone(t);
  zone.txt('_svc-verify.customer.test', 'svc-verify=token123');
  const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort } });
  t.strictSame(await svc.running.ctx.resolver.txt('_svc-verify.customer.test'), ['svc-verify=token123']);
  t.equal(zone.queriesFor('_svc-verify.customer.test', 'TXT').length, 1, 'the query reached the zone');
});
