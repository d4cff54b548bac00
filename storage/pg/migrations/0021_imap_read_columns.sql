-- What IMAP FETCH and SEARCH read of every message, kept beside the row instead of dug out of its jsonb on
-- each read (docs/decisions.md #57): Postgres computes both from the stored MIME tree and envelope, so no
-- writer (delivery, import, APPEND, COPY) has to know of them.
--   header_end     the top-level header's length (structure.body.bodyStart): BODY[HEADER] and BODY[TEXT]
--                  are ranges of the stored body with no tree decoded (imap/fetch-sections.ts).
--   subject_plain  the Subject as written when it is printable ASCII without encoded words (RFC 2047), so
--                  that SEARCH SUBJECT / HEADER Subject is decided by ILIKE alone (storage/pg/imap-mailboxes.ts
--                  envelopeCandidates); NULL when there is no subject or its decoded form may differ.
-- Adding them rewrites mail_messages once.
ALTER TABLE mail_messages
  ADD COLUMN header_end integer GENERATED ALWAYS AS ((structure->'body'->>'bodyStart')::integer) STORED,
  ADD COLUMN subject_plain text GENERATED ALWAYS AS (
    CASE WHEN (envelope->>'subject') !~ '[^\x01-\x7e]' AND (envelope->>'subject') NOT LIKE '%=?%'
      THEN envelope->>'subject' END
  ) STORED;
