-- sendEmail's tags and metadata (docs/api.md §4.11), stored with the message: tags a JSON array of
-- {name, value}, metadata a JSON object of strings; both NULL for a message sent without (the common case,
-- so the plain send writes nothing more). The console filters a project's messages by one tag
-- (`?tag=name:value`, tags @> '[{"name":…,"value":…}]'): a GIN index over the tagged messages only, so an
-- untagged message adds no index entry.
ALTER TABLE messages ADD COLUMN tags jsonb;
ALTER TABLE messages ADD COLUMN metadata jsonb;
CREATE INDEX messages_tags_idx ON messages USING gin (tags jsonb_path_ops) WHERE tags IS NOT NULL;
