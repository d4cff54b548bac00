// docs/api.md §4.5 domain claims and capabilities, and the admin force-verify of §4.14: HTTP shapes around
// the operations of core/domains.ts.
import type { domainRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx, Deps } from '../deps.js';
import type { Access } from '../authorize.js';
import { inboundRecords, outboundRecords, ownershipRecord } from '../../mail/dns-records.js';
import { dkimTxtValue, type DkimAlgorithm } from '../../mail/dkim-keys.js';
import type { Claim, Inbound, Outbound } from '../../storage/pg/domains.js';
import {
  addCapabilities,
  claimDomain,
  forceVerifySenderDomain,
  getClaimView,
  listClaimViews,
  releaseClaim,
  removeInbound,
  removeOutbound,
  RETIRED_LISTED_MS,
  rotateDkim,
  setOutboundDisplayName,
  verifyClaim,
  verifyInbound,
  verifyOutbound,
  type ClaimView,
} from '../../core/domains.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** RFC 6376 §3.5 and RFC 8463 §3: the a= name of a key type (k=). */
const ALGORITHM = { rsa: 'rsa-sha256', ed25519: 'ed25519-sha256' } as const;
const KEY_TYPE = { 'rsa-sha256': 'rsa', 'ed25519-sha256': 'ed25519' } as const;

function pendingJson(o: Outbound) {
  const { pendingDkimSelector: selector, pendingDkimAlgorithm: alg, pendingDkimPublic: key } = o;
  if (!selector || !alg || !key) return null;
  return {
    selector,
    algorithm: ALGORITHM[alg],
    record: {
      host: `${selector}._domainkey.${o.domain}`,
      type: 'TXT' as const,
      value: dkimTxtValue(alg, key),
      note:
        'Publish beside the current DKIM record, then call verify: the current key signs until then. Keep the ' +
        'record it replaces for a week after (see dkim.retired).',
    },
    createdAt: (o.pendingDkimCreatedAt ?? o.createdAt).toISOString(),
  };
}

/** The DKIM keys as the capability read shows them; retired selectors are listed for RETIRED_LISTED_MS. */
function dkimJson(o: Outbound, now: Date) {
  const pending = pendingJson(o);
  const retired = o.dkimRetired
    .map((r) => ({ r, at: new Date(r.retiredAt) }))
    .filter(({ at }) => at.getTime() + RETIRED_LISTED_MS > now.getTime())
    .map(({ r, at }) => ({
      selector: r.selector,
      algorithm: ALGORITHM[r.algorithm],
      retiredAt: at.toISOString(),
      until: new Date(at.getTime() + RETIRED_LISTED_MS).toISOString(),
    }));
  return {
    selector: o.dkimSelector,
    algorithm: ALGORITHM.rsa,
    ...(o.ed25519Selector ? { ed25519Selector: o.ed25519Selector } : {}),
    ...(pending ? { pending } : {}),
    retired,
  };
}

function outboundJson(o: Outbound, deps: Deps, now: Date) {
  const { returnPathDomain, dnsRecords } = outboundRecords(o, deps.ctx.config);
  return {
    id: o.id,
    domain: o.domain,
    status: o.status,
    verifiedAt: iso(o.verifiedAt),
    selector: o.dkimSelector,
    dkim: dkimJson(o, now),
    dnsRecords,
    returnPathSubdomain: o.returnPathSubdomain,
    returnPathDomain,
    defaultDisplayName: o.defaultDisplayName,
    createdAt: o.createdAt.toISOString(),
  };
}

function inboundJson(i: Inbound, deps: Deps) {
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

function claimJson(deps: Deps, now: Date, { claim: c, outbound, inbound }: ClaimView) {
  return {
    id: c.id,
    projectId: c.projectId,
    domain: c.domain,
    status: c.status,
    verifiedAt: iso(c.verifiedAt),
    createdAt: c.createdAt.toISOString(),
    dnsRecords: { ownership: ownershipRecord(c) },
    outbound: outbound.map((o) => outboundJson(o, deps, now)),
    inbound: inbound.map((i) => inboundJson(i, deps)),
    nextStep: nextStep(c, outbound, inbound),
  };
}

function project(rc: RequestCtx): string {
  const projectId = (rc.access as Access | null)?.projectId;
  if (!projectId) throw new Error('domain route without a project target');
  return projectId;
}

async function verifyOutboundJson(rc: RequestCtx, capId: string, claimId?: string) {
  const cap = await verifyOutbound(rc.deps, project(rc), capId, claimId, rc.now);
  rc.audit.targetId = cap.id;
  return { status: 'verified' as const, outbound: outboundJson(cap, rc.deps, rc.now) };
}

async function rotate(rc: RequestCtx, capId: string, algorithm: keyof typeof KEY_TYPE | undefined, claimId?: string) {
  const type: DkimAlgorithm | undefined = algorithm && KEY_TYPE[algorithm];
  const cap = await rotateDkim(rc.deps, project(rc), capId, claimId, type, rc.now);
  rc.audit.targetId = cap.id;
  const outbound = outboundJson(cap, rc.deps, rc.now);
  if (!outbound.dkim.pending) throw new Error('rotateDkim left no pending key');
  return { pending: outbound.dkim.pending, outbound };
}

async function displayName(rc: RequestCtx, capId: string, name: string | null, claimId?: string) {
  const cap = await setOutboundDisplayName(rc.deps, project(rc), capId, claimId, name);
  return { outbound: outboundJson(cap, rc.deps, rc.now) };
}

async function verifyInboundJson(rc: RequestCtx, capId: string, claimId?: string) {
  const cap = await verifyInbound(rc.deps, project(rc), capId, claimId, rc.now);
  return { status: 'verified' as const, inbound: inboundJson(cap, rc.deps) };
}

const ok = () => ({ ok: true as const });

export const domainHandlers: Handlers<typeof domainRoutes> = {
  async 'console.projects.domains.create'({ body }, rc) {
    const view = await claimDomain(rc.deps, project(rc), body.domain, rc.now);
    rc.audit.targetId = view.claim.id;
    return claimJson(rc.deps, rc.now, view);
  },

  async 'console.projects.domains.list'(_in, rc) {
    return { domains: (await listClaimViews(rc.deps, project(rc))).map((v) => claimJson(rc.deps, rc.now, v)) };
  },

  async 'console.projects.domains.get'({ params }, rc) {
    return claimJson(rc.deps, rc.now, await getClaimView(rc.deps, project(rc), params.domainId));
  },

  async 'console.projects.domains.verify'({ params }, rc) {
    const claim = await verifyClaim(rc.deps, project(rc), params.domainId, rc.now);
    return { status: 'verified' as const, domain: claim.domain };
  },

  async 'console.projects.domains.delete'({ params }, rc) {
    await releaseClaim(rc.deps, project(rc), params.domainId);
    return ok();
  },

  async 'console.projects.domains.outbound.create'({ params, body }, rc) {
    const c = { ...body, outbound: true, inbound: false };
    return claimJson(rc.deps, rc.now, await addCapabilities(rc.deps, project(rc), params.domainId, c, rc.now));
  },

  async 'console.projects.domains.inbound.create'({ params, body }, rc) {
    const c = { subdomain: body.subdomain, outbound: false, inbound: true };
    return claimJson(rc.deps, rc.now, await addCapabilities(rc.deps, project(rc), params.domainId, c, rc.now));
  },

  async 'console.projects.domains.capabilities'({ params, body }, rc) {
    const c = { ...body, outbound: body.outbound ?? true, inbound: body.inbound ?? true };
    return claimJson(rc.deps, rc.now, await addCapabilities(rc.deps, project(rc), params.domainId, c, rc.now));
  },

  'console.projects.outbound.verify': ({ params }, rc) => verifyOutboundJson(rc, params.capId),
  'console.projects.domains.outbound.verify': ({ params }, rc) => verifyOutboundJson(rc, params.capId, params.domainId),
  'console.projects.outbound.dkim.rotate': ({ params, body }, rc) => rotate(rc, params.capId, body.algorithm),
  'console.projects.domains.outbound.dkim.rotate': ({ params, body }, rc) =>
    rotate(rc, params.capId, body.algorithm, params.domainId),
  'console.projects.outbound.displayName': ({ params, body }, rc) => displayName(rc, params.capId, body.displayName),
  'console.projects.domains.outbound.displayName': ({ params, body }, rc) =>
    displayName(rc, params.capId, body.displayName, params.domainId),
  async 'console.projects.outbound.delete'({ params }, rc) {
    await removeOutbound(rc.deps, project(rc), params.capId, undefined);
    return ok();
  },
  async 'console.projects.domains.outbound.delete'({ params }, rc) {
    await removeOutbound(rc.deps, project(rc), params.capId, params.domainId);
    return ok();
  },
  'console.projects.inbound.verify': ({ params }, rc) => verifyInboundJson(rc, params.capId),
  'console.projects.domains.inbound.verify': ({ params }, rc) => verifyInboundJson(rc, params.capId, params.domainId),
  async 'console.projects.inbound.delete'({ params }, rc) {
    await removeInbound(rc.deps, project(rc), params.capId, undefined);
    return ok();
  },
  async 'console.projects.domains.inbound.delete'({ params }, rc) {
    await removeInbound(rc.deps, project(rc), params.capId, params.domainId);
    return ok();
  },

  async 'admin.senderDomains.markVerified'({ params }, rc) {
    return { ok: true as const, ...(await forceVerifySenderDomain(rc.deps, params.id, rc.now)) };
  },
};
