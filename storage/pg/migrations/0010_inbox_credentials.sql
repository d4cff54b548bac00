-- docs/api.md §4.5 inboxes: a password change and a deletion end every IMAP and webmail session of the inbox.
-- credentials_version counts those changes: a session remembers the version it logged in with and ends when
-- the inbox's is larger (or the inbox is deleted); the change feed's inbox notice wakes it (mail/mail-store.ts).
ALTER TABLE inboxes ADD COLUMN credentials_version integer NOT NULL DEFAULT 1 CHECK (credentials_version > 0);

-- docs/decisions.md #20: an import skips a message whose Message-ID is already in the inbox, whichever way it
-- came in (the MX stores no import key); this finds them without reading the inbox's every row.
CREATE INDEX mail_messages_message_id_idx ON mail_messages (inbox_id, message_id) WHERE message_id IS NOT NULL;

-- The inboxes an organization is billed for (docs/decisions.md #18) are found through their capabilities.
CREATE INDEX inboxes_capability_idx ON inboxes (capability_id);
