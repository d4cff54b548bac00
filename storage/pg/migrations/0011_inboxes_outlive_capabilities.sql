-- docs/decisions.md #50: a deleted inbox outlives its inbound capability and its domain claim, so that its
-- billed days stay on the organization's bill for the month (docs/api.md §8). Removing a capability first
-- soft-deletes its inboxes and purges their mail through the mail store (which gives the blob references
-- back); the row then keeps its project and its address, and no longer its capability. A live inbox always
-- has one: the check refuses a capability's removal while one of its inboxes lives.
ALTER TABLE inboxes ADD COLUMN project_id uuid REFERENCES projects (id) ON DELETE CASCADE;
ALTER TABLE inboxes ADD COLUMN domain text;
UPDATE inboxes i SET project_id = c.project_id, domain = c.domain FROM inbound_capabilities c WHERE c.id = i.capability_id;
ALTER TABLE inboxes ALTER COLUMN project_id SET NOT NULL;
ALTER TABLE inboxes ALTER COLUMN domain SET NOT NULL;
ALTER TABLE inboxes ALTER COLUMN capability_id DROP NOT NULL;
ALTER TABLE inboxes DROP CONSTRAINT inboxes_capability_id_fkey;
ALTER TABLE inboxes ADD CONSTRAINT inboxes_capability_id_fkey
  FOREIGN KEY (capability_id) REFERENCES inbound_capabilities (id) ON DELETE SET NULL;
ALTER TABLE inboxes ADD CONSTRAINT inboxes_live_has_capability CHECK (capability_id IS NOT NULL OR deleted_at IS NOT NULL);

-- Billing reads an organization's inboxes through their projects now.
CREATE INDEX inboxes_project_idx ON inboxes (project_id);
-- The sweep that finishes an interrupted purge finds deleted inboxes that still hold mail.
CREATE INDEX inboxes_deleted_idx ON inboxes (deleted_at) WHERE deleted_at IS NOT NULL;
