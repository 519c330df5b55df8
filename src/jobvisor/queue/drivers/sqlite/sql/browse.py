"""SQLite's statements for the dashboard's reads (`queue.browse`) and the
fleet's heartbeats."""

from __future__ import annotations

from typing import Final, LiteralString

# --- the dashboard's reads (`queue.browse`) and the fleet's heartbeats ---------

JOB_LISTING_COLUMNS: Final[LiteralString] = (
    "id, queue, job_type, status, priority, attempts, max_attempts, run_at, created_at,"
    " finished_at, correlation_id, substr(payload, 1, 200), length(CAST(payload AS BLOB)),"
    " substr(last_error, 1, 200), lease_expires_at"
)

JOB_PAGE_FILTERS: Final[LiteralString] = (
    # The queue and type filters of every page of jobs (NULL: any).
    " AND (:queue IS NULL OR queue = :queue) AND (:job_type IS NULL OR job_type = :job_type)"
)

JOB_PAGE_NEWEST: Final[LiteralString] = (
    # A page of jobs of any status, newest first, after the cursor's id.
    "SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    " WHERE (:before IS NULL OR id < :before)" + JOB_PAGE_FILTERS + " ORDER BY id DESC LIMIT :limit"
)

JOB_PAGE_FINISHED: Final[LiteralString] = (
    # A page of finished jobs of one status, the last finished first, after
    # the cursor (finished_at, id), over jobvisor_jobs_finished_idx.
    "SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    " INDEXED BY jobvisor_jobs_finished_idx"
    " WHERE status IN ('completed', 'dead', 'cancelled') AND status = :status"
    " AND (finished_at, id) < (:at, :before)"
    + JOB_PAGE_FILTERS
    + " ORDER BY finished_at DESC, id DESC LIMIT :limit"
)

JOB_PAGE_RUNNING: Final[LiteralString] = (
    # A page of running jobs, the last claimed (or renewed) first, after the
    # cursor (lease_expires_at, id), over jobvisor_jobs_lease_idx.
    "SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    " INDEXED BY jobvisor_jobs_lease_idx"
    " WHERE status = 'running' AND (lease_expires_at, id) < (:at, :before)"
    + JOB_PAGE_FILTERS
    + " ORDER BY lease_expires_at DESC, id DESC LIMIT :limit"
)

JOB_PAGE_OF_CORRELATION: Final[LiteralString] = (
    # A page of the jobs of one correlation id, newest first: those that
    # carry it, and the job whose own id it is when that job carries none
    # (`own`, NULL when the id has another form). Unsorted: the caller
    # merges the two.
    "SELECT * FROM ("
    " SELECT * FROM (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  INDEXED BY jobvisor_jobs_correlation_idx"
    "  WHERE correlation_id = :correlation_id AND (:before IS NULL OR id < :before)"
    "  AND (:status IS NULL OR status = :status)"
    + JOB_PAGE_FILTERS
    + "  ORDER BY id DESC LIMIT :limit)"
    " UNION ALL"
    " SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE id = :own AND correlation_id IS NULL AND (:before IS NULL OR id < :before)"
    "  AND (:status IS NULL OR status = :status)" + JOB_PAGE_FILTERS + ")"
)

JOB_PAGE_DUE: Final[LiteralString] = (
    # A page of the jobs waiting to run, in claim order, after the cursor
    # (priority, run_at, id): the rest of its priority, then the lower ones;
    # up to twice `limit` rows, unsorted: the caller merges the two.
    "SELECT * FROM ("
    " SELECT * FROM (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE status IN ('pending', 'retryable') AND priority = :priority"
    "  AND (run_at, id) > (:run_at, :after)"
    "  AND (:status IS NULL OR status = :status)"
    + JOB_PAGE_FILTERS
    + "  ORDER BY priority DESC, run_at, id LIMIT :limit)"
    " UNION ALL"
    " SELECT * FROM (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE status IN ('pending', 'retryable') AND priority < :priority"
    "  AND (:status IS NULL OR status = :status)"
    + JOB_PAGE_FILTERS
    + "  ORDER BY priority DESC, run_at, id LIMIT :limit)"
    ")"
)

JOB_COUNT_WAITING_CAPPED: Final[LiteralString] = (
    # Pending and retryable jobs by queue and status, counting no further
    # than `cap` jobs of the two together.
    "SELECT queue, status, count(*) FROM (SELECT queue, status FROM jobvisor_jobs"
    " INDEXED BY jobvisor_jobs_claim_idx WHERE status IN ('pending', 'retryable')"
    " LIMIT :cap) GROUP BY queue, status"
)

JOB_COUNT_RUNNING_CAPPED: Final[LiteralString] = (
    # Running jobs by queue, counting no further than `cap`.
    "SELECT queue, status, count(*) FROM (SELECT queue, status FROM jobvisor_jobs"
    " INDEXED BY jobvisor_jobs_lease_idx WHERE status = 'running' LIMIT :cap)"
    " GROUP BY queue, status"
)

JOB_COUNT_FINISHED_CAPPED: Final[LiteralString] = (
    # Finished jobs of one status by queue, counting no further than `cap`.
    "SELECT queue, status, count(*) FROM (SELECT queue, status FROM jobvisor_jobs"
    " INDEXED BY jobvisor_jobs_finished_idx"
    " WHERE status IN ('completed', 'dead', 'cancelled') AND status = :status"
    " LIMIT :cap) GROUP BY queue, status"
)

JOB_COUNT_SAMPLED: Final[LiteralString] = (
    # SQLite samples nothing: the exact count by queue and status (`percent`
    # is ignored), each part over the index its statuses have.
    "SELECT queue, status, count(*) FROM jobvisor_jobs INDEXED BY jobvisor_jobs_claim_idx"
    " WHERE status IN ('pending', 'retryable')"
    " AND status IN (SELECT value FROM json_each(:statuses)) GROUP BY queue, status"
    " UNION ALL"
    " SELECT queue, status, count(*) FROM jobvisor_jobs INDEXED BY jobvisor_jobs_lease_idx"
    " WHERE status = 'running'"
    " AND status IN (SELECT value FROM json_each(:statuses)) GROUP BY queue, status"
    " UNION ALL"
    " SELECT queue, status, count(*) FROM jobvisor_jobs INDEXED BY jobvisor_jobs_finished_idx"
    " WHERE status IN ('completed', 'dead', 'cancelled')"
    " AND status IN (SELECT value FROM json_each(:statuses)) GROUP BY queue, status"
)

JOB_ROWS_ESTIMATE: Final[LiteralString] = (
    # SQLite keeps no estimate: -1, so counts past the cap are exact.
    "SELECT -1"
)

JOB_OLDEST_DUE_OF_QUEUES: Final[LiteralString] = (
    # For each of these queues, seconds since its oldest claimable job became
    # due (NULL: none is due); one probe of jobvisor_jobs_due_idx per queue.
    "SELECT q.value, (SELECT :now"
    "   - min(j.run_at) FROM jobvisor_jobs AS j"
    "   WHERE j.status IN ('pending', 'retryable') AND j.queue = q.value"
    "   AND j.run_at <= :now)"
    " FROM json_each(:queues) AS q"
)

JOB_FINISHED_PER_MINUTE: Final[LiteralString] = (
    # Completed and dead jobs per Unix minute `first`..`last`, counted
    # exactly (`cap` is PostgreSQL's; the times are NULL: nothing to
    # extrapolate), over jobvisor_jobs_finished_idx, whose predicate SQLite
    # must see word for word.
    "SELECT CAST(finished_at / 60 AS INTEGER) AS minute,"
    " sum(status = 'completed'), NULL, sum(status = 'dead'), NULL"
    " FROM jobvisor_jobs WHERE status IN ('completed', 'dead', 'cancelled')"
    " AND status <> 'cancelled' AND finished_at >= :first * 60.0"
    " AND finished_at < (:last + 1) * 60.0 AND :cap > 0"
    " GROUP BY minute"
)

SUPERVISOR_HEARTBEAT: Final[LiteralString] = (
    # A supervisor says it is alive: its row, written anew every few seconds.
    "INSERT INTO jobvisor_supervisors (id, host, pid, version, started_at, heartbeat_at,"
    " leader, workers) VALUES (:id, :host, :pid, :version,"
    " :now,"
    " :now, :leader, :workers)"
    " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,"
    " leader = excluded.leader, workers = excluded.workers"
)

SUPERVISOR_LIST: Final[LiteralString] = (
    # The supervisors heard from within `fresh` seconds, with the database's time.
    "SELECT id, host, pid, version, started_at, heartbeat_at, leader, workers,"
    " :now FROM jobvisor_supervisors"
    " WHERE heartbeat_at >= :now - :fresh"
    # Unsorted: the caller sorts (a sort priced out by enable_sort would
    # make PostgreSQL compile the plan with its JIT).
)

SUPERVISOR_DELETE: Final[LiteralString] = (
    # A supervisor stopped cleanly: its row goes.
    "DELETE FROM jobvisor_supervisors WHERE id = :id"
)

SUPERVISOR_PRUNE: Final[LiteralString] = (
    # The rows of supervisors silent for more than `age` seconds (killed, host lost).
    "DELETE FROM jobvisor_supervisors WHERE heartbeat_at < :now - :age"
)

JOB_RUNNING_BY_WORKER: Final[LiteralString] = (
    # How many jobs each worker is running (jobvisor_jobs_lease_idx: running jobs only).
    "SELECT worker_id, count(*) FROM jobvisor_jobs INDEXED BY jobvisor_jobs_lease_idx"
    " WHERE status = 'running' GROUP BY worker_id"
)

# --- the dashboard's sessions (`queue.web_sessions`) ------------------------------

WEB_SESSION_START: Final[LiteralString] = (
    # A login: its session acts until `ttl` seconds from now, or its logout.
    "INSERT INTO jobvisor_web_sessions (id, expires_at) VALUES (:id, :now + :ttl)"
)

WEB_SESSION_ALIVE: Final[LiteralString] = (
    # Whether a session may still act: logged in, not out, not expired.
    "SELECT 1 FROM jobvisor_web_sessions WHERE id = :id AND expires_at > :now"
)

WEB_SESSION_END: Final[LiteralString] = (
    # A logout: the session acts no more, whichever process it calls.
    "DELETE FROM jobvisor_web_sessions WHERE id = :id"
)

WEB_SESSION_PRUNE: Final[LiteralString] = (
    # The sessions past their expiry, which nothing logged out.
    "DELETE FROM jobvisor_web_sessions WHERE expires_at <= :now"
)
