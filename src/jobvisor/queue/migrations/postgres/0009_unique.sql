-- Uniqueness beyond live jobs (`enqueue(..., unique=Unique(...))`). A job
-- enqueued with `unique` holds `unique_key` (its job type, key, payload hash
-- and period, and the time bucket it was enqueued in) while its status is one
-- of `unique_states`; the partial unique index below lets one job hold a key
-- at a time, and the insert's ON CONFLICT finds the holder. Both columns are
-- NULL for every other job, so adding them rewrites nothing.
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS unique_key text;
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS unique_states text[];

-- Built here, the index holds a SHARE lock (writes wait, reads go on) for one
-- scan of the table: 0.2 s a million jobs. On a large table, build it first
-- with CREATE UNIQUE INDEX CONCURRENTLY (docs/operations.md, "Unique jobs"):
-- this then finds it and scans nothing. One left invalid by an interrupted
-- concurrent build would be skipped, and no insert could use it: refuse.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('jobvisor_jobs_unique_idx') AND NOT indisvalid)
    THEN
        RAISE EXCEPTION 'index jobvisor_jobs_unique_idx is invalid (an interrupted CREATE INDEX '
            'CONCURRENTLY): DROP INDEX CONCURRENTLY jobvisor_jobs_unique_idx, then build it '
            'again or run migrate';
    END IF;
END
$$;
-- Give up rather than queue every writer behind a long transaction that
-- holds the table; `migrate` is safe to run again.
SET LOCAL lock_timeout = '5s';
CREATE UNIQUE INDEX IF NOT EXISTS jobvisor_jobs_unique_idx
    ON jobvisor_jobs (unique_key) WHERE unique_key IS NOT NULL;

-- A job whose status leaves its unique states gives its key up for good (set
-- to NULL in the same UPDATE), so the slot frees and a job coming back (a
-- release, a requeue) never collides with the key's next holder. The WHEN
-- clause is all a job without a key pays.
CREATE OR REPLACE FUNCTION jobvisor_unique_release() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.unique_key := NULL;
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER jobvisor_jobs_unique_release
    BEFORE UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN (NEW.unique_key IS NOT NULL AND NOT (NEW.status = ANY (NEW.unique_states)))
    EXECUTE FUNCTION jobvisor_unique_release();
