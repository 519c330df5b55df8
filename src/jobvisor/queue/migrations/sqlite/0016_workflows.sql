-- Workflows: jobs that wait on other jobs (see the PostgreSQL migration and
-- docs/design.md, "Workflows"). Ids are UUID text, `settled` 0 or 1.
ALTER TABLE jobvisor_jobs ADD COLUMN workflow_id TEXT;
ALTER TABLE jobvisor_jobs ADD COLUMN node TEXT;
ALTER TABLE jobvisor_jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;

-- SQLite cannot change a table's checks, and building jobvisor_jobs again
-- would drop what later migrations add to it. Widening the status check
-- changes nothing stored, so the table's definition is edited in place (the
-- documented way for such a change); the CREATE statements below bump the
-- schema version, so every connection reads the new definition.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
    SET sql = replace(sql, '''dead'', ''cancelled'')', '''dead'', ''cancelled'', ''waiting'')')
    WHERE type = 'table' AND name = 'jobvisor_jobs' AND instr(sql, '''waiting''') = 0;
PRAGMA writable_schema = RESET;

CREATE INDEX IF NOT EXISTS jobvisor_jobs_workflow_idx
    ON jobvisor_jobs (workflow_id) WHERE workflow_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS jobvisor_workflows (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at REAL NOT NULL,
    CHECK (name <> '')
);

CREATE TABLE IF NOT EXISTS jobvisor_workflow_edges (
    workflow_id TEXT    NOT NULL,
    parent_id   TEXT    NOT NULL,
    child_id    TEXT    NOT NULL,
    on_failure  TEXT    NOT NULL,
    takes_result INTEGER NOT NULL DEFAULT 0,
    settled     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (parent_id, child_id),
    CHECK (on_failure IN ('cancel', 'run', 'wait'))
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobvisor_workflow_edges_child_idx
    ON jobvisor_workflow_edges (child_id);
CREATE INDEX IF NOT EXISTS jobvisor_workflow_edges_workflow_idx
    ON jobvisor_workflow_edges (workflow_id);

-- The hand-over (see the PostgreSQL migration). A "cancel" cascades through
-- the children's own endings, which fire this trigger again: every
-- connection jobvisor opens sets PRAGMA recursive_triggers. SQLite runs one
-- writer at a time, so the count cannot race.
CREATE TRIGGER IF NOT EXISTS jobvisor_jobs_workflow_hand_over
    AFTER UPDATE OF status ON jobvisor_jobs
    FOR EACH ROW
    WHEN NEW.workflow_id IS NOT NULL AND OLD.status IS NOT NEW.status
        AND NEW.status IN ('completed', 'dead', 'cancelled')
BEGIN
    UPDATE jobvisor_jobs SET
        waiting_on = waiting_on - 1,
        status = CASE WHEN status <> 'waiting' THEN status
            WHEN NEW.status <> 'completed' AND (SELECT on_failure FROM jobvisor_workflow_edges
                WHERE parent_id = NEW.id AND child_id = jobvisor_jobs.id) = 'cancel'
                THEN 'cancelled'
            WHEN waiting_on <= 1 THEN 'pending' ELSE 'waiting' END,
        finished_at = CASE WHEN status = 'waiting' AND NEW.status <> 'completed'
            AND (SELECT on_failure FROM jobvisor_workflow_edges
                WHERE parent_id = NEW.id AND child_id = jobvisor_jobs.id) = 'cancel'
            THEN NEW.finished_at ELSE finished_at END,
        last_error = CASE WHEN status = 'waiting' AND NEW.status <> 'completed'
            AND (SELECT on_failure FROM jobvisor_workflow_edges
                WHERE parent_id = NEW.id AND child_id = jobvisor_jobs.id) = 'cancel'
            THEN 'cancelled: its parent ' || NEW.node || ' (job ' || NEW.id || ') ended '
                || NEW.status
            ELSE last_error END,
        meta = CASE WHEN NEW.status = 'completed' AND NOT (SELECT takes_result
                FROM jobvisor_workflow_edges
                WHERE parent_id = NEW.id AND child_id = jobvisor_jobs.id) THEN meta
            WHEN NEW.status = 'completed'
            THEN json_set(coalesce(meta, '{}'), '$.parents."' || NEW.node || '"',
                json(coalesce(NEW.result, 'null')))
            ELSE json_set(coalesce(meta, '{}'), '$.failed_parents."' || NEW.node || '"',
                NEW.status) END
    WHERE id IN (SELECT child_id FROM jobvisor_workflow_edges
        WHERE parent_id = NEW.id AND settled = 0
            AND (NEW.status = 'completed' OR on_failure <> 'wait'));
    UPDATE jobvisor_workflow_edges SET settled = 1
        WHERE parent_id = NEW.id AND settled = 0
            AND (NEW.status = 'completed' OR on_failure <> 'wait');
END;
