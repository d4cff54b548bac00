-- The mail store (docs/architecture.md, "Receiving and reading mail"): inboxes under an inbound
-- capability, their mailboxes, the message index IMAP and the webmail read without opening a body, the
-- change journal, and the Postgres blob store. Bodies live in the blob store named by SVC_BLOB_STORE;
-- `blobs` and `blob_chunks` are used only when that is `postgres`.

-- docs/api.md §4.5 inboxes. A live localpart is unique per capability, case-insensitively (RFC 5321 §2.4 lets
-- a local part be case-sensitive; ours never differ by case); a soft-deleted inbox frees its address at
-- once. storage_limit_bytes: docs/decisions.md #17 (1 GB is 2^30 bytes). used_bytes moves in the same
-- transaction as the message rows it counts.
CREATE TABLE inboxes (
  id uuid PRIMARY KEY,
  capability_id uuid NOT NULL REFERENCES inbound_capabilities (id) ON DELETE CASCADE,
  localpart text NOT NULL,
  type text NOT NULL DEFAULT 'individual' CHECK (type IN ('individual', 'group')),
  password_hash text,
  initial_password_sealed text,
  storage_limit_bytes bigint NOT NULL DEFAULT 1073741824 CHECK (storage_limit_bytes > 0),
  used_bytes bigint NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  billing_started_at timestamptz,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX inboxes_live_localpart_key ON inboxes (capability_id, lower(localpart)) WHERE deleted_at IS NULL;

-- RFC 3501 §2.3.1.1: a mailbox's UIDVALIDITY must never be reused for a mailbox of the same name. Taken
-- from one sequence for all mailboxes, it is never reused at all; NO CYCLE keeps it a 32-bit nz-number.
CREATE SEQUENCE mailbox_uid_validity_seq AS bigint MINVALUE 1 MAXVALUE 4294967295 NO CYCLE;

-- uid_next and highest_modseq only grow: both are moved by one row-locked UPDATE in the transaction
-- that inserts the message (RFC 7162 §3.1.1: an empty mailbox reports HIGHESTMODSEQ 1, and every change
-- takes a larger value). special_use: the RFC 6154 role; INBOX has none.
CREATE TABLE mailboxes (
  id uuid PRIMARY KEY,
  inbox_id uuid NOT NULL REFERENCES inboxes (id) ON DELETE CASCADE,
  name text NOT NULL,
  special_use text CHECK (special_use IN ('\All', '\Archive', '\Drafts', '\Flagged', '\Junk', '\Sent', '\Trash')),
  uid_validity bigint NOT NULL UNIQUE DEFAULT nextval('mailbox_uid_validity_seq'),
  uid_next bigint NOT NULL DEFAULT 1 CHECK (uid_next > 0),
  highest_modseq bigint NOT NULL DEFAULT 1 CHECK (highest_modseq > 0),
  subscribed boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL,
  UNIQUE (inbox_id, name)
);
CREATE UNIQUE INDEX mailboxes_special_use_key ON mailboxes (inbox_id, special_use) WHERE special_use IS NOT NULL;

-- One row per message in a mailbox (a copy into another mailbox is another row naming the same blob).
-- blob_address is the SHA-256 of the stored body: its content hash and its blob store address. prefix:
-- the header lines added on receipt (Received, Authentication-Results), served in front of the body, so
-- a stored body is never rewritten; size (RFC822.SIZE) counts both. flags: IMAP system flags in their
-- canonical case and keywords, as FLAGS shows them. envelope and structure are computed once at insert.
-- import_key: docs/decisions.md #20 (by Message-ID, or the raw message's SHA-256), unique per inbox.
-- Expunged rows are deleted; the journal below remembers the expunge (RFC 7162 §3.2.5.1 VANISHED).
CREATE TABLE mail_messages (
  id uuid PRIMARY KEY,
  inbox_id uuid NOT NULL REFERENCES inboxes (id) ON DELETE CASCADE,
  mailbox_id uuid NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  uid bigint NOT NULL CHECK (uid > 0),
  modseq bigint NOT NULL CHECK (modseq > 0),
  blob_address text NOT NULL,
  prefix bytea NOT NULL,
  size bigint NOT NULL CHECK (size >= 0),
  internal_date timestamptz NOT NULL,
  flags text[] NOT NULL DEFAULT '{}',
  message_id text,
  envelope jsonb,
  structure jsonb,
  import_key text,
  created_at timestamptz NOT NULL,
  UNIQUE (mailbox_id, uid)
);
CREATE INDEX mail_messages_modseq_idx ON mail_messages (mailbox_id, modseq);
CREATE UNIQUE INDEX mail_messages_import_key ON mail_messages (inbox_id, import_key) WHERE import_key IS NOT NULL;
CREATE INDEX mail_messages_blob_idx ON mail_messages (blob_address);

-- The change journal: one row per message per change, written in the transaction of the change, in
-- modseq order per mailbox. Several messages changed by one operation share its modseq. Pruned after a
-- while (a client older than the journal resynchronizes in full).
CREATE TABLE mail_changes (
  mailbox_id uuid NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  modseq bigint NOT NULL,
  uid bigint NOT NULL,
  kind text NOT NULL CHECK (kind IN ('append', 'flags', 'expunge')),
  flags text[],
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (mailbox_id, modseq, uid)
);
CREATE INDEX mail_changes_created_idx ON mail_changes (created_at);

-- The Postgres blob store: a row per blob with its reference count (a committed row always has
-- refs >= 1: the release that reaches 0 deletes it), and its bytes as 256 KiB chunks.
CREATE TABLE blobs (
  address text PRIMARY KEY CHECK (address ~ '^[0-9a-f]{64}$'),
  size bigint NOT NULL CHECK (size >= 0),
  refs integer NOT NULL CHECK (refs >= 0),
  chunks integer NOT NULL CHECK (chunks >= 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE blob_chunks (
  address text NOT NULL REFERENCES blobs (address) ON DELETE CASCADE,
  seq integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (address, seq)
);
