"""Every statement the PostgreSQL engine runs. The SQLite module defines the
same names. `%(now)s` is the injected clock: NULL means the database's own.

Values are always parameters; no statement is built at run time."""

from typing import Final, LiteralString

# The one channel every jobvisor notice travels on (see `queue.notices`): its
# payload is a queue name for a new job, or a JSON object for other kinds.
NOTIFY_CHANNEL: Final = "jobvisor"

LISTEN: Final[LiteralString] = (
    # Subscribe this session to every notice.
    "LISTEN " + NOTIFY_CHANNEL
)

MIGRATION_LOCK: Final[LiteralString] = (
    # Serialise concurrent migrate() calls for the rest of the transaction.
    "SELECT pg_advisory_xact_lock(7428930915630210)"
)

MIGRATIONS_TABLE_CREATE: Final[LiteralString] = (
    # The record of applied schema versions.
    "CREATE TABLE IF NOT EXISTS jobvisor_migrations ("
    " version integer PRIMARY KEY, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())"
)

MIGRATIONS_APPLIED: Final[LiteralString] = (
    # Versions already applied.
    "SELECT version FROM jobvisor_migrations ORDER BY version"
)

MIGRATION_RECORD: Final[LiteralString] = (
    # Record one applied version.
    "INSERT INTO jobvisor_migrations (version, name) VALUES (%(version)s, %(name)s)"
)

MIGRATIONS_TABLE_EXISTS: Final[LiteralString] = (
    # Whether the record of schema versions exists, without creating it.
    "SELECT to_regclass('jobvisor_migrations') IS NOT NULL"
)

CLOCK_NOW: Final[LiteralString] = (
    # The time every other statement of this transaction would use.
    "SELECT coalesce(%(now)s::timestamptz, now())"
)

JOB_COLUMNS_COPY: Final[LiteralString] = (
    # Bulk insert; rows carry every column JOB_INSERT sets.
    "COPY jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,"
    " dedupe_key, correlation_id, created_at, meta) FROM STDIN"
)

JOB_INSERT: Final[LiteralString] = (
    # Insert one job unless a live job has its dedupe key; returns the new id or
    # nothing. With `notify`, a new job wakes idle workers (at its commit).
    "WITH inserted AS ("
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, dedupe_key, correlation_id, created_at, meta)"
    " VALUES (%(id)s, %(queue)s, %(job_type)s, %(payload)s::jsonb, %(priority)s,"
    " coalesce(%(run_at)s::timestamptz, coalesce(%(now)s::timestamptz, now())"
    "   + coalesce(%(delay)s::float8, 0) * interval '1 second'),"
    " %(max_attempts)s, %(dedupe_key)s, %(correlation_id)s,"
    " coalesce(%(now)s::timestamptz, now()), %(meta)s::jsonb)"
    " ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL"
    "   AND status IN ('pending', 'running', 'retryable') DO NOTHING"
    " RETURNING id, queue)"
    " SELECT id, CASE WHEN %(notify)s::bool THEN pg_notify('" + NOTIFY_CHANNEL + "', queue) END"
    " FROM inserted"
)

JOB_GET_LIVE_BY_DEDUPE_KEY: Final[LiteralString] = (
    # The live job holding a dedupe key.
    "SELECT id FROM jobvisor_jobs WHERE dedupe_key = %(dedupe_key)s"
    " AND status IN ('pending', 'running', 'retryable')"
)

JOB_NOTIFY: Final[LiteralString] = (
    # Wake idle workers; identical notifications in one transaction are sent once.
    "SELECT pg_notify('" + NOTIFY_CHANNEL + "', %(queue)s)"
)

JOB_CLAIM: Final[LiteralString] = (
    # Claim up to `limit` due jobs in priority order, skipping rows others hold.
    "WITH picked AS ("
    " SELECT id FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable')"
    "   AND run_at <= coalesce(%(now)s::timestamptz, now())"
    "   AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))"
    "   AND (%(job_types)s::text[] IS NULL OR job_type = ANY(%(job_types)s::text[]))"
    " ORDER BY priority DESC, run_at, id"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
    " UPDATE jobvisor_jobs AS j SET status = 'running', attempts = j.attempts + 1,"
    " claim_token = gen_random_uuid(), worker_id = %(worker_id)s,"
    " lease_expires_at = coalesce(%(now)s::timestamptz, now())"
    "   + %(lease)s::float8 * interval '1 second',"
    " started_at = coalesce(%(now)s::timestamptz, now())"
    " FROM picked WHERE j.id = picked.id"
    " RETURNING j.id, j.queue, j.job_type, j.payload, j.priority, j.run_at, j.status,"
    " j.attempts, j.max_attempts, j.last_error, j.correlation_id, j.dedupe_key,"
    " j.lease_expires_at, j.claim_token, j.worker_id, j.created_at, j.started_at,"
    " j.finished_at, j.meta"
)

JOB_RENEW_MANY: Final[LiteralString] = (
    # Extend the leases still held by these (id, claim token) pairs; returns the
    # renewed ids, each with whether its cancel was requested.
    "UPDATE jobvisor_jobs AS j"
    " SET lease_expires_at = coalesce(%(now)s::timestamptz, now())"
    "   + %(lease)s::float8 * interval '1 second'"
    " FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS c(id, token)"
    " WHERE j.id = c.id AND j.claim_token = c.token AND j.status = 'running'"
    " RETURNING j.id, j.cancel_requested_at IS NOT NULL"
)

JOB_COMPLETE_MANY: Final[LiteralString] = (
    # Complete the jobs still held by these (id, claim token) pairs (cancelled
    # instead when a cancel was requested first); returns their ids.
    "UPDATE jobvisor_jobs AS j SET status = CASE WHEN j.cancel_requested_at IS NULL"
    "   THEN 'completed' ELSE 'cancelled' END, claim_token = NULL,"
    " lease_expires_at = NULL, finished_at = coalesce(%(now)s::timestamptz, now())"
    " FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS c(id, token)"
    " WHERE j.id = c.id AND j.claim_token = c.token AND j.status = 'running'"
    " RETURNING j.id"
)

JOB_FAIL: Final[LiteralString] = (
    # A held job failed: retry after `delay` seconds, or dead when attempts are
    # spent (cancelled, keeping the request's text, when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
    " run_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL THEN run_at"
    "   ELSE coalesce(%(now)s::timestamptz, now()) + %(delay)s::float8 * interval '1 second' END,"
    " finished_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL"
    "   THEN coalesce(%(now)s::timestamptz, now()) END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN %(error)s ELSE last_error END,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE id = %(id)s AND claim_token = %(token)s AND status = 'running'"
    " RETURNING status"
)

JOB_SNOOZE: Final[LiteralString] = (
    # A held job asked to run again after `delay` seconds; the attempt is given
    # back (cancelled instead when a cancel was requested).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL"
    "   THEN coalesce(%(now)s::timestamptz, now()) END, attempts = attempts - 1,"
    " run_at = coalesce(%(now)s::timestamptz, now()) + %(delay)s::float8 * interval '1 second',"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE id = %(id)s AND claim_token = %(token)s AND status = 'running'"
    " RETURNING status"
)

JOB_RELEASE_MANY: Final[LiteralString] = (
    # Interrupted through no fault of their own: pending again now, attempts
    # given back (cancelled instead when a cancel was requested).
    "UPDATE jobvisor_jobs AS j SET"
    " status = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
    " finished_at = CASE WHEN j.cancel_requested_at IS NOT NULL"
    "   THEN coalesce(%(now)s::timestamptz, now()) END, attempts = j.attempts - 1,"
    " run_at = coalesce(%(now)s::timestamptz, now()), claim_token = NULL,"
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
    " finished_at = coalesce(%(now)s::timestamptz, now()),"
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
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
    " run_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL THEN run_at"
    "   ELSE coalesce(%(now)s::timestamptz, now()) + (SELECT least(p.cap, p.base"
    "     * power(2::float8, least(greatest(jobvisor_jobs.attempts - 1, 0), 62)))"
    "     * (1 - p.jitter * random())"
    "     FROM unnest(%(policy_types)s::text[], %(policy_bases)s::float8[],"
    "       %(policy_caps)s::float8[], %(policy_jitters)s::float8[])"
    "       AS p(job_type, base, cap, jitter)"
    "     WHERE p.job_type = jobvisor_jobs.job_type OR p.job_type IS NULL"
    "     ORDER BY p.job_type IS NULL LIMIT 1) * interval '1 second' END,"
    " finished_at = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL"
    "   THEN coalesce(%(now)s::timestamptz, now()) END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL"
    "   THEN 'lease expired on worker ' || worker_id ELSE last_error END,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running' AND lease_expires_at < coalesce(%(now)s::timestamptz, now())"
    " RETURNING id, status, queue, job_type"
)

JOB_REQUEUE_CRASHED: Final[LiteralString] = (
    # Every job a dead worker held: retryable now (attempt counted), or dead
    # when spent. With a `culprit`, only that job is charged; the others were
    # interrupted by its fault: pending now, attempts given back, error kept.
    # A job whose cancel was requested ends cancelled, keeping the request's text.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN %(culprit)s::uuid IS NOT NULL AND id <> %(culprit)s::uuid"
    "   THEN 'pending' WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
    " attempts = CASE WHEN %(culprit)s::uuid IS NOT NULL AND id <> %(culprit)s::uuid"
    "   THEN attempts - 1 ELSE attempts END,"
    " run_at = CASE WHEN cancel_requested_at IS NOT NULL OR (attempts >= max_attempts"
    "   AND (%(culprit)s::uuid IS NULL OR id = %(culprit)s::uuid)) THEN run_at"
    "   ELSE coalesce(%(now)s::timestamptz, now()) END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR (attempts >= max_attempts"
    "   AND (%(culprit)s::uuid IS NULL OR id = %(culprit)s::uuid))"
    "   THEN coalesce(%(now)s::timestamptz, now()) END,"
    " last_error = CASE WHEN cancel_requested_at IS NOT NULL OR (%(culprit)s::uuid IS NOT NULL"
    "   AND id <> %(culprit)s::uuid) THEN last_error ELSE %(error)s END,"
    " claim_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running' AND worker_id = %(worker_id)s"
    " RETURNING id, status"
)

JOB_DELETE_FINISHED: Final[LiteralString] = (
    # One batch of terminal jobs of one status finished more than `age` seconds ago.
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = %(status)s"
    "   AND finished_at < coalesce(%(now)s::timestamptz, now()) - %(age)s::float8"
    "   * interval '1 second'"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
)

JOB_COUNT_BY_QUEUE_STATUS: Final[LiteralString] = (
    # Job counts by queue and status.
    "SELECT queue, status, count(*) FROM jobvisor_jobs GROUP BY queue, status"
)

JOB_OLDEST_DUE_AGE: Final[LiteralString] = (
    # Per queue, seconds since the oldest claimable job became due.
    "SELECT queue, extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - min(run_at))"
    " FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')"
    " AND run_at <= coalesce(%(now)s::timestamptz, now()) GROUP BY queue"
)

JOB_GET: Final[LiteralString] = (
    # One job by id.
    "SELECT id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at, meta FROM jobvisor_jobs WHERE id = %(id)s"
)

JOB_LIST_BY_STATUS: Final[LiteralString] = (
    # Jobs of one status, oldest finished first (then oldest created).
    "SELECT id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at, meta FROM jobvisor_jobs WHERE status = %(status)s"
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
    " run_at = coalesce(%(run_at)s::timestamptz, coalesce(%(now)s::timestamptz, now()))"
    " WHERE id = %(id)s AND status = 'dead' AND (dedupe_key IS NULL OR NOT EXISTS ("
    "   SELECT 1 FROM jobvisor_jobs AS live WHERE live.dedupe_key = jobvisor_jobs.dedupe_key"
    "   AND live.status IN ('pending', 'running', 'retryable')))"
    " RETURNING queue"
)

JOB_REQUEUE_DEAD_OF_TYPE: Final[LiteralString] = (
    # One batch of a job type's dead jobs without a dedupe key back to pending,
    # attempts reset; returns each one's queue.
    "UPDATE jobvisor_jobs SET status = 'pending', attempts = 0, finished_at = NULL,"
    " run_at = coalesce(%(run_at)s::timestamptz, coalesce(%(now)s::timestamptz, now()))"
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
    "   ELSE coalesce(%(now)s::timestamptz, now()) END,"
    " cancel_requested_at = CASE WHEN status = 'running' THEN coalesce(cancel_requested_at,"
    "   coalesce(%(now)s::timestamptz, now())) END,"
    " last_error = CASE WHEN cancel_requested_at IS NULL THEN %(error)s ELSE last_error END"
    " WHERE id = %(id)s AND status IN ('pending', 'retryable', 'running')"
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
    "   ELSE coalesce(%(now)s::timestamptz, now()) END,"
    " cancel_requested_at = CASE WHEN j.status = 'running'"
    "   THEN coalesce(%(now)s::timestamptz, now()) END,"
    " last_error = %(error)s"
    " FROM picked WHERE j.id = picked.id"
    " RETURNING j.status, CASE WHEN j.status = 'running' THEN pg_notify('" + NOTIFY_CHANNEL + "',"
    "   json_build_object('kind', 'cancel', 'queue', j.queue, 'id', j.id)::text) END"
)

JOB_STATUS: Final[LiteralString] = (
    # The status of one job, to explain a refused change.
    "SELECT status FROM jobvisor_jobs WHERE id = %(id)s"
)

LEADER_ATTEMPT_ELECT: Final[LiteralString] = (
    # Take or keep the leadership lease; returns a row only to the leader.
    "INSERT INTO jobvisor_leader (name, holder, expires_at)"
    " VALUES (%(name)s, %(holder)s, coalesce(%(now)s::timestamptz, now())"
    "   + %(ttl)s::float8 * interval '1 second')"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
    " expires_at = excluded.expires_at"
    " WHERE jobvisor_leader.holder = excluded.holder"
    "   OR jobvisor_leader.expires_at < coalesce(%(now)s::timestamptz, now())"
    " RETURNING holder"
)

LEADER_RESIGN: Final[LiteralString] = (
    # Give the leadership up at once so another host need not wait for the lease.
    "DELETE FROM jobvisor_leader WHERE name = %(name)s AND holder = %(holder)s"
)
