"""SQLite's statements of workflows (`queue.workflows`), under the names of
the PostgreSQL driver's `WorkflowSql`; the hand-over is the migrations'
triggers."""

from __future__ import annotations

from typing import Final, LiteralString


class WorkflowSql:
    """SQLite's workflow statements (named parameters; lists as JSON)."""

    WORKFLOW_INSERT: Final[LiteralString] = (
        # A workflow's own row.
        "INSERT INTO jobvisor_workflows (id, name, created_at) VALUES (:id, :name, :now)"
    )

    WORKFLOW_JOBS_COPY: Final[LiteralString] = (
        # A workflow's jobs through executemany (see Postgres.WORKFLOW_JOBS_COPY).
        "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,"
        " dedupe_key, correlation_id, created_at, meta, concurrency_key,"
        " workflow_id, node, status, waiting_on)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )

    WORKFLOW_EDGES_COPY: Final[LiteralString] = (
        # A workflow's dependencies through executemany.
        "INSERT INTO jobvisor_workflow_edges (workflow_id, parent_id, child_id, on_failure,"
        " takes_result) VALUES (?, ?, ?, ?, ?)"
    )

    WORKFLOW_GET: Final[LiteralString] = (
        # A workflow's name and creation time.
        "SELECT name, created_at FROM jobvisor_workflows WHERE id = :id"
    )

    WORKFLOW_JOB_LIST: Final[LiteralString] = (
        # A workflow's jobs, in the order they were added.
        "SELECT id, node, job_type, status, attempts, result, last_error, finished_at"
        " FROM jobvisor_jobs WHERE workflow_id = :id ORDER BY id"
    )

    WORKFLOW_EDGE_LIST: Final[LiteralString] = (
        # A workflow's dependencies.
        "SELECT parent_id, child_id, on_failure FROM jobvisor_workflow_edges"
        " WHERE workflow_id = :id"
    )

    WORKFLOW_CANCEL: Final[LiteralString] = (
        # JOB_CANCEL over every unfinished job of a workflow.
        "UPDATE jobvisor_jobs SET"
        " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
        " finished_at = CASE WHEN status = 'running' THEN finished_at ELSE :now END,"
        " cancel_requested_at = CASE WHEN status = 'running' THEN coalesce(cancel_requested_at,"
        "   :now) END,"
        " last_error = CASE WHEN cancel_requested_at IS NULL THEN :error ELSE last_error END"
        " WHERE workflow_id = :id AND status IN ('pending', 'retryable', 'running', 'waiting')"
        " RETURNING status, NULL"
    )

    WORKFLOW_LOCK: Final[LiteralString] = (
        # Nothing to hold: a SQLite plan has the database's write lock.
        "SELECT NULL"
    )

    WORKFLOW_RETRY_PICK: Final[LiteralString] = (
        # The jobs a retry starts again (see Postgres.WORKFLOW_RETRY_PICK).
        "SELECT j.id FROM jobvisor_jobs AS j WHERE j.workflow_id = :id"
        " AND (j.status IN ('dead', 'cancelled')"
        "   OR (j.status IN ('waiting', 'pending', 'retryable')"
        "   AND EXISTS (SELECT 1 FROM jobvisor_workflow_edges AS e"
        "     JOIN jobvisor_jobs AS p ON p.id = e.parent_id"
        "     WHERE e.child_id = j.id AND e.settled AND p.status IN ('dead', 'cancelled'))))"
    )

    WORKFLOW_RETRY_EDGES: Final[LiteralString] = (
        # The dependencies of those jobs start again (see Postgres').
        "UPDATE jobvisor_workflow_edges SET settled = coalesce((SELECT p.status = 'completed'"
        "   AND p.id NOT IN (SELECT value FROM json_each(:ids))"
        "   FROM jobvisor_jobs AS p WHERE p.id = jobvisor_workflow_edges.parent_id), 0)"
        " WHERE child_id IN (SELECT value FROM json_each(:ids))"
    )

    WORKFLOW_RETRY_JOBS: Final[LiteralString] = (
        # Those jobs back to waiting or pending (see Postgres'); returns their queues.
        "UPDATE jobvisor_jobs SET"
        " waiting_on = (SELECT count(*) FROM jobvisor_workflow_edges AS e"
        "   WHERE e.child_id = jobvisor_jobs.id AND NOT e.settled),"
        " status = CASE WHEN (SELECT count(*) FROM jobvisor_workflow_edges AS e"
        "   WHERE e.child_id = jobvisor_jobs.id AND NOT e.settled) > 0"
        "   THEN 'waiting' ELSE 'pending' END,"
        " attempts = 0, crashes = 0, finished_at = NULL, cancel_requested_at = NULL,"
        " run_at = :now, meta = json_remove(meta, '$.failed_parents')"
        " WHERE id IN (SELECT value FROM json_each(:ids))"
        " RETURNING queue"
    )

    WORKFLOW_RETRY_HOLD_JOBS: Final[LiteralString] = (
        # A running job's parents started again (see Postgres').
        "UPDATE jobvisor_jobs SET waiting_on = waiting_on + (SELECT count(*)"
        "   FROM jobvisor_workflow_edges AS e WHERE e.child_id = jobvisor_jobs.id AND e.settled"
        "   AND e.parent_id IN (SELECT value FROM json_each(:ids))),"
        " meta = json_remove(meta, '$.failed_parents')"
        " WHERE status = 'running' AND id IN (SELECT child_id FROM jobvisor_workflow_edges"
        "   WHERE settled AND parent_id IN (SELECT value FROM json_each(:ids)))"
    )

    WORKFLOW_RETRY_HOLD_EDGES: Final[LiteralString] = (
        # Those jobs' dependencies on the restarted parents open again.
        "UPDATE jobvisor_workflow_edges SET settled = 0"
        " WHERE settled AND parent_id IN (SELECT value FROM json_each(:ids))"
        "   AND child_id IN (SELECT id FROM jobvisor_jobs WHERE status = 'running')"
    )

    WORKFLOW_FINISHED_PICK: Final[LiteralString] = (
        # Up to `limit` workflows every job of which finished past its status's age.
        "SELECT w.id FROM jobvisor_workflows AS w WHERE NOT EXISTS ("
        " SELECT 1 FROM jobvisor_jobs AS j WHERE j.workflow_id = w.id AND NOT coalesce("
        "   (j.status = 'completed' AND j.finished_at < :now - :age_completed)"
        "   OR (j.status = 'dead' AND j.finished_at < :now - :age_dead)"
        "   OR (j.status = 'cancelled' AND j.finished_at < :now - :age_cancelled), 0))"
        " ORDER BY w.created_at LIMIT :limit"
    )

    WORKFLOW_DELETE_JOBS: Final[LiteralString] = (
        # The jobs of these workflows.
        "DELETE FROM jobvisor_jobs WHERE workflow_id IN (SELECT value FROM json_each(:ids))"
    )

    WORKFLOW_DELETE: Final[LiteralString] = (
        # These workflows' rows.
        "DELETE FROM jobvisor_workflows WHERE id IN (SELECT value FROM json_each(:ids))"
    )

    WORKFLOW_DELETE_EDGES: Final[LiteralString] = (
        # These workflows' dependencies.
        "DELETE FROM jobvisor_workflow_edges"
        " WHERE workflow_id IN (SELECT value FROM json_each(:ids))"
    )

    WORKFLOW_PAGE: Final[LiteralString] = (
        # A page of workflows, newest first, after the cursor's id.
        "SELECT id, name, created_at FROM jobvisor_workflows"
        " WHERE (:before IS NULL OR id < :before) ORDER BY id DESC LIMIT :limit"
    )

    WORKFLOW_COUNTS_OF: Final[LiteralString] = (
        # The jobs of these workflows by status.
        "SELECT workflow_id, status, count(*) FROM jobvisor_jobs"
        " WHERE workflow_id IN (SELECT value FROM json_each(:ids)) GROUP BY workflow_id, status"
    )

    WORKFLOW_OF_JOB: Final[LiteralString] = (
        # The workflow and node key of a job (NULLs: it belongs to none).
        "SELECT workflow_id, node FROM jobvisor_jobs WHERE id = :id"
    )

    WORKFLOW_START_MARK: Final[LiteralString] = (
        # A job records the workflow it starts, only if it has started none
        # (one writer at a time: a second caller matches nothing).
        "UPDATE jobvisor_jobs SET meta = json_set(coalesce(meta, '{}'), '$.workflow', :workflow)"
        " WHERE id = :id AND json_extract(meta, '$.workflow') IS NULL RETURNING id"
    )

    WORKFLOW_STARTED_BY: Final[LiteralString] = (
        # The workflow a job started (NULL: none; no row: no such job).
        "SELECT json_extract(meta, '$.workflow') FROM jobvisor_jobs WHERE id = :id"
    )

    WORKFLOW_STATE_COUNTS: Final[LiteralString] = (
        # Every workflow by state (see Postgres.WORKFLOW_STATE_COUNTS).
        "SELECT state, count(*) FROM (SELECT CASE"
        "   WHEN max(status NOT IN ('completed', 'dead', 'cancelled')) THEN 'active'"
        "   WHEN min(status = 'completed') THEN 'completed' ELSE 'failed' END AS state"
        "   FROM jobvisor_jobs WHERE workflow_id IS NOT NULL GROUP BY workflow_id) AS w"
        " GROUP BY state"
    )
