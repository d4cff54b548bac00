-- Messages, their events, idempotency keys, the daily quota and suppressions (docs/api.md §4.11, §6, §8;
-- docs/decisions.md #3, #4, #11, #13). Message bodies live in the LMDB spool, not here.

CREATE TABLE messages (
  id uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  outbound_id uuid REFERENCES outbound_capabilities (id) ON DELETE SET NULL,
  status text NOT NULL CHECK (status IN ('queued', 'sending', 'delivered', 'deferred', 'bounced', 'failed', 'suppressed')),
  from_header text NOT NULL,
  from_address text NOT NULL,
  to_address text NOT NULL,
  subject text NOT NULL,
  message_id_header text NOT NULL,
  return_path text NOT NULL,
  idempotency_key text,
  size_bytes integer NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX messages_project_idx ON messages (project_id, created_at DESC);
CREATE INDEX messages_status_idx ON messages (status, created_at DESC);

-- Append-only; seq orders events written in the same millisecond.
CREATE TABLE message_events (
  id uuid PRIMARY KEY,
  seq bigserial NOT NULL UNIQUE,
  message_id uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
  project_id uuid NOT NULL,
  type text NOT NULL CHECK (type IN ('queued', 'sending', 'delivered', 'deferred', 'bounced', 'failed', 'suppressed', 'complained')),
  detail jsonb,
  created_at timestamptz NOT NULL
);
CREATE INDEX message_events_message_idx ON message_events (message_id, seq);

-- docs/decisions.md #3: a key is per project and lives 24 h; the body hash tells a retry from a reuse.
CREATE TABLE idempotency_keys (
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  key text NOT NULL,
  body_hash text NOT NULL,
  message_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (project_id, key)
);

-- docs/decisions.md #11 and #13: messages answered 200 per organization and UTC day.
CREATE TABLE quota_days (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  day date NOT NULL,
  accepted integer NOT NULL,
  PRIMARY KEY (organization_id, day)
);

-- address: the local part as given, the domain in lower case (domains are case-insensitive).
CREATE TABLE suppressions (
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  address text NOT NULL,
  reason text NOT NULL CHECK (reason IN ('hard_bounce', 'soft_bounce_max', 'complaint', 'manual')),
  detail text,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (project_id, address)
);
