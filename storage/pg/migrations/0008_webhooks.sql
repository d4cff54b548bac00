-- Webhooks (docs/api.md §4.8, §6 rules 2-3; docs/decisions.md #5): a project's endpoints, and one row per
-- delivery attempt of a message event to an endpoint.

-- events: the kinds subscribed to; empty means every kind (docs/decisions.md #5). The secret
-- (whsec_...) is needed again to sign every request, so it is sealed with the master key, bound to
-- the row by the associated data `webhook:<id>` (storage/secrets.ts).
CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY,
  project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  url text NOT NULL,
  events text[] NOT NULL DEFAULT '{}',
  secret_sealed text NOT NULL,
  created_at timestamptz NOT NULL
);
-- The fan-out joins a batch of events to their projects' endpoints.
CREATE INDEX webhook_endpoints_project_idx ON webhook_endpoints (project_id, created_at);

-- One row per attempt. The first is written in the transaction that writes the event
-- (storage/pg/webhooks.ts fanOut); each failed attempt writes the next. status: pending (not yet
-- made, due at next_attempt_at, which a dispatcher moves ahead as its lease while it tries),
-- succeeded (2xx), retrying (failed, the next attempt is its own row), failed (failed, given up).
-- webhook_id is the Standard Webhooks `webhook-id`, the same on every attempt of a delivery.
CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY,
  webhook_id text NOT NULL,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  project_id uuid NOT NULL,
  event_id uuid NOT NULL REFERENCES message_events (id) ON DELETE CASCADE,
  event_type text NOT NULL CHECK (event_type IN ('delivered', 'deferred', 'bounced', 'failed', 'suppressed', 'complained')),
  attempt integer NOT NULL CHECK (attempt >= 1),
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'retrying', 'failed')),
  status_code integer,
  latency_ms integer,
  error text,
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL,
  attempted_at timestamptz
);
-- One row per attempt number: two dispatchers finishing the same attempt write one next attempt.
CREATE UNIQUE INDEX webhook_deliveries_attempt_idx ON webhook_deliveries (event_id, endpoint_id, attempt);
-- What is due: only pending rows, in schedule order.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- The data layer lists a project's attempts, newest first.
CREATE INDEX webhook_deliveries_project_idx ON webhook_deliveries (project_id, created_at DESC);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);
