-- Fleet-wide flow control: one row per limited job type or queue (see the
-- PostgreSQL migration). On SQLite every claim holds the write lock, which
-- serialises the limited claims. refilled_at and updated_at are Unix epoch
-- seconds.
CREATE TABLE IF NOT EXISTS jobvisor_limits (
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
    PRIMARY KEY (kind, name),
    CHECK (kind IN ('queue', 'type')),
    CHECK (source IN ('code', 'operator')),
    CHECK (name <> ''),
    CHECK (concurrency IS NULL OR concurrency > 0),
    CHECK (key_concurrency IS NULL OR (key_concurrency > 0 AND kind = 'type')),
    CHECK ((rate_count IS NULL) = (rate_period IS NULL)),
    CHECK (rate_count IS NULL OR (rate_count > 0 AND rate_period > 0)),
    CHECK (concurrency IS NOT NULL OR key_concurrency IS NOT NULL OR rate_count IS NOT NULL)
);
-- The key a type's key_concurrency counts by.
ALTER TABLE jobvisor_jobs ADD COLUMN concurrency_key TEXT;
