-- The jobs table, its claim/lease/retention indexes, and the leader lease row.
CREATE TABLE IF NOT EXISTS jobvisor_jobs (
    id               uuid        PRIMARY KEY,
    queue            text        NOT NULL DEFAULT 'default',
    job_type         text        NOT NULL,
    payload          jsonb       NOT NULL DEFAULT '{}',
    priority         integer     NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    last_error       text,
    correlation_id   text,
    dedupe_key       text,
    lease_expires_at timestamptz,
    claim_token      uuid,
    worker_id        text,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz,
    CONSTRAINT jobvisor_jobs_status_check CHECK (
        status IN ('pending', 'running', 'retryable', 'completed', 'dead', 'cancelled')),
    CONSTRAINT jobvisor_jobs_attempts_check CHECK (
        max_attempts >= 1 AND attempts >= 0 AND attempts <= max_attempts),
    CONSTRAINT jobvisor_jobs_claim_check CHECK (
        (status = 'running') = (claim_token IS NOT NULL)
        AND (status <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))),
    CONSTRAINT jobvisor_jobs_names_check CHECK (job_type <> '' AND queue <> '')
);

-- Claimable jobs in claim order; the partial predicate keeps it small.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_claim_idx
    ON jobvisor_jobs (priority DESC, run_at, id)
    WHERE status IN ('pending', 'retryable');
-- The reaper's scan for expired leases, and release_worker's by worker id.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_lease_idx
    ON jobvisor_jobs (lease_expires_at) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS jobvisor_jobs_worker_idx
    ON jobvisor_jobs (worker_id) WHERE status = 'running';
-- Cleanup and the dead-job list walk terminal jobs by finish time.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_finished_idx
    ON jobvisor_jobs (status, finished_at)
    WHERE status IN ('completed', 'dead', 'cancelled');
-- At most one live job per dedupe key.
CREATE UNIQUE INDEX IF NOT EXISTS jobvisor_jobs_dedupe_idx
    ON jobvisor_jobs (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retryable');

-- Every job is updated two or three times and then deleted: vacuum early and
-- often so dead tuples do not pile up under a steady load, and leave room on
-- each page for HOT updates.
ALTER TABLE jobvisor_jobs SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- One row per leadership name; whoever holds an unexpired lease is leader.
CREATE TABLE IF NOT EXISTS jobvisor_leader (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
