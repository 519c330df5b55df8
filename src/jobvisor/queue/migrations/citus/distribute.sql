-- Spread the jobs table over a Citus cluster (`migrate` with JOBVISOR_CITUS=on,
-- once, after the PostgreSQL migrations; docs/design.md, "Scale-out").
--
-- Each job lives in one of 32 buckets, and each bucket in a shard of its own:
-- `bucket` is the distribution column, and every statement that locks or
-- changes jobs names its bucket, so Citus sends it to one shard, where SKIP
-- LOCKED, the partial indexes and HOT updates work as on one server. A job's
-- bucket is its id's low five bits (the enqueue sets them from the dedupe or
-- concurrency key when the job has one, so each key lives in one bucket and
-- its uniqueness holds across the cluster), and the column holds the value
-- standing for that bucket: the smallest integer whose hash falls in the
-- bucket's shard (`jobvisor_buckets`), so no two buckets share a shard.
--
-- Workflows, batches and durable steps cross buckets (a hand-over trigger
-- updates other jobs, steps reference their job): their triggers and foreign
-- keys go, and the client refuses them in this mode.

DROP TRIGGER IF EXISTS jobvisor_batch_member_settled ON jobvisor_jobs;
DROP TRIGGER IF EXISTS jobvisor_jobs_workflow_hand_over_many ON jobvisor_jobs;
ALTER TABLE jobvisor_steps DROP CONSTRAINT IF EXISTS jobvisor_steps_job_id_fkey;
ALTER TABLE jobvisor_signals DROP CONSTRAINT IF EXISTS jobvisor_signals_job_id_fkey;
ALTER TABLE jobvisor_events DROP CONSTRAINT IF EXISTS jobvisor_events_job_id_fkey;
ALTER TABLE jobvisor_batch_callbacks DROP CONSTRAINT IF EXISTS jobvisor_batch_callbacks_batch_id_fkey;

CREATE TABLE jobvisor_buckets (
    k     integer PRIMARY KEY,
    value integer NOT NULL UNIQUE
);
-- Citus splits the int4 hash space into 32 equal ranges, one per shard:
-- 2^27 hash values each.
INSERT INTO jobvisor_buckets (k, value)
SELECT k, min(v) FROM (
    SELECT v, ((hashint4(v)::bigint + 2147483648) / 134217728)::integer AS k
    FROM generate_series(0, 10000) AS v) AS candidates
GROUP BY k;

ALTER TABLE jobvisor_jobs ADD COLUMN bucket integer;
UPDATE jobvisor_jobs AS j SET bucket = b.value FROM jobvisor_buckets AS b
    WHERE b.k = ('x' || right(j.id::text, 2))::bit(8)::integer & 31;
ALTER TABLE jobvisor_jobs ALTER COLUMN bucket SET NOT NULL;

-- Unique indexes must hold the distribution column.
ALTER TABLE jobvisor_jobs DROP CONSTRAINT jobvisor_jobs_pkey;
ALTER TABLE jobvisor_jobs ADD CONSTRAINT jobvisor_jobs_pkey PRIMARY KEY (id, bucket);
DROP INDEX jobvisor_jobs_dedupe_idx;
CREATE UNIQUE INDEX jobvisor_jobs_dedupe_idx ON jobvisor_jobs (bucket, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retryable');
DROP INDEX jobvisor_jobs_unique_idx;
CREATE UNIQUE INDEX jobvisor_jobs_unique_idx ON jobvisor_jobs (bucket, unique_key)
    WHERE unique_key IS NOT NULL;

SET LOCAL citus.enable_unsafe_triggers = on;
SET LOCAL citus.multi_shard_modify_mode = 'sequential';
SELECT create_distributed_table('jobvisor_jobs', 'bucket', shard_count => 32);

-- Everything else is small and read by the claim, or rarely written: a copy
-- on every node.
SELECT create_reference_table(t) FROM unnest(ARRAY[
    'jobvisor_buckets', 'jobvisor_migrations', 'jobvisor_leader', 'jobvisor_queue_pauses',
    'jobvisor_schedules', 'jobvisor_limits', 'jobvisor_supervisors', 'jobvisor_key_buckets',
    'jobvisor_web_sessions', 'jobvisor_claim_marks', 'jobvisor_batches',
    'jobvisor_batch_callbacks', 'jobvisor_workflows', 'jobvisor_workflow_edges',
    'jobvisor_steps', 'jobvisor_signals', 'jobvisor_events']) AS t;
