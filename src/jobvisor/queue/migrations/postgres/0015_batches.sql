-- Batches: a group of jobs whose last member to finish enqueues the batch's
-- callbacks. `unfinished` counts the members not yet terminal; the trigger
-- below takes it down under the batch row's lock, and the statement that
-- takes it to zero while the batch is closed enqueues the callbacks (once:
-- `finished_at` is set by the same guarded update).
CREATE TABLE IF NOT EXISTS jobvisor_batches (
    id          uuid        PRIMARY KEY,
    meta        jsonb,
    closed      boolean     NOT NULL DEFAULT false,
    total       integer     NOT NULL DEFAULT 0,
    unfinished  integer     NOT NULL DEFAULT 0,
    failed      integer     NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    closed_at   timestamptz,
    finished_at timestamptz,
    CONSTRAINT jobvisor_batches_counts_check CHECK (unfinished >= 0 AND failed >= 0)
);
-- The safety net's and retention's scans: closed batches not yet finished,
-- and finished ones by finish time.
CREATE INDEX IF NOT EXISTS jobvisor_batches_open_idx
    ON jobvisor_batches (closed_at) WHERE closed AND finished_at IS NULL;
CREATE INDEX IF NOT EXISTS jobvisor_batches_finished_idx
    ON jobvisor_batches (finished_at) WHERE finished_at IS NOT NULL;

-- A batch's callbacks, their jobs made ready at the batch's opening (id,
-- payload and options) and inserted when it finishes: `kind` says when
-- ('success': every member completed; 'failure': one did not; 'finish': always).
CREATE TABLE IF NOT EXISTS jobvisor_batch_callbacks (
    batch_id       uuid    NOT NULL REFERENCES jobvisor_batches (id) ON DELETE CASCADE,
    kind           text    NOT NULL,
    job_id         uuid    NOT NULL,
    queue          text    NOT NULL,
    job_type       text    NOT NULL,
    payload        jsonb   NOT NULL,
    priority       integer NOT NULL,
    max_attempts   integer NOT NULL,
    correlation_id text,
    PRIMARY KEY (batch_id, kind),
    CONSTRAINT jobvisor_batch_callbacks_kind_check CHECK (kind IN ('success', 'failure', 'finish'))
);

-- Members and callbacks carry their batch's id (NULL for every other job,
-- which is all the trigger's WHEN clause looks at).
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS batch_id uuid;
CREATE INDEX IF NOT EXISTS jobvisor_jobs_batch_idx
    ON jobvisor_jobs (batch_id, id) WHERE batch_id IS NOT NULL;

-- Finish a batch if it is closed and has no unfinished member: the guarded
-- update that sets `finished_at` has one winner, and only it inserts the
-- callbacks (and wakes the workers of their queues). True when it fired.
CREATE OR REPLACE FUNCTION jobvisor_batch_fire(batch uuid, at timestamptz)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    failures integer;
BEGIN
    UPDATE jobvisor_batches SET finished_at = at
     WHERE id = batch AND closed AND unfinished = 0 AND finished_at IS NULL
    RETURNING failed INTO failures;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,
                               correlation_id, created_at, batch_id)
    SELECT c.job_id, c.queue, c.job_type, c.payload, c.priority, at, c.max_attempts,
           c.correlation_id, at, batch
      FROM jobvisor_batch_callbacks c
     WHERE c.batch_id = batch
       AND (c.kind = 'finish' OR (c.kind = 'success') = (failures = 0));
    PERFORM pg_notify('jobvisor', q.queue)
       FROM (SELECT DISTINCT queue FROM jobvisor_batch_callbacks WHERE batch_id = batch) q;
    RETURN true;
END $$;

-- A member's status crossed into or out of the terminal ones: count it, and
-- fire the batch when it was the last. The counts never go below zero: a
-- count set wrong by hand must not fail a member's completion. A batch already finished is left as
-- it is (its callbacks, and a member requeued after it finished, change nothing).
CREATE OR REPLACE FUNCTION jobvisor_batch_member_settled()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('completed', 'dead', 'cancelled') THEN
        UPDATE jobvisor_batches
           SET unfinished = greatest(unfinished - 1, 0),
               failed = failed + (NEW.status <> 'completed')::int
         WHERE id = NEW.batch_id AND finished_at IS NULL;
        IF FOUND THEN
            PERFORM jobvisor_batch_fire(NEW.batch_id, coalesce(NEW.finished_at, NEW.run_at));
        END IF;
    ELSE
        UPDATE jobvisor_batches
           SET unfinished = unfinished + 1,
               failed = greatest(failed - (OLD.status <> 'completed')::int, 0)
         WHERE id = NEW.batch_id AND finished_at IS NULL;
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS jobvisor_batch_member_settled ON jobvisor_jobs;
CREATE TRIGGER jobvisor_batch_member_settled
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN (NEW.batch_id IS NOT NULL
          AND (OLD.status IN ('completed', 'dead', 'cancelled'))
              <> (NEW.status IN ('completed', 'dead', 'cancelled')))
    EXECUTE FUNCTION jobvisor_batch_member_settled();
