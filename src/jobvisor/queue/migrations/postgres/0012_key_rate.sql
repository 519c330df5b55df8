-- Rates per concurrency key: a type's key_rate gives each of its keys a token
-- bucket of its own. The limit is a pair of columns beside the type's rate;
-- the buckets live in their own table, one row per (type, key) created by the
-- first claim that takes from it (a missing row is a full bucket) and deleted
-- by maintenance once it has refilled, so the table holds the keys in use.
ALTER TABLE jobvisor_limits ADD COLUMN IF NOT EXISTS key_rate_count integer;
ALTER TABLE jobvisor_limits ADD COLUMN IF NOT EXISTS key_rate_period double precision;
ALTER TABLE jobvisor_limits DROP CONSTRAINT IF EXISTS jobvisor_limits_values_check;
ALTER TABLE jobvisor_limits ADD CONSTRAINT jobvisor_limits_values_check CHECK (
    (concurrency IS NULL OR concurrency > 0)
    AND (key_concurrency IS NULL OR (key_concurrency > 0 AND kind = 'type'))
    AND ((rate_count IS NULL) = (rate_period IS NULL))
    AND (rate_count IS NULL OR (rate_count > 0 AND rate_period > 0))
    AND ((key_rate_count IS NULL) = (key_rate_period IS NULL))
    AND (key_rate_count IS NULL OR (key_rate_count > 0 AND key_rate_period > 0 AND kind = 'type'))
    AND (concurrency IS NOT NULL OR key_concurrency IS NOT NULL OR rate_count IS NOT NULL
        OR key_rate_count IS NOT NULL));
CREATE TABLE IF NOT EXISTS jobvisor_key_buckets (
    job_type        text             NOT NULL,
    concurrency_key text             NOT NULL,
    tokens          double precision NOT NULL,
    refilled_at     timestamptz      NOT NULL,
    PRIMARY KEY (job_type, concurrency_key)
);
