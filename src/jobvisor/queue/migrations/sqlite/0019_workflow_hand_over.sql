-- The workflow hand-over, cheaper per parent (see the PostgreSQL migration
-- and docs/design.md, "Workflows"). Migration 16's one trigger set a child's
-- status, finished_at, last_error and meta for every parent handed over, so
-- SQLite rewrote the child's entries in each index on those columns every
-- time, even when only its count of open parents changed, and looked its
-- edge up once per column. Two triggers take its place, one per kind of
-- ending: a completed parent lowers the count (which no index holds) and
-- writes its result into meta where the child takes it; only the last one
-- changes the child's status. A failed parent (dead, cancelled) does the
-- rest in steps. A child made pending is due from its last parent's ending
-- on (or later, when it was enqueued to run later), as on PostgreSQL.
-- SQLite runs one writer at a time; each step sees the ones before it.
DROP TRIGGER IF EXISTS jobvisor_jobs_workflow_hand_over;

CREATE TRIGGER IF NOT EXISTS jobvisor_jobs_workflow_completed
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN NEW.workflow_id IS NOT NULL AND OLD.status IS NOT NEW.status
        AND NEW.status = 'completed'
BEGIN
    UPDATE jobvisor_jobs SET
        waiting_on = waiting_on - 1,
        meta = CASE WHEN (SELECT takes_result FROM jobvisor_workflow_edges
                WHERE parent_id = NEW.id AND child_id = jobvisor_jobs.id)
            THEN json_set(coalesce(meta, '{}'), '$.parents."' || NEW.node || '"',
                json(coalesce(NEW.result, 'null')))
            ELSE meta END
    WHERE id IN (SELECT child_id FROM jobvisor_workflow_edges
        WHERE parent_id = NEW.id AND settled = 0);
    UPDATE jobvisor_jobs SET
        status = 'pending',
        run_at = max(run_at, coalesce(NEW.finished_at, run_at))
    WHERE status = 'waiting' AND waiting_on <= 0
        AND id IN (SELECT child_id FROM jobvisor_workflow_edges
            WHERE parent_id = NEW.id AND settled = 0);
    UPDATE jobvisor_workflow_edges SET settled = 1 WHERE parent_id = NEW.id AND settled = 0;
END;

-- A dead or cancelled parent: "cancel" and "run" edges settle, "wait" edges
-- stay open. A waiting child of a "cancel" edge ends cancelled, and its own
-- ending cascades (every connection jobvisor opens sets PRAGMA
-- recursive_triggers).
CREATE TRIGGER IF NOT EXISTS jobvisor_jobs_workflow_failed
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN NEW.workflow_id IS NOT NULL AND OLD.status IS NOT NEW.status
        AND NEW.status IN ('dead', 'cancelled')
BEGIN
    UPDATE jobvisor_jobs SET
        waiting_on = waiting_on - 1,
        meta = json_set(coalesce(meta, '{}'), '$.failed_parents."' || NEW.node || '"',
            NEW.status)
    WHERE id IN (SELECT child_id FROM jobvisor_workflow_edges
        WHERE parent_id = NEW.id AND settled = 0 AND on_failure <> 'wait');
    UPDATE jobvisor_jobs SET
        status = 'cancelled',
        finished_at = NEW.finished_at,
        last_error = 'cancelled: its parent ' || NEW.node || ' (job ' || NEW.id || ') ended '
            || NEW.status
    WHERE status = 'waiting'
        AND id IN (SELECT child_id FROM jobvisor_workflow_edges
            WHERE parent_id = NEW.id AND settled = 0 AND on_failure = 'cancel');
    UPDATE jobvisor_jobs SET
        status = 'pending',
        run_at = max(run_at, coalesce(NEW.finished_at, run_at))
    WHERE status = 'waiting' AND waiting_on <= 0
        AND id IN (SELECT child_id FROM jobvisor_workflow_edges
            WHERE parent_id = NEW.id AND settled = 0 AND on_failure = 'run');
    UPDATE jobvisor_workflow_edges SET settled = 1
        WHERE parent_id = NEW.id AND settled = 0 AND on_failure <> 'wait';
END;
