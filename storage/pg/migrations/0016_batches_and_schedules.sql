-- sendBatch (docs/api.md §4.11): an idempotency key covering a batch names every message of it, in order
-- (message_id stays the first, so a sendEmail replay reads it as before); NULL for a sendEmail's key.
ALTER TABLE idempotency_keys ADD COLUMN message_ids uuid[];
-- scheduledAt (docs/api.md §4.11): when a scheduled message may leave, NULL for one sent at once. The spool
-- entry is what holds it back; this is what the message read shows and what reschedule moves.
ALTER TABLE messages ADD COLUMN scheduled_at timestamptz;
