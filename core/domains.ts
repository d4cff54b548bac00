// Domain claims and their capabilities (docs/api.md §4.5) as operations of a project: claim, verify by
// DNS (through the context's resolver), add and remove sending (outbound) and receiving (inbound), and the
// admin force-verify of §4.14. The caller has already checked that the principal may act on `projectId`.
import { randomBytes, randomUUID } from 'node:crypto';
import { getDomain } from 'tldts';
import { ApiError, fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { normalizeDomain } from '../mail/domain-names.js';
import { DnsError } from '../mail/resolver.js';
import { generateDkimKey, publishedKey, type DkimAlgorithm } from '../mail/dkim-keys.js';
import { isSpfRecord, ownershipRecord } from '../mail/dns-records.js';
import { isPgError, PG_CHECK_VIOLATION, type Queryable } from '../storage/pg/client.js';
import { retireInboxes } from './inboxes.js';
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
  promotePendingDkim,
  setDisplayName,
  setPendingDkim,
  touchClaimCheck,
  type Claim,
  type Inbound,
  type Outbound,
} from '../storage/pg/domains.js';

/** docs/api.md §8: a claim's verification may be checked once per 10 s. */
export const VERIFY_THROTTLE_MS = 10_000;
export const DEFAULT_RETURN_PATH = 'bounces';
/**
 * How long a selector replaced by a rotation stays listed as retired: its record should stay published while
 * mail signed with it may still be verified (queued, retried for days, read late).
 */
export const RETIRED_LISTED_MS = 7 * 24 * 60 * 60_000;

/** A claim with its capabilities. */
export interface ClaimView {
  claim: Claim;
  outbound: Outbound[];
  inbound: Inbound[];
}

async function claimViews(q: Queryable, claims: Claim[]): Promise<ClaimView[]> {
  const ids = claims.map((c) => c.id);
  const [outs, ins] = ids.length ? await Promise.all([listOutbound(q, ids), listInbound(q, ids)]) : [[], []];
  return claims.map((claim) => ({
    claim,
    outbound: outs.filter((o) => o.claimId === claim.id),
    inbound: ins.filter((i) => i.claimId === claim.id),
  }));
}

const claimView = async (q: Queryable, c: Claim) => (await claimViews(q, [c]))[0]!;

export async function listClaimViews(deps: CoreDeps, projectId: string): Promise<ClaimView[]> {
  const { db } = deps.storage;
  return claimViews(db, await listClaims(db, projectId));
}

async function loadClaim(q: Queryable, projectId: string, id: string): Promise<Claim> {
  const c = await getClaim(q, projectId, id);
  if (!c) throw fail('not_found', 'No such domain claim.');
  return c;
}

export async function getClaimView(deps: CoreDeps, projectId: string, id: string): Promise<ClaimView> {
  const { db } = deps.storage;
  return claimView(db, await loadClaim(db, projectId, id));
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

async function lookupTxt(deps: CoreDeps, name: string): Promise<string[]> {
  try {
    return await deps.ctx.resolver.txt(name, { fresh: true });
  } catch (err) {
    if (err instanceof DnsError && err.absent) return [];
    return dnsUnanswered(err, name);
  }
}

export interface OutboundOptions {
  subdomain?: string;
  returnPathSubdomain?: string;
  ed25519?: boolean;
}

async function addOutbound(q: Queryable, deps: CoreDeps, claim: Claim, o: OutboundOptions, now: Date) {
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
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
  what: string,
): Promise<T> {
  const cap = await get(deps.storage.db, projectId, capId);
  if (!cap || (claimId !== undefined && cap.claimId !== claimId))
    throw fail('not_found', `No such ${what} capability.`);
  return cap;
}

/** Claims a domain for the project: a subdomain of a verified apex of the same project is verified at once. */
export async function claimDomain(deps: CoreDeps, projectId: string, name: string, now: Date): Promise<ClaimView> {
  const domain = normalizeDomain(name);
  if (!domain) throw fail('invalid_domain', `${JSON.stringify(name)} is not a valid host name.`);
  const apex = getDomain(domain);
  if (!apex) throw fail('invalid_domain', `${domain} is a public suffix; claim a domain registered under it.`);
  const { db } = deps.storage;
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
    now,
  });
  if (claim === 'taken') throw await taken();
  return claimView(db, claim);
}

/** Checks the ownership TXT record (at most once per VERIFY_THROTTLE_MS) and marks the claim verified. */
export async function verifyClaim(deps: CoreDeps, projectId: string, id: string, now: Date): Promise<Claim> {
  const { db } = deps.storage;
  const claim = await loadClaim(db, projectId, id);
  if (!(await touchClaimCheck(db, claim.id, now, VERIFY_THROTTLE_MS))) {
    const wait = Math.max(
      1,
      Math.ceil((VERIFY_THROTTLE_MS - (now.getTime() - (claim.lastCheckAt?.getTime() ?? 0))) / 1000),
    );
    throw new ApiError('rate_limited', `Checked less than 10 s ago; try again in ${wait} s.`, undefined, {
      'Retry-After': String(wait),
    });
  }
  if (claim.status !== 'verified') {
    const record = ownershipRecord(claim);
    const found = await lookupTxt(deps, record.host);
    if (!found.some((v) => v.trim() === record.value)) {
      throw fail('invalid_request', `The TXT record at ${record.host} is missing or does not match.`, {
        expected: record,
        found,
      });
    }
    await markClaimVerified(db, claim.id, now);
  }
  return claim;
}

/**
 * Releases a claim that has no subdomain claims and never sent. Its receiving capabilities go with it, so
 * their inboxes are retired first (docs/decisions.md #50); the checks run again in the deleting transaction.
 */
export async function releaseClaim(deps: CoreDeps, projectId: string, id: string): Promise<void> {
  const { db } = deps.storage;
  const check = async (q: Queryable) => {
    const claim = await loadClaim(q, projectId, id);
    if ((await countChildClaims(q, claim.id)) > 0)
      throw fail('conflict', `Release the subdomain claims of ${claim.domain} first.`);
    if (await claimHasSent(q, claim.id))
      throw fail('conflict', `${claim.domain} has sent mail: the claim stays for the record.`);
    return claim;
  };
  const claim = await check(db);
  const inbound = await listInbound(db, [claim.id]);
  await retireInboxes(
    deps,
    inbound.map((c) => c.id),
    new Date(deps.ctx.clock.now()),
  );
  await inboxRaceIsConflict(() => db.tx(async (q) => deleteClaim(q, (await check(q)).id)));
}

/** An inbox created between the retirement and the delete keeps its capability (the schema's check): 409. */
async function inboxRaceIsConflict(remove: () => Promise<void>): Promise<void> {
  try {
    await remove();
  } catch (err) {
    if (!isPgError(err, PG_CHECK_VIOLATION)) throw err;
    throw fail('conflict', 'An inbox was created on this domain meanwhile; delete it, then try again.');
  }
}

/**
 * Adds sending and/or receiving to a claim. Both or neither: a conflict on one leaves the other uncreated.
 * `subdomain` puts the capabilities on a name under the claim's domain.
 */
export async function addCapabilities(
  deps: CoreDeps,
  projectId: string,
  claimId: string,
  c: OutboundOptions & { outbound: boolean; inbound: boolean },
  now: Date,
): Promise<ClaimView> {
  const { db } = deps.storage;
  const claim = await loadClaim(db, projectId, claimId);
  await db.tx(async (q) => {
    if (c.outbound) await addOutbound(q, deps, claim, c, now);
    if (c.inbound) await addInbound(q, claim, c.subdomain, now);
  });
  return claimView(db, claim);
}

/**
 * Checks the DKIM record(s) of a sending capability and marks it verified; the claim must be verified first.
 * With a pending key (rotateDkim), its record is checked too and, when it matches, the key is promoted: it
 * signs from now on in place of the key of its algorithm, whose selector is listed as retired. The records
 * checked are those of the keys that sign afterwards: a replaced key's record may already be gone.
 */
export async function verifyOutbound(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
  now: Date,
): Promise<Outbound & { publishedSpf: string | null }> {
  const { db } = deps.storage;
  const cap = await capabilityOf(getOutbound, deps, projectId, capId, claimId, 'outbound');
  const claim = await loadClaim(db, projectId, cap.claimId);
  if (claim.status !== 'verified') throw fail('invalid_request', `Verify the claim of ${claim.domain} first.`);
  const host = (selector: string) => `${selector}._domainkey.${cap.domain}`;
  const pending =
    cap.pendingDkimSelector && cap.pendingDkimAlgorithm && cap.pendingDkimPublic
      ? { selector: cap.pendingDkimSelector, algorithm: cap.pendingDkimAlgorithm, key: cap.pendingDkimPublic }
      : null;
  const wanted: [string, string][] = [];
  if (pending) wanted.push([host(pending.selector), pending.key]);
  if (pending?.algorithm !== 'rsa') wanted.push([host(cap.dkimSelector), cap.dkimPublic]);
  if (cap.ed25519Selector && cap.ed25519Public && pending?.algorithm !== 'ed25519')
    wanted.push([host(cap.ed25519Selector), cap.ed25519Public]);
  for (const [name, key] of wanted) {
    const found = await lookupTxt(deps, name);
    if (!found.some((v) => publishedKey(v) === key)) {
      throw fail('invalid_request', `The DKIM record at ${name} is missing or does not match.`, {
        host: name,
        found,
      });
    }
  }
  // The SPF record already at the domain, if any: the suggested one is then that record with our include merged
  // in (mail/dns-records.ts), never a second one. Advice only: a lookup that fails leaves the plain suggestion.
  const publishedSpf = (await lookupTxt(deps, cap.domain).catch(() => [])).find(isSpfRecord) ?? null;
  if (!pending) {
    await markOutboundVerified(db, cap.id, now);
    return { ...cap, status: 'verified', verifiedAt: cap.verifiedAt ?? now, publishedSpf };
  }
  await db.tx(async (q) => {
    const keepSince = new Date(now.getTime() - RETIRED_LISTED_MS);
    if (!(await promotePendingDkim(q, cap.id, pending.selector, now, keepSince)))
      throw fail(
        'conflict',
        'Another rotation replaced the pending DKIM key meanwhile: publish its record, then verify.',
      );
    await markOutboundVerified(q, cap.id, now);
  });
  const after = await getOutbound(db, projectId, cap.id);
  if (!after) throw fail('not_found', 'No such outbound capability.');
  return { ...after, publishedSpf };
}

/**
 * Mints a DKIM key for the capability under a new selector, pending until verifyOutbound finds its record
 * (the current key signs until then). `algorithm` names the key it replaces: RSA (the default, the key every
 * capability has) or the Ed25519 second signature (added when the capability had none). A pending key
 * already there is replaced: one rotation at a time.
 */
export async function rotateDkim(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
  algorithm: DkimAlgorithm | undefined,
  now: Date,
): Promise<Outbound> {
  const cap = await capabilityOf(getOutbound, deps, projectId, capId, claimId, 'outbound');
  const key = await generateDkimKey(algorithm ?? 'rsa');
  await setPendingDkim(deps.storage.db, cap.id, {
    selector: key.selector,
    algorithm: key.algorithm,
    privateSealed: deps.storage.sealer.seal(key.privatePem, `dkim:${cap.id}:${key.selector}`),
    public: key.publicKey,
    now,
  });
  return {
    ...cap,
    pendingDkimSelector: key.selector,
    pendingDkimAlgorithm: key.algorithm,
    pendingDkimPublic: key.publicKey,
    pendingDkimCreatedAt: now,
  };
}

export async function setOutboundDisplayName(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
  name: string | null,
): Promise<Outbound> {
  const cap = await capabilityOf(getOutbound, deps, projectId, capId, claimId, 'outbound');
  await setDisplayName(deps.storage.db, cap.id, name);
  return { ...cap, defaultDisplayName: name };
}

/** Removes sending from a domain that never sent (its capability is the record of what it sent). */
export async function removeOutbound(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
): Promise<void> {
  const cap = await capabilityOf(getOutbound, deps, projectId, capId, claimId, 'outbound');
  if (cap.sentCount > 0)
    throw fail('conflict', `${cap.domain} has sent mail: its sending capability stays for the record.`);
  await deleteOutbound(deps.storage.db, cap.id);
}

/** Checks that an MX record of the domain points at this service's MX host and marks receiving verified. */
export async function verifyInbound(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
  now: Date,
): Promise<Inbound> {
  const cap = await capabilityOf(getInbound, deps, projectId, capId, claimId, 'inbound');
  const want = deps.ctx.config.mxHost;
  let found: string[] = [];
  try {
    found = (await deps.ctx.resolver.mx(cap.domain, { fresh: true })).map((m) => m.exchange);
  } catch (err) {
    if (!(err instanceof DnsError && err.absent)) dnsUnanswered(err, cap.domain);
  }
  if (!found.includes(want)) {
    throw fail('mx_record_mismatch', `No MX record of ${cap.domain} points at ${want}.`, { expected: want, found });
  }
  await markInboundVerified(deps.storage.db, cap.id, now);
  return { ...cap, status: 'verified', verifiedAt: cap.verifiedAt ?? now };
}

export async function removeInbound(
  deps: CoreDeps,
  projectId: string,
  capId: string,
  claimId: string | undefined,
): Promise<void> {
  const cap = await capabilityOf(getInbound, deps, projectId, capId, claimId, 'inbound');
  // docs/decisions.md #50: the inboxes are deleted (billed days kept) and emptied before the capability goes.
  await retireInboxes(deps, [cap.id], new Date(deps.ctx.clock.now()));
  await inboxRaceIsConflict(() => deleteInbound(deps.storage.db, cap.id));
}

/** docs/api.md §4.14: the platform marks a sender domain (outbound capability or claim) verified. */
export async function forceVerifySenderDomain(deps: CoreDeps, id: string, now: Date) {
  const marked = await forceVerify(deps.storage.db, id, now);
  if (!marked) throw fail('not_found', 'No such sender domain (outbound capability or claim).');
  return marked;
}
