// docs/api.md §4.4 custom webmail domains (register, list, verify, delete) and the §4.12 allow check: HTTP
// shapes around core/custom-domains.ts.
import type { customDomainRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import type { Access } from '../authorize.js';
import { fail } from '../errors.js';
import { deleteCustomDomain, listCustomDomains, type CustomDomain } from '../../storage/pg/custom-domains.js';
import {
  dnsRecordFor,
  isCustomDomainAllowed,
  registerCustomDomain,
  verifyCustomDomain,
} from '../../core/custom-domains.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const customDomainJson = (d: CustomDomain) => ({
  id: d.id,
  domain: d.domain,
  status: d.status,
  verified_at: iso(d.verifiedAt),
  last_verify_attempt: iso(d.lastVerifyAttempt),
  created_at: d.createdAt.toISOString(),
});

/** The access the route table's target check granted; present on every {id} route. */
function granted(rc: RequestCtx): Access {
  if (!rc.access) throw new Error('route without a target reached a custom-domain handler');
  return rc.access;
}

export const customDomainHandlers: Handlers<typeof customDomainRoutes> = {
  async 'console.organizations.customDomains.create'({ body }, rc) {
    const { organizationId } = granted(rc);
    const row = await registerCustomDomain(rc.deps, organizationId, body.domain, rc.now);
    rc.audit.targetId = row.id;
    const dnsRecord = dnsRecordFor(row.domain, rc.deps.ctx.config);
    return {
      customDomain: customDomainJson(row),
      dnsRecord,
      nextStep:
        `Publish the DNS record (${dnsRecord.host} ${dnsRecord.type} ${dnsRecord.value}), then call ` +
        `POST /console/v1/organizations/${organizationId}/custom-domains/${row.id}/verify.`,
    };
  },

  async 'console.organizations.customDomains.list'(_in, rc) {
    const config = rc.deps.ctx.config;
    const rows = await listCustomDomains(rc.deps.storage.db, granted(rc).organizationId);
    return { customDomains: rows.map((d) => ({ ...customDomainJson(d), dnsRecord: dnsRecordFor(d.domain, config) })) };
  },

  async 'console.organizations.customDomains.verify'({ params }, rc) {
    const verified = await verifyCustomDomain(rc.deps, granted(rc).organizationId, params.domainId, rc.now);
    return { status: 'verified' as const, domain: verified.domain, customDomain: customDomainJson(verified) };
  },

  async 'console.organizations.customDomains.delete'({ params }, rc) {
    if (!(await deleteCustomDomain(rc.deps.storage.db, granted(rc).organizationId, params.domainId)))
      throw fail('not_found', 'No such custom domain.');
    return { ok: true as const };
  },

  async 'v1.services.customDomainAllowed'({ query }, rc) {
    if (!(await isCustomDomainAllowed(rc.deps, query.domain))) throw fail('not_found', 'Not a verified custom domain.');
    return { allowed: true as const };
  },
};
