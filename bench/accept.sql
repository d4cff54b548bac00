-- The database work of one sendEmail as one transaction per send, as pgbench runs it (bench/run.ts:
-- -M prepared -c 64 -j 2 -D tenants=<orgs>): findSendingCapability, then the daily quota upsert, the
-- suppression check, the message row and its first event, one round trip each, against a database the
-- service migrated and populated with its bench tenants (domains bench-1.test …). The service does the
-- same work in one statement shared by concurrent sends (storage/pg/messages.ts, group commit).
-- Not here: the request guard (nonce, rate limit, credential), which a sendEmail also costs, and the
-- LMDB spool write, which sendEmail makes before its statement.
-- The ids of the message and its event are UUIDv7 as the service's are (mail/uuid.ts, docs/decisions.md #73): the
-- milliseconds of clock_timestamp() over the first 48 bits of a random UUID, its version nibble set to 7.
\set t random(1, :tenants)
\set r random(1, 1000000000)
SELECT c.id AS outbound, c.project_id AS project, p.organization_id AS org, o.plan AS plan
  FROM outbound_capabilities c JOIN projects p ON p.id = c.project_id JOIN organizations o ON o.id = p.organization_id
  WHERE c.domain = 'bench-' || :t || '.test' AND c.status = 'verified' AND p.deleted_at IS NULL \gset
BEGIN;
INSERT INTO quota_days AS d (organization_id, day, accepted) VALUES (:org, (now() AT TIME ZONE 'UTC')::date, 1)
  ON CONFLICT (organization_id, day) DO UPDATE SET accepted = d.accepted + 1 WHERE :plan::text = 'payg' OR d.accepted < 500
  RETURNING accepted;
SELECT reason FROM suppressions WHERE project_id = :project AND address = 'rcpt-' || :r || '@dest.test';
INSERT INTO messages (id, project_id, organization_id, outbound_id, status, from_header, from_address, to_address, subject,
    message_id_header, return_path, idempotency_key, size_bytes, created_at, updated_at)
  VALUES (encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
      substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1),
      'hex')::uuid,
    :project, :org, :outbound, 'queued', 'Bench <no-reply@bench-' || :t || '.test>',
    'no-reply@bench-' || :t || '.test', 'rcpt-' || :r || '@dest.test', 'Your sign-in code ' || :r,
    md5(:r::text) || '@bench-' || :t || '.test', 'b-' || md5(:r::text) || '@bounces.bench-' || :t || '.test', NULL, 1100, now(), now())
  RETURNING id AS message \gset
INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
  VALUES (encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
      substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1),
      'hex')::uuid,
    :message, :project, 'queued', NULL, now());
END;
