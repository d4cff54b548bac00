// The records a sending capability suggests (docs/dns-records.md): SPF as an include of the operator's record,
// merged into the customer's own when the verify step found one (RFC 7208 §3.2: never a second SPF record), and
// DMARC with aggregate reports to a mailbox at the domain.
import t from 'tap';
import {
  isSpfRecord,
  mergeSpfInclude,
  operatorSpfRecord,
  outboundRecords,
  type OutboundKeys,
} from '../../mail/dns-records.js';

const hosts = { hostname: 'mta.example.net', mxHost: 'mx.example.net' };
const keys: OutboundKeys = {
  domain: 'shop.test',
  dkimSelector: 'svcr0123456789',
  dkimPublic: 'AAAA',
  ed25519Selector: null,
  ed25519Public: null,
  returnPathSubdomain: 'bounces',
};

t.test('SPF: an include of the operator record, never a complete apex record', async (t) => {
  const { spf } = outboundRecords(keys, hosts).dnsRecords;
  t.same(spf, { host: 'shop.test', type: 'TXT', value: 'v=spf1 include:_spf.mta.example.net ~all' });
  t.same(operatorSpfRecord(hosts), {
    host: '_spf.mta.example.net',
    type: 'TXT',
    value: 'v=spf1 a:mta.example.net -all',
  });
  t.ok(isSpfRecord(spf.value));
});

t.test('SPF: merged into the record the verify step found, with a note saying so', async (t) => {
  const existing = 'v=spf1 include:_spf.google.com ip4:192.0.2.1 ~all';
  const { spf } = outboundRecords({ ...keys, publishedSpf: existing }, hosts).dnsRecords;
  t.equal(spf.host, 'shop.test');
  t.equal(spf.value, 'v=spf1 include:_spf.google.com ip4:192.0.2.1 include:_spf.mta.example.net ~all');
  t.match(spf.note, /^Merge into your existing SPF record/);
  t.match(spf.note, existing, 'the note names the record found');
  // Already included: the record as it is, and nothing to merge.
  const done = outboundRecords({ ...keys, publishedSpf: 'v=spf1  include:_spf.mta.example.net -all' }, hosts);
  t.equal(done.dnsRecords.spf.value, 'v=spf1 include:_spf.mta.example.net -all');
  t.notMatch(done.dnsRecords.spf.note, /Merge/);
  // Nothing found (or never looked): the plain include, no note.
  t.equal(outboundRecords({ ...keys, publishedSpf: null }, hosts).dnsRecords.spf.note, undefined);
});

t.test('mergeSpfInclude: before all or redirect, else at the end; never twice', async (t) => {
  const inc = '_spf.mta.example.net';
  const cases: [string, string][] = [
    ['v=spf1 -all', `v=spf1 include:${inc} -all`],
    ['v=spf1 mx ?all', `v=spf1 mx include:${inc} ?all`],
    ['v=spf1 a mx +all', `v=spf1 a mx include:${inc} +all`],
    ['v=spf1 mx all', `v=spf1 mx include:${inc} all`],
    ['v=spf1 mx redirect=_spf.example.org', `v=spf1 mx include:${inc} redirect=_spf.example.org`],
    ['v=spf1 mx', `v=spf1 mx include:${inc}`],
    ['v=spf1', `v=spf1 include:${inc}`],
    [`v=spf1 +include:${inc.toUpperCase()} ~all`, `v=spf1 +include:${inc.toUpperCase()} ~all`],
    ['  v=spf1   ip6:2001:db8::/32   ~all ', `v=spf1 ip6:2001:db8::/32 include:${inc} ~all`],
  ];
  for (const [given, want] of cases) t.equal(mergeSpfInclude(given, inc), want, given);
});

t.test('DMARC: reports to a mailbox at the domain, with a note', async (t) => {
  const { dmarc } = outboundRecords(keys, hosts).dnsRecords;
  t.equal(dmarc.host, '_dmarc.shop.test');
  t.equal(dmarc.value, 'v=DMARC1; p=none; rua=mailto:dmarc-reports@shop.test; adkim=r; aspf=r');
  t.match(dmarc.note, /dmarc-reports@shop\.test/);
  t.notOk(isSpfRecord(dmarc.value));
});
