-- Custom webmail domains (docs/api.md §2.2, §3, §4.4, §4.12): a host name an organization points at the
-- webmail host (SVC_WEBMAIL_HOST) with a CNAME, or an apex at SVC_WEBMAIL_ADDRESSES with A/AAAA.
--
-- `domain` is stored normalized (control/domain-names.ts: lower case, no trailing dot, punycode) and
-- is unique across the platform: the UNIQUE constraint decides between two organizations registering
-- the same name at the same moment (409 custom_domain_taken), and its index answers the public allow
-- check (GET /v1/services/custom-domain-allowed) in one lookup.
-- `disabled` is reserved: the spec names the state but not the moves into and out of it.
CREATE TABLE custom_domains (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  domain text NOT NULL CHECK (domain = lower(domain) AND domain NOT LIKE '%.' AND length(domain) BETWEEN 1 AND 253),
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified', 'disabled')),
  verified_at timestamptz,
  last_verify_attempt timestamptz,
  created_at timestamptz NOT NULL,
  CONSTRAINT custom_domains_domain_key UNIQUE (domain),
  CHECK (status <> 'verified' OR verified_at IS NOT NULL)
);
CREATE INDEX custom_domains_org_idx ON custom_domains (organization_id, created_at);
