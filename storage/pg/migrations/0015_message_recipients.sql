-- sendEmail's to, cc and bcc (docs/api.md §4.11): one message, a delivery per recipient. A message to one
-- recipient (the common case) has no rows here: its row is its recipient (to_address, status, attempts), so
-- the plain send and its delivery write nothing more. A message to several has a row per distinct recipient,
-- each with its own status; messages.status is then derived from them (storage/pg/recipients.ts) and
-- messages.to_address holds the first `to`. `position` keeps the order given (to, then cc, then bcc).
CREATE TABLE message_recipients (
  message_id uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
  address text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('to', 'cc', 'bcc')),
  position smallint NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'sending', 'delivered', 'deferred', 'bounced', 'failed', 'suppressed')),
  attempts integer NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (message_id, address)
);
