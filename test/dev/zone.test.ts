// The development DNS zone (docs/development.md) in front of the real service: every verification the API
// offers passes through it at once (a claim, sending on a subdomain with Ed25519, a DKIM rotation,
// receiving, a custom webmail domain), because it publishes exactly what the API asks for; every other
// domain's MX is the sink; the platform's names are on loopback.
import t from 'tap';
import { promises as dns } from 'node:dns';
import { startTestService } from '../helpers/service.js';
import { startDevZone } from '../../dev/zone.js';
import { devLookup } from '../../dev/records.js';

t.test('claims, DKIM, rotation, MX and custom domains verify through the dev zone at once', async (t) => {
  let lookup: ReturnType<typeof devLookup> | null = null;
  const zone = await startDevZone({
    host: '127.0.0.1',
    port: 0,
    lookup: (name, type) => (lookup ? lookup(name, type) : Promise.resolve('servfail')),
  });
  t.teardown(() => zone.stop());
  const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort } });
  const config = svc.running.ctx.config;
  const sinkHost = `sink.${config.hostname}`;
  lookup = devLookup(() => svc.running.storage.db, {
    hostname: config.hostname,
    mxHost: config.mxHost,
    webmailHost: config.webmailHost,
    sinkHost,
  });
  // Node 24's resolveMx adds `type: 'MX'` to each record (Node 20's does not): compare the two fields that count.
  const mx = (rs: { exchange: string; priority: number }[]) =>
    rs.map(({ exchange, priority }) => ({ exchange, priority }));
  const resolver = new dns.Resolver();
  resolver.setServers([zone.hostPort]);

  const owner = await svc.signup();
  const me = owner.client;
  const { organization } = await me.console.organizations.create({ name: 'Zone Org' });
  const { project } = await me.console.projects.create({ name: 'p', organizationId: organization.id });
  const id = project.id;

  // Before anything is claimed, the zone publishes nothing for the name; a verification would fail.
  await t.rejects(resolver.resolveTxt('_svc-verify.acme.test'), { code: 'ENOTFOUND' }, 'NXDOMAIN before a claim');

  const claim = await me.console.projects.domains.create({ id, domain: 'acme.test' });
  t.equal(claim.status, 'pending');
  const verified = await me.console.projects.domains.verify({ id, domainId: claim.id });
  t.equal(verified.status, 'verified', 'the ownership TXT is published at once');

  const withOut = await me.console.projects.domains.outbound.create({
    id,
    domainId: claim.id,
    subdomain: 'mail',
    ed25519: true,
  });
  const out = withOut.outbound.find((o) => o.domain === 'mail.acme.test')!;
  t.ok(out, 'sending on a subdomain');
  const v = await me.console.projects.outbound.verify({ id, capId: out.id });
  t.equal(v.status, 'verified', 'both DKIM records (RSA and Ed25519) are published at once');
  const dkim = out.dnsRecords.dkim;
  t.same(
    (await resolver.resolveTxt(dkim.host)).map((c) => c.join('')),
    [dkim.value],
    'the DKIM TXT is exactly what the API asked for',
  );
  t.same(
    mx(await resolver.resolveMx(out.dnsRecords.returnPath.mx.host)),
    [{ exchange: config.mxHost, priority: 10 }],
    'the return-path MX points at SVC_MX_HOST',
  );

  const rotated = await me.console.projects.outbound.dkim.rotate({ id, capId: out.id });
  const pending = rotated.outbound.dkim.pending;
  t.ok(pending, 'a pending key');
  const promoted = await me.console.projects.outbound.verify({ id, capId: out.id });
  t.equal(promoted.outbound.selector, pending?.selector, 'its record is published, so verify promotes it');

  const withIn = await me.console.projects.domains.inbound.create({ id, domainId: claim.id });
  const inbound = withIn.inbound.find((i) => i.domain === 'acme.test')!;
  const vi = await me.console.projects.inbound.verify({ id, capId: inbound.id });
  t.equal(vi.status, 'verified', 'the MX of a receiving domain points at SVC_MX_HOST');

  const { customDomain } = await me.console.organizations.customDomains.create({
    id: organization.id,
    domain: 'webmail.acme.test',
  });
  const vc = await me.console.organizations.customDomains.verify({ id: organization.id, domainId: customDomain.id });
  t.equal(vc.status, 'verified', 'a custom webmail domain CNAMEs to the webmail host');

  t.same(
    mx(await resolver.resolveMx('anywhere.example')),
    [{ exchange: sinkHost, priority: 10 }],
    'every other domain: the sink',
  );
  t.same(await resolver.resolve4(sinkHost), ['127.0.0.1'], 'the sink is on loopback');
  t.same(await resolver.resolve4(config.mxHost), ['127.0.0.1'], 'so is the MX host');
  await t.rejects(resolver.resolveTxt('_mta-sts.anywhere.example'), { code: 'ENOTFOUND' }, 'no MTA-STS policy');
});
