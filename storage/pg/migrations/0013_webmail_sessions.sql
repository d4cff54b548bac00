-- Webmail sessions (docs/api.md §4.15): one row per signed-in browser, scoped to one inbox. The cookie holds a
-- random token; only its SHA-256 is stored. A session ends when it expires, when the user signs out, or when the
-- inbox's credentials version moves past the one it signed in with (a password change or a deletion).
CREATE TABLE webmail_sessions (
  token_hash text PRIMARY KEY,
  inbox_id uuid NOT NULL REFERENCES inboxes (id) ON DELETE CASCADE,
  credentials_version integer NOT NULL,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX webmail_sessions_inbox_idx ON webmail_sessions (inbox_id);
CREATE INDEX webmail_sessions_expires_idx ON webmail_sessions (expires_at);
