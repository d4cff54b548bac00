-- Per-organization request rate limits (docs/api.md §5.5), set by an operator for a bulk sender: the bucket of
-- every credential of the organization (its API keys and organization tokens) holds rate_limit_burst tokens and
-- gains rate_limit_per_second a second. NULL: the platform's SVC_RATE_LIMIT_BURST / SVC_RATE_LIMIT_PER_SECOND.
ALTER TABLE organizations
  ADD COLUMN rate_limit_burst integer CHECK (rate_limit_burst BETWEEN 1 AND 1000000),
  ADD COLUMN rate_limit_per_second double precision CHECK (rate_limit_per_second > 0 AND rate_limit_per_second <= 100000);
