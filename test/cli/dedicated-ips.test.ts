// Dedicated IPs as operators meet them, through the real `svc` command in a child process: a start with a
// source address the host does not have stops with one line naming it, and `svc doctor --ips` checks the
// forward-confirmed reverse DNS of each address against a loopback DNS zone.
import t from 'tap';
import { exitWithin, listenEnv, listening, stderrLines, svc, tempDir, type Svc } from '../helpers/child.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';

t.test('start with a source address not on the host exits non-zero with one line naming it', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], {
    ...listenEnv(dataDir),
    SVC_SOURCE_ADDRESSES: '127.0.0.1@mta-a.test,shop.test=192.0.2.1@mta-b.test',
  });
  const exit = await exitWithin(s, 'svc start with a foreign source address');
  t.equal(exit.code, 2, 'exit code 2: bad configuration');
  const lines = stderrLines(s);
  t.equal(lines.length, 1, `exactly one stderr line: ${JSON.stringify(s.stderr())}`);
  t.match(lines[0], /\bSVC_SOURCE_ADDRESSES\b/, 'names the variable');
  t.match(lines[0], /\b192\.0\.2\.1 is not an address of this host\b/, 'names the address');
  t.notMatch(lines[0], /127\.0\.0\.1/, 'and not the address that is the host’s');
  t.notMatch(s.stdout(), /MTA delivering|control plane listening/, 'nothing started');
});

t.test('start with loopback source addresses (all of 127.0.0.0/8 is on lo) runs', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], {
    ...listenEnv(dataDir),
    SVC_SOURCE_ADDRESSES: '127.0.0.1@mta-a.test,shop.test=127.0.0.2@mta-b.test',
  });
  await listening(s);
  s.child.kill('SIGTERM');
  t.same(await exitWithin(s, 'svc start after SIGTERM'), { code: 0, signal: null });
});

function doctorIps(t: Parameters<typeof svc>[0], zone: DnsZone, sources: string, ...extra: string[]): Svc {
  return svc(t, ['doctor', '--ips', ...extra], {
    SVC_DNS_SERVERS: zone.hostPort,
    SVC_HOSTNAME: 'mta.test',
    SVC_SOURCE_ADDRESSES: sources,
    SVC_LOG_LEVEL: 'warn',
  });
}

const outLines = (s: Svc) => s.stdout().split('\n').filter(Boolean);

t.test('svc doctor --ips: PTR names the EHLO name and the name resolves back, or says what is wrong', async (t) => {
  const zone = await startDnsZone(t);
  // Right: 127.0.0.1 ⇄ mta-a.test. Wrong: 127.0.0.2's PTR names another host than its EHLO name.
  zone.ptr('127.0.0.1', 'mta-a.test').a('mta-a.test', '127.0.0.1');
  zone.ptr('127.0.0.2', 'other.test').a('mta-b.test', '127.0.0.2');
  const sources = '127.0.0.1@mta-a.test,shop.test=127.0.0.2@mta-b.test';

  const mixed = doctorIps(t, zone, sources);
  t.equal((await exitWithin(mixed, 'svc doctor --ips')).code, 1, 'one address wrong: exit 1');
  const lines = outLines(mixed);
  t.equal(lines.length, 2, `one line per address: ${JSON.stringify(mixed.stdout())}`);
  t.match(lines[0], /^127\.0\.0\.1 +EHLO mta-a\.test +OK$/);
  t.match(lines[1], /^127\.0\.0\.2 +EHLO mta-b\.test +WRONG: PTR names other\.test, not mta-b\.test$/);
  t.ok(zone.queriesFor('2.0.0.127.in-addr.arpa', 'PTR').length, 'the PTR was asked of SVC_DNS_SERVERS');

  // The PTR fixed, the forward record now points elsewhere: not confirmed.
  zone.remove('2.0.0.127.in-addr.arpa').ptr('127.0.0.2', 'mta-b.test');
  zone.remove('mta-b.test').a('mta-b.test', '127.0.0.9');
  const back = doctorIps(t, zone, sources);
  t.equal((await exitWithin(back, 'svc doctor --ips')).code, 1);
  t.match(outLines(back)[1], /^127\.0\.0\.2 +EHLO mta-b\.test +WRONG: mta-b\.test resolves to 127\.0\.0\.9, not back/);

  // No PTR at all; and an address without @name is checked against SVC_HOSTNAME.
  const bare = doctorIps(t, zone, '127.0.0.3,shop.test=127.0.0.1@mta-a.test');
  t.equal((await exitWithin(bare, 'svc doctor --ips')).code, 1);
  t.match(outLines(bare)[0], /^127\.0\.0\.3 +EHLO mta\.test +WRONG: no PTR record at 3\.0\.0\.127\.in-addr\.arpa$/);
  t.match(outLines(bare)[1], /^127\.0\.0\.1 +EHLO mta-a\.test +OK$/);

  // Everything right, IPv6 too (ip6.arpa nibbles, AAAA back): exit 0.
  zone.remove('mta-b.test').a('mta-b.test', '127.0.0.2');
  zone.ptr('2001:db8::1', 'mta6.test').aaaa('mta6.test', '2001:db8::1');
  const ok = doctorIps(t, zone, `${sources},news.test=2001:db8:0::1@mta6.test`);
  t.equal((await exitWithin(ok, 'svc doctor --ips')).code, 0, `all right: exit 0 ${ok.stdout()}${ok.stderr()}`);
  t.match(outLines(ok)[2], /^2001:db8::1 +EHLO mta6\.test +OK$/);
  t.ok(zone.queriesFor(`1.${'0.'.repeat(23)}8.b.d.0.1.0.0.2.ip6.arpa`, 'PTR').length, 'the ip6.arpa name asked');
});

t.test('svc doctor --ips: DNS that does not answer, nothing configured, bad usage', async (t) => {
  const zone = await startDnsZone(t);
  zone.behaviour = 'silent';
  const silent = doctorIps(t, zone, '127.0.0.1@mta-a.test');
  t.equal((await exitWithin(silent, 'svc doctor --ips')).code, 1, 'no answer: exit 1');
  t.match(outLines(silent)[0], /^127\.0\.0\.1 +EHLO mta-a\.test +UNKNOWN: PTR .* got no answer \(DNS TIMEOUT\)/);
  zone.behaviour = 'normal';
  const none = svc(t, ['doctor', '--ips'], { SVC_DNS_SERVERS: zone.hostPort, SVC_LOG_LEVEL: 'warn' });
  t.equal((await exitWithin(none, 'svc doctor --ips')).code, 2, 'no SVC_SOURCE_ADDRESSES: exit 2');
  t.match(none.stderr(), /SVC_SOURCE_ADDRESSES is not set/);
  const both = doctorIps(t, zone, '127.0.0.1', 'example.com');
  t.equal((await exitWithin(both, 'svc doctor --ips')).code, 2, '--ips and a domain: usage');
  t.match(both.stderr(), /svc doctor --ips/);
});
