-- DKIM key rotation (docs/api.md §4.5): a capability holds at most one pending key, minted by rotate and
-- promoted by verify once its TXT record is published; the selectors it replaced are listed for a week
-- (`dkim_retired`, entries { selector, algorithm, retiredAt }) so their records stay up while mail signed
-- with them is in flight. The retired private keys are not kept: nothing signs with them again.
-- `dkim_version` goes up with every change of the signing keys: the MTA's key cache (its own process) reads
-- it to know when to open the keys again.
ALTER TABLE outbound_capabilities
  ADD COLUMN pending_dkim_selector text,
  ADD COLUMN pending_dkim_algorithm text CHECK (pending_dkim_algorithm IN ('rsa', 'ed25519')),
  ADD COLUMN pending_dkim_private_sealed text,
  ADD COLUMN pending_dkim_public text,
  ADD COLUMN pending_dkim_created_at timestamptz,
  ADD COLUMN dkim_retired jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN dkim_version integer NOT NULL DEFAULT 1;
