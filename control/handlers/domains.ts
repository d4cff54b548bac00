// Spec §4.5 domain claims and capabilities, and the admin force-verify of §4.14.
import { randomBytes, randomUUID } from 'node:crypto';
import { getDomain } from 'tldts';
import type { domainRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx, Deps } from '../deps.js';
import { ApiError, fail } from '../errors.js';
import type { Access } from '../authorize.js';
import { normalizeDomain } from '../../mail/domain-names.js';
import { DnsError } from '../../mail/resolver.js';
import { generateDkimKey, publishedKey } from '../../mail/dkim-keys.js';
import { inboundRecords, outboundRecords, ownershipRecord } from '../../mail/dns-records.js';
import type { Queryable } from '../../storage/pg/client.js';
import {
  claimHasSent,
  countChildClaims,
  deleteClaim,
  deleteInbound,
  deleteOutbound,
  findClaimByDomain,
  forceVerify,
  getClaim,
  getInbound,
  getOutbound,
  insertClaim,
  insertInbound,
  insertOutbound,
  listClaims,
  listInbound,
  listOutbound,
  markClaimVerified,
  markInboundVerified,
  markOutboundVerified,
  setDisplayName,
  touchClaimCheck,
  type Claim,
  type Inbound,
  type Outbound,
} from '../../storage/pg/domains.js';

/** Spec §8: a claim's verification may be checked once per 10 s. */
export const VERIFY_THROTTLE_MS = 10_000;
export const DEFAULT_RETURN_PATH = 'bounces';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function outboundJson(o: Outbound, deps: Deps) {
  const { returnPathDomain, dnsRecords } = outboundRecords(o, deps.ctx.config);
  return {
    id: o.id,
    domain: o.domain,
    status: o.status,
    verifiedAt: iso(o.verifiedAt),
    selector: o.dkimSelector,
    dnsRecords,
    returnPathSubdomain: o.returnPathSubdomain,
    returnPathDomain,
    defaultDisplayName: o.defaultDisplayName,
    createdAt: o.createdAt.toISOString(),
  };
}

export function inboundJson(i: Inbound, deps: Deps) {
  return {
    id: i.id,
    domain: i.domain,
    status: i.status,
    verifiedAt: iso(i.verifiedAt),
    dnsRecords: inboundRecords(i, deps.ctx.config),
    createdAt: i.createdAt.toISOString(),
  };
}

function nextStep(c: Claim, outbound: Outbound[], inbound: Inbound[]): string {
  if (c.status !== 'verified') return `Publish the TXT record ${ownershipRecord(c).host}, then call verify.`;
  if (outbound.length === 0 && inbound.length === 0)
    return 'Add sending (outbound) or receiving (inbound) to the domain.';
  const pending = [
    ...outbound.filter((o) => o.status !== 'verified').map((o) => `the DKIM record of ${o.domain}`),
    ...inbound.filter((i) => i.status !== 'verified').map((i) => `the MX record of ${i.domain}`),
  ];
  return pending.length
    ? `Publish ${pending.join(' and ')}, then verify the capability.`
    : 'Ready: send and receive on this domain.';
}

async function claimsJson(q: Queryable, deps: Deps, claims: Claim[]) {
  const ids = claims.map((c) => c.id);
  const [outs, ins] = ids.length ? await Promise.all([listOutbound(q, ids), listInbound(q, ids)]) : [[], []];
  return claims.map((c) => {
    const outbound = outs.filter((o) => o.claimId === c.id);
    const inbound = ins.filter((i) => i.claimId === c.id);
    return {
      id: c.id,
      projectId: c.projectId,
      domain: c.domain,
      status: c.status,
      verifiedAt: iso(c.verifiedAt),
      createdAt: c.createdAt.toISOString(),
      dnsRecords: { ownership: ownershipRecord(c) },
      outbound: outbound.map((o) => outboundJson(o, deps)),
      inbound: inbound.map((i) => inboundJson(i, deps)),
      nextStep: nextStep(c, outbound, inbound),
    };
  });
}

async function claimJson(q: Queryable, deps: Deps, c: Claim) {
  return (await claimsJson(q, deps, [c]))[0]!;
}

function project(rc: RequestCtx): string {
  const projectId = (rc.access as Access | null)?.projectId;
  if (!projectId) throw new Error('domain route without a project target');
  return projectId;
}

async function loadClaim(q: Queryable, rc: RequestCtx, id: string): Promise<Claim> {
  const c = await getClaim(q, project(rc), id);
  if (!c) throw fail('not_found', 'No such domain claim.');
  return c;
}

/** The (sub)domain a capability goes on: blank `subdomain` means the claim's own domain. */
function capabilityDomain(claim: Claim, subdomain: string | undefined): string {
  const name = subdomain?.trim() ? normalizeDomain(`${subdomain.trim()}.${claim.domain}`) : claim.domain;
  if (!name) throw fail('invalid_domain', `${subdomain}.${claim.domain} is not a valid host name.`);
  return name;
}

/** DNS that does not answer is the customer's to fix or retry: a 400 that says so, never a hang. */
function dnsUnanswered(err: unknown, what: string): never {
  if (err instanceof DnsError && !err.absent) {
    throw fail('invalid_request', `DNS did not answer for ${what} (${err.failure}); try again in a minute.`, {
      dns: err.failure,
    });
  }
  throw err;
}

async function lookupTxt(deps: Deps, name: string): Promise<string[]> {
  try {
    return await deps.ctx.resolver.txt(name, { fresh: true });
  } catch (err) {
    if (err instanceof DnsError && err.absent) return [];
    return dnsUnanswered(err, name);
  }
}

async function addOutbound(
  q: Queryable,
  deps: Deps,
  claim: Claim,
  o: { subdomain?: string; returnPathSubdomain?: string; ed25519?: boolean },
  now: Date,
) {
  const domain = capabilityDomain(claim, o.subdomain);
  const id = randomUUID();
  const [rsa, ed] = await Promise.all([
    generateDkimKey('rsa'),
    o.ed25519 ? generateDkimKey('ed25519') : Promise.resolve(null),
  ]);
  const { sealer } = deps.storage;
  const inserted = await insertOutbound(q, {
    id,
    claimId: claim.id,
    projectId: claim.projectId,
    domain,
    verified: false,
    now,
    dkimSelector: rsa.selector,
    dkimPrivateSealed: sealer.seal(rsa.privatePem, `dkim:${id}:${rsa.selector}`),
    dkimPublic: rsa.publicKey,
    ed25519: ed
      ? {
          selector: ed.selector,
          privateSealed: sealer.seal(ed.privatePem, `dkim:${id}:${ed.selector}`),
          public: ed.publicKey,
        }
      : undefined,
    returnPathSubdomain: (o.returnPathSubdomain ?? DEFAULT_RETURN_PATH).toLowerCase(),
  });
  if (inserted === 'taken') throw fail('outbound_already_exists', `${domain} already has sending.`);
}

async function addInbound(q: Queryable, claim: Claim, subdomain: string | undefined, now: Date) {
  const domain = capabilityDomain(claim, subdomain);
  if (
    (await insertInbound(q, { id: randomUUID(), claimId: claim.id, projectId: claim.projectId, domain, now })) ===
    'taken'
  ) {
    throw fail('inbound_already_exists', `${domain} already has receiving.`);
  }
}

/** A capability of the project; under the nested alias paths, also of the claim named there. */
async function capabilityOf<T extends { claimId: string }>(
  get: (q: Queryable, projectId: string, id: string) => Promise<T | null>,
  rc: RequestCtx,
  capId: string,
  claimId: string | undefined,
  what: string,
): Promise<T> {
  const cap = await get(rc.deps.storage.db, project(rc), capId);
  if (!cap || (claimId !== undefined && cap.claimId !== claimId))
    throw fail('not_found', `No such ${what} capability.`);
  return cap;
}

async function verifyOutbound(rc: RequestCtx, capId: string, claimId?: string) {
  const { db } = rc.deps.storage;
  const cap = await capabilityOf(getOutbound, rc, capId, claimId, 'outbound');
  const claim = await loadClaim(db, rc, cap.claimId);
  if (claim.status !== 'verified') throw fail('invalid_request', `Verify the claim of ${claim.domain} first.`);
  const wanted: [string, string][] = [[`${cap.dkimSelector}._domainkey.${cap.domain}`, cap.dkimPublic]];
  if (cap.ed25519Selector && cap.ed25519Public)
    wanted.push([`${cap.ed25519Selector}._domainkey.${cap.domain}`, cap.ed25519Public]);
  for (const [host, key] of wanted) {
    const found = await lookupTxt(rc.deps, host);
    if (!found.some((v) => publishedKey(v) === key)) {
      throw fail('invalid_request', `The DKIM record at ${host} is missing or does not match.`, { host, found });
    }
  }
  await markOutboundVerified(db, cap.id, rc.now);
  rc.audit.targetId = cap.id;
  return {
    status: 'verified' as const,
    outbound: outboundJson({ ...cap, status: 'verified', verifiedAt: cap.verifiedAt ?? rc.now }, rc.deps),
  };
}

async function displayName(rc: RequestCtx, capId: string, name: string | null, claimId?: string) {
  const { db } = rc.deps.storage;
  const cap = await capabilityOf(getOutbound, rc, capId, claimId, 'outbound');
  await setDisplayName(db, cap.id, name);
  return { outbound: outboundJson({ ...cap, defaultDisplayName: name }, rc.deps) };
}

async function removeOutbound(rc: RequestCtx, capId: string, claimId?: string) {
  const { db } = rc.deps.storage;
  const cap = await capabilityOf(getOutbound, rc, capId, claimId, 'outbound');
  if (cap.sentCount > 0)
    throw fail('conflict', `${cap.domain} has sent mail: its sending capability stays for the record.`);
  await deleteOutbound(db, cap.id);
  return { ok: true as const };
}

async function verifyInbound(rc: RequestCtx, capId: string, claimId?: string) {
  const { db } = rc.deps.storage;
  const cap = await capabilityOf(getInbound, rc, capId, claimId, 'inbound');
  const want = rc.deps.ctx.config.mxHost;
  let found: string[] = [];
  try {
    found = (await rc.deps.ctx.resolver.mx(cap.domain, { fresh: true })).map((m) => m.exchange);
  } catch (err) {
    if (!(err instanceof DnsError && err.absent)) dnsUnanswered(err, cap.domain);
  }
  if (!found.includes(want)) {
    throw fail('mx_record_mismatch', `No MX record of ${cap.domain} points at ${want}.`, { expected: want, found });
  }
  await markInboundVerified(db, cap.id, rc.now);
  return {
    status: 'verified' as const,
    inbound: inboundJson({ ...cap, status: 'verified', verifiedAt: cap.verifiedAt ?? rc.now }, rc.deps),
  };
}

async function removeInbound(rc: RequestCtx, capId: string, claimId?: string) {
  const { db } = rc.deps.storage;
  const cap = await capabilityOf(getInbound, rc, capId, claimId, 'inbound');
  await deleteInbound(db, cap.id);
  return { ok: true as const };
}

export const domainHandlers: Handlers<typeof domainRoutes> = {
  async 'console.projects.domains.create'({ body }, rc) {
    const domain = normalizeDomain(body.domain);
    if (!domain) throw fail('invalid_domain', `${JSON.stringify(body.domain)} is not a valid host name.`);
    const apex = getDomain(domain);
    if (!apex) throw fail('invalid_domain', `${domain} is a public suffix; claim a domain registered under it.`);
    const projectId = project(rc);
    const { db } = rc.deps.storage;
    const taken = async () => {
      const holder = await findClaimByDomain(db, domain);
      return holder && holder.projectId === projectId
        ? fail('conflict', `This project already claimed ${domain}.`)
        : fail('domain_claim_conflict', `${domain} is claimed by another project.`);
    };
    let apexClaim: Claim | null = null;
    if (domain !== apex) {
      apexClaim = await findClaimByDomain(db, apex);
      if (!apexClaim) throw fail('apex_not_claimed', `Claim ${apex} first.`);
      if (apexClaim.projectId !== projectId)
        throw fail('domain_claim_conflict', `${apex} is claimed by another project.`);
      if (apexClaim.status !== 'verified') throw fail('apex_not_verified', `Verify ${apex} first.`);
    }
    // A subdomain of a verified apex is the same owner's: it is verified from the start.
    const claim = await insertClaim(db, {
      id: randomUUID(),
      projectId,
      domain,
      apexClaimId: apexClaim?.id ?? null,
      verifyToken: randomBytes(16).toString('hex'),
      verified: apexClaim !== null,
      now: rc.now,
    });
    if (claim === 'taken') throw await taken();
    rc.audit.targetId = claim.id;
    return claimJson(db, rc.deps, claim);
  },

  async 'console.projects.domains.list'(_in, rc) {
    const { db } = rc.deps.storage;
    return { domains: await claimsJson(db, rc.deps, await listClaims(db, project(rc))) };
  },

  async 'console.projects.domains.get'({ params }, rc) {
    const { db } = rc.deps.storage;
    return claimJson(db, rc.deps, await loadClaim(db, rc, params.domainId));
  },

  async 'console.projects.domains.verify'({ params }, rc) {
    const { db } = rc.deps.storage;
    const claim = await loadClaim(db, rc, params.domainId);
    if (!(await touchClaimCheck(db, claim.id, rc.now, VERIFY_THROTTLE_MS))) {
      const wait = Math.max(
        1,
        Math.ceil((VERIFY_THROTTLE_MS - (rc.now.getTime() - (claim.lastCheckAt?.getTime() ?? 0))) / 1000),
      );
      throw new ApiError('rate_limited', `Checked less than 10 s ago; try again in ${wait} s.`, undefined, {
        'Retry-After': String(wait),
      });
    }
    if (claim.status !== 'verified') {
      const record = ownershipRecord(claim);
      const found = await lookupTxt(rc.deps, record.host);
      if (!found.some((v) => v.trim() === record.value)) {
        throw fail('invalid_request', `The TXT record at ${record.host} is missing or does not match.`, {
          expected: record,
          found,
        });
      }
      await markClaimVerified(db, claim.id, rc.now);
    }
    return { status: 'verified' as const, domain: claim.domain };
  },

  async 'console.projects.domains.delete'({ params }, rc) {
    const { db } = rc.deps.storage;
    await db.tx(async (q) => {
      const claim = await loadClaim(q, rc, params.domainId);
      if ((await countChildClaims(q, claim.id)) > 0)
        throw fail('conflict', `Release the subdomain claims of ${claim.domain} first.`);
      if (await claimHasSent(q, claim.id))
        throw fail('conflict', `${claim.domain} has sent mail: the claim stays for the record.`);
      await deleteClaim(q, claim.id);
    });
    return { ok: true as const };
  },

  async 'console.projects.domains.outbound.create'({ params, body }, rc) {
    const { db } = rc.deps.storage;
    const claim = await loadClaim(db, rc, params.domainId);
    await addOutbound(db, rc.deps, claim, body, rc.now);
    return claimJson(db, rc.deps, claim);
  },

  async 'console.projects.domains.inbound.create'({ params, body }, rc) {
    const { db } = rc.deps.storage;
    const claim = await loadClaim(db, rc, params.domainId);
    await addInbound(db, claim, body.subdomain, rc.now);
    return claimJson(db, rc.deps, claim);
  },

  async 'console.projects.domains.capabilities'({ params, body }, rc) {
    const { db } = rc.deps.storage;
    const claim = await loadClaim(db, rc, params.domainId);
    // Both or neither: a conflict on one leaves the other uncreated.
    await db.tx(async (q) => {
      if (body.outbound ?? true) await addOutbound(q, rc.deps, claim, body, rc.now);
      if (body.inbound ?? true) await addInbound(q, claim, body.subdomain, rc.now);
    });
    return claimJson(db, rc.deps, claim);
  },

  'console.projects.outbound.verify': ({ params }, rc) => verifyOutbound(rc, params.capId),
  'console.projects.domains.outbound.verify': ({ params }, rc) => verifyOutbound(rc, params.capId, params.domainId),
  'console.projects.outbound.displayName': ({ params, body }, rc) => displayName(rc, params.capId, body.displayName),
  'console.projects.domains.outbound.displayName': ({ params, body }, rc) =>
    displayName(rc, params.capId, body.displayName, params.domainId),
  'console.projects.outbound.delete': ({ params }, rc) => removeOutbound(rc, params.capId),
  'console.projects.domains.outbound.delete': ({ params }, rc) => removeOutbound(rc, params.capId, params.domainId),
  'console.projects.inbound.verify': ({ params }, rc) => verifyInbound(rc, params.capId),
  'console.projects.domains.inbound.verify': ({ params }, rc) => verifyInbound(rc, params.capId, params.domainId),
  'console.projects.inbound.delete': ({ params }, rc) => removeInbound(rc, params.capId),
  'console.projects.domains.inbound.delete': ({ params }, rc) => removeInbound(rc, params.capId, params.domainId),

  async 'admin.senderDomains.markVerified'({ params }, rc) {
    const marked = await forceVerify(rc.deps.storage.db, params.id, rc.now);
    if (!marked) throw fail('not_found', 'No such sender domain (outbound capability or claim).');
    return { ok: true as const, ...marked };
  },
};
