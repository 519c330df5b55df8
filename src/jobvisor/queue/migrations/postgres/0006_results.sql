-- What a job left behind: its handler's return value (JSON, NULL when it
-- returned None), its last reported progress ({"fraction", "note"}), and the
-- error of each failed attempt ([{attempt, at, error, worker_id}], the last 20).
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS result jsonb;
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS progress jsonb;
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS errors jsonb;
-- Someone waits for this job to end (`wait`): its completion or death sends
-- a notice (PostgreSQL). False for every other job, so they send none.
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS wait_notify boolean NOT NULL DEFAULT false;
