-- Uniqueness beyond live jobs (`enqueue(..., unique=Unique(...))`). A job
-- enqueued with `unique` holds `unique_key` (its job type, key, payload hash
-- and period, and the time bucket it was enqueued in) while its status is one
-- of `unique_states` (a JSON array of status names); the partial unique index
-- lets one job hold a key at a time, and the insert's ON CONFLICT finds the
-- holder. Both columns are NULL for every other job.
ALTER TABLE jobvisor_jobs ADD COLUMN unique_key TEXT;
ALTER TABLE jobvisor_jobs ADD COLUMN unique_states TEXT;

CREATE UNIQUE INDEX IF NOT EXISTS jobvisor_jobs_unique_idx
    ON jobvisor_jobs (unique_key) WHERE unique_key IS NOT NULL;

-- A job whose status leaves its unique states gives its key up for good, so
-- the slot frees and a job coming back (a release, a requeue) never collides
-- with the key's next holder. The WHEN clause is all a job without a key pays.
CREATE TRIGGER IF NOT EXISTS jobvisor_jobs_unique_release
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN NEW.unique_key IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM json_each(NEW.unique_states) WHERE value = NEW.status)
BEGIN
    UPDATE jobvisor_jobs SET unique_key = NULL WHERE id = NEW.id;
END;
