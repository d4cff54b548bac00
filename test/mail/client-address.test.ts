// mail/client-address.ts: which address is the client, given the socket's peer, X-Forwarded-For and the
// trusted proxies (SVC_TRUSTED_PROXIES).
import t from 'tap';
import { clientAddress, clientKey, isCidr, networks } from '../../mail/client-address.js';

t.test('CIDR blocks and single addresses', async (t) => {
  for (const ok of ['10.0.0.0/8', '127.0.0.1', '::1', '::1/128', 'fd00::/8', '0.0.0.0/0']) t.ok(isCidr(ok), ok);
  for (const bad of ['10.0.0.0/33', '::/129', 'example.com', '10.0.0.0/8/1', '1.2.3', '', '10.0.0.0/x'])
    t.notOk(isCidr(bad), JSON.stringify(bad));
  const trusted = networks(['10.0.0.0/8', '::1', '2001:db8::/32']);
  t.ok(trusted('10.1.2.3'));
  t.ok(trusted('::ffff:10.1.2.3'), 'an IPv4 peer seen on a dual-stack socket');
  t.ok(trusted('::1'));
  t.ok(trusted('2001:db8::5'));
  t.notOk(trusted('11.0.0.1'));
  t.notOk(trusted('127.0.0.1'));
  t.notOk(trusted('not an address'));
  t.notOk(networks([])('10.1.2.3'), 'nobody is trusted by default');
});

t.test('the client address', async (t) => {
  const trusted = networks(['10.0.0.0/8']);
  const cases: [string, string | undefined, string, string][] = [
    ['198.51.100.1', undefined, '198.51.100.1', 'no header: the socket'],
    ['198.51.100.1', '203.0.113.9', '198.51.100.1', 'an untrusted peer writes what it likes: ignored'],
    ['10.0.0.5', '203.0.113.9', '203.0.113.9', 'a trusted proxy names the client'],
    ['10.0.0.5', '6.6.6.6, 203.0.113.9', '203.0.113.9', "the client's own forged hop is left of the real one"],
    ['10.0.0.5', '203.0.113.9, 10.0.0.4', '203.0.113.9', 'two trusted proxies in a row'],
    ['10.0.0.5', '10.0.0.3, 10.0.0.4', '10.0.0.3', 'every hop trusted: the leftmost'],
    ['10.0.0.5', 'garbage, 203.0.113.9', '203.0.113.9', 'a hop that is no address left of the client'],
    ['10.0.0.5', '203.0.113.9, garbage', '10.0.0.5', 'a hop that is no address next to us: the proxy'],
    ['::ffff:10.0.0.5', '::ffff:203.0.113.9', '203.0.113.9', 'IPv4-mapped forms written plainly'],
    ['10.0.0.5', ' 2001:db8::7 ', '2001:db8::7', 'IPv6, with spaces'],
  ];
  for (const [peer, xff, want, why] of cases) t.equal(clientAddress(peer, xff, trusted), want, why);
});

t.test('clientKey: an IPv4 address, or the /64 of an IPv6 one', async (t) => {
  t.equal(clientKey('192.0.2.1'), '192.0.2.1');
  t.equal(clientKey('::ffff:192.0.2.1'), '192.0.2.1');
  t.equal(clientKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  t.equal(clientKey('2001:db8:1:2::ffff'), clientKey('2001:DB8:1:2:ffff:ffff:ffff:ffff'));
});
