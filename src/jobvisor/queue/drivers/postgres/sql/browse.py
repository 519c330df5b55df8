"""PostgreSQL's statements for the dashboard's reads (`queue.browse`) and the
fleet's heartbeats."""

from __future__ import annotations

from typing import Final, LiteralString

# --- the dashboard's reads (`queue.browse`) and the fleet's heartbeats ---------

JOB_LISTING_COLUMNS: Final[LiteralString] = (
    "id, queue, job_type, status, priority, attempts, max_attempts, run_at, created_at,"
    " finished_at, correlation_id, left(payload::text, 200), octet_length(payload::text),"
    " left(last_error, 200), lease_expires_at"
)

JOB_PAGE_FILTERS: Final[LiteralString] = (
    # The queue and type filters of every page of jobs (NULL: any).
    " AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)"
    " AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)"
)

JOB_PAGE_NEWEST: Final[LiteralString] = (
    # A page of jobs of any status, newest first, after the cursor's id
    # (primary key, walked backwards); queue and type are filters on the way.
    "SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    " WHERE (%(before)s::uuid IS NULL OR id < %(before)s::uuid)"
    + JOB_PAGE_FILTERS
    + " ORDER BY id DESC LIMIT %(limit)s"
)

JOB_PAGE_FINISHED: Final[LiteralString] = (
    # A page of finished jobs of one status, the last finished first, after
    # the cursor (finished_at, id): a backward walk of
    # jobvisor_jobs_finished_idx (the status list repeated, or a prepared
    # generic plan cannot prove the partial index's predicate); jobs that
    # finished in the same instant (one `complete_many`) are put in id order
    # by an incremental sort of that instant's jobs alone.
    "SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    " WHERE status IN ('completed', 'dead', 'cancelled') AND status = %(status)s"
    " AND (finished_at, id) < (%(at)s::timestamptz, %(before)s::uuid)"
    + JOB_PAGE_FILTERS
    + " ORDER BY finished_at DESC, id DESC LIMIT %(limit)s"
)

JOB_PAGE_RUNNING: Final[LiteralString] = (
    # A page of running jobs, the last claimed (or renewed) first, after the
    # cursor (lease_expires_at, id): a backward walk of jobvisor_jobs_lease_idx.
    "SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    " WHERE status = 'running'"
    " AND (lease_expires_at, id) < (%(at)s::timestamptz, %(before)s::uuid)"
    + JOB_PAGE_FILTERS
    + " ORDER BY lease_expires_at DESC, id DESC LIMIT %(limit)s"
)

JOB_PAGE_OF_CORRELATION: Final[LiteralString] = (
    # A page of the jobs of one correlation id, newest first: those that
    # carry it (jobvisor_jobs_correlation_idx), and the job whose own id it
    # is when that job carries none (`own`, NULL when the id has another
    # form; the primary key). Unsorted: the caller merges the two.
    "SELECT * FROM ("
    " (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE correlation_id = %(correlation_id)s"
    "  AND (%(before)s::uuid IS NULL OR id < %(before)s::uuid)"
    "  AND (%(status)s::text IS NULL OR status = %(status)s::text)"
    + JOB_PAGE_FILTERS
    + "  ORDER BY id DESC LIMIT %(limit)s)"
    " UNION ALL"
    " (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE id = %(own)s::uuid AND correlation_id IS NULL"
    "  AND (%(before)s::uuid IS NULL OR id < %(before)s::uuid)"
    "  AND (%(status)s::text IS NULL OR status = %(status)s::text)" + JOB_PAGE_FILTERS + ")"
    ") AS correlated"
)

JOB_PAGE_DUE: Final[LiteralString] = (
    # A page of the jobs waiting to run, in claim order (the claim index),
    # after the cursor (priority, run_at, id): the rest of the cursor's
    # priority, then the lower ones. The first page's cursor is the highest
    # priority with the earliest time. Up to twice `limit` rows, unsorted: the
    # caller merges the two (an outer sort would cost a JIT compile).
    "SELECT * FROM ("
    " (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE status IN ('pending', 'retryable') AND priority = %(priority)s"
    "  AND (run_at, id) > (%(run_at)s::timestamptz, %(after)s::uuid)"
    "  AND (%(status)s::text IS NULL OR status = %(status)s::text)"
    + JOB_PAGE_FILTERS
    + "  ORDER BY priority DESC, run_at, id LIMIT %(limit)s)"
    " UNION ALL"
    " (SELECT " + JOB_LISTING_COLUMNS + " FROM jobvisor_jobs"
    "  WHERE status IN ('pending', 'retryable') AND priority < %(priority)s"
    "  AND (%(status)s::text IS NULL OR status = %(status)s::text)"
    + JOB_PAGE_FILTERS
    + "  ORDER BY priority DESC, run_at, id LIMIT %(limit)s)"
    ") AS due"
)

JOB_COUNT_WAITING_CAPPED: Final[LiteralString] = (
    # Pending and retryable jobs by queue and status, counting no further
    # than `cap` jobs of the two together (a walk of jobvisor_jobs_claim_idx,
    # in its order so that no plan reads the table instead).
    "SELECT queue, status, count(*) FROM (SELECT queue, status FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable') ORDER BY priority DESC, run_at, id"
    " LIMIT %(cap)s) AS capped GROUP BY queue, status"
)

JOB_COUNT_RUNNING_CAPPED: Final[LiteralString] = (
    # Running jobs by queue, counting no further than `cap` (jobvisor_jobs_lease_idx).
    "SELECT queue, status, count(*) FROM (SELECT queue, status FROM jobvisor_jobs"
    " WHERE status = 'running' ORDER BY lease_expires_at LIMIT %(cap)s) AS capped"
    " GROUP BY queue, status"
)

JOB_COUNT_FINISHED_CAPPED: Final[LiteralString] = (
    # Finished jobs of one status by queue, counting no further than `cap`
    # (jobvisor_jobs_finished_idx).
    "SELECT queue, status, count(*) FROM (SELECT queue, status FROM jobvisor_jobs"
    " WHERE status IN ('completed', 'dead', 'cancelled') AND status = %(status)s"
    " ORDER BY finished_at LIMIT %(cap)s) AS capped GROUP BY queue, status"
)

JOB_COUNT_SAMPLED: Final[LiteralString] = (
    # Jobs of these statuses by queue and status in a `percent` sample of the
    # table's pages: the count the dashboard shows as "about" (scaled up).
    "SELECT queue, status, count(*) FROM jobvisor_jobs TABLESAMPLE SYSTEM (%(percent)s)"
    " WHERE status = ANY(%(statuses)s::text[]) GROUP BY queue, status"
)

JOB_ROWS_ESTIMATE: Final[LiteralString] = (
    # The planner's estimate of the jobs table's rows (-1: never analysed).
    "SELECT coalesce((SELECT reltuples FROM pg_class WHERE oid = to_regclass('jobvisor_jobs')), -1)"
)

JOB_OLDEST_DUE_OF_QUEUES: Final[LiteralString] = (
    # For each of these queues, seconds since its oldest claimable job became
    # due (NULL: none is due); one probe of jobvisor_jobs_due_idx per queue.
    "SELECT q.name, (SELECT extract(epoch FROM %(now)s::timestamptz"
    "   - min(j.run_at)) FROM jobvisor_jobs AS j"
    "   WHERE j.status IN ('pending', 'retryable') AND j.queue = q.name"
    "   AND j.run_at <= %(now)s::timestamptz)"
    " FROM unnest(%(queues)s::text[]) AS q(name)"
)

JOB_FINISHED_PER_MINUTE: Final[LiteralString] = (
    # For each Unix minute `first`..`last`: how many jobs completed and died
    # in it, counting no further than `cap` of each, with the finish time of
    # the last one counted (the caller extrapolates a minute at the cap).
    # 2 x minutes short walks of jobvisor_jobs_finished_idx, whatever the
    # throughput; each status is a literal, or the partial index is unusable.
    "SELECT m.minute, c.n, c.last, d.n, d.last"
    " FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS m(minute)"
    " CROSS JOIN LATERAL (SELECT count(*) AS n, max(x.finished_at) AS last FROM ("
    "   SELECT finished_at FROM jobvisor_jobs WHERE status = 'completed'"
    "   AND finished_at >= to_timestamp(m.minute * 60)"
    "   AND finished_at < to_timestamp((m.minute + 1) * 60)"
    "   ORDER BY finished_at LIMIT %(cap)s) AS x) AS c"
    " CROSS JOIN LATERAL (SELECT count(*) AS n, max(x.finished_at) AS last FROM ("
    "   SELECT finished_at FROM jobvisor_jobs WHERE status = 'dead'"
    "   AND finished_at >= to_timestamp(m.minute * 60)"
    "   AND finished_at < to_timestamp((m.minute + 1) * 60)"
    "   ORDER BY finished_at LIMIT %(cap)s) AS x) AS d"
    " WHERE c.n > 0 OR d.n > 0"
)

SUPERVISOR_HEARTBEAT: Final[LiteralString] = (
    # A supervisor says it is alive: its row, written anew every few seconds.
    "INSERT INTO jobvisor_supervisors (id, host, pid, version, started_at, heartbeat_at,"
    " leader, workers) VALUES (%(id)s, %(host)s, %(pid)s, %(version)s,"
    " %(now)s::timestamptz, %(now)s::timestamptz,"
    " %(leader)s, %(workers)s::jsonb)"
    " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,"
    " leader = excluded.leader, workers = excluded.workers"
)

SUPERVISOR_LIST: Final[LiteralString] = (
    # The supervisors heard from within `fresh` seconds, with the database's time.
    "SELECT id, host, pid, version, started_at, heartbeat_at, leader, workers::text,"
    " %(now)s::timestamptz FROM jobvisor_supervisors"
    " WHERE heartbeat_at >= %(now)s::timestamptz"
    "   - %(fresh)s::float8 * interval '1 second'"
    # Unsorted: the caller sorts (a sort priced out by enable_sort would
    # make PostgreSQL compile the plan with its JIT).
)

SUPERVISOR_DELETE: Final[LiteralString] = (
    # A supervisor stopped cleanly: its row goes.
    "DELETE FROM jobvisor_supervisors WHERE id = %(id)s"
)

SUPERVISOR_PRUNE: Final[LiteralString] = (
    # The rows of supervisors silent for more than `age` seconds (killed, host lost).
    "DELETE FROM jobvisor_supervisors WHERE heartbeat_at < %(now)s::timestamptz"
    " - %(age)s::float8 * interval '1 second'"
)

JOB_RUNNING_BY_WORKER: Final[LiteralString] = (
    # How many jobs each worker is running (jobvisor_jobs_lease_idx: running jobs only).
    "SELECT worker_id, count(*) FROM jobvisor_jobs WHERE status = 'running' GROUP BY worker_id"
)

# --- the dashboard's sessions (`queue.web_sessions`) ------------------------------

WEB_SESSION_START: Final[LiteralString] = (
    # A login: its session acts until `ttl` seconds from now, or its logout.
    "INSERT INTO jobvisor_web_sessions (id, expires_at)"
    " VALUES (%(id)s, %(now)s::timestamptz + %(ttl)s::float8 * interval '1 second')"
)

WEB_SESSION_ALIVE: Final[LiteralString] = (
    # Whether a session may still act: logged in, not out, not expired.
    "SELECT 1 FROM jobvisor_web_sessions WHERE id = %(id)s AND expires_at > %(now)s::timestamptz"
)

WEB_SESSION_END: Final[LiteralString] = (
    # A logout: the session acts no more, whichever process it calls.
    "DELETE FROM jobvisor_web_sessions WHERE id = %(id)s"
)

WEB_SESSION_PRUNE: Final[LiteralString] = (
    # The sessions past their expiry, which nothing logged out.
    "DELETE FROM jobvisor_web_sessions WHERE expires_at <= %(now)s::timestamptz"
)
