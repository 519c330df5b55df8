-- The jobs table, its claim/lease/retention indexes, and the leader lease row.
-- Times are Unix epoch seconds (REAL); ids and claim tokens are UUID text.
CREATE TABLE IF NOT EXISTS jobvisor_jobs (
    id               TEXT    PRIMARY KEY,
    queue            TEXT    NOT NULL DEFAULT 'default',
    job_type         TEXT    NOT NULL,
    payload          TEXT    NOT NULL DEFAULT '{}',
    priority         INTEGER NOT NULL DEFAULT 0,
    run_at           REAL    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    last_error       TEXT,
    correlation_id   TEXT,
    dedupe_key       TEXT,
    lease_expires_at REAL,
    claim_token      TEXT,
    worker_id        TEXT,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    CHECK (status IN ('pending', 'running', 'retryable', 'completed', 'dead', 'cancelled')),
    CHECK (max_attempts >= 1 AND attempts >= 0 AND attempts <= max_attempts),
    CHECK ((status = 'running') = (claim_token IS NOT NULL)),
    CHECK (status <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (job_type <> '' AND queue <> '')
);

CREATE INDEX IF NOT EXISTS jobvisor_jobs_claim_idx
    ON jobvisor_jobs (priority DESC, run_at, id)
    WHERE status IN ('pending', 'retryable');

CREATE INDEX IF NOT EXISTS jobvisor_jobs_lease_idx
    ON jobvisor_jobs (lease_expires_at) WHERE status = 'running';

CREATE INDEX IF NOT EXISTS jobvisor_jobs_worker_idx
    ON jobvisor_jobs (worker_id) WHERE status = 'running';

CREATE INDEX IF NOT EXISTS jobvisor_jobs_finished_idx
    ON jobvisor_jobs (status, finished_at)
    WHERE status IN ('completed', 'dead', 'cancelled');

CREATE UNIQUE INDEX IF NOT EXISTS jobvisor_jobs_dedupe_idx
    ON jobvisor_jobs (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retryable');

CREATE TABLE IF NOT EXISTS jobvisor_leader (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at REAL NOT NULL
);
