// addressesNotOnHost against interface tables as os.networkInterfaces() gives them on Linux: lo lists only
// 127.0.0.1 and ::1, yet all of 127.0.0.0/8 is the host's while lo is up.
import t from 'tap';
import os from 'node:os';
import { addressesNotOnHost, checkSourceAddressesOnHost } from '../../config/host-addresses.js';
import { loadConfig, ConfigError } from '../../config/load.js';

type Interfaces = ReturnType<typeof os.networkInterfaces>;
const entry = (address: string, internal: boolean): os.NetworkInterfaceInfo =>
  ({
    address,
    netmask: address.includes(':') ? 'ffff:ffff:ffff:ffff::' : '255.0.0.0',
    family: address.includes(':') ? 'IPv6' : 'IPv4',
    mac: '00:00:00:00:00:00',
    internal,
    cidr: null,
    ...(address.includes(':') ? { scopeid: 0 } : {}),
  }) as os.NetworkInterfaceInfo;
const host: Interfaces = {
  lo: [entry('127.0.0.1', true), entry('::1', true)],
  eth0: [entry('192.0.2.10', false), entry('2001:db8::10', false)],
};
const sources = (raw: string) => loadConfig({ SVC_SOURCE_ADDRESSES: raw }).sourceAddresses;

t.test('addresses of the interfaces, any 127.x with lo up, ::1', async (t) => {
  t.same(addressesNotOnHost(sources('192.0.2.10@a.test,x.test=2001:DB8:0::10,y.test=127.0.0.2,z.test=::1'), host), []);
  t.same(addressesNotOnHost(sources('192.0.2.1,x.test=127.0.0.7,y.test=2001:db8::1'), host), [
    '192.0.2.1',
    '2001:db8::1',
  ]);
  // Without an up loopback interface, 127.0.0.2 is no more the host's than any other address.
  t.same(addressesNotOnHost(sources('127.0.0.2'), { eth0: host.eth0 }), ['127.0.0.2']);
  t.same(addressesNotOnHost(sources('127.0.0.1'), {}), ['127.0.0.1']);
  t.same(addressesNotOnHost(loadConfig({}).sourceAddresses, {}), [], 'unset: nothing to check');
});

t.test('the start stops with one line naming the variable and every missing address', async (t) => {
  t.doesNotThrow(() => checkSourceAddressesOnHost(sources('127.0.0.5@mta.test'), host));
  let thrown: unknown = null;
  try {
    checkSourceAddressesOnHost(sources('192.0.2.1,a.test=198.51.100.1,b.test=192.0.2.10'), host);
  } catch (err) {
    thrown = err;
  }
  t.type(thrown, ConfigError);
  t.match((thrown as ConfigError).problems, [
    /^invalid configuration: SVC_SOURCE_ADDRESSES: 192\.0\.2\.1, 198\.51\.100\.1 are not an address of this host/,
  ]);
  t.equal((thrown as ConfigError).problems.length, 1, 'one line');
  // On this machine, as `svc start` calls it.
  t.doesNotThrow(() => checkSourceAddressesOnHost(sources('127.0.0.1,a.test=127.0.0.2')));
});
