"""PostgreSQL's statements for a claimed job's outcomes, recovery, retention,
dead jobs, cancellation, pauses, leadership and schedules."""

from __future__ import annotations

from typing import Final, LiteralString

from .intake import NOTIFY_CHANNEL

JOB_RENEW_MANY: Final[LiteralString] = (
    # Extend the leases still held by these (id, claim token) pairs, writing
    # the progress each reported since (`progress` NULL: none did); returns
    # the renewed ids, each with whether its cancel was requested.
    "UPDATE jobvisor_jobs AS j"
    " SET lease_expires_at = %(now)s::timestamptz"
    "   + %(lease)s::float8 * interval '1 second',"
    " progress = coalesce(c.progress, j.progress)"
    " FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(progress)s::jsonb[])"
    "   AS c(id, token, progress)"
    " WHERE j.id = c.id AND j.claim_token = c.token AND j.status = 'running'"
    " RETURNING j.id, j.cancel_requested_at IS NOT NULL"
)

JOB_COMPLETE_MANY: Final[LiteralString] = (
    # Complete the jobs still held by these (id, claim token) pairs, each with
    # its result (`results` NULL: none has one), cancelled instead when a
    # cancel was requested first; returns their ids.
    "UPDATE jobvisor_jobs AS j SET status = CASE WHEN j.cancel_requested_at IS NULL"
    "   THEN 'completed' ELSE 'cancelled' END, claim_token = NULL,"
    " lease_expires_at = NULL, finished_at = %(now)s::timestamptz,"
    " result = c.result"
    " FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(results)s::jsonb[])"
    "   AS c(id, token, result)"
    " WHERE j.id = c.id AND j.claim_token = c.token AND j.status = 'running'"
    # A job someone waits for sends its notice (at commit); the others none.
    " RETURNING j.id, CASE WHEN j.wait_notify THEN pg_notify('" + NOTIFY_CHANNEL + "',"
    "   json_build_object('kind', 'done', 'queue', j.queue, 'id', j.id)::text) END,"
    # A limited job frees a slot: idle workers of its queue claim again.
    " CASE WHEN j.job_type = ANY(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'type'))"
    "   OR j.queue = ANY(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'queue'))"
    "   THEN pg_notify('" + NOTIFY_CHANNEL + "', j.queue) END"
)

JOB_FAIL: Final[LiteralString] = (
    # A held job failed: retry after `delay` seconds, or dead when attempts are
    # spent (cancelled, keeping the request's text, when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN attempts >= max_attempts THEN 'dead'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'retryable' END,"
    " run_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL THEN run_at"
    "   ELSE %(now)s::timestamptz + %(delay)s::float8 * interval '1 second' END,"
    " finished_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL"
    "   THEN %(now)s::timestamptz END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN %(error)s ELSE last_error END,"
    " claim_token = NULL, lease_expires_at = NULL,"
    # The attempt's entry in the error history, the last 20 kept.
    " errors = CASE WHEN jsonb_array_length(coalesce(errors, '[]')) >= 20 THEN errors - 0"
    "   ELSE coalesce(errors, '[]') END || jsonb_build_array(jsonb_build_object("
    "   'attempt', attempts, 'at', %(now)s::timestamptz,"
    "   'error', %(error)s::text, 'worker_id', worker_id))"
    " WHERE id = %(id)s AND claim_token = %(token)s AND status = 'running'"
    " RETURNING status, CASE WHEN wait_notify AND status = 'dead' THEN pg_notify('"
    + NOTIFY_CHANNEL
    + "', json_build_object('kind', 'done', 'queue', queue, 'id', id)::text) END,"
    # A limited job frees a slot: idle workers of its queue claim again.
    " CASE WHEN job_type = ANY(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'type'))"
    "   OR queue = ANY(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'queue'))"
    "   THEN pg_notify('" + NOTIFY_CHANNEL + "', queue) END"
)

JOB_SNOOZE: Final[LiteralString] = (
    # A held job asked to run again after `delay` seconds; the attempt is given
    # back (cancelled instead when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'pending' END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL"
    "   THEN %(now)s::timestamptz END, attempts = attempts - 1,"
    " run_at = %(now)s::timestamptz + %(delay)s::float8 * interval '1 second',"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE id = %(id)s AND claim_token = %(token)s AND status = 'running'"
    " RETURNING status"
)

JOB_RELEASE_MANY: Final[LiteralString] = (
    # Interrupted through no fault of their own: pending again now, attempts
    # given back (cancelled instead when a cancel was requested).
    "UPDATE jobvisor_jobs AS j SET"
    " status = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN j.waiting_on > 0 THEN 'waiting' ELSE 'pending' END,"
    " finished_at = CASE WHEN j.cancel_requested_at IS NOT NULL"
    "   THEN %(now)s::timestamptz END, attempts = j.attempts - 1,"
    " run_at = %(now)s::timestamptz, claim_token = NULL,"
    " lease_expires_at = NULL"
    " FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS c(id, token)"
    " WHERE j.id = c.id AND j.claim_token = c.token AND j.status = 'running'"
    " RETURNING j.id"
)

JOB_CANCEL_HELD: Final[LiteralString] = (
    # The handler of a held job gave it up for good (a requested cancel keeps
    # the request's text).
    "UPDATE jobvisor_jobs SET status = 'cancelled',"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN %(error)s ELSE last_error END,"
    " finished_at = %(now)s::timestamptz,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE id = %(id)s AND claim_token = %(token)s AND status = 'running'"
    " RETURNING status"
)

JOB_REAP_EXPIRED: Final[LiteralString] = (
    # Running jobs whose lease ran out: retryable with their type's backoff (the
    # policy with a NULL type is the default), dead when spent, or cancelled
    # when a cancel was requested.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN attempts >= max_attempts THEN 'dead'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'retryable' END,"
    " run_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL THEN run_at"
    "   ELSE %(now)s::timestamptz + (SELECT least(p.cap, p.base"
    "     * power(2::float8, least(greatest(jobvisor_jobs.attempts - 1, 0), 62)))"
    # The jitter's draw in [0, 1) is the job's own (`backoff.retry_draw`): the
    # low 16 bits of its id, stepped by 40503 (65536 / golden ratio) per attempt.
    "     * (1 - p.jitter * (((('x' || right(jobvisor_jobs.id::text, 4))::bit(16)::int"
    "       + jobvisor_jobs.attempts::bigint * 40503) %% 65536)::float8 / 65536))"
    "     FROM unnest(%(policy_types)s::text[], %(policy_bases)s::float8[],"
    "       %(policy_caps)s::float8[], %(policy_jitters)s::float8[])"
    "       AS p(job_type, base, cap, jitter)"
    "     WHERE p.job_type = jobvisor_jobs.job_type OR p.job_type IS NULL"
    "     ORDER BY p.job_type IS NULL LIMIT 1) * interval '1 second' END,"
    " finished_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL"
    "   THEN %(now)s::timestamptz END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL"
    "   THEN 'lease expired on worker ' || worker_id ELSE last_error END,"
    " errors = CASE WHEN jsonb_array_length(coalesce(errors, '[]')) >= 20 THEN errors - 0"
    "   ELSE coalesce(errors, '[]') END || jsonb_build_array(jsonb_build_object("
    "   'attempt', attempts, 'at', %(now)s::timestamptz,"
    "   'error', 'lease expired on worker ' || worker_id, 'worker_id', worker_id)),"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running' AND lease_expires_at < %(now)s::timestamptz"
    " RETURNING id, status, queue, job_type"
)

_crash_charged: Final[LiteralString] = (
    # Whether a dead worker's job is charged the attempt: it is the known
    # culprit; or, with none known, it ran alone there (`alone`), or this is its
    # `crash_limit`-th crash since it was last charged for one.
    "(CASE WHEN %(culprit)s::uuid IS NOT NULL THEN id = %(culprit)s::uuid"
    " ELSE crashes + 1 >= %(crash_limit)s OR %(alone)s::boolean END)"
)

JOB_HELD_BY_WORKER: Final[LiteralString] = (
    # How many jobs a worker holds: whether a dead one ran a job alone is read
    # before JOB_REQUEUE_CRASHED changes any of them.
    "SELECT count(*) FROM jobvisor_jobs WHERE status = 'running' AND worker_id = %(worker_id)s"
)

JOB_REQUEUE_CRASHED: Final[LiteralString] = (
    # Every job a dead worker held. A charged job (see _crash_charged) is
    # retryable now (attempt counted), or dead when spent; the others were
    # interrupted by someone else's fault: pending now, attempts given back,
    # error kept, and with no culprit known one more crash counted.
    # A job whose cancel was requested ends cancelled, keeping the request's text.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN NOT " + _crash_charged + ""
    "   THEN CASE WHEN waiting_on > 0 THEN 'waiting' ELSE 'pending' END"
    "   WHEN attempts >= max_attempts THEN 'dead'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'retryable' END,"
    " attempts = CASE WHEN " + _crash_charged + " THEN attempts ELSE attempts - 1 END,"
    " crashes = CASE WHEN " + _crash_charged + " THEN 0"
    "   WHEN %(culprit)s::uuid IS NULL THEN crashes + 1 ELSE crashes END,"
    " run_at = CASE WHEN cancel_requested_at IS NOT NULL OR (attempts >= max_attempts"
    "   AND " + _crash_charged + ") THEN run_at ELSE %(now)s::timestamptz END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR (attempts >= max_attempts"
    "   AND " + _crash_charged + ") THEN %(now)s::timestamptz END,"
    " last_error = CASE WHEN cancel_requested_at IS NOT NULL OR NOT " + _crash_charged + ""
    "   THEN last_error ELSE %(error)s END,"
    " errors = CASE WHEN NOT " + _crash_charged + ""
    "   THEN errors WHEN jsonb_array_length(coalesce(errors, '[]')) >= 20 THEN errors - 0"
    "   ELSE coalesce(errors, '[]') END || CASE WHEN NOT " + _crash_charged + ""
    "   THEN '[]' ELSE jsonb_build_array(jsonb_build_object("
    "   'attempt', attempts, 'at', %(now)s::timestamptz,"
    "   'error', %(error)s::text, 'worker_id', worker_id)) END,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running' AND worker_id = %(worker_id)s"
    " RETURNING id, status"
)

JOB_DELETE_FINISHED: Final[LiteralString] = (
    # One batch of terminal jobs of one status finished more than `age` seconds
    # ago, outside batches and workflows (each goes whole: `batches.batch_cleanup`,
    # WORKFLOW_DELETE_FINISHED).
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = %(status)s AND batch_id IS NULL"
    "   AND workflow_id IS NULL"
    "   AND finished_at < %(now)s::timestamptz - %(age)s::float8"
    "   * interval '1 second'"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
)

JOB_COUNT_BY_QUEUE_STATUS: Final[LiteralString] = (
    # Job counts by queue and status.
    "SELECT queue, status, count(*) FROM jobvisor_jobs GROUP BY queue, status"
)

JOB_OLDEST_DUE_AGE: Final[LiteralString] = (
    # Per queue, seconds since the oldest claimable job became due.
    "SELECT queue, extract(epoch FROM %(now)s::timestamptz - min(run_at))"
    " FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')"
    " AND run_at <= %(now)s::timestamptz GROUP BY queue"
)

JOB_GET: Final[LiteralString] = (
    # One job by id.
    "SELECT id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at, meta, result, progress, errors, unique_key"
    " FROM jobvisor_jobs WHERE id = %(id)s"
)

JOB_LIST_BY_STATUS: Final[LiteralString] = (
    # Jobs of one status, oldest finished first (then oldest created).
    "SELECT id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at, meta, result, progress, errors, unique_key"
    " FROM jobvisor_jobs WHERE status = %(status)s"
    " AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)"
    " ORDER BY finished_at NULLS LAST, id LIMIT %(limit)s"
)

JOB_COUNT_BY_STATUS: Final[LiteralString] = (
    # How many jobs have one status (of one job type, if given).
    "SELECT count(*) FROM jobvisor_jobs WHERE status = %(status)s"
    " AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)"
)

JOB_REQUEUE_DEAD: Final[LiteralString] = (
    # A dead job back to pending with its attempts reset, unless a live job holds its dedupe key.
    "UPDATE jobvisor_jobs SET status = 'pending', attempts = 0, finished_at = NULL,"
    " run_at = coalesce(%(run_at)s::timestamptz, %(now)s::timestamptz)"
    " WHERE id = %(id)s AND status = 'dead' AND (dedupe_key IS NULL OR NOT EXISTS ("
    "   SELECT 1 FROM jobvisor_jobs AS live WHERE live.dedupe_key = jobvisor_jobs.dedupe_key"
    "   AND live.status IN ('pending', 'running', 'retryable')))"
    " RETURNING queue"
)

JOB_REQUEUE_DEAD_OF_TYPE: Final[LiteralString] = (
    # One batch of a job type's dead jobs without a dedupe key back to pending,
    # attempts reset; returns each one's queue.
    "UPDATE jobvisor_jobs SET status = 'pending', attempts = 0, finished_at = NULL,"
    " run_at = coalesce(%(run_at)s::timestamptz, %(now)s::timestamptz)"
    " WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = 'dead' AND job_type = %(job_type)s"
    " AND dedupe_key IS NULL LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
    " RETURNING queue"
)

JOB_DEAD_WITH_DEDUPE_KEY_OF_TYPE: Final[LiteralString] = (
    # The dead jobs of a job type that have a dedupe key (requeued one by one).
    "SELECT id FROM jobvisor_jobs WHERE status = 'dead' AND job_type = %(job_type)s"
    " AND dedupe_key IS NOT NULL ORDER BY id"
)

JOB_DELETE_DEAD: Final[LiteralString] = (
    # Discard one dead job.
    "DELETE FROM jobvisor_jobs WHERE id = %(id)s AND status = 'dead' RETURNING id"
)

JOB_DELETE_DEAD_OF_TYPE: Final[LiteralString] = (
    # Discard one batch of the dead jobs of a job type.
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = 'dead' AND job_type = %(job_type)s"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
)

JOB_CANCEL: Final[LiteralString] = (
    # Cancel a job waiting to run; ask a running one's worker to stop it (the
    # first request's text is kept, each request notifies). Returns its new status.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
    " finished_at = CASE WHEN status = 'running' THEN finished_at"
    "   ELSE %(now)s::timestamptz END,"
    " cancel_requested_at = CASE WHEN status = 'running' THEN coalesce(cancel_requested_at,"
    "   %(now)s::timestamptz) END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN %(error)s ELSE last_error END"
    " WHERE id = %(id)s AND status IN ('pending', 'retryable', 'running', 'waiting')"
    " RETURNING status, CASE WHEN status = 'running' THEN pg_notify('" + NOTIFY_CHANNEL + "',"
    "   json_build_object('kind', 'cancel', 'queue', queue, 'id', id)::text) END"
)

JOB_CANCEL_MANY: Final[LiteralString] = (
    # JOB_CANCEL over one batch of the live jobs of a job type and/or queue
    # not yet asked to stop; returns each one's new status.
    "WITH picked AS ("
    " SELECT id FROM jobvisor_jobs WHERE status IN ('pending', 'retryable', 'running')"
    "   AND cancel_requested_at IS NULL"
    "   AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)"
    "   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
    " UPDATE jobvisor_jobs AS j SET"
    " status = CASE WHEN j.status = 'running' THEN j.status ELSE 'cancelled' END,"
    " finished_at = CASE WHEN j.status = 'running' THEN j.finished_at"
    "   ELSE %(now)s::timestamptz END,"
    " cancel_requested_at = CASE WHEN j.status = 'running'"
    "   THEN %(now)s::timestamptz END,"
    " last_error = %(error)s"
    " FROM picked WHERE j.id = picked.id"
    " RETURNING j.status, CASE WHEN j.status = 'running' THEN pg_notify('" + NOTIFY_CHANNEL + "',"
    "   json_build_object('kind', 'cancel', 'queue', j.queue, 'id', j.id)::text) END"
)

JOB_WAIT_MARK: Final[LiteralString] = (
    # Someone waits for this job: its completion or death will send a notice.
    "UPDATE jobvisor_jobs SET wait_notify = true WHERE id = %(id)s AND NOT wait_notify"
    " AND status NOT IN ('completed', 'dead', 'cancelled')"
)

JOB_STATUS: Final[LiteralString] = (
    # The status of one job, to explain a refused change.
    "SELECT status FROM jobvisor_jobs WHERE id = %(id)s"
)

QUEUE_PAUSE_LOCK_TIMEOUT: Final[LiteralString] = (
    # How long QUEUE_PAUSE_LOCK may wait, for this transaction only: claims
    # queue up behind it, so a long transaction holding the table (pg_dump)
    # makes the pause fail rather than stop every claim for as long.
    "SELECT set_config('lock_timeout', %(lock_timeout)s, true)"
)

QUEUE_PAUSE_LOCK: Final[LiteralString] = (
    # Wait for every claim in flight and hold new ones until this transaction
    # commits: a claim that waited takes its snapshot after the commit, so it
    # sees the pause (every claim reads the pause table, and this lock
    # conflicts with that read).
    "LOCK TABLE jobvisor_queue_pauses IN ACCESS EXCLUSIVE MODE"
)

QUEUE_PAUSE: Final[LiteralString] = (
    # Pause a queue (a paused one keeps its first pause time). The time is
    # taken after the lock: every claim that began later saw the pause.
    "INSERT INTO jobvisor_queue_pauses (queue, paused_at)"
    " VALUES (%(queue)s, %(now)s::timestamptz)"
    " ON CONFLICT (queue) DO NOTHING"
)

QUEUE_RESUME: Final[LiteralString] = (
    # Resume a queue; returns its name when it was paused.
    "DELETE FROM jobvisor_queue_pauses WHERE queue = %(queue)s RETURNING queue"
)

QUEUE_PAUSED_LIST: Final[LiteralString] = (
    # The paused queues, by name.
    "SELECT queue FROM jobvisor_queue_pauses ORDER BY queue"
)

LEADER_ATTEMPT_ELECT: Final[LiteralString] = (
    # Take or keep the leadership lease; returns a row only to the leader.
    "INSERT INTO jobvisor_leader (name, holder, expires_at)"
    " VALUES (%(name)s, %(holder)s, %(now)s::timestamptz"
    "   + %(ttl)s::float8 * interval '1 second')"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
    " expires_at = excluded.expires_at"
    " WHERE jobvisor_leader.holder = excluded.holder"
    "   OR jobvisor_leader.expires_at < %(now)s::timestamptz"
    " RETURNING holder"
)

LEADER_RESIGN: Final[LiteralString] = (
    # Give the leadership up at once so another host need not wait for the lease.
    "DELETE FROM jobvisor_leader WHERE name = %(name)s AND holder = %(holder)s"
)

SCHEDULE_COLUMNS: Final[LiteralString] = (
    "name, spec, timezone, next_run_at, last_run_at, enabled,"
    " job_type, queue, priority, payload, catch_up"
)

SCHEDULE_UPSERT: Final[LiteralString] = (
    # Write a declared schedule; its next tick is kept unless the spec or zone
    # changed or it comes back from disabled (then the new first tick counts).
    "INSERT INTO jobvisor_schedules (name, spec, timezone, job_type, queue, priority,"
    " payload, catch_up, next_run_at, enabled, updated_at)"
    " VALUES (%(name)s, %(spec)s, %(timezone)s, %(job_type)s, %(queue)s, %(priority)s,"
    " %(payload)s, %(catch_up)s, %(next_run_at)s, true, %(now)s::timestamptz)"
    " ON CONFLICT (name) DO UPDATE SET job_type = excluded.job_type,"
    " queue = excluded.queue, priority = excluded.priority, payload = excluded.payload,"
    " catch_up = excluded.catch_up, updated_at = excluded.updated_at,"
    " next_run_at = CASE WHEN NOT jobvisor_schedules.enabled"
    "   OR jobvisor_schedules.spec <> excluded.spec"
    "   OR jobvisor_schedules.timezone <> excluded.timezone"
    "   THEN excluded.next_run_at ELSE jobvisor_schedules.next_run_at END,"
    " spec = excluded.spec, timezone = excluded.timezone, enabled = true"
)

SCHEDULE_DISABLE_UNDECLARED: Final[LiteralString] = (
    # Keep the rows of schedules the code no longer declares, disabled.
    "UPDATE jobvisor_schedules SET enabled = false,"
    " updated_at = %(now)s::timestamptz"
    " WHERE enabled AND NOT (name = ANY(coalesce(%(names)s::text[], '{}')))"
)

SCHEDULE_LIST: Final[LiteralString] = (
    # Every schedule, by name.
    "SELECT " + SCHEDULE_COLUMNS + " FROM jobvisor_schedules ORDER BY name"
)

SCHEDULE_GET: Final[LiteralString] = (
    # One schedule by name.
    "SELECT " + SCHEDULE_COLUMNS + " FROM jobvisor_schedules WHERE name = %(name)s"
)

SCHEDULE_ENABLED: Final[LiteralString] = (
    # The enabled schedules' next ticks, with the database's time. Unsorted:
    # the sort, priced out on our sessions (enable_sort), would make the plan
    # costly enough for PostgreSQL's JIT (a 100 ms compile for a few rows).
    "SELECT name, next_run_at, %(now)s::timestamptz FROM jobvisor_schedules WHERE enabled"
)

SCHEDULE_ADVANCE: Final[LiteralString] = (
    # Move a schedule past the ticks being enqueued, only if no one did it first.
    "UPDATE jobvisor_schedules SET next_run_at = %(next_run_at)s,"
    " last_run_at = coalesce(%(last_run_at)s::timestamptz, last_run_at)"
    " WHERE name = %(name)s AND next_run_at = %(expected)s AND enabled"
)

DB_OLDEST_XMIN: Final[LiteralString] = (
    # The other backend whose snapshot or transaction id is the oldest (it
    # holds VACUUM's horizon back), with its transaction's age: one of this
    # database, or one of any database that has a transaction id, since every
    # snapshot taken here carries the server's oldest running transaction id
    # as its xmin. On a tie (this database's sessions carry that xmin too) the
    # oldest transaction is named. Rows of other roles' sessions read NULL
    # without pg_read_all_stats.
    "SELECT pid, coalesce(application_name, ''), coalesce(state, ''),"
    " coalesce(backend_type, ''), coalesce(extract(epoch FROM now() - xact_start), 0)"
    " FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
    " AND (backend_xid IS NOT NULL"
    "   OR (datname = current_database() AND backend_xmin IS NOT NULL))"
    " ORDER BY greatest(age(backend_xid), age(backend_xmin)) DESC, xact_start LIMIT 1"
)
