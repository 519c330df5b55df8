-- What a job left behind: its handler's return value (JSON text, NULL when it
-- returned None), its last reported progress ({"fraction", "note"}), and the
-- error of each failed attempt ([{attempt, at, error, worker_id}], the last 20;
-- `at` in Unix epoch seconds).
ALTER TABLE jobvisor_jobs ADD COLUMN result TEXT;
ALTER TABLE jobvisor_jobs ADD COLUMN progress TEXT;
ALTER TABLE jobvisor_jobs ADD COLUMN errors TEXT;
-- Someone waits for this job to end (`wait`): its completion or death sends
-- a notice (PostgreSQL). False for every other job, so they send none.
ALTER TABLE jobvisor_jobs ADD COLUMN wait_notify INTEGER NOT NULL DEFAULT 0;
