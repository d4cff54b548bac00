// mta/inbound/authenticate.ts on its own: the authserv-id of an Authentication-Results field (RFC 8601
// §2.2), removing those in our name byte-exactly (RFC 8601 §5), the end of the header block, the trace
// fields (RFC 5321 §4.4), our resolver in mailauth's (name, type) shape against a loopback zone, and mailauth's
// index loaded at the first message rather than at start.
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import {
  authservIdOf,
  headerEnd,
  mailauthResolver,
  MAX_TXT_OCTETS,
  removeOurAuthResults,
  traceFields,
} from '../../mta/inbound/authenticate.js';
import { createResolver } from '../../mail/dns.js';
import { systemClock } from '../../mail/clock.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

t.test('authservIdOf', async (t) => {
  t.equal(authservIdOf(' mta.test; dkim=pass'), 'mta.test');
  t.equal(authservIdOf(' MTA.Test 1; none'), 'mta.test', 'with a version, any case');
  t.equal(authservIdOf(' (a (nested) comment)\r\n\tmta.test;\r\n\tspf=pass'), 'mta.test', 'after comments, folded');
  t.equal(authservIdOf(' "mta.test"; none'), 'mta.test', 'a quoted-string');
  t.equal(authservIdOf(' mta.test.evil.example; none'), 'mta.test.evil.example');
  t.equal(authservIdOf(' ;'), null);
});

t.test('removeOurAuthResults keeps every other byte', async (t) => {
  const ours = new Set(['mta.test']);
  const header = Buffer.from(
    'Received: from a\r\n\tby b\r\n' +
      'Authentication-Results: mta.test; dkim=pass\r\n' +
      'authentication-results  :  (x) MTA.TEST;\r\n spf=pass\r\n\tdmarc=pass\r\n' +
      'Authentication-Results: mta.test.evil.example; none\r\n' +
      'X-Authentication-Results: mta.test; none\r\n' +
      'Subject: s\r\n\r\n',
  );
  const out = removeOurAuthResults(header, ours);
  t.equal(out.removed, 2);
  t.equal(
    out.header.toString(),
    'Received: from a\r\n\tby b\r\n' +
      'Authentication-Results: mta.test.evil.example; none\r\n' +
      'X-Authentication-Results: mta.test; none\r\n' +
      'Subject: s\r\n\r\n',
  );
  const none = Buffer.from('Subject: s\n\n');
  t.equal(removeOurAuthResults(none, ours).header, none, 'nothing removed: the same buffer');
  t.equal(
    removeOurAuthResults(Buffer.from('Authentication-Results: mta.test; x\nSubject: s\n\n'), ours).header.toString(),
    'Subject: s\n\n',
    'bare LF line ends',
  );
});

t.test('headerEnd', async (t) => {
  t.equal(headerEnd(Buffer.from('A: b\r\n\r\nbody')), 8);
  t.equal(headerEnd(Buffer.from('A: b\n\nbody')), 6);
  t.equal(headerEnd(Buffer.from('\r\nbody')), 2, 'an empty header');
  t.equal(headerEnd(Buffer.from('A: b\r\nC: d')), -1, 'no blank line yet');
  t.equal(headerEnd(Buffer.from('A: b\r\n\r')), -1, 'a blank line not complete yet');
});

t.test('traceFields', async (t) => {
  const base = {
    helo: 'client.test',
    ip: '127.0.0.1',
    hostname: 'mta.test',
    protocol: 'ESMTPS',
    id: 'ABC',
    recipient: 'info@r.test',
    sender: 'ada@s.test',
    now: Date.UTC(2026, 10, 3, 4, 5, 6),
  };
  t.equal(
    traceFields({ ...base, tls: { version: 'TLSv1.3', name: 'TLS_AES_256_GCM_SHA384' } }),
    'Return-Path: <ada@s.test>\r\n' +
      'Received: from client.test ([127.0.0.1])\r\n\tby mta.test (svc-mail) with ESMTPS id ABC\r\n' +
      '\t(using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384)\r\n' +
      '\tfor <info@r.test>; Tue, 03 Nov 2026 04:05:06 +0000\r\n',
  );
  const odd = traceFields({ ...base, helo: 'x (y)\t;', ip: '::1', sender: '', tls: null });
  t.match(odd, /^Return-Path: <>\r\nReceived: from x\?\?y\?\?\? \(\[IPv6:::1\]\)/, 'untrusted helo made inert');
});

t.test('mailauthResolver: node:dns shapes and error codes', async (t) => {
  const zone = await startDnsZone(t);
  zone.txt('t.test', 'v=spf1 ', '-all').mx('t.test', 10, 'mx.t.test').a('mx.t.test', '127.0.0.1');
  const r = mailauthResolver(createResolver({ servers: [{ host: zone.host, port: zone.port }], clock: systemClock }));
  t.same(await r('t.test', 'TXT'), [['v=spf1 -all']]);
  t.same(await r('t.test', 'MX'), [{ exchange: 'mx.t.test', priority: 10 }]);
  t.same(await r('mx.t.test', 'A'), ['127.0.0.1']);
  await t.rejects(r('nope.t.test', 'TXT'), { code: 'ENOTFOUND' });
  await t.rejects(r('mx.t.test', 'TXT'), { code: 'ENODATA' });
  await t.rejects(r('1.0.0.127.in-addr.arpa', 'PTR'), { code: 'ENOTIMP' });
  // A record longer than mailauth is shown is left out; with nothing left, no data.
  const chunks = (n: number) => Array.from({ length: n }, () => 'x'.repeat(255));
  zone
    .txt('long.t.test', ...chunks(17))
    .txt('long.t.test', 'v=spf1 -all')
    .txt('longer.t.test', ...chunks(17));
  t.same(await r('long.t.test', 'TXT'), [['v=spf1 -all']]);
  await t.rejects(r('longer.t.test', 'TXT'), { code: 'ENODATA' });
  t.ok(17 * 255 > MAX_TXT_OCTETS);
});

t.test("mailauth's index is loaded by the first message authenticated, not by importing the module", async (t) => {
  // In a process of its own, which imports nothing else that could load mailauth.
  const fixture = fileURLToPath(new URL('../fixtures/first-message-loads-mailauth.ts', import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [...FROM_SOURCES, fixture], { timeout: 60_000 });
  const seen = JSON.parse(stdout) as { atImport: boolean; afterMessage: boolean; results: string };
  t.equal(seen.atImport, false, 'not loaded when the module is imported (what every start of an MX listener pays)');
  t.equal(seen.afterMessage, true, 'loaded once a message is authenticated');
  t.match(seen.results, /^Authentication-Results: mta\.test;.*dkim=none/s, 'and that message was authenticated');
});
