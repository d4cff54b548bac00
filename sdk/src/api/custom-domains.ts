// docs/api.md §4.4 custom webmail domains and the §4.12 allow check.
import { Type } from '@sinclair/typebox';
import { Nullable, Obj, Ok, Timestamp, routes, type RouteSpec } from './types.js';
import { ORG_AUTH } from './organizations.js';

const OrgId = Type.String({ maxLength: 64 });
const DomainId = Type.String({ maxLength: 64 });
const byId = { kind: 'organization', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];
// Longer than any valid name on purpose: an overlong name is 400 invalid_domain (the handler's
// verdict), not a schema error.
const DomainInput = Type.String({ minLength: 1, maxLength: 1024 });

/** docs/api.md §2.2 custom webmail domain. `disabled` is reserved (docs/api.md §3 names no moves into it yet). */
export const CustomDomain = Type.Object({
  id: Type.String(),
  domain: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('disabled')]),
  verified_at: Nullable(Timestamp),
  last_verify_attempt: Nullable(Timestamp),
  created_at: Timestamp,
});

/** docs/api.md §2.2 custom domain DNS record: the CNAME to publish at the domain. */
export const CustomDomainDnsRecord = Type.Object({
  host: Type.String(),
  type: Type.Literal('CNAME'),
  value: Type.String(),
  note: Type.String(),
});

export const customDomainRoutes = routes({
  'console.organizations.customDomains.create': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/custom-domains',
    auth: ORG_AUTH,
    target: byId,
    permission: 'domains:manage',
    summary:
      'Register a custom webmail domain (normalized: lower case, no trailing dot, IDN as punycode) and get the ' +
      'CNAME to publish. ' +
      '400 invalid_domain if it is not a valid host name; 409 custom_domain_taken if any organization registered it.',
    params: Type.Object({ id: OrgId }),
    body: Obj({ domain: DomainInput }),
    response: Type.Object({ customDomain: CustomDomain, dnsRecord: CustomDomainDnsRecord, nextStep: Type.String() }),
  },
  'console.organizations.customDomains.list': {
    method: 'GET',
    path: '/console/v1/organizations/{id}/custom-domains',
    auth: ORG_AUTH,
    target: byId,
    summary: "The organization's custom webmail domains, each with its dnsRecord.",
    params: Type.Object({ id: OrgId }),
    response: Type.Object({
      customDomains: Type.Array(Type.Intersect([CustomDomain, Type.Object({ dnsRecord: CustomDomainDnsRecord })])),
    }),
  },
  'console.organizations.customDomains.verify': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/custom-domains/{domainId}/verify',
    auth: ORG_AUTH,
    target: byId,
    permission: 'domains:manage',
    summary:
      'Check DNS now: passes when the CNAME of the domain is the webmail host, or when it has no CNAME and all its ' +
      'A/AAAA records ' +
      '(at least one) are webmail addresses. Sets last_verify_attempt on every call and verified_at on success; ' +
      '400 cname_not_found otherwise, with what was found (or that DNS did not answer) in message and details.',
    params: Type.Object({ id: OrgId, domainId: DomainId }),
    response: Type.Object({ status: Type.Literal('verified'), domain: Type.String(), customDomain: CustomDomain }),
  },
  'console.organizations.customDomains.delete': {
    method: 'DELETE',
    path: '/console/v1/organizations/{id}/custom-domains/{domainId}',
    auth: ORG_AUTH,
    target: byId,
    permission: 'domains:manage',
    summary: 'Remove a custom webmail domain; webmail is no longer served there and the name is free again.',
    params: Type.Object({ id: OrgId, domainId: DomainId }),
    response: Ok,
  },
  'v1.services.customDomainAllowed': {
    method: 'GET',
    path: '/v1/services/custom-domain-allowed',
    auth: 'public',
    summary:
      'Public allow check (for on-demand TLS in front of webmail): 200 { allowed: true } if the host, normalized, ' +
      'is a verified custom webmail domain; 404 otherwise. Reveals only that boolean.',
    query: Obj({ domain: DomainInput }),
    response: Type.Object({ allowed: Type.Literal(true) }),
  },
});
