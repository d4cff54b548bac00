// docs/api.md §4.5 domain claims with their outbound (DKIM) and inbound (MX) capabilities, and the admin
// force-verify of §4.14.
//
// Paths: in §4.5 a leading "..." is /console/v1/projects/{id} (as in §4.4 and §4.7, where rows repeat
// the header's last segment), so capabilities live at .../outbound/{capId}. The nested form
// .../domains/{domainId}/outbound/{capId} reads naturally too, so it is served as an alias by the
// same handlers.
import { Type } from '@sinclair/typebox';
import { Nullable, Obj, Ok, Timestamp, routes, type RouteSpec } from './types.js';
import { PROJECT_AUTH } from './projects.js';
import { ADMIN_AUTH } from './admin.js';

const byProject = { kind: 'project', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];
const Id = Type.String({ maxLength: 64 });
const base = { auth: PROJECT_AUTH, target: byProject, scope: 'project:admin' } as const;
const write = { ...base, permission: 'domains:manage' } as const;

export const DnsRecord = Type.Object({
  host: Type.String(),
  type: Type.Union([Type.Literal('TXT'), Type.Literal('MX'), Type.Literal('CNAME')]),
  value: Type.String(),
  priority: Type.Optional(Type.Integer()),
  note: Type.Optional(Type.String()),
});

const Status = Type.Union([Type.Literal('pending'), Type.Literal('verified')]);

/** DKIM signing algorithms by their a= names (RFC 6376 §3.5, RFC 8463 §3). */
const DkimAlgorithm = Type.Union([Type.Literal('rsa-sha256'), Type.Literal('ed25519-sha256')]);

/** A key minted by rotate, signing once verify finds its record. */
export const PendingDkim = Type.Object({
  selector: Type.String(),
  algorithm: DkimAlgorithm,
  /** The TXT record to publish beside the current one(s). */
  record: DnsRecord,
  createdAt: Timestamp,
});

/** The capability's DKIM keys: the one(s) signing, a pending rotation, and selectors retired within a week. */
export const OutboundDkim = Type.Object({
  /** The RSA key's selector (the capability's `selector`). */
  selector: Type.String(),
  algorithm: DkimAlgorithm,
  /** The selector of the Ed25519 second signature, when the capability has one. */
  ed25519Selector: Type.Optional(Type.String()),
  pending: Type.Optional(PendingDkim),
  /** Selectors replaced by a rotation: keep their records published until `until` (a week), for mail in flight. */
  retired: Type.Array(
    Type.Object({ selector: Type.String(), algorithm: DkimAlgorithm, retiredAt: Timestamp, until: Timestamp }),
  ),
});

export const OutboundCapability = Type.Object({
  id: Type.String(),
  domain: Type.String(),
  status: Status,
  verifiedAt: Nullable(Timestamp),
  selector: Type.String(),
  dkim: OutboundDkim,
  dnsRecords: Type.Object({
    dkim: DnsRecord,
    dkimEd25519: Type.Optional(DnsRecord),
    spf: DnsRecord,
    dmarc: DnsRecord,
    returnPath: Type.Object({ mx: DnsRecord, spf: DnsRecord }),
  }),
  returnPathSubdomain: Type.String(),
  returnPathDomain: Type.String(),
  defaultDisplayName: Nullable(Type.String()),
  createdAt: Timestamp,
});

export const InboundCapability = Type.Object({
  id: Type.String(),
  domain: Type.String(),
  status: Status,
  verifiedAt: Nullable(Timestamp),
  dnsRecords: Type.Object({ mx: DnsRecord }),
  createdAt: Timestamp,
});

export const DomainClaim = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  domain: Type.String(),
  status: Status,
  verifiedAt: Nullable(Timestamp),
  createdAt: Timestamp,
  dnsRecords: Type.Object({ ownership: DnsRecord }),
  outbound: Type.Array(OutboundCapability),
  inbound: Type.Array(InboundCapability),
  nextStep: Type.String(),
});

/** A DNS label: what `subdomain` and `returnPathSubdomain` take (several labels for subdomain). */
const Subdomain = Type.String({
  maxLength: 190,
  pattern: '^$|^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$',
});
const Label = Type.String({ minLength: 1, maxLength: 63, pattern: '^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$' });

const outboundBody = Obj({
  subdomain: Type.Optional(Subdomain),
  returnPathSubdomain: Type.Optional(Label),
  /** Also sign with Ed25519 (RFC 8463), as a second signature beside RSA. */
  ed25519: Type.Optional(Type.Boolean()),
});
const displayNameBody = Obj({
  // Header-bound: no CR, LF or NUL (checked again where the header is built).
  displayName: Nullable(Type.String({ minLength: 1, maxLength: 200, pattern: '^[^\\r\\n\\u0000]*$' })),
});
const VerifiedOutbound = Type.Object({ status: Type.Literal('verified'), outbound: OutboundCapability });
const VerifiedInbound = Type.Object({ status: Type.Literal('verified'), inbound: InboundCapability });
const capParams = Type.Object({ id: Id, capId: Id });
const nestedCapParams = Type.Object({ id: Id, domainId: Id, capId: Id });

// Capabilities are addressed by their own id under the project (see the comment at the top).
const capabilityRoutes = routes({
  'console.projects.outbound.verify': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/outbound/{capId}/verify',
    summary:
      'Re-check the DKIM TXT record(s) and mark the capability verified; a pending rotated key whose record is ' +
      'published is promoted (it signs from then on).',
    params: capParams,
    response: VerifiedOutbound,
  },
  'console.projects.outbound.dkim.rotate': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/outbound/{capId}/dkim/rotate',
    summary:
      'Mint a DKIM key under a new selector (RSA-2048 by default, or the Ed25519 second signature); the current ' +
      'key signs until verify finds the new record. A pending key is replaced.',
    params: capParams,
    body: Obj({ algorithm: Type.Optional(DkimAlgorithm) }),
    response: Type.Object({ pending: PendingDkim, outbound: OutboundCapability }),
  },
  'console.projects.outbound.displayName': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/outbound/{capId}/display-name',
    summary: 'Set (or clear with null) the default display name for sends with a bare from.',
    params: capParams,
    body: displayNameBody,
    response: Type.Object({ outbound: OutboundCapability }),
  },
  'console.projects.outbound.delete': {
    ...write,
    method: 'DELETE',
    path: '/console/v1/projects/{id}/outbound/{capId}',
    summary: 'Remove the capability; 409 once it has sent mail.',
    params: capParams,
    response: Ok,
  },
  'console.projects.inbound.verify': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/inbound/{capId}/verify',
    summary: 'Confirm the MX points at the service; 400 mx_record_mismatch otherwise.',
    params: capParams,
    response: VerifiedInbound,
  },
  'console.projects.inbound.delete': {
    ...write,
    method: 'DELETE',
    path: '/console/v1/projects/{id}/inbound/{capId}',
    summary: 'Remove the capability (its inboxes cascade).',
    params: capParams,
    response: Ok,
  },
});

/** The nested alias of a capability route: same schemas and handler logic, the claim named in the path. */
type Nested<R> = Omit<R, 'params' | 'path' | 'summary'> & {
  path: string;
  summary: string;
  params: typeof nestedCapParams;
};
function nested<R extends RouteSpec>(r: R): Nested<R> {
  return {
    ...r,
    path: r.path.replace('/console/v1/projects/{id}/', '/console/v1/projects/{id}/domains/{domainId}/'),
    params: nestedCapParams,
    summary: `Alias of ${r.method} ${r.path}.`,
  };
}

export const domainRoutes = routes({
  'console.projects.domains.create': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/domains',
    summary:
      'Claim a domain: the apex first (its ownership TXT at _svc-verify.<domain>), then any subdomain of a verified ' +
      'apex.',
    params: Type.Object({ id: Id }),
    body: Obj({ domain: Type.String({ minLength: 1, maxLength: 300 }) }),
    response: DomainClaim,
  },
  'console.projects.domains.list': {
    ...base,
    method: 'GET',
    path: '/console/v1/projects/{id}/domains',
    summary: 'Claims of the project, each with its DNS records and capabilities.',
    params: Type.Object({ id: Id }),
    response: Type.Object({ domains: Type.Array(DomainClaim) }),
  },
  'console.projects.domains.get': {
    ...base,
    method: 'GET',
    path: '/console/v1/projects/{id}/domains/{domainId}',
    summary: 'One claim with its capabilities and DNS records.',
    params: Type.Object({ id: Id, domainId: Id }),
    response: DomainClaim,
  },
  'console.projects.domains.verify': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/domains/{domainId}/verify',
    summary:
      'Check the ownership TXT: 200 { status: "verified" }, 400 on mismatch, 429 within 10 s of the previous check.',
    params: Type.Object({ id: Id, domainId: Id }),
    response: Type.Object({ status: Type.Literal('verified'), domain: Type.String() }),
  },
  'console.projects.domains.delete': {
    ...write,
    method: 'DELETE',
    path: '/console/v1/projects/{id}/domains/{domainId}',
    summary: 'Release the claim (capabilities cascade); 409 while a subdomain claim or sent mail blocks it.',
    params: Type.Object({ id: Id, domainId: Id }),
    response: Ok,
  },
  'console.projects.domains.outbound.create': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/domains/{domainId}/outbound',
    summary:
      'Add sending to the claim or one of its subdomains: a DKIM key (RSA-2048, Ed25519 on request) and its records.',
    params: Type.Object({ id: Id, domainId: Id }),
    body: outboundBody,
    response: DomainClaim,
  },
  'console.projects.domains.inbound.create': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/domains/{domainId}/inbound',
    summary: 'Add receiving to the claim or one of its subdomains: an MX record pointing at the service.',
    params: Type.Object({ id: Id, domainId: Id }),
    body: Obj({ subdomain: Type.Optional(Subdomain) }),
    response: DomainClaim,
  },
  'console.projects.domains.capabilities': {
    ...write,
    method: 'POST',
    path: '/console/v1/projects/{id}/domains/{domainId}/capabilities',
    summary: 'Add sending and receiving at once (each defaults to true).',
    params: Type.Object({ id: Id, domainId: Id }),
    body: Obj({
      subdomain: Type.Optional(Subdomain),
      outbound: Type.Optional(Type.Boolean()),
      inbound: Type.Optional(Type.Boolean()),
      returnPathSubdomain: Type.Optional(Label),
      ed25519: Type.Optional(Type.Boolean()),
    }),
    response: DomainClaim,
  },
  ...capabilityRoutes,
  'console.projects.domains.outbound.verify': nested(capabilityRoutes['console.projects.outbound.verify']),
  'console.projects.domains.outbound.dkim.rotate': nested(capabilityRoutes['console.projects.outbound.dkim.rotate']),
  'console.projects.domains.outbound.displayName': nested(capabilityRoutes['console.projects.outbound.displayName']),
  'console.projects.domains.outbound.delete': nested(capabilityRoutes['console.projects.outbound.delete']),
  'console.projects.domains.inbound.verify': nested(capabilityRoutes['console.projects.inbound.verify']),
  'console.projects.domains.inbound.delete': nested(capabilityRoutes['console.projects.inbound.delete']),
  'admin.senderDomains.markVerified': {
    method: 'POST',
    path: '/admin/v1/sender-domains/{id}/mark-verified',
    auth: ADMIN_AUTH,
    summary:
      'Force-verify an outbound capability (by its id) or a claim and all its outbound capabilities (by the claim id).',
    params: Type.Object({ id: Id }),
    response: Type.Object({ ok: Type.Literal(true), claimId: Type.String(), outboundIds: Type.Array(Type.String()) }),
  },
});
