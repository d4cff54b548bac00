-- docs/decisions.md #74: a credential's bucket row carries the limits it was last refilled with, so that the
-- request guard's upsert reads them from the row it proposes instead of looking them up once per expression.
-- Buckets written before this migration, and the throttles' rows (storage/pg/throttles.ts), leave them NULL.
ALTER TABLE rate_limits ADD COLUMN burst double precision, ADD COLUMN per_second double precision;
