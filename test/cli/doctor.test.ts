// `svc doctor <domain>` as operators run it: `node --import ./bin/resolve-sources.ts bin/svc.ts doctor <domain>`
// in a child process, reading the database of a service this test set up through the SDK and asking a loopback
// DNS server this test publishes into.
//
// The service is stopped before the first child runs: the embedded database (PGlite) is held by one
// process at a time, and doctor needs no running service. The same order works on a real Postgres
// (SVC_DATABASE_URL set for the test run), where the child reads the service's own test database.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';
import { runSvc, type Run } from '../helpers/child.js';

const MX_HOST = 'mx.svc.test';
/** A child that runs longer than this has hung (two DNS attempts of 2 s each, plus start-up). */
const CHILD_DEADLINE_MS = 60_000;

function doctor(svc: TestService, zone: DnsZone, ...args: string[]): Promise<Run> {
  const env: Record<string, string> = {
    SVC_DATA_DIR: svc.dataDir,
    SVC_DNS_SERVERS: zone.hostPort,
    // As the test service has them: the expected SPF names SVC_HOSTNAME, the MX records SVC_MX_HOST.
    SVC_HOSTNAME: 'mta.test',
    SVC_MX_HOST: MX_HOST,
    SVC_LOG_LEVEL: 'warn',
    ...(svc.databaseUrl ? { SVC_DATABASE_URL: svc.databaseUrl } : {}),
  };
  return runSvc(['doctor', ...args], env, CHILD_DEADLINE_MS);
}

interface Row {
  status: string;
  label: string;
  type: string;
  host: string;
  value: string;
}

/** The record lines of a report: two-space indent, then status, label, "TYPE host" and the value. */
function rows(stdout: string): Row[] {
  return stdout.split('\n').flatMap((line) => {
    const m = /^ {2}(\S.*?) {2,}(\S.*?) {2,}(TXT|MX|CNAME) (\S+) {2}(.*)$/.exec(line);
    return m ? [{ status: m[1]!, label: m[2]!, type: m[3]!, host: m[4]!, value: m[5]! }] : [];
  });
}

function row(t: Test, run: Run, label: string, host: string): Row {
  const found = rows(run.out).filter((r) => r.label === label && r.host === host);
  t.equal(found.length, 1, `one ${label} line for ${host}`);
  return found[0] ?? { status: '(no line)', label, type: '', host, value: '' };
}

const chunks = (value: string, size = 255) =>
  Array.from({ length: Math.ceil(value.length / size) }, (_, i) => value.slice(i * size, (i + 1) * size));

t.test('svc doctor: ok, missing and wrong records, and the exit codes', async (t) => {
  const zone = await startDnsZone(t);
  const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort, SVC_MX_HOST: MX_HOST } });
  const u = await svc.signup();
  const { organization } = await u.client.console.organizations.create({ name: 'Doctor' });
  const { project } = await u.client.console.projects.create({ name: 'mail', organizationId: organization.id });
  const p = u.client.console.projects;
  const id = project.id;

  const domain = `doc-${randomBytes(5).toString('hex')}.com`;
  const c = await p.domains.create({ id, domain });
  zone.txt(c.dnsRecords.ownership.host, c.dnsRecords.ownership.value);
  svc.clock.advance(11_000);
  await p.domains.verify({ id, domainId: c.id });
  await p.domains.outbound.create({ id, domainId: c.id, ed25519: true });
  const claim = await p.domains.inbound.create({ id, domainId: c.id });
  const o = claim.outbound[0]!;
  const ed = o.dnsRecords.dkimEd25519!;
  const shop = await p.domains.create({ id, domain: `shop.${domain}` });
  await p.domains.capabilities({ id, domainId: shop.id, outbound: false });
  const pending = await p.domains.create({ id, domain: `pending-${randomBytes(5).toString('hex')}.com` });
  // doctor reads the database in a process of its own: the service lets go of it first.
  await svc.running.stop();

  // Published: ownership (above), the RSA key split into 255-character strings, the return path.
  // Not published: the Ed25519 key, DMARC. Wrong: the inbound MX; SPF without our host (a recommendation).
  zone.txt(o.dnsRecords.dkim.host, ...chunks(o.dnsRecords.dkim.value));
  zone.mx(o.dnsRecords.returnPath.mx.host, 10, MX_HOST);
  zone.txt(o.dnsRecords.returnPath.spf.host, o.dnsRecords.returnPath.spf.value);
  zone.txt(domain, 'v=spf1 include:_spf.example.net -all');
  zone.txt(domain, 'site-verification=abc123');
  zone.mx(domain, 10, 'mx.other.test');

  await t.test('some required records missing or wrong: exit 1', async (t) => {
    const run = await doctor(svc, zone, domain);
    t.equal(run.code, 1, `exit 1 (stderr: ${run.stderr})`);
    t.match(
      run.out,
      new RegExp(`^svc doctor ${domain.replace(/\./g, '\\.')}: claim verified`, 'm'),
      'a header names the claim',
    );
    t.notMatch(run.out, /^\{/m, 'no log lines in the report');
    t.equal(rows(run.out).length, 8, 'one line per record: ownership, 2 DKIM, return-path MX and SPF, SPF, DMARC, MX');

    const own = row(t, run, 'ownership', `_svc-verify.${domain}`);
    t.same(own, {
      status: 'ok',
      label: 'ownership',
      type: 'TXT',
      host: `_svc-verify.${domain}`,
      value: JSON.stringify(c.dnsRecords.ownership.value),
    });
    t.same(
      row(t, run, 'DKIM', o.dnsRecords.dkim.host),
      {
        status: 'ok',
        label: 'DKIM',
        type: 'TXT',
        host: o.dnsRecords.dkim.host,
        value: JSON.stringify(o.dnsRecords.dkim.value),
      },
      'DKIM published as split strings: ok, with the full expected value',
    );
    t.same(row(t, run, 'DKIM Ed25519', ed.host), {
      status: 'missing',
      label: 'DKIM Ed25519',
      type: 'TXT',
      host: ed.host,
      value: JSON.stringify(ed.value),
    });
    t.same(row(t, run, 'return-path MX', `bounces.${domain}`), {
      status: 'ok',
      label: 'return-path MX',
      type: 'MX',
      host: `bounces.${domain}`,
      value: `10 ${MX_HOST}`,
    });
    t.equal(row(t, run, 'return-path SPF', `bounces.${domain}`).status, 'ok');
    const spf = row(t, run, 'SPF', domain);
    t.equal(
      spf.status,
      'wrong (found "v=spf1 include:_spf.example.net -all") (recommended)',
      'SPF without our host: wrong, a recommendation; other TXT ignored',
    );
    t.equal(spf.value, JSON.stringify(o.dnsRecords.spf.value));
    t.same(row(t, run, 'DMARC', `_dmarc.${domain}`), {
      status: 'missing (recommended)',
      label: 'DMARC',
      type: 'TXT',
      host: `_dmarc.${domain}`,
      value: JSON.stringify(o.dnsRecords.dmarc.value),
    });
    t.same(row(t, run, 'MX', domain), {
      status: 'wrong (found "mx.other.test")',
      label: 'MX',
      type: 'MX',
      host: domain,
      value: `10 ${MX_HOST}`,
    });
    t.match(
      run.out,
      /^2 of 4 required records right; 2 recommended records missing or different\. Publish/m,
      'the summary counts',
    );
  });

  await t.test('every required record right: exit 0, recommendations still shown', async (t) => {
    zone.txt(ed.host, ed.value);
    zone.remove(domain, 'MX').mx(domain, 10, MX_HOST);
    // The customer's own DMARC policy is as good as the suggested one.
    zone.txt(`_dmarc.${domain}`, 'v=DMARC1; p=reject; rua=mailto:dmarc@example.net');
    const run = await doctor(svc, zone, ` ${domain.toUpperCase()}. `);
    t.equal(run.code, 0, `exit 0 (stderr: ${run.stderr})`);
    t.equal(row(t, run, 'DKIM Ed25519', ed.host).status, 'ok');
    t.equal(row(t, run, 'MX', domain).status, 'ok');
    t.equal(row(t, run, 'DMARC', `_dmarc.${domain}`).status, 'ok');
    t.match(row(t, run, 'SPF', domain).status, /^wrong \(found .*\(recommended\)$/);
    t.match(run.out, /^4 of 4 required records right; 1 recommended record missing or different\.$/m);

    // Our mechanism merged into the customer's SPF record counts.
    zone.remove(domain, 'TXT').txt(domain, 'v=spf1 include:_spf.example.net include:_spf.mta.test -all');
    const merged = await doctor(svc, zone, domain);
    t.equal(row(t, merged, 'SPF', domain).status, 'ok', 'SPF with our mechanism among others: ok');
    zone.txt(domain, o.dnsRecords.spf.value);
    const two = await doctor(svc, zone, domain);
    t.match(row(t, two, 'SPF', domain).status, /^wrong \(found .*RFC 7208 §4\.5/, 'two SPF records: wrong');
    t.equal(two.code, 0, 'a recommendation never fails the check');
  });

  await t.test('a subdomain claim and a pending claim', async (t) => {
    const sub = await doctor(svc, zone, `shop.${domain}`);
    t.equal(sub.code, 1, 'the MX of shop is missing: exit 1');
    t.equal(
      row(t, sub, 'ownership', `_svc-verify.shop.${domain}`).status,
      'missing (no longer needed: verified)',
      'a verified claim does not need its ownership TXT (a subdomain claim never did)',
    );
    t.equal(row(t, sub, 'MX', `shop.${domain}`).status, 'missing');
    t.equal(rows(sub.out).length, 2, 'inbound only: no sending records');
    t.match(sub.out, /^0 of 1 required records right\./m);

    const pend = await doctor(svc, zone, pending.domain);
    t.equal(pend.code, 1, 'pending, nothing published: exit 1');
    t.equal(
      row(t, pend, 'ownership', `_svc-verify.${pending.domain}`).status,
      'missing',
      'the ownership TXT is required while pending',
    );
    zone.txt(`_svc-verify.${pending.domain}`, 'svc-verify=something-else');
    t.equal(
      row(t, await doctor(svc, zone, pending.domain), 'ownership', `_svc-verify.${pending.domain}`).status,
      'wrong (found "svc-verify=something-else")',
    );
    zone.txt(`_svc-verify.${pending.domain}`, pending.dnsRecords.ownership.value);
    const fixed = await doctor(svc, zone, pending.domain);
    t.equal(fixed.code, 0, 'published: exit 0');
    t.equal(row(t, fixed, 'ownership', `_svc-verify.${pending.domain}`).status, 'ok');
  });

  await t.test('usage errors and an unknown domain: exit 2 with a message', async (t) => {
    const [none, invalid, two, unknown] = await Promise.all([
      doctor(svc, zone),
      doctor(svc, zone, 'not a domain'),
      doctor(svc, zone, domain, 'extra.com'),
      doctor(svc, zone, `unknown-${randomBytes(4).toString('hex')}.com`),
    ]);
    t.equal(none.code, 2, 'no domain: 2');
    t.match(none.stderr, /usage: svc doctor <domain>/);
    t.equal(invalid.code, 2, 'an invalid name: 2');
    t.match(invalid.stderr, /"not a domain" is not a valid domain name/);
    t.equal(two.code, 2, 'two names: 2');
    t.equal(unknown.code, 2, 'an unknown domain: 2');
    t.match(unknown.stderr, /unknown-\w+\.com is not claimed on this platform/);
    for (const r of [none, invalid, two, unknown]) t.equal(r.out, '', 'nothing on stdout');
  });

  await t.test('a DNS server that does not answer: exit 1 in bounded time, never a hang', async (t) => {
    zone.behaviour = 'silent';
    const run = await doctor(svc, zone, domain);
    zone.behaviour = 'normal';
    t.equal(run.code, 1, 'exit 1');
    t.ok(run.ms < 30_000, `finished in ${run.ms} ms`);
    const dkim = row(t, run, 'DKIM', o.dnsRecords.dkim.host);
    t.match(dkim.status, /^unknown \(DNS TIMEOUT/, 'each record says the lookup got no answer');
    t.ok(
      rows(run.out).every((r) => r.status.startsWith('unknown')),
      'every line',
    );
  });
});
