-- SMTP TLS Reporting (RFC 8460; docs/operations.md, "TLS reporting"). The MTA counts its outbound TLS sessions
-- in memory and adds them here about once a minute: one row per recipient (policy) domain, UTC day, policy,
-- result and receiving host. policy_key is a digest of (type, strings, mx_host), so that a long policy (many
-- TLSA records) never makes the key too long to index. result '' is a successful session.
CREATE TABLE tls_report_counts (
  domain text NOT NULL,
  day date NOT NULL,
  policy_key text NOT NULL,
  policy_type text NOT NULL CHECK (policy_type IN ('sts', 'tlsa', 'no-policy-found')),
  policy_strings jsonb NOT NULL,
  mx_host jsonb NOT NULL,
  result text NOT NULL,
  receiving_mx text NOT NULL,
  receiving_ip text NOT NULL,
  detail text NOT NULL,
  sessions bigint NOT NULL CHECK (sessions >= 0),
  PRIMARY KEY (day, domain, policy_key, result, receiving_mx, receiving_ip)
);

-- One report per domain and day (RFC 8460 §4.1: one per 24-hour period): claimed by one MTA node (the row),
-- then `sent` (to at least one rua destination), `no-rua` (the domain publishes no _smtp._tls record) or
-- `failed` (given up); `pending` rows are retried at next_attempt_at.
CREATE TABLE tls_report_sends (
  domain text NOT NULL,
  day date NOT NULL,
  report_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'sent', 'no-rua', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  destinations jsonb NOT NULL DEFAULT '[]',
  last_error text,
  sent_at timestamptz,
  PRIMARY KEY (day, domain)
);
