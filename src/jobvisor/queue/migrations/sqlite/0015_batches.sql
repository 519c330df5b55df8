-- Batches: a group of jobs whose last member to finish enqueues the batch's
-- callbacks. `unfinished` counts the members not yet terminal; the trigger
-- below takes it down, and the statement that takes it to zero while the
-- batch is closed enqueues the callbacks (once: `finished_at` is set by the
-- same guarded update). SQLite runs one writer at a time.
CREATE TABLE IF NOT EXISTS jobvisor_batches (
    id          TEXT    PRIMARY KEY,
    meta        TEXT,
    closed      INTEGER NOT NULL DEFAULT 0,
    total       INTEGER NOT NULL DEFAULT 0,
    unfinished  INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    created_at  REAL    NOT NULL,
    closed_at   REAL,
    finished_at REAL,
    CHECK (unfinished >= 0 AND failed >= 0)
);
CREATE INDEX IF NOT EXISTS jobvisor_batches_open_idx
    ON jobvisor_batches (closed_at) WHERE closed AND finished_at IS NULL;
CREATE INDEX IF NOT EXISTS jobvisor_batches_finished_idx
    ON jobvisor_batches (finished_at) WHERE finished_at IS NOT NULL;

-- A batch's callbacks, made ready at its opening and inserted when it
-- finishes: 'success' (every member completed), 'failure' (one did not),
-- 'finish' (always).
CREATE TABLE IF NOT EXISTS jobvisor_batch_callbacks (
    batch_id       TEXT    NOT NULL REFERENCES jobvisor_batches (id) ON DELETE CASCADE,
    kind           TEXT    NOT NULL CHECK (kind IN ('success', 'failure', 'finish')),
    job_id         TEXT    NOT NULL,
    queue          TEXT    NOT NULL,
    job_type       TEXT    NOT NULL,
    payload        TEXT    NOT NULL,
    priority       INTEGER NOT NULL,
    max_attempts   INTEGER NOT NULL,
    correlation_id TEXT,
    PRIMARY KEY (batch_id, kind)
);

ALTER TABLE jobvisor_jobs ADD COLUMN batch_id TEXT;
CREATE INDEX IF NOT EXISTS jobvisor_jobs_batch_idx
    ON jobvisor_jobs (batch_id, id) WHERE batch_id IS NOT NULL;

-- A member became terminal: count it down (never below zero: a count set
-- wrong by hand must not fail a completion), and when it was the last of a
-- closed batch insert the callbacks, then mark the batch finished.
CREATE TRIGGER IF NOT EXISTS jobvisor_batch_member_settled
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN NEW.batch_id IS NOT NULL
         AND NEW.status IN ('completed', 'dead', 'cancelled')
         AND OLD.status NOT IN ('completed', 'dead', 'cancelled')
BEGIN
    UPDATE jobvisor_batches
       SET unfinished = max(unfinished - 1, 0), failed = failed + (NEW.status <> 'completed')
     WHERE id = NEW.batch_id AND finished_at IS NULL;
    INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,
                               correlation_id, created_at, batch_id)
    SELECT c.job_id, c.queue, c.job_type, c.payload, c.priority,
           coalesce(NEW.finished_at, NEW.run_at), c.max_attempts, c.correlation_id,
           coalesce(NEW.finished_at, NEW.run_at), c.batch_id
      FROM jobvisor_batch_callbacks c JOIN jobvisor_batches b ON b.id = c.batch_id
     WHERE b.id = NEW.batch_id AND b.closed AND b.unfinished = 0 AND b.finished_at IS NULL
       AND (c.kind = 'finish' OR (c.kind = 'success') = (b.failed = 0));
    UPDATE jobvisor_batches SET finished_at = coalesce(NEW.finished_at, NEW.run_at)
     WHERE id = NEW.batch_id AND closed AND unfinished = 0 AND finished_at IS NULL;
END;

-- A member came back from a terminal status (a dead job requeued) before
-- its batch finished: it counts as unfinished again.
CREATE TRIGGER IF NOT EXISTS jobvisor_batch_member_reopened
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN NEW.batch_id IS NOT NULL
         AND OLD.status IN ('completed', 'dead', 'cancelled')
         AND NEW.status NOT IN ('completed', 'dead', 'cancelled')
BEGIN
    UPDATE jobvisor_batches
       SET unfinished = unfinished + 1, failed = max(failed - (OLD.status <> 'completed'), 0)
     WHERE id = NEW.batch_id AND finished_at IS NULL;
END;
