-- Fleet-wide flow control: one row per limited job type or queue. The claim
-- of a limited group serialises on the group (a transaction-scoped advisory
-- lock), counts the group's running jobs and takes tokens from its bucket;
-- the claim of everything else reads the names here once per statement and
-- skips them, so an empty table costs a scan of an empty table.
CREATE TABLE IF NOT EXISTS jobvisor_limits (
    kind            text             NOT NULL,
    name            text             NOT NULL,
    concurrency     integer,
    key_concurrency integer,
    rate_count      integer,
    rate_period     double precision,
    tokens          double precision,
    refilled_at     timestamptz,
    source          text             NOT NULL,
    updated_at      timestamptz      NOT NULL,
    PRIMARY KEY (kind, name),
    CONSTRAINT jobvisor_limits_kind_check CHECK (kind IN ('queue', 'type')),
    CONSTRAINT jobvisor_limits_source_check CHECK (source IN ('code', 'operator')),
    CONSTRAINT jobvisor_limits_name_check CHECK (name <> ''),
    CONSTRAINT jobvisor_limits_values_check CHECK (
        (concurrency IS NULL OR concurrency > 0)
        AND (key_concurrency IS NULL OR (key_concurrency > 0 AND kind = 'type'))
        AND ((rate_count IS NULL) = (rate_period IS NULL))
        AND (rate_count IS NULL OR (rate_count > 0 AND rate_period > 0))
        AND (concurrency IS NOT NULL OR key_concurrency IS NOT NULL OR rate_count IS NOT NULL))
);
-- The key a type's key_concurrency counts by (NULL: the job counts only
-- toward its type's and queue's limits). Nullable without a default: adding
-- it rewrites nothing.
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS concurrency_key text;
