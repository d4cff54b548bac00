-- RFC 3501 §2.3.2 \Recent: a message is recent to the first session that selects its mailbox read-write after
-- it arrived. recent_uid is the highest UID some session has already been given as recent; the SELECT that
-- claims the ones above it moves it up to uid_next - 1 in the same statement (docs/decisions.md #51).
ALTER TABLE mailboxes ADD COLUMN recent_uid bigint NOT NULL DEFAULT 0 CHECK (recent_uid >= 0);
