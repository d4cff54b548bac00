// docs/api.md §4.5 domain claims, their outbound (DKIM) and inbound (MX) capabilities, and the admin
// force-verify of §4.14, through the SDK against the running service. Every DNS answer comes from a
// real dns2 authoritative server on loopback (test/helpers/dns-zone.ts) that the tests publish into.
// The 10 s verify throttle is crossed by advancing the service's clock, never by sleeping.
import t, { type Test } from 'tap';
import { createPublicKey, randomBytes } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import { signHeaders, type Client, type DomainClaim } from '@svc-mail/sdk';
import { startTestService, type TestService } from '../helpers/service.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';
import { errorOf } from '../helpers/errors.js';

type Claim = Static<typeof DomainClaim>;

const MX_HOST = 'mx.svc.test';
/** Longer than the 10 s verify throttle of docs/api.md §8. */
const PAST_THROTTLE_MS = 11_000;

interface Tenant {
  client: Client;
  projectId: string;
  organizationId: string;
  keyId: string;
  secret: string;
}

interface Env {
  svc: TestService;
  zone: DnsZone;
  owner: Tenant;
}

async function tenant(svc: TestService, name = 'Org'): Promise<Tenant> {
  const u = await svc.signup();
  const { organization } = await u.client.console.organizations.create({ name });
  const { project } = await u.client.console.projects.create({
    name: `${name} project`,
    organizationId: organization.id,
  });
  return {
    client: u.client,
    projectId: project.id,
    organizationId: organization.id,
    keyId: u.tokenId,
    secret: u.secret,
  };
}

async function setup(t: Test): Promise<Env> {
  const zone = await startDnsZone(t);
  const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort, SVC_MX_HOST: MX_HOST } });
  return { svc, zone, owner: await tenant(svc, 'Owner') };
}

/** A fresh registrable name under a real public suffix, so every test has its own. */
const apexName = (tag = 'd') => `${tag}-${randomBytes(5).toString('hex')}.com`;

/** RFC 1035 §3.3: a TXT record's character-strings hold at most 255 octets each. */
const chunks = (value: string, size = 255) =>
  Array.from({ length: Math.ceil(value.length / size) }, (_, i) => value.slice(i * size, (i + 1) * size));

async function claim(e: Env, domain: string, who: Tenant = e.owner): Promise<Claim> {
  return who.client.console.projects.domains.create({ id: who.projectId, domain });
}

/** Claims the name, publishes its ownership TXT and verifies it (past the throttle). */
async function verifiedClaim(e: Env, domain: string, who: Tenant = e.owner): Promise<Claim> {
  return publishAndVerify(e, await claim(e, domain, who), who);
}

async function publishAndVerify(e: Env, c: Claim, who: Tenant = e.owner): Promise<Claim> {
  e.zone.txt(c.dnsRecords.ownership.host, c.dnsRecords.ownership.value);
  e.svc.clock.advance(PAST_THROTTLE_MS);
  await who.client.console.projects.domains.verify({ id: who.projectId, domainId: c.id });
  return get(e, c.id, who);
}

const get = (e: Env, domainId: string, who: Tenant = e.owner) =>
  who.client.console.projects.domains.get({ id: who.projectId, domainId });

/** A signed request outside the SDK, to read response headers. */
async function raw(
  e: Env,
  who: Tenant,
  method: string,
  target: string,
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers = await signHeaders({
    method,
    target,
    body: '',
    keyId: who.keyId,
    secret: who.secret,
    timestamp: String(e.svc.clock.now()),
  });
  const res = await fetch(e.svc.url + target, { method, headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const outboundOf = (c: Claim, domain: string) => {
  const o = c.outbound.find((x) => x.domain === domain);
  if (!o) throw new Error(`no outbound capability for ${domain} in ${JSON.stringify(c.outbound.map((x) => x.domain))}`);
  return o;
};
const inboundOf = (c: Claim, domain: string) => {
  const i = c.inbound.find((x) => x.domain === domain);
  if (!i) throw new Error(`no inbound capability for ${domain} in ${JSON.stringify(c.inbound.map((x) => x.domain))}`);
  return i;
};

/** The p= tag of a DKIM TXT value. */
const pTag = (value: string) => /(?:^|;)\s*p=([^;]*)/.exec(value)?.[1]?.replace(/\s+/g, '') ?? '';

t.test('claim: ownership TXT, verify, 400 before publishing, 429 within 10 s', async (t) => {
  const e = await setup(t);
  const { owner, zone, svc } = e;
  const domain = apexName();
  const c = await claim(e, domain);
  t.match(c, {
    projectId: owner.projectId,
    domain,
    status: 'pending',
    verifiedAt: null,
    outbound: [],
    inbound: [],
    dnsRecords: { ownership: { host: `_svc-verify.${domain}`, type: 'TXT', value: /\S{16,}/ } },
  });
  t.match(c.nextStep, /_svc-verify\./, 'nextStep says to publish the TXT');
  const other = await claim(e, apexName());
  t.not(other.dnsRecords.ownership.value, c.dnsRecords.ownership.value, 'each claim has its own random token');

  const verify = (domainId = c.id) => owner.client.console.projects.domains.verify({ id: owner.projectId, domainId });
  t.match(await errorOf(verify()), { status: 400 }, 'verify before publishing: 400');
  t.ok(zone.queriesFor(c.dnsRecords.ownership.host, 'TXT').length >= 1, 'the service asked the DNS');

  const again = await raw(e, owner, 'POST', `/console/v1/projects/${owner.projectId}/domains/${c.id}/verify`);
  t.equal(again.status, 429, 'a second check within 10 s: 429');
  t.equal(again.body?.error?.code, 'rate_limited');
  t.type(again.body?.error?.message, 'string');
  const retryAfter = again.headers.get('retry-after');
  t.match(retryAfter, /^\d+$/, `Retry-After in whole seconds (${retryAfter})`);
  t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 10, 'Retry-After within the 10 s window');
  t.match(
    await errorOf(verify(other.id)),
    { status: 400 },
    'the throttle is per claim: another claim is checked at once',
  );

  svc.clock.advance(PAST_THROTTLE_MS);
  zone.txt(c.dnsRecords.ownership.host, 'svc-verify=not-the-token');
  t.match(await errorOf(verify()), { status: 400 }, 'a TXT with another value: 400');

  svc.clock.advance(PAST_THROTTLE_MS);
  zone.txt(c.dnsRecords.ownership.host, c.dnsRecords.ownership.value);
  t.same(await verify(), { status: 'verified', domain }, 'published: 200 { status: "verified" }');
  const after = await get(e, c.id);
  t.equal(after.status, 'verified');
  t.type(after.verifiedAt, 'string');
  t.notMatch(after.nextStep, /_svc-verify/, 'nextStep moves on');

  t.match(await errorOf(verify()), { status: 429, code: 'rate_limited' }, 'a verified claim is throttled too');
  svc.clock.advance(PAST_THROTTLE_MS);
  const pair = await Promise.allSettled([verify(), verify()]);
  t.equal(
    pair.filter((r) => r.status === 'fulfilled').length,
    1,
    'two checks at the same moment: one passes the throttle',
  );
  t.match(
    pair.find((r) => r.status === 'rejected'),
    { reason: { status: 429, code: 'rate_limited' } },
    'the other is 429',
  );
  svc.clock.advance(PAST_THROTTLE_MS);
  t.same(await verify(), { status: 'verified', domain }, 'verifying again is harmless');
  t.equal((await get(e, c.id)).verifiedAt, after.verifiedAt, 'verifiedAt keeps the first verification');

  for (const bad of ['nope', '00000000-0000-4000-8000-000000000000']) {
    t.match(await errorOf(get(e, bad)), { status: 404 }, `claim id ${bad}: 404`);
    t.match(await errorOf(verify(bad)), { status: 404 }, `verify of claim id ${bad}: 404`);
    t.match(
      await errorOf(owner.client.console.projects.outbound.verify({ id: owner.projectId, capId: bad })),
      { status: 404 },
      `capability id ${bad}: 404`,
    );
    t.match(
      await errorOf(owner.client.console.projects.inbound.delete({ id: owner.projectId, capId: bad })),
      { status: 404 },
      `capability id ${bad}: 404`,
    );
  }
  const listed = await owner.client.console.projects.domains.list({ id: owner.projectId });
  t.same(listed.domains.map((d) => d.domain).sort(), [domain, other.domain].sort(), 'list holds both claims');
});

t.test('subdomain claims: apex first, verified; uniqueness across projects', async (t) => {
  const e = await setup(t);
  const { owner } = e;
  const intruder = await tenant(e.svc, 'Intruder');
  const apex = apexName();
  const create = (domain: string, who: Tenant = owner) =>
    who.client.console.projects.domains.create({ id: who.projectId, domain });

  t.match(
    await errorOf(create(`shop.${apex}`)),
    { status: 422, code: 'apex_not_claimed' },
    'subdomain before the apex is claimed',
  );
  const a = await claim(e, apex);
  t.match(
    await errorOf(create(`shop.${apex}`)),
    { status: 422, code: 'apex_not_verified' },
    'subdomain before the apex is verified',
  );
  t.match(
    await errorOf(create(apex, intruder)),
    { status: 409, code: 'domain_claim_conflict' },
    'another project: the apex, pending',
  );
  t.match(
    await errorOf(create(`x.${apex}`, intruder)),
    { status: 409, code: 'domain_claim_conflict' },
    'another project: a subdomain of a pending apex',
  );

  await publishAndVerify(e, a);
  const sub = await create(`shop.${apex}`);
  t.match(
    sub,
    { domain: `shop.${apex}`, status: 'verified', verifiedAt: String },
    'subdomain of a verified apex: verified from the start',
  );
  t.match(await create(`a.b.${apex}`), { domain: `a.b.${apex}`, status: 'verified' }, 'a deeper subdomain too');

  t.match(
    await errorOf(create(apex, intruder)),
    { status: 409, code: 'domain_claim_conflict' },
    'another project: the verified apex',
  );
  t.match(
    await errorOf(create(`shop.${apex}`, intruder)),
    { status: 409, code: 'domain_claim_conflict' },
    'another project: a claimed subdomain',
  );
  t.match(
    await errorOf(create(`new.${apex}`, intruder)),
    { status: 409, code: 'domain_claim_conflict' },
    'another project: an unclaimed subdomain',
  );
  t.match(
    await errorOf(create(apex.toUpperCase() + '.', intruder)),
    { status: 409, code: 'domain_claim_conflict' },
    'another project: the apex spelled otherwise',
  );

  const dup = await errorOf(create(apex));
  t.equal(dup.status, 409, 'the same project claiming the apex again: 409');
  t.not(dup.code, 'domain_claim_conflict', 'not "another project"');
  t.match(
    await errorOf(create(`SHOP.${apex}.`)),
    { status: 409 },
    'the same project claiming a subdomain again (spelled otherwise): 409',
  );

  const mine = (await intruder.client.console.projects.domains.list({ id: intruder.projectId })).domains;
  t.same(mine, [], 'the refused claims left nothing behind');
  t.equal(a.projectId, owner.projectId);
});

t.test('a concurrent double claim of one apex: exactly one wins', async (t) => {
  const e = await setup(t);
  const rival = await tenant(e.svc, 'Rival');
  for (let i = 0; i < 5; i++) {
    const domain = apexName('race');
    const results = await Promise.allSettled([claim(e, domain), claim(e, domain, rival)]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    t.equal(won.length, 1, `${domain}: one 200`);
    t.equal(lost.length, 1, `${domain}: one refused`);
    t.match(
      lost[0]?.reason,
      { status: 409, code: 'domain_claim_conflict' },
      `${domain}: the other gets 409 domain_claim_conflict`,
    );
    const holders = [
      ...(await e.owner.client.console.projects.domains.list({ id: e.owner.projectId })).domains,
      ...(await rival.client.console.projects.domains.list({ id: rival.projectId })).domains,
    ].filter((d) => d.domain === domain);
    t.equal(holders.length, 1, `${domain}: one claim stored`);
  }
  // The same project twice at once: one claim, one 409.
  const domain = apexName('twice');
  const results = await Promise.allSettled([claim(e, domain), claim(e, domain)]);
  t.equal(results.filter((r) => r.status === 'fulfilled').length, 1, 'same project twice at once: one 200');
  t.match(
    results.find((r) => r.status === 'rejected'),
    { reason: { status: 409 } },
    'and one 409',
  );
});

t.test('names are normalized; invalid names and public suffixes are 400', async (t) => {
  const e = await setup(t);
  const create = (domain: string) => e.owner.client.console.projects.domains.create({ id: e.owner.projectId, domain });
  const tag = randomBytes(4).toString('hex');
  t.match(
    await create(` Mixed-CASE-${tag}.COM. `),
    { domain: `mixed-case-${tag}.com`, dnsRecords: { ownership: { host: `_svc-verify.mixed-case-${tag}.com` } } },
    'lower case, trailing dot and blanks removed',
  );
  t.match(await create('BÜCHER.de.'), { domain: 'xn--bcher-kva.de' }, 'IDN to punycode');
  t.match(await errorOf(create('bücher.de')), { status: 409 }, 'the Unicode and punycode spellings are one name');
  t.match(
    await create('foo.co.uk'),
    { domain: 'foo.co.uk' },
    'a name registered under a multi-label suffix is an apex',
  );

  for (const bad of [
    'not a domain',
    'exa_mple.com',
    '-bad.com',
    'bad-.com',
    'localhost',
    '1.2.3.4',
    'a..b.com',
    `${'x'.repeat(64)}.com`,
    'http://example.com',
    'user@example.com',
    'example.com/path',
    'xn--zz.com',
    `${'abcdefghi.'.repeat(26)}com`,
  ]) {
    t.match(
      await errorOf(create(bad)),
      { status: 400, code: 'invalid_domain' },
      `${JSON.stringify(bad)}: 400 invalid_domain`,
    );
  }
  t.match(await errorOf(create('')), { status: 400 }, 'empty: 400');
  for (const suffix of ['co.uk', 'com.au', 'CO.UK.']) {
    t.match(await errorOf(create(suffix)), { status: 400, code: 'invalid_domain' }, `public suffix ${suffix}: 400`);
  }
  t.equal(
    (await e.owner.client.console.projects.domains.list({ id: e.owner.projectId })).domains.length,
    3,
    'only the valid claims exist',
  );
});

t.test('outbound: DKIM key and records, verify with split TXT strings, display name, delete', async (t) => {
  const e = await setup(t);
  const { owner, zone, svc } = e;
  const p = owner.client.console.projects;
  const apex = apexName();
  const c = await verifiedClaim(e, apex);
  const withOut = await p.domains.outbound.create({ id: owner.projectId, domainId: c.id });
  t.equal(withOut.id, c.id, 'the response is the updated claim');
  const o = outboundOf(withOut, apex);
  t.match(o, {
    status: 'pending',
    verifiedAt: null,
    defaultDisplayName: null,
    returnPathSubdomain: 'bounces',
    returnPathDomain: `bounces.${apex}`,
    dnsRecords: {
      dkim: { host: `${o.selector}._domainkey.${apex}`, type: 'TXT', value: /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/ },
      spf: { host: apex, type: 'TXT', value: 'v=spf1 include:_spf.mta.test ~all' },
      dmarc: {
        host: `_dmarc.${apex}`,
        type: 'TXT',
        value: `v=DMARC1; p=none; rua=mailto:dmarc-reports@${apex}; adkim=r; aspf=r`,
        note: new RegExp(`dmarc-reports@${apex.replace(/\./g, '\\.')}`),
      },
      returnPath: {
        mx: { host: `bounces.${apex}`, type: 'MX', value: MX_HOST },
        spf: { host: `bounces.${apex}`, type: 'TXT', value: /^v=spf1 / },
      },
    },
  });
  t.notOk(o.dnsRecords.dkimEd25519, 'no Ed25519 record unless asked');
  t.match(o.selector, /^[a-z0-9-]+$/, 'the selector is one DNS label');
  const rsa = createPublicKey({
    key: Buffer.from(pTag(o.dnsRecords.dkim.value), 'base64'),
    format: 'der',
    type: 'spki',
  });
  t.equal(rsa.asymmetricKeyType, 'rsa', 'p= is an RSA public key (DER SubjectPublicKeyInfo)');
  t.equal(rsa.asymmetricKeyDetails?.modulusLength, 2048, 'RSA-2048');

  // A subdomain, a custom return path and an Ed25519 second key.
  const withNews = await p.domains.outbound.create({
    id: owner.projectId,
    domainId: c.id,
    subdomain: 'News',
    returnPathSubdomain: 'RP',
    ed25519: true,
  });
  const n = outboundOf(withNews, `news.${apex}`);
  t.match(n, {
    returnPathSubdomain: 'rp',
    returnPathDomain: `rp.news.${apex}`,
    dnsRecords: { returnPath: { mx: { host: `rp.news.${apex}`, value: MX_HOST } } },
  });
  t.not(n.selector, o.selector, 'each capability has its own selector');
  t.not(pTag(n.dnsRecords.dkim.value), pTag(o.dnsRecords.dkim.value), 'and its own key');
  const ed = n.dnsRecords.dkimEd25519;
  t.match(ed, { type: 'TXT', value: /^v=DKIM1; k=ed25519; p=[A-Za-z0-9+/]+=*$/ }, 'ed25519: true adds dkimEd25519');
  if (ed) {
    const edSelector = ed.host.split('._domainkey.')[0];
    t.equal(ed.host, `${edSelector}._domainkey.news.${apex}`);
    t.not(edSelector, n.selector, 'the Ed25519 key has its own selector');
    const rawKey = Buffer.from(pTag(ed.value), 'base64');
    t.equal(rawKey.length, 32, 'RFC 8463: p= is the raw 32-byte key');
    // RFC 8410 SubjectPublicKeyInfo prefix of an Ed25519 key, to check the 32 bytes are one.
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), rawKey]);
    t.equal(createPublicKey({ key: spki, format: 'der', type: 'spki' }).asymmetricKeyType, 'ed25519');
  }

  // 409 outbound_already_exists on the same (sub)domain, however spelled.
  const dupOut = (subdomain?: string) =>
    errorOf(p.domains.outbound.create({ id: owner.projectId, domainId: c.id, subdomain }));
  t.match(await dupOut(), { status: 409, code: 'outbound_already_exists' }, 'apex again');
  t.match(await dupOut(''), { status: 409, code: 'outbound_already_exists' }, 'blank subdomain is the apex');
  t.match(await dupOut('NEWS'), { status: 409, code: 'outbound_already_exists' }, 'subdomain again, other case');
  const racing = await Promise.allSettled(
    [1, 2].map(() => p.domains.outbound.create({ id: owner.projectId, domainId: c.id, subdomain: 'race' })),
  );
  t.equal(
    racing.filter((r) => r.status === 'fulfilled').length,
    1,
    'two outbound creates at once on one name: one 200',
  );
  t.match(
    racing.find((r) => r.status === 'rejected'),
    { reason: { status: 409, code: 'outbound_already_exists' } },
    'and one 409',
  );

  // Verify: 400 until the DKIM TXT is published; split into 255-character strings it passes.
  const verifyOut = (capId: string) => p.outbound.verify({ id: owner.projectId, capId });
  t.match(await errorOf(verifyOut(o.id)), { status: 400 }, 'outbound verify before publishing: 400');
  const parts = chunks(o.dnsRecords.dkim.value);
  t.ok(parts.length >= 2, `the DKIM value takes ${parts.length} strings`);
  zone.txt(o.dnsRecords.dkim.host, ...parts);
  t.equal(o.dnsRecords.spf.note, undefined, 'no SPF note before verify has looked');
  // An SPF record already at the domain (beside another TXT record): verify's answer suggests merging into it.
  zone.txt(apex, 'google-site-verification=abc').txt(apex, 'v=spf1 include:_spf.example.org -all');
  const v = await verifyOut(o.id);
  t.match(
    v,
    { status: 'verified', outbound: { id: o.id, status: 'verified', verifiedAt: String } },
    'split strings joined: 200 verified',
  );
  t.match(
    v.outbound.dnsRecords.spf,
    {
      host: apex,
      value: 'v=spf1 include:_spf.example.org include:_spf.mta.test -all',
      note: /^Merge into your existing SPF record/,
    },
    'the existing SPF record with our include merged in, and a note',
  );
  t.equal(outboundOf(await get(e, c.id), apex).status, 'verified', 'the claim shows it verified');
  t.match(await verifyOut(o.id), { status: 'verified' }, 'verify is repeatable (no throttle on capabilities)');

  // The Ed25519 capability needs both keys; a wrong key does not pass.
  zone.txt(n.dnsRecords.dkim.host, ...chunks(o.dnsRecords.dkim.value));
  t.match(await errorOf(verifyOut(n.id)), { status: 400 }, 'another key at the selector: 400');
  zone.remove(n.dnsRecords.dkim.host).txt(n.dnsRecords.dkim.host, ...chunks(n.dnsRecords.dkim.value));
  t.match(await errorOf(verifyOut(n.id)), { status: 400 }, 'RSA published but not Ed25519: 400');
  if (ed) zone.txt(ed.host, ed.value);
  t.match(await verifyOut(n.id), { status: 'verified' }, 'both published: 200');

  // Display name: set, read back, clear; CR or LF refused.
  const setName = (displayName: string | null) =>
    p.outbound.displayName({ id: owner.projectId, capId: o.id, displayName });
  t.match(await setName('Acme Billing'), { outbound: { id: o.id, defaultDisplayName: 'Acme Billing' } });
  t.equal(outboundOf(await get(e, c.id), apex).defaultDisplayName, 'Acme Billing', 'stored');
  t.match(
    await setName('Zoë "Support" Team'),
    { outbound: { defaultDisplayName: 'Zoë "Support" Team' } },
    'Unicode and quotes are fine',
  );
  for (const bad of ['Acme\r\nBcc: victim@example.test', 'line\nfeed', 'carriage\rreturn']) {
    t.match(await errorOf(setName(bad)), { status: 400 }, `${JSON.stringify(bad)}: 400`);
  }
  t.equal(
    outboundOf(await get(e, c.id), apex).defaultDisplayName,
    'Zoë "Support" Team',
    'a refused name changes nothing',
  );
  t.match(await setName(null), { outbound: { defaultDisplayName: null } }, 'null clears');
  t.equal(outboundOf(await get(e, c.id), apex).defaultDisplayName, null, 'cleared');

  // Delete: fine before any mail; 409 once it has sent (sent mail is simulated in the database).
  const tmp = outboundOf(
    await p.domains.outbound.create({ id: owner.projectId, domainId: c.id, subdomain: 'tmp' }),
    `tmp.${apex}`,
  );
  t.same(await p.outbound.delete({ id: owner.projectId, capId: tmp.id }), { ok: true }, 'delete: ok');
  t.notOk(
    (await get(e, c.id)).outbound.some((x) => x.id === tmp.id),
    'gone from the claim',
  );
  t.match(await errorOf(verifyOut(tmp.id)), { status: 404 }, 'its id is 404 now');
  t.ok(
    outboundOf(
      await p.domains.outbound.create({ id: owner.projectId, domainId: c.id, subdomain: 'tmp' }),
      `tmp.${apex}`,
    ),
    'the name can take sending again',
  );
  await svc.running.storage.db.query('UPDATE outbound_capabilities SET sent_count = 1 WHERE id = $1', [n.id]);
  t.match(
    await errorOf(p.outbound.delete({ id: owner.projectId, capId: n.id })),
    { status: 409 },
    'delete after sent mail: 409',
  );
  t.ok(
    (await get(e, c.id)).outbound.some((x) => x.id === n.id),
    'still there',
  );
});

t.test('inbound: MX record, mx_record_mismatch, 409 inbound_already_exists', async (t) => {
  const e = await setup(t);
  const { owner, zone } = e;
  const p = owner.client.console.projects;
  const apex = apexName();
  const c = await verifiedClaim(e, apex);
  const i = inboundOf(await p.domains.inbound.create({ id: owner.projectId, domainId: c.id }), apex);
  t.match(i, {
    domain: apex,
    status: 'pending',
    verifiedAt: null,
    dnsRecords: { mx: { host: apex, type: 'MX', value: MX_HOST } },
  });
  const verifyIn = (capId: string) => p.inbound.verify({ id: owner.projectId, capId });

  t.match(await errorOf(verifyIn(i.id)), { status: 400, code: 'mx_record_mismatch' }, 'no MX: 400 mx_record_mismatch');
  zone.mx(apex, 10, 'mx.elsewhere.test');
  t.match(
    await errorOf(verifyIn(i.id)),
    { status: 400, code: 'mx_record_mismatch' },
    'an MX to another host: 400 mx_record_mismatch',
  );
  zone.mx(apex, 20, MX_HOST);
  t.match(
    await verifyIn(i.id),
    { status: 'verified', inbound: { id: i.id, status: 'verified', verifiedAt: String } },
    'an MX to SVC_MX_HOST: 200',
  );
  t.equal(inboundOf(await get(e, c.id), apex).status, 'verified');

  const dupIn = (subdomain?: string) =>
    errorOf(p.domains.inbound.create({ id: owner.projectId, domainId: c.id, subdomain }));
  t.match(await dupIn(), { status: 409, code: 'inbound_already_exists' }, 'apex again');
  const mail = inboundOf(
    await p.domains.inbound.create({ id: owner.projectId, domainId: c.id, subdomain: 'mail' }),
    `mail.${apex}`,
  );
  t.match(mail.dnsRecords.mx, { host: `mail.${apex}`, value: MX_HOST });
  t.match(await dupIn('Mail'), { status: 409, code: 'inbound_already_exists' }, 'subdomain again');
  t.match(
    await errorOf(verifyIn(mail.id)),
    { status: 400, code: 'mx_record_mismatch' },
    "the apex's MX does not count for a subdomain",
  );
  zone.mx(`mail.${apex}`, 10, MX_HOST);
  t.match(await verifyIn(mail.id), { status: 'verified' });

  t.same(await p.inbound.delete({ id: owner.projectId, capId: mail.id }), { ok: true }, 'delete: ok');
  t.notOk(
    (await get(e, c.id)).inbound.some((x) => x.id === mail.id),
    'gone',
  );
  t.match(await errorOf(verifyIn(mail.id)), { status: 404 });
});

t.test('capabilities: both at once by default, one when the other is false', async (t) => {
  const e = await setup(t);
  const { owner } = e;
  const p = owner.client.console.projects;
  const apex = apexName();
  const c = await verifiedClaim(e, apex);
  const caps = (body: {
    subdomain?: string;
    outbound?: boolean;
    inbound?: boolean;
    ed25519?: boolean;
    returnPathSubdomain?: string;
  }) => p.domains.capabilities({ id: owner.projectId, domainId: c.id, ...body });

  const both = await caps({});
  t.same(
    [both.outbound.map((o) => o.domain), both.inbound.map((i) => i.domain)],
    [[apex], [apex]],
    'default: both on the apex',
  );
  const out = await caps({ subdomain: 'out', inbound: false, ed25519: true, returnPathSubdomain: 'rp' });
  t.match(
    outboundOf(out, `out.${apex}`),
    { returnPathSubdomain: 'rp', dnsRecords: { dkimEd25519: { type: 'TXT' } } },
    'options reach the outbound capability',
  );
  t.notOk(
    out.inbound.some((i) => i.domain === `out.${apex}`),
    'inbound: false creates no inbound',
  );
  const inb = await caps({ subdomain: 'in', outbound: false });
  t.ok(inboundOf(inb, `in.${apex}`));
  t.notOk(
    inb.outbound.some((o) => o.domain === `in.${apex}`),
    'outbound: false creates no outbound',
  );

  t.match(await errorOf(caps({})), { status: 409, code: 'outbound_already_exists' }, 'both exist: 409');
  t.match(
    await errorOf(caps({ subdomain: 'out' })),
    { status: 409, code: 'outbound_already_exists' },
    'outbound exists, inbound not: 409',
  );
  t.notOk(
    (await get(e, c.id)).inbound.some((i) => i.domain === `out.${apex}`),
    'and the inbound half was not created',
  );
  t.match(
    await errorOf(caps({ subdomain: 'in', outbound: false })),
    { status: 409, code: 'inbound_already_exists' },
    'inbound again: 409',
  );
});

t.test('release: cascades, blocked by a subdomain claim or sent mail', async (t) => {
  const e = await setup(t);
  const { owner, svc } = e;
  const p = owner.client.console.projects;
  const release = (domainId: string) => p.domains.delete({ id: owner.projectId, domainId });

  const apex = apexName();
  const a = await verifiedClaim(e, apex);
  const sub = await claim(e, `shop.${apex}`);
  t.match(await errorOf(release(a.id)), { status: 409 }, 'a subdomain claim blocks the release of its apex');
  t.same(await release(sub.id), { ok: true }, 'the subdomain claim releases');
  await p.domains.capabilities({ id: owner.projectId, domainId: a.id });
  const o = outboundOf(await get(e, a.id), apex);
  await svc.running.storage.db.query('UPDATE outbound_capabilities SET sent_count = 1 WHERE id = $1', [o.id]);
  t.match(await errorOf(release(a.id)), { status: 409 }, 'sent mail blocks the release');
  t.equal((await get(e, a.id)).outbound.length, 1, 'the refused release changed nothing');

  const other = apexName();
  const b = await verifiedClaim(e, other);
  const withCaps = await p.domains.capabilities({ id: owner.projectId, domainId: b.id });
  const bo = outboundOf(withCaps, other);
  const bi = inboundOf(withCaps, other);
  t.same(await release(b.id), { ok: true }, 'otherwise the release is ok');
  t.match(await errorOf(get(e, b.id)), { status: 404 }, 'the claim is gone');
  t.match(
    await errorOf(p.outbound.verify({ id: owner.projectId, capId: bo.id })),
    { status: 404 },
    'its outbound capability is gone',
  );
  t.match(
    await errorOf(p.inbound.verify({ id: owner.projectId, capId: bi.id })),
    { status: 404 },
    'its inbound capability is gone',
  );
  const rows = await svc.running.storage.db.query<{ n: number }>(
    `SELECT (SELECT count(*)::int FROM outbound_capabilities WHERE claim_id = $1)
       + (SELECT count(*)::int FROM inbound_capabilities WHERE claim_id = $1) AS n`,
    [b.id],
  );
  t.equal(rows[0]?.n, 0, 'no capability rows are left');
  const stranger = await tenant(svc, 'Next owner');
  t.match(
    await claim(e, other, stranger),
    { domain: other, status: 'pending' },
    'the released name can be claimed by anyone again',
  );
  t.match(await errorOf(release(b.id)), { status: 404 }, 'releasing twice: 404');
});

t.test('the nested alias paths act the same and only on their own claim', async (t) => {
  const e = await setup(t);
  const { owner, zone } = e;
  const p = owner.client.console.projects;
  const apex = apexName();
  const a = await verifiedClaim(e, apex);
  const s = await claim(e, `shop.${apex}`);
  const withCaps = await p.domains.capabilities({ id: owner.projectId, domainId: a.id });
  const o = outboundOf(withCaps, apex);
  const i = inboundOf(withCaps, apex);
  const so = outboundOf(await p.domains.outbound.create({ id: owner.projectId, domainId: s.id }), `shop.${apex}`);
  const si = inboundOf(await p.domains.inbound.create({ id: owner.projectId, domainId: s.id }), `shop.${apex}`);
  const id = owner.projectId;

  // Under the wrong claim: 404, and nothing happens.
  zone.txt(o.dnsRecords.dkim.host, o.dnsRecords.dkim.value).mx(apex, 10, MX_HOST);
  const wrong = [
    ['outbound verify', () => p.domains.outbound.verify({ id, domainId: s.id, capId: o.id })],
    [
      'outbound display-name',
      () => p.domains.outbound.displayName({ id, domainId: s.id, capId: o.id, displayName: 'X' }),
    ],
    ['outbound delete', () => p.domains.outbound.delete({ id, domainId: s.id, capId: o.id })],
    ['inbound verify', () => p.domains.inbound.verify({ id, domainId: s.id, capId: i.id })],
    ['inbound delete', () => p.domains.inbound.delete({ id, domainId: s.id, capId: i.id })],
    ['outbound id as inbound', () => p.domains.inbound.verify({ id, domainId: a.id, capId: o.id })],
  ] as const;
  for (const [what, call] of wrong) t.match(await errorOf(call()), { status: 404 }, `${what} under another claim: 404`);
  const untouched = await get(e, a.id);
  t.match(outboundOf(untouched, apex), { status: 'pending', defaultDisplayName: null }, 'nothing changed');
  t.equal(inboundOf(untouched, apex).status, 'pending');

  // Under their own claim: as the short paths.
  t.match(await p.domains.outbound.verify({ id, domainId: a.id, capId: o.id }), {
    status: 'verified',
    outbound: { id: o.id },
  });
  t.match(await p.domains.outbound.displayName({ id, domainId: a.id, capId: o.id, displayName: 'Shop' }), {
    outbound: { defaultDisplayName: 'Shop' },
  });
  t.match(await errorOf(p.domains.outbound.displayName({ id, domainId: a.id, capId: o.id, displayName: 'a\nb' })), {
    status: 400,
  });
  t.match(await p.domains.inbound.verify({ id, domainId: a.id, capId: i.id }), {
    status: 'verified',
    inbound: { id: i.id },
  });
  t.match(await errorOf(p.domains.inbound.verify({ id, domainId: s.id, capId: si.id })), {
    status: 400,
    code: 'mx_record_mismatch',
  });
  t.same(await p.domains.outbound.delete({ id, domainId: s.id, capId: so.id }), { ok: true });
  t.same(await p.domains.inbound.delete({ id, domainId: s.id, capId: si.id }), { ok: true });
  const shop = await get(e, s.id);
  t.same([shop.outbound, shop.inbound], [[], []], 'deleted through the nested paths');
});

t.test('admin mark-verified: by capability id, by claim id; 404 otherwise', async (t) => {
  const e = await setup(t);
  const { owner, svc } = e;
  const p = owner.client.console.projects;
  const admin = svc.admin();

  const one = apexName();
  const c1 = await claim(e, one);
  await p.domains.outbound.create({ id: owner.projectId, domainId: c1.id });
  const c1b = await p.domains.outbound.create({ id: owner.projectId, domainId: c1.id, subdomain: 'x' });
  const cap = outboundOf(c1b, one);
  const sibling = outboundOf(c1b, `x.${one}`);
  t.same(
    await admin.admin.senderDomains.markVerified({ id: cap.id }),
    { ok: true, claimId: c1.id, outboundIds: [cap.id] },
    'by capability id',
  );
  const after1 = await get(e, c1.id);
  t.match(outboundOf(after1, one), { status: 'verified', verifiedAt: String }, 'that capability is verified');
  t.equal(outboundOf(after1, `x.${one}`).status, 'pending', 'its sibling is not');
  t.equal(after1.status, 'verified', 'and so is its claim');
  t.ok(sibling);

  const two = apexName();
  const c2 = await claim(e, two);
  await p.domains.outbound.create({ id: owner.projectId, domainId: c2.id });
  const c2b = await p.domains.outbound.create({ id: owner.projectId, domainId: c2.id, subdomain: 'y' });
  const res = await admin.admin.senderDomains.markVerified({ id: c2.id });
  t.match(res, { ok: true, claimId: c2.id });
  t.same(
    [...res.outboundIds].sort(),
    c2b.outbound.map((o) => o.id).sort(),
    'by claim id: all its outbound capabilities',
  );
  const after2 = await get(e, c2.id);
  t.equal(after2.status, 'verified', 'the claim is verified');
  t.same(
    after2.outbound.map((o) => o.status),
    ['verified', 'verified'],
    'its capabilities are verified',
  );

  t.match(
    await errorOf(admin.admin.senderDomains.markVerified({ id: '00000000-0000-4000-8000-000000000000' })),
    { status: 404 },
    'unknown id: 404',
  );
  t.match(
    await errorOf(admin.admin.senderDomains.markVerified({ id: 'not-a-uuid' })),
    { status: 404 },
    'not an id at all: 404',
  );
  const inbound = inboundOf(await p.domains.inbound.create({ id: owner.projectId, domainId: c2.id }), two);
  t.match(
    await errorOf(admin.admin.senderDomains.markVerified({ id: inbound.id })),
    { status: 404 },
    'an inbound capability is not a sender domain: 404',
  );
  t.equal(inboundOf(await get(e, c2.id), two).status, 'pending', 'and stays pending');
  t.match(
    await errorOf(owner.client.admin.senderDomains.markVerified({ id: cap.id })),
    { status: 403 },
    'a customer: 403',
  );
});

t.test('a resolver that does not answer: a clear 400, never a hang', async (t) => {
  const e = await setup(t);
  const { owner, zone, svc } = e;
  const p = owner.client.console.projects;
  const pending = await claim(e, apexName('silent'));
  const apex = apexName();
  const c = await verifiedClaim(e, apex);
  const withCaps = await p.domains.capabilities({ id: owner.projectId, domainId: c.id });
  const o = outboundOf(withCaps, apex);
  const i = inboundOf(withCaps, apex);

  // The resolver's per-attempt timeout is not configurable from the environment (startService builds
  // it with its default), so the bound here is generous: two attempts of a few seconds each.
  const BOUND_MS = 15_000;
  const timed = async (what: string, call: () => Promise<unknown>) => {
    const started = Date.now();
    const err = await errorOf(call());
    const took = Date.now() - started;
    t.ok(took < BOUND_MS, `${what}: answered in ${took} ms`);
    t.match(err, { status: 400, message: /DNS/ }, `${what}: 400 that names the DNS problem`);
    t.notMatch(err.code, /mx_record_mismatch/, `${what}: not a mismatch, it was not an answer`);
    return err;
  };
  for (const behaviour of ['silent', 'servfail'] as const) {
    zone.behaviour = behaviour;
    svc.clock.advance(PAST_THROTTLE_MS);
    await Promise.all([
      timed(`${behaviour}: claim verify`, () => p.domains.verify({ id: owner.projectId, domainId: pending.id })),
      timed(`${behaviour}: outbound verify`, () => p.outbound.verify({ id: owner.projectId, capId: o.id })),
      timed(`${behaviour}: inbound verify`, () => p.inbound.verify({ id: owner.projectId, capId: i.id })),
    ]);
  }
  t.ok(zone.queriesFor(o.dnsRecords.dkim.host, 'TXT').length >= 2, 'the lookups reached the server');

  zone.behaviour = 'normal';
  zone.txt(pending.dnsRecords.ownership.host, pending.dnsRecords.ownership.value);
  svc.clock.advance(PAST_THROTTLE_MS);
  t.match(
    await p.domains.verify({ id: owner.projectId, domainId: pending.id }),
    { status: 'verified' },
    'answering again: verify works',
  );
});

t.test('non-members get 404, an auditor 403 on writes', async (t) => {
  const e = await setup(t);
  const { owner, svc } = e;
  const apex = apexName();
  const c = await verifiedClaim(e, apex);
  const withCaps = await owner.client.console.projects.domains.capabilities({ id: owner.projectId, domainId: c.id });
  const o = outboundOf(withCaps, apex);
  const i = inboundOf(withCaps, apex);
  const id = owner.projectId;
  const domainId = c.id;

  const reads: [string, (cl: Client) => Promise<unknown>][] = [
    ['list', (cl) => cl.console.projects.domains.list({ id })],
    ['get', (cl) => cl.console.projects.domains.get({ id, domainId })],
  ];
  const writes: [string, (cl: Client) => Promise<unknown>][] = [
    ['create', (cl) => cl.console.projects.domains.create({ id, domain: `new.${apex}` })],
    ['verify', (cl) => cl.console.projects.domains.verify({ id, domainId })],
    ['outbound create', (cl) => cl.console.projects.domains.outbound.create({ id, domainId, subdomain: 'w' })],
    ['inbound create', (cl) => cl.console.projects.domains.inbound.create({ id, domainId, subdomain: 'w' })],
    ['capabilities', (cl) => cl.console.projects.domains.capabilities({ id, domainId, subdomain: 'v' })],
    ['outbound verify', (cl) => cl.console.projects.outbound.verify({ id, capId: o.id })],
    ['display name', (cl) => cl.console.projects.outbound.displayName({ id, capId: o.id, displayName: 'Hijack' })],
    [
      'nested display name',
      (cl) => cl.console.projects.domains.outbound.displayName({ id, domainId, capId: o.id, displayName: 'Hijack' }),
    ],
    ['inbound verify', (cl) => cl.console.projects.inbound.verify({ id, capId: i.id })],
    ['outbound delete', (cl) => cl.console.projects.outbound.delete({ id, capId: o.id })],
    ['nested inbound delete', (cl) => cl.console.projects.domains.inbound.delete({ id, domainId, capId: i.id })],
    ['inbound delete', (cl) => cl.console.projects.inbound.delete({ id, capId: i.id })],
    ['release', (cl) => cl.console.projects.domains.delete({ id, domainId })],
  ];

  const outsider = await tenant(svc, 'Outsider');
  for (const [what, call] of [...reads, ...writes]) {
    t.match(await errorOf(call(outsider.client)), { status: 404 }, `non-member, ${what}: 404`);
  }

  const { code } = await owner.client.console.organizations.joinCodes.create({
    id: owner.organizationId,
    role: 'auditor',
  });
  const auditor = await svc.signup();
  await auditor.client.console.organizations.join({ code });
  for (const [what, call] of reads) t.ok(await call(auditor.client), `auditor, ${what}: allowed`);
  for (const [what, call] of writes) {
    t.match(await errorOf(call(auditor.client)), { status: 403, code: 'forbidden' }, `auditor, ${what}: 403`);
  }

  // Project keys: project:admin manages the sender domains (docs/api.md §5.3), other scopes do not.
  const key = (scopes: ('messages:send' | 'project:admin')[]) =>
    owner.client.console.projects.apiKeys
      .create({ id, label: scopes.join(' '), scopes })
      .then((k) => svc.client({ keyId: k.keyId, secret: k.secret }));
  const sender = await key(['messages:send']);
  const admin = await key(['project:admin']);
  for (const [what, call] of [...reads, ...writes.slice(0, 2)]) {
    t.match(await errorOf(call(sender)), { status: 403, code: 'forbidden' }, `key without project:admin, ${what}: 403`);
  }
  t.equal(
    (await admin.console.projects.domains.list({ id })).domains.length,
    1,
    'a project:admin key lists the claims',
  );

  const still = await get(e, c.id);
  t.match(
    still,
    { status: 'verified', outbound: [{ id: o.id, defaultDisplayName: null }], inbound: [{ id: i.id }] },
    'nothing changed',
  );
  t.equal((await owner.client.console.projects.domains.list({ id })).domains.length, 1, 'no claim was added');
});
