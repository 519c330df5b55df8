-- Periodic jobs: one row per schedule the application declares. The
-- maintenance leader writes the declaration at start (a schedule no longer
-- declared is kept with enabled = false) and advances next_run_at with a
-- guarded UPDATE in the transaction that enqueues the tick's job.
CREATE TABLE IF NOT EXISTS jobvisor_schedules (
    name        text PRIMARY KEY,
    spec        text NOT NULL,
    timezone    text NOT NULL,
    job_type    text NOT NULL,
    queue       text NOT NULL,
    priority    integer NOT NULL,
    payload     text NOT NULL,
    catch_up    text NOT NULL,
    next_run_at timestamptz NOT NULL,
    last_run_at timestamptz,
    enabled     boolean NOT NULL DEFAULT true,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
