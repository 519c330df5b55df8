-- Workflows: jobs that wait on other jobs (see docs/design.md, "Workflows").
-- A workflow job carries its workflow's id and its node's key; a job with
-- parents still to finish is `waiting` (outside the claim index, which holds
-- only pending and retryable jobs) and counts them in `waiting_on`. All three
-- columns are NULL or 0 for every other job, so adding them rewrites nothing.
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS workflow_id uuid;
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS node text;
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS waiting_on integer NOT NULL DEFAULT 0;

SET LOCAL lock_timeout = '5s';
ALTER TABLE jobvisor_jobs DROP CONSTRAINT IF EXISTS jobvisor_jobs_status_check;
ALTER TABLE jobvisor_jobs ADD CONSTRAINT jobvisor_jobs_status_check CHECK (
    status IN ('pending', 'running', 'retryable', 'completed', 'dead', 'cancelled', 'waiting'))
    NOT VALID;
ALTER TABLE jobvisor_jobs VALIDATE CONSTRAINT jobvisor_jobs_status_check;

-- A workflow's jobs, for its status, cancel, retry and cleanup.
CREATE INDEX IF NOT EXISTS jobvisor_jobs_workflow_idx
    ON jobvisor_jobs (workflow_id) WHERE workflow_id IS NOT NULL;

-- One row per workflow: its name and when it was enqueued.
CREATE TABLE IF NOT EXISTS jobvisor_workflows (
    id         uuid        PRIMARY KEY,
    name       text        NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT jobvisor_workflows_name_check CHECK (name <> '')
);

-- One row per dependency: `child_id` runs after `parent_id`. `on_failure`
-- says what the parent's death or cancel does to the child; `takes_result`
-- that the child's payload holds a placeholder for the parent's result (only
-- then is the result copied to the child: a fan-in that only waits copies
-- nothing); `settled` that the parent's ending has been handed over to the
-- child (exactly once).
CREATE TABLE IF NOT EXISTS jobvisor_workflow_edges (
    workflow_id uuid    NOT NULL,
    parent_id   uuid    NOT NULL,
    child_id    uuid    NOT NULL,
    on_failure  text    NOT NULL,
    takes_result boolean NOT NULL DEFAULT false,
    settled     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (parent_id, child_id),
    CONSTRAINT jobvisor_workflow_edges_policy_check CHECK (
        on_failure IN ('cancel', 'run', 'wait'))
);
CREATE INDEX IF NOT EXISTS jobvisor_workflow_edges_child_idx
    ON jobvisor_workflow_edges (child_id);
CREATE INDEX IF NOT EXISTS jobvisor_workflow_edges_workflow_idx
    ON jobvisor_workflow_edges (workflow_id);

-- The hand-over. Whatever statement ends a workflow job (a completion, a
-- failure, a reap, a cancel, a crash requeue that kills it) settles its
-- unsettled edges in the same transaction: each child counts one parent
-- less, under the child's row lock, so the one update that reaches zero makes
-- it pending, once. A completed parent's result goes into the child's
-- meta.parents (by node), which the claim reads, when the child's payload
-- takes it; a failed one (dead or cancelled) cancels the child ("cancel",
-- which cascades: the child's own ending fires this again), counts as done
-- and is listed in
-- meta.failed_parents ("run"), or is left unsettled until the parent is
-- requeued and completes ("wait"). Plain jobs fail the WHEN clause and pay
-- nothing more.
CREATE OR REPLACE FUNCTION jobvisor_workflow_hand_over() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    woken integer;
BEGIN
    WITH settled AS (
        UPDATE jobvisor_workflow_edges AS e SET settled = true
        WHERE e.parent_id = NEW.id AND NOT e.settled
            AND (NEW.status = 'completed' OR e.on_failure <> 'wait')
        RETURNING e.child_id, e.on_failure, e.takes_result
    ), handed AS (
        UPDATE jobvisor_jobs AS c SET
            waiting_on = c.waiting_on - 1,
            status = CASE WHEN c.status <> 'waiting' THEN c.status
                WHEN NEW.status <> 'completed' AND s.on_failure = 'cancel' THEN 'cancelled'
                WHEN c.waiting_on <= 1 THEN 'pending' ELSE 'waiting' END,
            finished_at = CASE WHEN c.status = 'waiting' AND NEW.status <> 'completed'
                AND s.on_failure = 'cancel' THEN NEW.finished_at ELSE c.finished_at END,
            last_error = CASE WHEN c.status = 'waiting' AND NEW.status <> 'completed'
                AND s.on_failure = 'cancel'
                THEN 'cancelled: its parent ' || NEW.node || ' (job ' || NEW.id || ') ended '
                    || NEW.status
                ELSE c.last_error END,
            meta = CASE WHEN NEW.status = 'completed' AND NOT s.takes_result THEN c.meta
                WHEN NEW.status = 'completed'
                THEN coalesce(c.meta, '{}') || jsonb_build_object('parents',
                    coalesce(c.meta -> 'parents', '{}') || jsonb_build_object(NEW.node, NEW.result))
                ELSE coalesce(c.meta, '{}') || jsonb_build_object('failed_parents',
                    coalesce(c.meta -> 'failed_parents', '{}')
                    || jsonb_build_object(NEW.node, NEW.status)) END
        FROM settled AS s WHERE c.id = s.child_id
        RETURNING c.status, c.queue
    )
    SELECT count(pg_notify('jobvisor', queue)) INTO woken FROM handed WHERE status = 'pending';
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER jobvisor_jobs_workflow_hand_over
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
        AND NEW.status IN ('completed', 'dead', 'cancelled'))
    EXECUTE FUNCTION jobvisor_workflow_hand_over();
