"""PostgreSQL's statements of workflows (`queue.workflows`). The SQLite
driver's `WorkflowSql` defines the same names, each statement a literal with
a one-line comment. The hand-over itself (a workflow job's ending reaching
its children) is no statement here: it is the trigger of the migrations
(16, then 19), so every path that ends a job hands over."""

from __future__ import annotations

from typing import Final, LiteralString

from .intake import NOTIFY_CHANNEL


class WorkflowSql:
    """PostgreSQL's workflow statements (psycopg's named parameters)."""

    WORKFLOW_INSERT: Final[LiteralString] = (
        # A workflow's own row.
        "INSERT INTO jobvisor_workflows (id, name, created_at)"
        " VALUES (%(id)s, %(name)s, %(now)s::timestamptz)"
    )

    WORKFLOW_JOBS_COPY: Final[LiteralString] = (
        # A workflow's jobs, in binary: JOB_COLUMNS_COPY's columns, then the
        # workflow, the node's key, the status and the count of parents.
        "COPY jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,"
        " dedupe_key, correlation_id, created_at, meta, concurrency_key,"
        " workflow_id, node, status, waiting_on) FROM STDIN (FORMAT BINARY)"
    )

    WORKFLOW_EDGES_COPY: Final[LiteralString] = (
        # A workflow's dependencies, in binary.
        "COPY jobvisor_workflow_edges (workflow_id, parent_id, child_id, on_failure,"
        " takes_result)"
        " FROM STDIN (FORMAT BINARY)"
    )

    WORKFLOW_GET: Final[LiteralString] = (
        # A workflow's name and creation time.
        "SELECT name, created_at FROM jobvisor_workflows WHERE id = %(id)s"
    )

    WORKFLOW_JOB_LIST: Final[LiteralString] = (
        # A workflow's jobs, in the order they were added.
        "SELECT id, node, job_type, status, attempts, result, last_error, finished_at"
        " FROM jobvisor_jobs WHERE workflow_id = %(id)s ORDER BY id"
    )

    WORKFLOW_EDGE_LIST: Final[LiteralString] = (
        # A workflow's dependencies.
        "SELECT parent_id, child_id, on_failure FROM jobvisor_workflow_edges"
        " WHERE workflow_id = %(id)s"
    )

    WORKFLOW_CANCEL: Final[LiteralString] = (
        # JOB_CANCEL over every unfinished job of a workflow: those not running
        # are cancelled now, a running one's worker is asked to stop it.
        "UPDATE jobvisor_jobs SET"
        " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
        " finished_at = CASE WHEN status = 'running' THEN finished_at"
        "   ELSE %(now)s::timestamptz END,"
        " cancel_requested_at = CASE WHEN status = 'running' THEN coalesce(cancel_requested_at,"
        "   %(now)s::timestamptz) END,"
        " last_error = CASE WHEN cancel_requested_at IS NULL THEN %(error)s ELSE last_error END"
        " WHERE workflow_id = %(id)s"
        "   AND status IN ('pending', 'retryable', 'running', 'waiting')"
        " RETURNING status, CASE WHEN status = 'running' THEN pg_notify('" + NOTIFY_CHANNEL + "',"
        "   json_build_object('kind', 'cancel', 'queue', queue, 'id', id)::text) END"
    )

    WORKFLOW_LOCK: Final[LiteralString] = (
        # Hold a workflow's jobs for a retry: no ending hands over meanwhile.
        "SELECT id FROM jobvisor_jobs WHERE workflow_id = %(id)s ORDER BY id FOR UPDATE"
    )

    WORKFLOW_RETRY_PICK: Final[LiteralString] = (
        # The jobs a retry starts again: the dead and cancelled ones, and those
        # not running that went on after a parent of theirs failed ("run"),
        # a failed attempt's retryable one too.
        "SELECT j.id FROM jobvisor_jobs AS j WHERE j.workflow_id = %(id)s"
        " AND (j.status IN ('dead', 'cancelled')"
        "   OR (j.status IN ('waiting', 'pending', 'retryable')"
        "   AND EXISTS (SELECT 1 FROM jobvisor_workflow_edges AS e"
        "     JOIN jobvisor_jobs AS p ON p.id = e.parent_id"
        "     WHERE e.child_id = j.id AND e.settled AND p.status IN ('dead', 'cancelled'))))"
    )

    WORKFLOW_RETRY_EDGES: Final[LiteralString] = (
        # The dependencies of those jobs start again: settled only where the
        # parent completed (its result stays in the child's meta).
        "UPDATE jobvisor_workflow_edges AS e SET settled = (p.status = 'completed'"
        "   AND p.id <> ALL(%(ids)s::uuid[]))"
        " FROM jobvisor_jobs AS p"
        " WHERE e.child_id = ANY(%(ids)s::uuid[]) AND p.id = e.parent_id"
    )

    WORKFLOW_RETRY_JOBS: Final[LiteralString] = (
        # Those jobs back to waiting (or pending, with every parent completed),
        # attempts reset, their failed parents forgotten; returns their queues.
        "UPDATE jobvisor_jobs AS j SET"
        " waiting_on = w.open,"
        " status = CASE WHEN w.open > 0 THEN 'waiting' ELSE 'pending' END,"
        " attempts = 0, crashes = 0, finished_at = NULL, cancel_requested_at = NULL,"
        " run_at = %(now)s::timestamptz, meta = j.meta - 'failed_parents'"
        " FROM (SELECT c.id, (SELECT count(*) FROM jobvisor_workflow_edges AS e"
        "   WHERE e.child_id = c.id AND NOT e.settled) AS open"
        "   FROM unnest(%(ids)s::uuid[]) AS c(id)) AS w"
        " WHERE j.id = w.id"
        " RETURNING j.queue"
    )

    WORKFLOW_RETRY_HOLD_JOBS: Final[LiteralString] = (
        # A running job that went on after a parent of its failed, that parent
        # now started again: its current attempt runs on, but should it end
        # without completing, it waits for that parent again (every path that
        # puts a running job back goes to `waiting` while `waiting_on` > 0).
        "UPDATE jobvisor_jobs AS j SET waiting_on = j.waiting_on + r.n,"
        " meta = j.meta - 'failed_parents'"
        " FROM (SELECT e.child_id, count(*) AS n FROM jobvisor_workflow_edges AS e"
        "   WHERE e.parent_id = ANY(%(ids)s::uuid[]) AND e.settled GROUP BY e.child_id) AS r"
        " WHERE j.id = r.child_id AND j.status = 'running'"
    )

    WORKFLOW_RETRY_HOLD_EDGES: Final[LiteralString] = (
        # Those jobs' dependencies on the restarted parents open again.
        "UPDATE jobvisor_workflow_edges AS e SET settled = false FROM jobvisor_jobs AS c"
        " WHERE e.parent_id = ANY(%(ids)s::uuid[]) AND e.settled"
        "   AND c.id = e.child_id AND c.status = 'running'"
    )

    WORKFLOW_FINISHED_PICK: Final[LiteralString] = (
        # Up to `limit` workflows every job of which finished longer ago than
        # its status's age (an age NULL: jobs of that status are kept).
        "SELECT w.id FROM jobvisor_workflows AS w WHERE NOT EXISTS ("
        " SELECT 1 FROM jobvisor_jobs AS j WHERE j.workflow_id = w.id AND NOT coalesce("
        "   (j.status = 'completed' AND j.finished_at < %(now)s::timestamptz"
        "     - %(age_completed)s::float8 * interval '1 second')"
        "   OR (j.status = 'dead' AND j.finished_at < %(now)s::timestamptz"
        "     - %(age_dead)s::float8 * interval '1 second')"
        "   OR (j.status = 'cancelled' AND j.finished_at < %(now)s::timestamptz"
        "     - %(age_cancelled)s::float8 * interval '1 second'), false))"
        " ORDER BY w.created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
    )

    WORKFLOW_DELETE_JOBS: Final[LiteralString] = (
        # The jobs of these workflows.
        "DELETE FROM jobvisor_jobs WHERE workflow_id = ANY(%(ids)s::uuid[])"
    )

    WORKFLOW_DELETE_EDGES: Final[LiteralString] = (
        # These workflows' dependencies.
        "DELETE FROM jobvisor_workflow_edges WHERE workflow_id = ANY(%(ids)s::uuid[])"
    )

    WORKFLOW_DELETE: Final[LiteralString] = (
        # These workflows' rows.
        "DELETE FROM jobvisor_workflows WHERE id = ANY(%(ids)s::uuid[])"
    )

    WORKFLOW_PAGE: Final[LiteralString] = (
        # A page of workflows, newest first (ids are time-ordered), after the
        # cursor's id: a backward walk of the primary key.
        "SELECT id, name, created_at FROM jobvisor_workflows"
        " WHERE (%(before)s::uuid IS NULL OR id < %(before)s::uuid)"
        " ORDER BY id DESC LIMIT %(limit)s"
    )

    WORKFLOW_COUNTS_OF: Final[LiteralString] = (
        # The jobs of these workflows by status (jobvisor_jobs_workflow_idx).
        "SELECT workflow_id, status, count(*) FROM jobvisor_jobs"
        " WHERE workflow_id = ANY(%(ids)s::uuid[]) GROUP BY workflow_id, status"
    )

    WORKFLOW_OF_JOB: Final[LiteralString] = (
        # The workflow and node key of a job (NULLs: it belongs to none).
        "SELECT workflow_id, node FROM jobvisor_jobs WHERE id = %(id)s"
    )

    WORKFLOW_START_MARK: Final[LiteralString] = (
        # A job records the workflow it starts, only if it has started none:
        # the row lock makes a second caller wait, then match nothing.
        "UPDATE jobvisor_jobs SET meta = coalesce(meta, '{}')"
        " || jsonb_build_object('workflow', %(workflow)s::text)"
        " WHERE id = %(id)s AND meta -> 'workflow' IS NULL RETURNING id"
    )

    WORKFLOW_STARTED_BY: Final[LiteralString] = (
        # The workflow a job started (NULL: none; no row: no such job).
        "SELECT meta ->> 'workflow' FROM jobvisor_jobs WHERE id = %(id)s"
    )

    WORKFLOW_STATE_COUNTS: Final[LiteralString] = (
        # Every workflow by state: active while a job of it is unfinished,
        # else completed when all completed, else failed.
        "SELECT state, count(*) FROM (SELECT CASE"
        "   WHEN bool_or(status NOT IN ('completed', 'dead', 'cancelled')) THEN 'active'"
        "   WHEN bool_and(status = 'completed') THEN 'completed' ELSE 'failed' END AS state"
        "   FROM jobvisor_jobs WHERE workflow_id IS NOT NULL GROUP BY workflow_id) AS w"
        " GROUP BY state"
    )
