-- Domain claims and their sending (outbound, DKIM) and receiving (inbound, MX) capabilities
-- (docs/api.md §4.5).
--
-- Uniqueness across ancestors and descendants is the database's job: the registrable domain (the
-- apex) is claimed once platform-wide (UNIQUE domain), and a subdomain claim must reference the apex
-- claim of its own project (the composite foreign key), so no project can claim anything under
-- another project's apex, even when two claim at the same moment.
CREATE TABLE domain_claims (
  id uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  domain text NOT NULL UNIQUE,
  apex_claim_id uuid,
  verify_token text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
  verified_at timestamptz,
  last_check_at timestamptz,
  created_at timestamptz NOT NULL,
  UNIQUE (id, project_id),
  FOREIGN KEY (apex_claim_id, project_id) REFERENCES domain_claims (id, project_id) ON DELETE RESTRICT
);
CREATE INDEX domain_claims_project_idx ON domain_claims (project_id);
CREATE INDEX domain_claims_apex_idx ON domain_claims (apex_claim_id) WHERE apex_claim_id IS NOT NULL;

-- One outbound capability per (sub)domain platform-wide (docs/api.md §4.11: send-on-behalf resolves the
-- project from it). DKIM private keys are sealed with the master key; the selector is unique per
-- capability so that keys can rotate.
CREATE TABLE outbound_capabilities (
  id uuid PRIMARY KEY,
  claim_id uuid NOT NULL REFERENCES domain_claims (id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  domain text NOT NULL UNIQUE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
  verified_at timestamptz,
  dkim_selector text NOT NULL,
  dkim_private_sealed text NOT NULL,
  dkim_public text NOT NULL,
  ed25519_selector text,
  ed25519_private_sealed text,
  ed25519_public text,
  return_path_subdomain text NOT NULL DEFAULT 'bounces',
  default_display_name text,
  sent_count bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL
);
CREATE INDEX outbound_capabilities_claim_idx ON outbound_capabilities (claim_id);

CREATE TABLE inbound_capabilities (
  id uuid PRIMARY KEY,
  claim_id uuid NOT NULL REFERENCES domain_claims (id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  domain text NOT NULL UNIQUE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
  verified_at timestamptz,
  created_at timestamptz NOT NULL
);
CREATE INDEX inbound_capabilities_claim_idx ON inbound_capabilities (claim_id);

-- The data layer's `sender_domains` (docs/api.md §2.1): the sending capabilities, without key material.
CREATE VIEW sender_domains AS
  SELECT id, project_id, claim_id, domain, status, verified_at, dkim_selector, ed25519_selector, return_path_subdomain,
    default_display_name, created_at
  FROM outbound_capabilities;
