"""SQLite's statements for a claimed job's outcomes, recovery, retention, dead
jobs, cancellation, pauses, leadership and schedules."""

from __future__ import annotations

from typing import Final, LiteralString

JOB_RENEW_MANY: Final[LiteralString] = (
    # Extend the leases still held by these (id, claim token) pairs, writing
    # the progress each reported since (`progress`: JSON text by id, NULL when
    # none did); returns the renewed ids, each with whether its cancel was
    # requested.
    "UPDATE jobvisor_jobs"
    " SET lease_expires_at = :now + :lease,"
    " progress = coalesce((SELECT r.value FROM json_each(:progress) AS r"
    "   WHERE r.key = jobvisor_jobs.id), progress)"
    " FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token"
    "   FROM json_each(:pairs)) AS c"
    " WHERE jobvisor_jobs.id = c.id AND jobvisor_jobs.claim_token = c.token"
    " AND jobvisor_jobs.status = 'running'"
    " RETURNING jobvisor_jobs.id, jobvisor_jobs.cancel_requested_at IS NOT NULL"
)

JOB_COMPLETE_MANY: Final[LiteralString] = (
    # Complete the jobs still held by these (id, claim token) pairs, each with
    # its result (`results`: JSON text by id, NULL when none has one),
    # cancelled instead when a cancel was requested first; returns their ids.
    "UPDATE jobvisor_jobs SET status = CASE WHEN cancel_requested_at IS NULL"
    "   THEN 'completed' ELSE 'cancelled' END, claim_token = NULL,"
    " lease_expires_at = NULL,"
    " finished_at = :now,"
    " result = CASE WHEN :results IS NOT NULL THEN"
    "   (SELECT r.value FROM json_each(:results) AS r WHERE r.key = jobvisor_jobs.id) END"
    " FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token"
    "   FROM json_each(:pairs)) AS c"
    " WHERE jobvisor_jobs.id = c.id AND jobvisor_jobs.claim_token = c.token"
    " AND jobvisor_jobs.status = 'running'"
    " RETURNING jobvisor_jobs.id"
)

JOB_FAIL: Final[LiteralString] = (
    # A held job failed: retry after `delay` seconds, or dead when attempts are
    # spent (cancelled, keeping the request's text, when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN attempts >= max_attempts THEN 'dead'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'retryable' END,"
    " run_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL THEN run_at"
    "   ELSE :now + :delay END,"
    " finished_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL"
    "   THEN :now END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN :error ELSE last_error END,"
    " claim_token = NULL, lease_expires_at = NULL,"
    # The attempt's entry in the error history, the last 20 kept.
    " errors = json_insert(CASE WHEN json_array_length(coalesce(errors, '[]')) >= 20"
    "   THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END, '$[#]',"
    "   json_object('attempt', attempts,"
    "   'at', :now,"
    "   'error', :error, 'worker_id', worker_id))"
    " WHERE id = :id AND claim_token = :token AND status = 'running'"
    " RETURNING status"
)

JOB_SNOOZE: Final[LiteralString] = (
    # A held job asked to run again after `delay` seconds; the attempt is given
    # back (cancelled instead when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'pending' END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL"
    "   THEN :now END,"
    " attempts = attempts - 1,"
    " run_at = :now + :delay,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE id = :id AND claim_token = :token AND status = 'running'"
    " RETURNING status"
)

JOB_RELEASE_MANY: Final[LiteralString] = (
    # Interrupted through no fault of their own: pending again now, attempts
    # given back (cancelled instead when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'pending' END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL"
    "   THEN :now END,"
    " attempts = attempts - 1,"
    " run_at = :now,"
    " claim_token = NULL, lease_expires_at = NULL"
    " FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token"
    "   FROM json_each(:pairs)) AS c"
    " WHERE jobvisor_jobs.id = c.id AND jobvisor_jobs.claim_token = c.token"
    " AND jobvisor_jobs.status = 'running'"
    " RETURNING jobvisor_jobs.id"
)

JOB_CANCEL_HELD: Final[LiteralString] = (
    # The handler of a held job gave it up for good (a requested cancel keeps
    # the request's text).
    "UPDATE jobvisor_jobs SET status = 'cancelled',"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN :error ELSE last_error END,"
    " finished_at = :now,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE id = :id AND claim_token = :token AND status = 'running'"
    " RETURNING status"
)

JOB_REAP_EXPIRED: Final[LiteralString] = (
    # Running jobs whose lease ran out: retryable with their type's backoff (the
    # policy with a null type is the default), dead when spent, or cancelled
    # when a cancel was requested.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN attempts >= max_attempts THEN 'dead'"
    "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'retryable' END,"
    " run_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL THEN run_at"
    "   ELSE :now + (SELECT"
    "     min(p.cap, p.base * (1 << min(max(jobvisor_jobs.attempts - 1, 0), 62)))"
    # The jitter's draw in [0, 1) is the job's own (`backoff.retry_draw`): the
    # low 16 bits of its id, stepped by 40503 (65536 / golden ratio) per attempt.
    "     * (1 - p.jitter * (((instr('0123456789abcdef', substr(jobvisor_jobs.id, 33, 1)) - 1)"
    "       * 4096 + (instr('0123456789abcdef', substr(jobvisor_jobs.id, 34, 1)) - 1) * 256"
    "       + (instr('0123456789abcdef', substr(jobvisor_jobs.id, 35, 1)) - 1) * 16"
    "       + (instr('0123456789abcdef', substr(jobvisor_jobs.id, 36, 1)) - 1)"
    "       + jobvisor_jobs.attempts * 40503) % 65536 / 65536.0))"
    "     FROM (SELECT json_extract(value, '$[0]') AS job_type,"
    "       json_extract(value, '$[1]') AS base, json_extract(value, '$[2]') AS cap,"
    "       json_extract(value, '$[3]') AS jitter FROM json_each(:policies)) AS p"
    "     WHERE p.job_type = jobvisor_jobs.job_type OR p.job_type IS NULL"
    "     ORDER BY p.job_type IS NULL LIMIT 1) END,"
    " finished_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL"
    "   THEN :now END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL"
    "   THEN 'lease expired on worker ' || worker_id ELSE last_error END,"
    " errors = json_insert(CASE WHEN json_array_length(coalesce(errors, '[]')) >= 20"
    "   THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END, '$[#]',"
    "   json_object('attempt', attempts,"
    "   'at', :now,"
    "   'error', 'lease expired on worker ' || worker_id, 'worker_id', worker_id)),"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running'"
    " AND lease_expires_at < :now"
    " RETURNING id, status, queue, job_type"
)

_crash_charged: Final[LiteralString] = (
    # Whether a dead worker's job is charged the attempt: it is the known
    # culprit; or, with none known, it ran alone there (`alone`), or this is its
    # `crash_limit`-th crash since it was last charged for one.
    "(CASE WHEN :culprit IS NOT NULL THEN id = :culprit"
    " ELSE crashes + 1 >= :crash_limit OR :alone END)"
)

JOB_HELD_BY_WORKER: Final[LiteralString] = (
    # How many jobs a worker holds: whether a dead one ran a job alone is read
    # before JOB_REQUEUE_CRASHED changes any of them.
    "SELECT count(*) FROM jobvisor_jobs WHERE status = 'running' AND worker_id = :worker_id"
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
    "   WHEN :culprit IS NULL THEN crashes + 1 ELSE crashes END,"
    " run_at = CASE WHEN cancel_requested_at IS NOT NULL"
    "   OR (attempts >= max_attempts AND " + _crash_charged + ")"
    "   THEN run_at ELSE :now END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR (attempts >= max_attempts"
    "   AND " + _crash_charged + ") THEN :now END,"
    " last_error = CASE WHEN cancel_requested_at IS NOT NULL"
    "   OR NOT " + _crash_charged + " THEN last_error ELSE :error END,"
    " errors = CASE WHEN NOT " + _crash_charged + " THEN errors"
    "   ELSE json_insert(CASE WHEN json_array_length(coalesce(errors, '[]')) >= 20"
    "   THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END, '$[#]',"
    "   json_object('attempt', attempts,"
    "   'at', :now,"
    "   'error', :error, 'worker_id', worker_id)) END,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running' AND worker_id = :worker_id"
    " RETURNING id, status"
)

JOB_DELETE_FINISHED: Final[LiteralString] = (
    # One batch of terminal jobs of one status finished more than `age` seconds
    # ago, outside batches and workflows (each goes whole: `batches.batch_cleanup`,
    # WORKFLOW_DELETE_FINISHED).
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = :status AND batch_id IS NULL"
    "   AND workflow_id IS NULL"
    "   AND finished_at < :now - :age"
    " LIMIT :limit)"
)

JOB_COUNT_BY_QUEUE_STATUS: Final[LiteralString] = (
    # Job counts by queue and status.
    "SELECT queue, status, count(*) FROM jobvisor_jobs GROUP BY queue, status"
)

JOB_OLDEST_DUE_AGE: Final[LiteralString] = (
    # Per queue, seconds since the oldest claimable job became due.
    "SELECT queue, :now - min(run_at)"
    " FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')"
    " AND run_at <= :now GROUP BY queue"
)

JOB_GET: Final[LiteralString] = (
    # One job by id.
    "SELECT id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at, meta, result, progress, errors, unique_key"
    " FROM jobvisor_jobs WHERE id = :id"
)

JOB_LIST_BY_STATUS: Final[LiteralString] = (
    # Jobs of one status, oldest finished first (then oldest created).
    "SELECT id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at, meta, result, progress, errors, unique_key"
    " FROM jobvisor_jobs WHERE status = :status"
    " AND (:job_type IS NULL OR job_type = :job_type)"
    " ORDER BY finished_at IS NULL, finished_at, id LIMIT :limit"
)

JOB_COUNT_BY_STATUS: Final[LiteralString] = (
    # How many jobs have one status (of one job type, if given).
    "SELECT count(*) FROM jobvisor_jobs WHERE status = :status"
    " AND (:job_type IS NULL OR job_type = :job_type)"
)

JOB_REQUEUE_DEAD: Final[LiteralString] = (
    # A dead job back to pending with its attempts reset, unless a live job holds its dedupe key.
    "UPDATE jobvisor_jobs SET status = 'pending', attempts = 0, finished_at = NULL,"
    " run_at = coalesce(:run_at, :now)"
    " WHERE id = :id AND status = 'dead' AND (dedupe_key IS NULL OR NOT EXISTS ("
    "   SELECT 1 FROM jobvisor_jobs AS live WHERE live.dedupe_key = jobvisor_jobs.dedupe_key"
    "   AND live.status IN ('pending', 'running', 'retryable')))"
    " RETURNING queue"
)

JOB_REQUEUE_DEAD_OF_TYPE: Final[LiteralString] = (
    # One batch of a job type's dead jobs without a dedupe key back to pending,
    # attempts reset; returns each one's queue.
    "UPDATE jobvisor_jobs SET status = 'pending', attempts = 0, finished_at = NULL,"
    " run_at = coalesce(:run_at, :now)"
    " WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = 'dead' AND job_type = :job_type"
    " AND dedupe_key IS NULL LIMIT :limit)"
    " RETURNING queue"
)

JOB_DEAD_WITH_DEDUPE_KEY_OF_TYPE: Final[LiteralString] = (
    # The dead jobs of a job type that have a dedupe key (requeued one by one).
    "SELECT id FROM jobvisor_jobs WHERE status = 'dead' AND job_type = :job_type"
    " AND dedupe_key IS NOT NULL ORDER BY id"
)

JOB_DELETE_DEAD: Final[LiteralString] = (
    # Discard one dead job.
    "DELETE FROM jobvisor_jobs WHERE id = :id AND status = 'dead' RETURNING id"
)

JOB_DELETE_DEAD_OF_TYPE: Final[LiteralString] = (
    # Discard one batch of the dead jobs of a job type.
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = 'dead' AND job_type = :job_type"
    " LIMIT :limit)"
)

JOB_CANCEL: Final[LiteralString] = (
    # Cancel a job waiting to run; ask a running one's worker to stop it (the
    # first request's text is kept). Returns its new status.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
    " finished_at = CASE WHEN status = 'running' THEN finished_at"
    "   ELSE :now END,"
    " cancel_requested_at = CASE WHEN status = 'running' THEN coalesce(cancel_requested_at,"
    "   :now) END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN :error ELSE last_error END"
    " WHERE id = :id AND status IN ('pending', 'retryable', 'running', 'waiting')"
    " RETURNING status, NULL"
)

JOB_CANCEL_MANY: Final[LiteralString] = (
    # JOB_CANCEL over one batch of the live jobs of a job type and/or queue
    # not yet asked to stop; returns each one's new status.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
    " finished_at = CASE WHEN status = 'running' THEN finished_at"
    "   ELSE :now END,"
    " cancel_requested_at = CASE WHEN status = 'running'"
    "   THEN :now END,"
    " last_error = :error"
    " WHERE id IN (SELECT id FROM jobvisor_jobs"
    "   WHERE status IN ('pending', 'retryable', 'running') AND cancel_requested_at IS NULL"
    "   AND (:job_type IS NULL OR job_type = :job_type)"
    "   AND (:queue IS NULL OR queue = :queue) LIMIT :limit)"
    " RETURNING status, NULL"
)

JOB_WAIT_MARK: Final[LiteralString] = (
    # Someone waits for this job (SQLite sends no notices; `wait` polls).
    "UPDATE jobvisor_jobs SET wait_notify = 1 WHERE id = :id AND NOT wait_notify"
    " AND status NOT IN ('completed', 'dead', 'cancelled')"
)

JOB_STATUS: Final[LiteralString] = (
    # The status of one job, to explain a refused change.
    "SELECT status FROM jobvisor_jobs WHERE id = :id"
)

QUEUE_PAUSE_LOCK_TIMEOUT: Final[LiteralString] = (
    # BEGIN IMMEDIATE waits for the write lock up to the busy timeout already.
    "SELECT :lock_timeout"
)

QUEUE_PAUSE_LOCK: Final[LiteralString] = (
    # BEGIN IMMEDIATE already holds the write lock, which every claim needs.
    "SELECT 1"
)

QUEUE_PAUSE: Final[LiteralString] = (
    # Pause a queue (a paused one keeps its first pause time).
    "INSERT INTO jobvisor_queue_pauses (queue, paused_at)"
    " VALUES (:queue, :now)"
    " ON CONFLICT (queue) DO NOTHING"
)

QUEUE_RESUME: Final[LiteralString] = (
    # Resume a queue; returns its name when it was paused.
    "DELETE FROM jobvisor_queue_pauses WHERE queue = :queue RETURNING queue"
)

QUEUE_PAUSED_LIST: Final[LiteralString] = (
    # The paused queues, by name.
    "SELECT queue FROM jobvisor_queue_pauses ORDER BY queue"
)

LEADER_ATTEMPT_ELECT: Final[LiteralString] = (
    # Take or keep the leadership lease; returns a row only to the leader.
    "INSERT INTO jobvisor_leader (name, holder, expires_at)"
    " VALUES (:name, :holder, :now + :ttl)"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
    " expires_at = excluded.expires_at"
    " WHERE jobvisor_leader.holder = excluded.holder"
    "   OR jobvisor_leader.expires_at < :now"
    " RETURNING holder"
)

LEADER_RESIGN: Final[LiteralString] = (
    # Give the leadership up at once so another host need not wait for the lease.
    "DELETE FROM jobvisor_leader WHERE name = :name AND holder = :holder"
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
    " VALUES (:name, :spec, :timezone, :job_type, :queue, :priority,"
    " :payload, :catch_up, :next_run_at, 1,"
    " :now)"
    " ON CONFLICT (name) DO UPDATE SET job_type = excluded.job_type,"
    " queue = excluded.queue, priority = excluded.priority, payload = excluded.payload,"
    " catch_up = excluded.catch_up, updated_at = excluded.updated_at,"
    " next_run_at = CASE WHEN NOT jobvisor_schedules.enabled"
    "   OR jobvisor_schedules.spec <> excluded.spec"
    "   OR jobvisor_schedules.timezone <> excluded.timezone"
    "   THEN excluded.next_run_at ELSE jobvisor_schedules.next_run_at END,"
    " spec = excluded.spec, timezone = excluded.timezone, enabled = 1"
)

SCHEDULE_DISABLE_UNDECLARED: Final[LiteralString] = (
    # Keep the rows of schedules the code no longer declares, disabled.
    "UPDATE jobvisor_schedules SET enabled = 0,"
    " updated_at = :now"
    " WHERE enabled AND name NOT IN (SELECT value FROM json_each(coalesce(:names, '[]')))"
)

SCHEDULE_LIST: Final[LiteralString] = (
    # Every schedule, by name.
    "SELECT " + SCHEDULE_COLUMNS + " FROM jobvisor_schedules ORDER BY name"
)

SCHEDULE_GET: Final[LiteralString] = (
    # One schedule by name.
    "SELECT " + SCHEDULE_COLUMNS + " FROM jobvisor_schedules WHERE name = :name"
)

SCHEDULE_ENABLED: Final[LiteralString] = (
    # The enabled schedules' next ticks, with the database's time. Unsorted,
    # as on PostgreSQL: the caller sorts.
    "SELECT name, next_run_at, :now FROM jobvisor_schedules WHERE enabled"
)

SCHEDULE_ADVANCE: Final[LiteralString] = (
    # Move a schedule past the ticks being enqueued, only if no one did it first.
    "UPDATE jobvisor_schedules SET next_run_at = :next_run_at,"
    " last_run_at = coalesce(:last_run_at, last_run_at)"
    " WHERE name = :name AND next_run_at = :expected AND enabled"
)

DB_OLDEST_XMIN: Final[LiteralString] = (
    # SQLite keeps no transaction horizon that holds rows back: no row.
    "SELECT 0, '', '', '', 0.0 WHERE 0"
)
