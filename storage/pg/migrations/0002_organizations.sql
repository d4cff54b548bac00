-- Organizations, members, organization tokens, invitations, join codes, projects, project API keys
-- and the audit log (docs/api.md §4.1, §4.3, §4.6, §4.7, §5.3-§5.5).

CREATE TABLE organizations (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  plan text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'payg')),
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

CREATE TABLE organization_members (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'auditor', 'billing')),
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX organization_members_user_idx ON organization_members (user_id);

-- docs/api.md §8: a user can create at most one organization. Enforced by the database, not read-then-write.
CREATE UNIQUE INDEX organizations_one_per_creator ON organizations (created_by);

CREATE TABLE organization_tokens (
  id uuid PRIMARY KEY,
  token_id text NOT NULL UNIQUE,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  secret_sealed text NOT NULL,
  label text,
  created_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX organization_tokens_org_idx ON organization_tokens (organization_id);

-- Only hashes of invitation tokens and join codes are kept: the plaintext travels once.
CREATE TABLE invitations (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'auditor', 'billing')),
  token_hash text NOT NULL UNIQUE,
  invited_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz,
  accepted_by uuid REFERENCES users (id) ON DELETE SET NULL,
  revoked_at timestamptz
);
CREATE INDEX invitations_org_idx ON invitations (organization_id);

CREATE TABLE join_codes (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  code_hash text NOT NULL UNIQUE,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'auditor', 'billing')),
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  used_by uuid REFERENCES users (id) ON DELETE SET NULL,
  revoked_at timestamptz
);
CREATE INDEX join_codes_org_idx ON join_codes (organization_id);

CREATE TABLE projects (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- Soft delete (docs/api.md §3): the row stays for history, leaves every list, and its keys stop working.
  deleted_at timestamptz
);
CREATE INDEX projects_org_idx ON projects (organization_id) WHERE deleted_at IS NULL;

-- expires_at is set on rotation (docs/api.md §3: the old key works 24 h more); revoked_at on revoke.
CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  key_id text NOT NULL UNIQUE,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  secret_sealed text NOT NULL,
  label text,
  scopes text[] NOT NULL,
  managed text NOT NULL CHECK (managed IN ('platform', 'local')),
  allowed_cidrs text[] NOT NULL DEFAULT '{}',
  rotated_from text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_project_idx ON api_keys (project_id);

-- seq orders entries written in the same millisecond, on every node (one sequence in Postgres).
CREATE TABLE audit_log (
  id uuid PRIMARY KEY,
  seq bigserial NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  actor_kind text NOT NULL,
  actor_id text,
  action text NOT NULL,
  method text NOT NULL,
  path text NOT NULL,
  status integer NOT NULL,
  organization_id uuid,
  project_id uuid,
  target_id text,
  request_id text NOT NULL,
  ip text
);
CREATE INDEX audit_log_project_idx ON audit_log (project_id, seq DESC);
CREATE INDEX audit_log_org_idx ON audit_log (organization_id, seq DESC);
