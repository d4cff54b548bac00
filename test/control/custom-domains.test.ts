// docs/api.md §4.4 custom webmail domains, §3 (their states), §4.12 (the public allow check), §5.4 (non-members
// 404, roles 403) and §7 (invalid_domain, cname_not_found, custom_domain_taken), through the SDK against
// the real service, whose resolver asks a real dns2 server on loopback (SVC_DNS_SERVERS).
import t from 'tap';
import { SvcError, type Client } from '@svc-mail/sdk';
import { startTestService, uniqueEmail, type SignedUp } from '../helpers/service.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { errorOf } from '../helpers/errors.js';

const WEBMAIL = 'webmail.svc.test';
const ADDRESSES = ['192.0.2.10', '192.0.2.11', '2001:db8::10'];
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const zone = await startDnsZone(t);
const svc = await startTestService(t, {
  env: { SVC_DNS_SERVERS: zone.hostPort, SVC_WEBMAIL_HOST: WEBMAIL, SVC_WEBMAIL_ADDRESSES: ADDRESSES.join(',') },
});
// Frozen, and moved on by hand before each call: rc.now is then known exactly, and buckets refill.
svc.clock.freeze();
const tick = () => {
  svc.clock.advance(1_000);
  return new Date(svc.clock.now()).toISOString();
};
const anonymous = svc.client();

interface Org {
  owner: SignedUp;
  id: string;
  orgClient: Client;
}

async function newOrg(tag = 'cd'): Promise<Org> {
  tick();
  const owner = await svc.signup(uniqueEmail(`${tag}-owner`));
  tick();
  const res = await owner.client.console.organizations.create({ name: `${tag} ${owner.userId.slice(0, 8)}` });
  const { tokenId, secret } = res.organizationToken;
  return { owner, id: res.organization.id, orgClient: svc.client({ keyId: tokenId, secret }) };
}

async function joined(org: Org, role: string): Promise<SignedUp> {
  tick();
  const { code } = await org.owner.client.console.organizations.joinCodes.create({ id: org.id, role });
  tick();
  const u = await svc.signup(uniqueEmail(role));
  tick();
  await u.client.console.organizations.join({ code });
  return u;
}

/** The status a call ended with: 200 or the SvcError status. */
async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    if (err instanceof SvcError) return err.status;
    throw err;
  }
}

async function allowed(domain: string): Promise<number> {
  tick();
  return statusOf(anonymous.v1.services.customDomainAllowed({ domain }));
}

async function listed(org: Org, domainId: string) {
  tick();
  const { customDomains } = await org.owner.client.console.organizations.customDomains.list({ id: org.id });
  return customDomains.find((d) => d.id === domainId);
}

const main = await newOrg('main');
const cd = main.owner.client.console.organizations.customDomains;

t.test('register: a pending domain, the CNAME to publish and the next step', async (t) => {
  const now = tick();
  const res = await cd.create({ id: main.id, domain: '  Mail.Register.TEST. ' });
  t.match(res.customDomain, {
    domain: 'mail.register.test',
    status: 'pending',
    verified_at: null,
    last_verify_attempt: null,
    created_at: now,
  });
  t.match(res.customDomain.id, UUID_RE);
  t.same(Object.keys(res.customDomain).sort(), [
    'created_at',
    'domain',
    'id',
    'last_verify_attempt',
    'status',
    'verified_at',
  ]);
  t.match(res.dnsRecord, { host: 'mail.register.test', type: 'CNAME', value: WEBMAIL });
  t.match(res.dnsRecord.note, WEBMAIL);
  t.match(res.dnsRecord.note, ADDRESSES[0] as string, 'the note names the apex alternative');
  t.match(res.nextStep, `/console/v1/organizations/${main.id}/custom-domains/${res.customDomain.id}/verify`);

  tick();
  const { customDomains } = await cd.list({ id: main.id });
  const row = customDomains.find((d) => d.id === res.customDomain.id);
  t.same(row, { ...res.customDomain, dnsRecord: res.dnsRecord }, 'listed with its dnsRecord');
});

t.test('an IDN is stored and answered as punycode', async (t) => {
  tick();
  const res = await cd.create({ id: main.id, domain: 'Post.Bücher.test' });
  t.equal(res.customDomain.domain, 'post.xn--bcher-kva.test');
  t.equal(res.dnsRecord.host, 'post.xn--bcher-kva.test');
  tick();
  t.match(
    await errorOf(cd.create({ id: main.id, domain: 'post.xn--bcher-kva.test' })),
    { status: 409, code: 'custom_domain_taken' },
    'the punycode spelling is the same domain',
  );
});

t.test('400 invalid_domain for names that are not host names', async (t) => {
  const bad = [
    '-bad.example',
    'a..b',
    'localhost',
    '1.2.3.4',
    'x'.repeat(300),
    `${'abcdefghi.'.repeat(30)}test`,
    'bad-.example',
    'under_score.example',
    'xn--zz.example',
    '::1',
    ' ',
  ];
  for (const domain of bad) {
    tick();
    const err = await errorOf(cd.create({ id: main.id, domain }));
    t.match(
      err,
      { status: 400, code: 'invalid_domain' },
      JSON.stringify(domain.length > 40 ? `${domain.slice(0, 20)}… (${domain.length})` : domain),
    );
  }
  tick();
  const { customDomains } = await cd.list({ id: main.id });
  t.notOk(
    customDomains.some((d) => d.domain.includes('bad') || d.domain.includes('..')),
    'nothing was stored',
  );
});

t.test('409 custom_domain_taken: once per platform, whatever the spelling, also at the same moment', async (t) => {
  const other = await newOrg('other');
  tick();
  await cd.create({ id: main.id, domain: 'mail.taken.test' });
  for (const domain of ['mail.taken.test', 'MAIL.Taken.test.']) {
    tick();
    t.match(
      await errorOf(other.owner.client.console.organizations.customDomains.create({ id: other.id, domain })),
      { status: 409, code: 'custom_domain_taken' },
      `another org: ${domain}`,
    );
  }
  tick();
  t.match(
    await errorOf(cd.create({ id: main.id, domain: 'mail.taken.test' })),
    { status: 409, code: 'custom_domain_taken' },
    'the same org again',
  );

  // Two organizations register one name at the same moment: the UNIQUE constraint lets exactly one in.
  const third = await newOrg('third');
  tick();
  const results = await Promise.all([
    statusOf(
      other.owner.client.console.organizations.customDomains.create({ id: other.id, domain: 'race.taken.test' }),
    ),
    statusOf(
      third.owner.client.console.organizations.customDomains.create({ id: third.id, domain: 'race.taken.test' }),
    ),
    statusOf(main.orgClient.console.organizations.customDomains.create({ id: main.id, domain: 'Race.Taken.Test' })),
  ]);
  t.same(results.sort(), [200, 409, 409], 'one registration, two 409');

  // The platform's own names are not for customers.
  for (const domain of [WEBMAIL, `x.${WEBMAIL}`, 'mta.test']) {
    tick();
    t.match(
      await errorOf(cd.create({ id: main.id, domain })),
      { status: 409, code: 'custom_domain_taken' },
      `reserved: ${domain}`,
    );
  }
});

t.test('verify by CNAME: last_verify_attempt on every call, verified_at only on success', async (t) => {
  tick();
  const { customDomain } = await cd.create({ id: main.id, domain: 'webmail.cname.test' });
  const id = customDomain.id;

  // Nothing published: NXDOMAIN.
  let now = tick();
  let err = await errorOf(cd.verify({ id: main.id, domainId: id }));
  t.match(err, { status: 400, code: 'cname_not_found' }, 'nothing published');
  t.match(err.message, /no CNAME and no A or AAAA records/);
  t.match(
    await listed(main, id),
    { status: 'pending', verified_at: null, last_verify_attempt: now },
    'attempt recorded, not verified',
  );

  // A CNAME pointing elsewhere.
  zone.cname('webmail.cname.test', 'ghs.googlehosted.test');
  now = tick();
  err = await errorOf(cd.verify({ id: main.id, domainId: id }));
  t.match(err, { status: 400, code: 'cname_not_found' }, 'CNAME elsewhere');
  t.match(err.message, 'ghs.googlehosted.test', 'the message says what was found');
  t.match(err.details, {
    expected: { host: 'webmail.cname.test', type: 'CNAME', value: WEBMAIL },
    found: { cname: 'ghs.googlehosted.test' },
  });
  t.match(
    await listed(main, id),
    { status: 'pending', verified_at: null, last_verify_attempt: now },
    'the later attempt is recorded',
  );
  t.equal(await allowed('webmail.cname.test'), 404, 'a pending domain is not allowed');

  // Fixed: the next verify sees it at once (lookups skip the cache).
  zone.remove('webmail.cname.test').cname('webmail.cname.test', `${WEBMAIL.toUpperCase()}.`);
  now = tick();
  const ok = await cd.verify({ id: main.id, domainId: id });
  t.match(ok, { status: 'verified', domain: 'webmail.cname.test' });
  t.match(ok.customDomain, { id, status: 'verified', verified_at: now, last_verify_attempt: now });
  t.match(await listed(main, id), { status: 'verified', verified_at: now, last_verify_attempt: now });
  t.equal(await allowed('webmail.cname.test'), 200, 'verified: allowed');
  t.ok(zone.queriesFor('webmail.cname.test', 'CNAME').length >= 3, 'each verify asked the DNS server');

  // Verify again after the record went away: 400 and a new attempt, but it stays verified since it was.
  const verifiedAt = now;
  zone.remove('webmail.cname.test').cname('webmail.cname.test', 'elsewhere.test');
  now = tick();
  t.match(await errorOf(cd.verify({ id: main.id, domainId: id })), { status: 400, code: 'cname_not_found' });
  t.match(await listed(main, id), { status: 'verified', verified_at: verifiedAt, last_verify_attempt: now });
  zone.remove('webmail.cname.test').cname('webmail.cname.test', WEBMAIL);
  now = tick();
  t.match(
    (await cd.verify({ id: main.id, domainId: id })).customDomain,
    { verified_at: verifiedAt, last_verify_attempt: now },
    'verified_at keeps when it first became verified',
  );
});

t.test('verify an apex by A/AAAA: all records within SVC_WEBMAIL_ADDRESSES, at least one', async (t) => {
  // All within (the AAAA written out in full: addresses compare as addresses, not strings).
  zone.a('apex-ok.test', '192.0.2.10').a('apex-ok.test', '192.0.2.11').aaaa('apex-ok.test', '2001:0db8:0:0:0:0:0:0010');
  tick();
  const good = (await cd.create({ id: main.id, domain: 'apex-ok.test' })).customDomain;
  let now = tick();
  t.match(await cd.verify({ id: main.id, domainId: good.id }), {
    status: 'verified',
    domain: 'apex-ok.test',
    customDomain: { verified_at: now },
  });
  t.equal(await allowed('apex-ok.test'), 200);

  // One address outside the list fails the whole domain.
  zone.a('apex-mixed.test', '192.0.2.10').a('apex-mixed.test', '198.51.100.7').aaaa('apex-mixed.test', '2001:db8::10');
  tick();
  const mixed = (await cd.create({ id: main.id, domain: 'apex-mixed.test' })).customDomain;
  now = tick();
  const err = await errorOf(cd.verify({ id: main.id, domainId: mixed.id }));
  t.match(err, { status: 400, code: 'cname_not_found' });
  t.match(err.message, '198.51.100.7', 'the message names the address outside');
  t.match(err.details, {
    found: { cname: null, a: ['192.0.2.10', '198.51.100.7'] },
    notWebmailAddresses: ['198.51.100.7'],
  });
  t.match(await listed(main, mixed.id), { status: 'pending', verified_at: null, last_verify_attempt: now });
  t.equal(await allowed('apex-mixed.test'), 404);

  // An AAAA alone, outside.
  zone.aaaa('apex-v6.test', '2001:db8::99');
  tick();
  const v6 = (await cd.create({ id: main.id, domain: 'apex-v6.test' })).customDomain;
  tick();
  t.match(await errorOf(cd.verify({ id: main.id, domainId: v6.id })), {
    status: 400,
    code: 'cname_not_found',
    message: /2001:db8::99/,
  });

  // A CNAME wins over addresses: a name that has one is judged by it.
  zone.cname('www.apex-ok.test', 'apex-ok.test');
  tick();
  const www = (await cd.create({ id: main.id, domain: 'www.apex-ok.test' })).customDomain;
  tick();
  t.match(
    await errorOf(cd.verify({ id: main.id, domainId: www.id })),
    { status: 400, code: 'cname_not_found', message: /points at apex-ok\.test/ },
    'a CNAME to a name that has webmail addresses is not the webmail host',
  );
});

t.test('a DNS server that does not answer: a clear 400 with a message, never a hang', async (t) => {
  tick();
  const { customDomain } = await cd.create({ id: main.id, domain: 'silent.dns.test' });
  zone.cname('silent.dns.test', WEBMAIL);
  for (const behaviour of ['silent', 'servfail'] as const) {
    zone.behaviour = behaviour;
    const now = tick();
    const started = Date.now();
    const err = await errorOf(cd.verify({ id: main.id, domainId: customDomain.id })).finally(
      () => (zone.behaviour = 'normal'),
    );
    t.match(err, { status: 400, code: 'cname_not_found', message: /DNS did not answer/ }, behaviour);
    t.match(err.details, { dnsFailure: behaviour === 'silent' ? 'TIMEOUT' : 'SERVFAIL' });
    t.ok(Date.now() - started < 30_000, `${behaviour}: answered in ${Date.now() - started} ms`);
    t.match(
      await listed(main, customDomain.id),
      { status: 'pending', verified_at: null, last_verify_attempt: now },
      'the attempt is kept',
    );
  }
  tick();
  t.match(
    await cd.verify({ id: main.id, domainId: customDomain.id }),
    { status: 'verified' },
    'answers again once DNS does',
  );
});

t.test('the allow check: public, normalized, true only for a verified domain, 404 after delete', async (t) => {
  zone.cname('mail.allow.test', WEBMAIL);
  zone.cname('post.xn--bcher-kva.allow.test', WEBMAIL);
  tick();
  const a = (await cd.create({ id: main.id, domain: 'mail.allow.test' })).customDomain;
  tick();
  const idn = (await cd.create({ id: main.id, domain: 'post.bücher.allow.test' })).customDomain;
  tick();
  const pending = (await cd.create({ id: main.id, domain: 'pending.allow.test' })).customDomain;

  t.equal(await allowed('mail.allow.test'), 404, 'registered but not verified');
  tick();
  await cd.verify({ id: main.id, domainId: a.id });
  tick();
  await cd.verify({ id: main.id, domainId: idn.id });

  tick();
  t.same(
    await anonymous.v1.services.customDomainAllowed({ domain: 'mail.allow.test' }),
    { allowed: true },
    'no credential needed',
  );
  t.equal(await allowed('MAIL.Allow.Test.'), 200, 'normalized like registration');
  t.equal(await allowed('post.bücher.allow.test'), 200, 'Unicode spelling of a verified IDN');
  t.equal(await allowed('post.xn--bcher-kva.allow.test'), 200, 'punycode spelling');
  t.equal(await allowed(pending.domain), 404, 'pending');
  t.equal(await allowed('unknown.allow.test'), 404, 'unknown');
  t.equal(await allowed('x.mail.allow.test'), 404, 'a subdomain of a verified domain is another host');
  t.equal(await allowed('a..b'), 404, 'not a host name');
  tick();
  const err = await errorOf(anonymous.v1.services.customDomainAllowed({ domain: 'unknown.allow.test' }));
  t.match(err, { status: 404, code: 'not_found' });
  t.notMatch(err.message, 'unknown.allow.test', 'reveals nothing beyond the boolean');

  tick();
  t.same(await cd.delete({ id: main.id, domainId: a.id }), { ok: true });
  t.equal(await allowed('mail.allow.test'), 404, 'deleted: no longer allowed');
  t.notOk(await listed(main, a.id), 'deleted: no longer listed');
  tick();
  t.match(
    await errorOf(cd.delete({ id: main.id, domainId: a.id })),
    { status: 404, code: 'not_found' },
    'delete twice',
  );
  tick();
  t.match(
    await errorOf(cd.verify({ id: main.id, domainId: a.id })),
    { status: 404, code: 'not_found' },
    'verify a deleted domain',
  );

  // Deleted, the name is free for any organization again.
  const other = await newOrg('reuse');
  tick();
  const again = await other.owner.client.console.organizations.customDomains.create({
    id: other.id,
    domain: 'mail.allow.test',
  });
  t.equal(again.customDomain.status, 'pending', 'registered afresh, pending');
  t.equal(await allowed('mail.allow.test'), 404, 'and not allowed until verified again');
});

t.test('the allow check is answered from the unique index on domain', async (t) => {
  const db = svc.running.storage.db;
  const plan = await db.tx(async (q) => {
    // Tiny tables are scanned whatever the indexes; forbid that to see which index serves the query.
    await q.query('SET LOCAL enable_seqscan = off');
    return q.query<Record<string, string>>(
      `EXPLAIN SELECT 1 FROM custom_domains WHERE domain = 'mail.allow.test' AND status = 'verified'`,
    );
  });
  t.match(plan.map((r) => Object.values(r)[0]).join('\n'), /Index (Only )?Scan using custom_domains_domain_key/);
});

t.test('access: non-members 404, roles without domains:manage 403, org token and staff act', async (t) => {
  const org = await newOrg('access');
  const api = (c: Client) => c.console.organizations.customDomains;
  tick();
  const { customDomain } = await api(org.owner.client).create({ id: org.id, domain: 'mail.access.test' });
  zone.cname('mail.access.test', WEBMAIL);

  // Another organization's owner and token, by this org's id: 404 everywhere, existence not leaked.
  const outsider = await newOrg('outsider');
  for (const [who, c] of [
    ['outsider owner', outsider.owner.client],
    ['outsider org token', outsider.orgClient],
  ] as const) {
    const calls: [string, () => Promise<unknown>][] = [
      ['list', () => api(c).list({ id: org.id })],
      ['create', () => api(c).create({ id: org.id, domain: 'evil.access.test' })],
      ['verify', () => api(c).verify({ id: org.id, domainId: customDomain.id })],
      ['delete', () => api(c).delete({ id: org.id, domainId: customDomain.id })],
    ];
    for (const [what, call] of calls) {
      tick();
      t.match(await errorOf(call()), { status: 404, code: 'not_found' }, `${who}: ${what}`);
    }
  }
  // Their own org's path with this org's domain id: still 404 (the domain is looked up within the org).
  tick();
  t.match(
    await errorOf(api(outsider.owner.client).verify({ id: outsider.id, domainId: customDomain.id })),
    { status: 404 },
    'verify via own org id',
  );
  tick();
  t.match(
    await errorOf(api(outsider.owner.client).delete({ id: outsider.id, domainId: customDomain.id })),
    { status: 404 },
    'delete via own org id',
  );
  tick();
  t.match(
    await errorOf(api(org.owner.client).verify({ id: org.id, domainId: 'not-a-uuid' })),
    { status: 404 },
    'malformed domain id',
  );

  // Roles (docs/api.md §5.5): auditor and billing read, but may not write; member may.
  for (const role of ['auditor', 'billing'] as const) {
    const u = await joined(org, role);
    tick();
    t.ok(
      (await api(u.client).list({ id: org.id })).customDomains.some((d) => d.id === customDomain.id),
      `${role} lists`,
    );
    for (const [what, call] of [
      ['create', () => api(u.client).create({ id: org.id, domain: `${role}.access.test` })],
      ['verify', () => api(u.client).verify({ id: org.id, domainId: customDomain.id })],
      ['delete', () => api(u.client).delete({ id: org.id, domainId: customDomain.id })],
    ] as const) {
      tick();
      t.match(await errorOf(call()), { status: 403, code: 'forbidden' }, `${role}: ${what}`);
    }
  }
  t.match(await listed(org, customDomain.id), { last_verify_attempt: null }, 'a refused verify records no attempt');

  const member = await joined(org, 'member');
  tick();
  const byMember = await api(member.client).create({ id: org.id, domain: 'member.access.test' });
  t.equal(byMember.customDomain.status, 'pending', 'member (domains:manage) registers');
  tick();
  t.match(
    await api(org.orgClient).verify({ id: org.id, domainId: customDomain.id }),
    { status: 'verified' },
    'the org token verifies',
  );
  tick();
  t.same(
    await api(svc.admin()).delete({ id: org.id, domainId: byMember.customDomain.id }),
    { ok: true },
    'the platform key deletes',
  );
  tick();
  t.same(
    (await api(org.owner.client).list({ id: org.id })).customDomains.map((d) => d.domain),
    ['mail.access.test'],
  );
});

t.test(
  'defaults: SVC_WEBMAIL_HOST is webmail.<SVC_HOSTNAME>; without SVC_WEBMAIL_ADDRESSES only a CNAME passes',
  async (t) => {
    const plain = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort } });
    const owner = await plain.signup(uniqueEmail('defaults'));
    const { organization } = await owner.client.console.organizations.create({ name: 'Defaults' });
    const api = owner.client.console.organizations.customDomains;
    const { customDomain, dnsRecord } = await api.create({ id: organization.id, domain: 'apex-default.test' });
    t.match(
      dnsRecord,
      { host: 'apex-default.test', type: 'CNAME', value: 'webmail.mta.test' },
      'the test service has SVC_HOSTNAME mta.test',
    );
    t.notMatch(dnsRecord.note, /A\/AAAA/, 'no apex alternative offered');
    // Records at webmail addresses of the other service count for nothing here.
    zone.a('apex-default.test', ADDRESSES[0] as string);
    const err = await errorOf(api.verify({ id: organization.id, domainId: customDomain.id }));
    t.match(err, { status: 400, code: 'cname_not_found', message: /has no CNAME record/ });
    t.equal(zone.queriesFor('apex-default.test', 'A').length, 0, 'no A lookup when no address could pass');
    zone.cname('www.apex-default.test', 'webmail.mta.test');
    const www = (await api.create({ id: organization.id, domain: 'www.apex-default.test' })).customDomain;
    t.match(await api.verify({ id: organization.id, domainId: www.id }), {
      status: 'verified',
      domain: 'www.apex-default.test',
    });
  },
);
