-- Periodic jobs: one row per schedule the application declares. The
-- maintenance leader writes the declaration at start (a schedule no longer
-- declared is kept with enabled = 0) and advances next_run_at with a guarded
-- UPDATE in the transaction that enqueues the tick's job. Times are Unix
-- epoch seconds, as in jobvisor_jobs.
CREATE TABLE IF NOT EXISTS jobvisor_schedules (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    job_type    TEXT NOT NULL,
    queue       TEXT NOT NULL,
    priority    INTEGER NOT NULL,
    payload     TEXT NOT NULL,
    catch_up    TEXT NOT NULL,
    next_run_at REAL NOT NULL,
    last_run_at REAL,
    enabled     INTEGER NOT NULL DEFAULT 1,
    updated_at  REAL NOT NULL
);
