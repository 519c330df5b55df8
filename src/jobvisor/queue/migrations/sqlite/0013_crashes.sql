-- How many workers died while running the job, counted while no one knows
-- which job killed them: the job is charged an attempt only once the count
-- reaches `ops.CRASH_LIMIT` (or when it ran alone in the dead worker).
ALTER TABLE jobvisor_jobs ADD COLUMN crashes integer NOT NULL DEFAULT 0;
