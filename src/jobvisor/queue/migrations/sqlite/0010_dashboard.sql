-- The fleet: one row per running supervisor, written by its own loop every
-- few seconds and deleted at its clean stop. Times are Unix epoch seconds;
-- workers is JSON text.
CREATE TABLE IF NOT EXISTS jobvisor_supervisors (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT    NOT NULL,
    started_at   REAL    NOT NULL,
    heartbeat_at REAL    NOT NULL,
    leader       INTEGER NOT NULL DEFAULT 0,
    workers      TEXT    NOT NULL DEFAULT '[]'
);
-- The dashboard's reads: jobs of one status newest first (queue and type
-- read from the index), each queue's oldest due job, a correlation id's jobs.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_status_idx
    ON jobvisor_jobs (status, id, queue, job_type);
CREATE INDEX IF NOT EXISTS jobvisor_jobs_due_idx
    ON jobvisor_jobs (queue, run_at) WHERE status IN ('pending', 'retryable');
CREATE INDEX IF NOT EXISTS jobvisor_jobs_correlation_idx
    ON jobvisor_jobs (correlation_id, id) WHERE correlation_id IS NOT NULL;
