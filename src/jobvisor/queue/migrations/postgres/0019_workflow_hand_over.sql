-- The workflow hand-over once per statement (see docs/design.md, "Workflows").
-- Migration 16's trigger ran once per ended parent: a completion of 200
-- parents of one fan-in updated the child's row 200 times in one statement,
-- each time a new version of the row that the next update had to walk past,
-- and held its lock while doing so. This one runs once per UPDATE statement
-- on the jobs table, over the statement's new rows (its transition table):
-- it settles the open edges of every workflow job the statement left
-- completed, dead or cancelled (an edge settles once, so a job that had
-- ended before hands nothing over again), and updates each child once, with
-- the count of its parents handed over, their results and their failures
-- together. A child made pending is due from its last parent's ending (or
-- later, when it was enqueued to run later): it lands ahead of the bounds of
-- bounded claims, not behind them.
--
-- Exactly once: the children are updated in the order of their ids' text
-- (no two hand-overs wait for each other in a cycle), and each new count is
-- computed from the row as it is once locked (READ COMMITTED re-reads a row
-- another transaction changed meanwhile), so of two transactions ending a
-- child's last parents only the one that brings the count to zero makes it
-- pending. A child made cancelled ends in that same UPDATE, which fires this
-- trigger again: the cascade. A statement that ends no workflow job pays the
-- capture of its rows and one look at them.

-- An edge is written once more after its insert, when it settles: with room
-- left on its page, that update is HOT (a new version beside the old one, no
-- entry in the table's three indexes). Pages written from now on are filled
-- to half.
ALTER TABLE jobvisor_workflow_edges SET (fillfactor = 50);

DROP TRIGGER IF EXISTS jobvisor_jobs_workflow_hand_over ON jobvisor_jobs;
DROP FUNCTION IF EXISTS jobvisor_workflow_hand_over();

CREATE OR REPLACE FUNCTION jobvisor_workflow_hand_over_many() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    woken integer;
BEGIN
    PERFORM 1 FROM jobvisor_hand_over_new AS n
        WHERE n.workflow_id IS NOT NULL AND n.status IN ('completed', 'dead', 'cancelled')
        LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    WITH ended AS (
        SELECT n.id, n.status, n.node, n.result, n.finished_at
        FROM jobvisor_hand_over_new AS n
        WHERE n.workflow_id IS NOT NULL AND n.status IN ('completed', 'dead', 'cancelled')
    ), settled AS (
        UPDATE jobvisor_workflow_edges AS e SET settled = true
        FROM ended AS p
        WHERE e.parent_id = p.id AND NOT e.settled
            AND (p.status = 'completed' OR e.on_failure <> 'wait')
        RETURNING e.child_id, e.on_failure, e.takes_result,
            p.id AS parent_id, p.status, p.node, p.result, p.finished_at
    ), per_child AS (
        SELECT s.child_id, count(*)::integer AS handed, max(s.finished_at) AS ended_at,
            jsonb_object_agg(s.node, s.result)
                FILTER (WHERE s.status = 'completed' AND s.takes_result) AS results,
            jsonb_object_agg(s.node, s.status) FILTER (WHERE s.status <> 'completed') AS failed,
            -- The parent that cancels the child, when one does: the first by
            -- node, as (node, id, status, finished_at).
            min(ARRAY[s.node, s.parent_id::text, s.status, s.finished_at::text])
                FILTER (WHERE s.status <> 'completed' AND s.on_failure = 'cancel') AS canceller
        FROM settled AS s GROUP BY s.child_id
    ), handed AS (
        UPDATE jobvisor_jobs AS c SET
            waiting_on = c.waiting_on - h.handed,
            status = CASE WHEN c.status <> 'waiting' THEN c.status
                WHEN h.canceller IS NOT NULL THEN 'cancelled'
                WHEN c.waiting_on <= h.handed THEN 'pending' ELSE 'waiting' END,
            -- A child made pending is due from its last parent's ending on
            -- (or later, when it was enqueued to run later).
            run_at = CASE WHEN c.status = 'waiting' AND h.canceller IS NULL
                AND c.waiting_on <= h.handed THEN greatest(c.run_at, h.ended_at)
                ELSE c.run_at END,
            finished_at = CASE WHEN c.status = 'waiting' AND h.canceller IS NOT NULL
                THEN h.canceller[4]::timestamptz ELSE c.finished_at END,
            last_error = CASE WHEN c.status = 'waiting' AND h.canceller IS NOT NULL
                THEN 'cancelled: its parent ' || h.canceller[1] || ' (job ' || h.canceller[2] || ') ended '
                    || h.canceller[3]
                ELSE c.last_error END,
            meta = CASE WHEN h.results IS NULL AND h.failed IS NULL THEN c.meta
                ELSE coalesce(c.meta, '{}')
                    || CASE WHEN h.results IS NULL THEN '{}'::jsonb
                        ELSE jsonb_build_object('parents',
                            coalesce(c.meta -> 'parents', '{}') || h.results) END
                    || CASE WHEN h.failed IS NULL THEN '{}'::jsonb
                        ELSE jsonb_build_object('failed_parents',
                            coalesce(c.meta -> 'failed_parents', '{}') || h.failed) END
                END
        -- The children in the order of their ids' text, which the update
        -- follows: a sort of these few (in uuid order the planner could walk
        -- the whole primary key instead, where sorts are priced out).
        FROM (SELECT * FROM per_child ORDER BY child_id::text) AS h
        WHERE c.id = h.child_id
        RETURNING c.status, c.queue
    )
    -- One notice per queue that gained a pending job: idle workers claim it.
    SELECT count(pg_notify('jobvisor', q.queue)) INTO woken
    FROM (SELECT DISTINCT queue FROM handed WHERE status = 'pending') AS q;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobvisor_jobs_workflow_hand_over_many
    AFTER UPDATE ON jobvisor_jobs
    REFERENCING NEW TABLE AS jobvisor_hand_over_new
    FOR EACH STATEMENT
    EXECUTE FUNCTION jobvisor_workflow_hand_over_many();
