-- The fleet: one row per running supervisor, written by its own loop every
-- few seconds and deleted at its clean stop. The dashboard shows the rows
-- heard from recently; the maintenance leader deletes the silent ones.
CREATE TABLE IF NOT EXISTS jobvisor_supervisors (
    id           text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    version      text        NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    leader       boolean     NOT NULL DEFAULT false,
    workers      jsonb       NOT NULL DEFAULT '[]'
);
-- The dashboard's reads, each backed by an index (docs/operations.md: on a
-- large table, create them CONCURRENTLY by hand before upgrading; these
-- statements then find them and build nothing under a lock).
-- Jobs of one status, newest first; queue and type filter and count from
-- the index alone.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_status_idx
    ON jobvisor_jobs (status, id) INCLUDE (queue, job_type);
-- Each queue's oldest due job.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_due_idx
    ON jobvisor_jobs (queue, run_at) WHERE status IN ('pending', 'retryable');
-- The jobs of one correlation id.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_correlation_idx
    ON jobvisor_jobs (correlation_id, id) WHERE correlation_id IS NOT NULL;
