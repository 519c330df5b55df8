-- Rates per concurrency key (see the PostgreSQL migration). SQLite cannot
-- change a table's checks, so jobvisor_limits is built again with the new
-- columns. refilled_at is Unix epoch seconds.
CREATE TABLE jobvisor_limits_new (
    kind            TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    concurrency     INTEGER,
    key_concurrency INTEGER,
    rate_count      INTEGER,
    rate_period     REAL,
    tokens          REAL,
    refilled_at     REAL,
    source          TEXT    NOT NULL,
    updated_at      REAL    NOT NULL,
    key_rate_count  INTEGER,
    key_rate_period REAL,
    PRIMARY KEY (kind, name),
    CHECK (kind IN ('queue', 'type')),
    CHECK (source IN ('code', 'operator')),
    CHECK (name <> ''),
    CHECK (concurrency IS NULL OR concurrency > 0),
    CHECK (key_concurrency IS NULL OR (key_concurrency > 0 AND kind = 'type')),
    CHECK ((rate_count IS NULL) = (rate_period IS NULL)),
    CHECK (rate_count IS NULL OR (rate_count > 0 AND rate_period > 0)),
    CHECK ((key_rate_count IS NULL) = (key_rate_period IS NULL)),
    CHECK (key_rate_count IS NULL OR (key_rate_count > 0 AND key_rate_period > 0 AND kind = 'type')),
    CHECK (concurrency IS NOT NULL OR key_concurrency IS NOT NULL OR rate_count IS NOT NULL
        OR key_rate_count IS NOT NULL)
);
INSERT INTO jobvisor_limits_new (kind, name, concurrency, key_concurrency, rate_count,
    rate_period, tokens, refilled_at, source, updated_at)
    SELECT kind, name, concurrency, key_concurrency, rate_count, rate_period, tokens,
        refilled_at, source, updated_at FROM jobvisor_limits;
DROP TABLE jobvisor_limits;
ALTER TABLE jobvisor_limits_new RENAME TO jobvisor_limits;
CREATE TABLE IF NOT EXISTS jobvisor_key_buckets (
    job_type        TEXT NOT NULL,
    concurrency_key TEXT NOT NULL,
    tokens          REAL NOT NULL,
    refilled_at     REAL NOT NULL,
    PRIMARY KEY (job_type, concurrency_key)
);
