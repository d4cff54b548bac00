-- A suppression gets an id of its own, so the data layer can name it (docs/api.md §4.1: get?id=, delete
-- by key). The primary key stays (project_id, address): sendEmail looks a recipient up by it and the
-- MTA adds suppressions with ON CONFLICT (project_id, address) DO NOTHING; a row inserted without an
-- id (as both do) gets one from the default. Existing rows get theirs here, one each.
ALTER TABLE suppressions ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX suppressions_id_idx ON suppressions (id);
-- The project detail lists a project's newest suppressions.
CREATE INDEX suppressions_project_created_idx ON suppressions (project_id, created_at DESC);
