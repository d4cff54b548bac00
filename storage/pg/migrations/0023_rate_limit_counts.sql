-- docs/decisions.md #90: the request guard takes a batch's requests of one credential in one upsert of its bucket.
-- The proposed row carries how many tokens they want (requested), and the row keeps how many it gave (granted),
-- which the statement hands out to the requests in order. The throttles' rows (storage/pg/throttles.ts), and
-- buckets written before this migration, leave them NULL.
ALTER TABLE rate_limits ADD COLUMN requested integer, ADD COLUMN granted integer;
