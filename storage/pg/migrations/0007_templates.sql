-- The templates module (docs/api.md §4.13, issue 6 items 6-8): an organization's templates, every version
-- each one has had, and the template a message was rendered from.

-- The current version of each template. `variables` is the list of { name, default? }.
CREATE TABLE templates (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  subject text NOT NULL,
  html text,
  text text,
  variables jsonb NOT NULL DEFAULT '[]',
  is_public boolean NOT NULL DEFAULT false,
  version integer NOT NULL DEFAULT 1,
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK (html IS NOT NULL OR text IS NOT NULL)
);
CREATE INDEX templates_org_idx ON templates (organization_id, created_at DESC);
CREATE INDEX templates_public_idx ON templates (created_at DESC) WHERE is_public;

-- Every version of every template, the current one included, so that the (template_id,
-- template_version) a message records always names its content. Written with the template in one
-- transaction: version 1 at create, version n+1 at each update; never changed afterwards.
CREATE TABLE template_versions (
  template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
  version integer NOT NULL,
  name text NOT NULL,
  subject text NOT NULL,
  html text,
  text text,
  variables jsonb NOT NULL,
  is_public boolean NOT NULL,
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (template_id, version)
);

-- The template (and its version) a message was rendered from. No foreign key: a message is a record
-- of what was sent and keeps these after the template is deleted.
ALTER TABLE messages ADD COLUMN template_id uuid;
ALTER TABLE messages ADD COLUMN template_version integer;
