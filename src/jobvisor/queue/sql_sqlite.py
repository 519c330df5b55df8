"""Every statement the SQLite engine runs, under the same names as the
PostgreSQL module. Times are Unix epoch seconds; `:now` is the time, always a
parameter (the injected clock's, or this host's, which is SQLite's own). Lists
arrive as JSON text and are read with json_each. Writers serialise on BEGIN
IMMEDIATE, so no SKIP LOCKED is needed."""

from typing import Final, LiteralString

MIGRATION_LOCK: Final[LiteralString] = (
    # BEGIN IMMEDIATE already holds the write lock; nothing more to take.
    "SELECT 1"
)

MIGRATIONS_TABLE_CREATE: Final[LiteralString] = (
    # The record of applied schema versions.
    "CREATE TABLE IF NOT EXISTS jobvisor_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
)

MIGRATIONS_APPLIED: Final[LiteralString] = (
    # Versions already applied.
    "SELECT version FROM jobvisor_migrations ORDER BY version"
)

MIGRATION_RECORD: Final[LiteralString] = (
    # Record one applied version.
    "INSERT INTO jobvisor_migrations (version, name) VALUES (:version, :name)"
)

MIGRATIONS_TABLE_EXISTS: Final[LiteralString] = (
    # Whether the record of schema versions exists, without creating it.
    "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'jobvisor_migrations'"
)

CLOCK_SAMPLE: Final[LiteralString] = (
    # SQLite's clock is this host's, read directly: never sampled.
    "SELECT (julianday('now') - 2440587.5) * 86400.0"
)

CLOCK_NOW: Final[LiteralString] = (
    # The time every other statement of this transaction would use.
    "SELECT :now"
)

JOB_COLUMNS_COPY: Final[LiteralString] = (
    # Bulk insert through executemany; rows carry every column JOB_INSERT sets.
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,"
    " dedupe_key, correlation_id, created_at, meta, concurrency_key)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

JOB_INSERT: Final[LiteralString] = (
    # Insert one job unless a live job has its dedupe key; returns the new id or
    # nothing. (`notify` is PostgreSQL's: SQLite workers poll.)
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, dedupe_key, correlation_id, created_at, meta, concurrency_key)"
    " VALUES (:id, :queue, :job_type, :payload, :priority,"
    " coalesce(:run_at, :now"
    "   + coalesce(:delay, 0)),"
    " :max_attempts, :dedupe_key, :correlation_id,"
    " :now, :meta, :concurrency_key)"
    " ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL"
    "   AND status IN ('pending', 'running', 'retryable') DO NOTHING"
    " RETURNING id"
)

UNIQUE_KEY: Final[LiteralString] = (
    # A unique job's key: its base text, and with a period the start of the
    # clock's current bucket, floor(now / period) * period, in UTC.
    "(:unique_key || CASE WHEN :unique_period IS NULL THEN '' ELSE '@'"
    " || strftime('%Y-%m-%dT%H:%M:%SZ', CAST(:now / :unique_period AS INTEGER)"
    "   * :unique_period, 'unixepoch') END)"
)

_UNIQUE_INSERT: Final[LiteralString] = (
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, correlation_id, created_at, meta, unique_key, unique_states,"
    " concurrency_key)"
    " VALUES (:id, :queue, :job_type, :payload, :priority,"
    " coalesce(:run_at, :now"
    "   + coalesce(:delay, 0)),"
    " :max_attempts, :correlation_id,"
    " :now, :meta,"
    " " + UNIQUE_KEY + ", :unique_states, :concurrency_key)"
    " ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL"
)

JOB_INSERT_UNIQUE: Final[LiteralString] = (
    # Insert one job unless a job holds its unique key; returns the new id or
    # nothing. (`notify` is PostgreSQL's: SQLite workers poll.)
    _UNIQUE_INSERT + " DO NOTHING RETURNING id"
)

JOB_INSERT_UNIQUE_REPLACE: Final[LiteralString] = (
    # JOB_INSERT_UNIQUE, but a pending holder of the key takes the new payload
    # and run_at (and its id is returned); a holder in any other status is
    # left as it is and nothing is returned.
    _UNIQUE_INSERT + " DO UPDATE SET payload = excluded.payload, run_at = excluded.run_at"
    " WHERE jobvisor_jobs.status = 'pending' RETURNING id"
)

JOB_GET_BY_UNIQUE_KEY: Final[LiteralString] = (
    # The job holding a unique key (its bucket read from the clock again).
    "SELECT id FROM jobvisor_jobs WHERE unique_key = " + UNIQUE_KEY
)

JOB_INSERT_KEYED_MANY: Final[LiteralString] = (
    # Insert many jobs with dedupe keys (`rows`: a JSON array of rows, their
    # columns in the order of JOB_COLUMNS_COPY's, created_at left out), each
    # unless a live job has its key (an earlier row included); returns the
    # ids inserted. (`WHERE true` tells the parser the ON CONFLICT is the
    # upsert's.)
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, dedupe_key, correlation_id, created_at, meta, concurrency_key)"
    " SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
    " json_extract(value, '$[2]'), json_extract(value, '$[3]'),"
    " json_extract(value, '$[4]'), json_extract(value, '$[5]'),"
    " json_extract(value, '$[6]'), json_extract(value, '$[7]'),"
    " json_extract(value, '$[8]'), :now, json_extract(value, '$[9]'),"
    " json_extract(value, '$[10]')"
    " FROM json_each(:rows) WHERE true ORDER BY key"
    " ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL"
    "   AND status IN ('pending', 'running', 'retryable') DO NOTHING"
    " RETURNING id"
)

JOB_GET_LIVE_BY_DEDUPE_KEYS: Final[LiteralString] = (
    # The live jobs holding any of these dedupe keys: (key, id).
    "SELECT dedupe_key, id FROM jobvisor_jobs"
    " WHERE dedupe_key IN (SELECT value FROM json_each(:keys))"
    " AND status IN ('pending', 'running', 'retryable')"
)

JOB_GET_LIVE_BY_DEDUPE_KEY: Final[LiteralString] = (
    # The live job holding a dedupe key.
    "SELECT id FROM jobvisor_jobs WHERE dedupe_key = :dedupe_key"
    " AND status IN ('pending', 'running', 'retryable')"
)

JOB_NOTIFY: Final[LiteralString] = (
    # SQLite has no notifications; workers poll.
    "SELECT :queue"
)


# Every claim of unlimited jobs: its head, then what it may ask of a job
# besides its status, then its tail.
_claim_head: Final[LiteralString] = (
    "UPDATE jobvisor_jobs SET status = 'running', attempts = attempts + 1,"
    " claim_token = :token, worker_id = :worker_id,"
    " lease_expires_at = :now + :lease,"
    " started_at = :now"
    " WHERE id IN ("
    " SELECT id FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable')"
)
_claim_tail: Final[LiteralString] = (
    "   AND run_at <= :now"
    "   AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))"
    "   AND (:job_types IS NULL OR job_type IN (SELECT value FROM json_each(:job_types)))"
    "   AND queue NOT IN (SELECT queue FROM jobvisor_queue_pauses)"
    "   AND job_type NOT IN (SELECT name FROM jobvisor_limits WHERE kind = 'type')"
    "   AND queue NOT IN (SELECT name FROM jobvisor_limits WHERE kind = 'queue')"
    " ORDER BY priority DESC, run_at, id LIMIT :limit)"
    " RETURNING id, queue, job_type, payload, priority, run_at, status, attempts,"
    " max_attempts, last_error, correlation_id, dedupe_key, lease_expires_at, claim_token,"
    " worker_id, created_at, started_at, finished_at, meta"
)

JOB_CLAIM: Final[LiteralString] = (
    # Claim up to `limit` due jobs in priority order, none of a paused queue nor
    # of a limited type or queue (JOB_CLAIM_LIMITED takes those); `token` is
    # the claim's own, made by the caller.
    _claim_head + _claim_tail
)

JOB_CLAIM_ABOVE: Final[LiteralString] = (
    # JOB_CLAIM of jobs of a priority above `above` only (a job that jumps the
    # queue of a busy worker).
    _claim_head + " AND priority > :above" + _claim_tail
)

# SQLite updates the claim index in place: no entries of claimed jobs to skip,
# so its claims are never bounded (`SqliteDialect.bounded_claim`).
JOB_CLAIM_AFTER: Final[LiteralString] = JOB_CLAIM

LIMIT_LOCK: Final[LiteralString] = (
    # The limited groups a claim with these filters could take jobs of, each
    # with whether it has a rate. The
    # write lock every claim holds already serialises the limited claims.
    "SELECT kind, name, rate_count IS NOT NULL, NULL FROM jobvisor_limits"
    " WHERE (kind = 'type' AND (:job_types IS NULL"
    "   OR name IN (SELECT value FROM json_each(:job_types))))"
    " OR (kind = 'queue' AND (:queues IS NULL OR name IN (SELECT value FROM json_each(:queues))))"
    " ORDER BY kind, name"
)

JOB_CLAIM_LIMITED: Final[LiteralString] = (
    # Claim up to `limit` due jobs of limited groups in priority order, never
    # more per group than its concurrency left, its bucket's whole tokens, and
    # per concurrency key its key_concurrency left and its key bucket's whole
    # tokens (see the PostgreSQL module).
    "UPDATE jobvisor_jobs SET status = 'running', attempts = attempts + 1,"
    " claim_token = :token, worker_id = :worker_id,"
    " lease_expires_at = :now + :lease,"
    " started_at = :now"
    " WHERE id IN ("
    " WITH lim AS MATERIALIZED ("
    # (Whole tokens, give or take the float clock's rounding of a microsecond.)
    "  SELECT kind, name, concurrency, key_concurrency, key_rate_count, key_rate_period,"
    "   CASE WHEN rate_count IS NOT NULL"
    "   THEN CAST(min(rate_count * 1.0, coalesce(tokens, rate_count) + max(0,"
    "   :now - coalesce(refilled_at, :now)) * rate_count / rate_period) + 0.000001"
    "   AS INTEGER) END AS tokens"
    "  FROM jobvisor_limits),"
    " run AS MATERIALIZED (SELECT queue, job_type, concurrency_key FROM jobvisor_jobs"
    "   WHERE status = 'running'),"
    " room AS MATERIALIZED (SELECT l.kind, l.name, l.key_concurrency, l.key_rate_count,"
    "   min(coalesce(l.concurrency - (SELECT count(*) FROM run AS r"
    "     WHERE CASE WHEN l.kind = 'type' THEN r.job_type ELSE r.queue END = l.name),"
    "     2147483647), coalesce(l.tokens, 2147483647)) AS room FROM lim AS l),"
    " keys AS MATERIALIZED (SELECT job_type, concurrency_key, count(*) AS n FROM run"
    "   WHERE concurrency_key IS NOT NULL GROUP BY job_type, concurrency_key),"
    # The key buckets in use, refilled to now, in whole tokens.
    " kb AS MATERIALIZED (SELECT b.job_type, b.concurrency_key,"
    "   CAST(min(l.key_rate_count * 1.0, b.tokens + max(0, :now - b.refilled_at)"
    "   * l.key_rate_count / l.key_rate_period) + 0.000001 AS INTEGER) AS tokens"
    "   FROM jobvisor_key_buckets AS b JOIN lim AS l ON l.kind = 'type'"
    "   AND l.name = b.job_type AND l.key_rate_count IS NOT NULL),"
    " full_keys AS MATERIALIZED (SELECT k.job_type, k.concurrency_key FROM keys AS k"
    "   JOIN room AS t ON t.kind = 'type' AND t.name = k.job_type"
    "   WHERE k.n >= t.key_concurrency"
    "   UNION SELECT job_type, concurrency_key FROM kb WHERE tokens < 1),"
    " picks AS (SELECT j.id, j.queue, j.job_type, j.concurrency_key, j.priority, j.run_at"
    "   FROM jobvisor_jobs AS j"
    "   WHERE j.status IN ('pending', 'retryable')"
    "   AND j.run_at <= :now"
    "   AND (:queues IS NULL OR j.queue IN (SELECT value FROM json_each(:queues)))"
    "   AND (:job_types IS NULL OR j.job_type IN (SELECT value FROM json_each(:job_types)))"
    "   AND j.queue NOT IN (SELECT queue FROM jobvisor_queue_pauses)"
    "   AND EXISTS (SELECT 1 FROM room WHERE room > 0)"  # else no scan at all
    # Limited jobs of groups with room, keys not saturated.
    "   AND (j.job_type IN (SELECT name FROM room WHERE kind = 'type')"
    "     OR j.queue IN (SELECT name FROM room WHERE kind = 'queue'))"
    "   AND j.job_type NOT IN (SELECT name FROM room WHERE kind = 'type' AND room <= 0)"
    "   AND j.queue NOT IN (SELECT name FROM room WHERE kind = 'queue' AND room <= 0)"
    "   AND (j.concurrency_key IS NULL"
    "     OR (j.job_type, j.concurrency_key) NOT IN (SELECT * FROM full_keys))"
    "   ORDER BY j.priority DESC, j.run_at, j.id LIMIT :window),"
    # A key's room: the least of its key_concurrency left and its whole tokens.
    " cand AS (SELECT c.*, t.room AS troom, q.room AS qroom,"
    "   CASE WHEN t.key_rate_count IS NULL THEN t.key_concurrency - coalesce(k.n, 0)"
    "     ELSE min(coalesce(t.key_concurrency - coalesce(k.n, 0), 2147483647),"
    "     coalesce(b.tokens, t.key_rate_count)) END AS kroom FROM picks AS c"
    "   LEFT JOIN room AS t ON t.kind = 'type' AND t.name = c.job_type"
    "   LEFT JOIN room AS q ON q.kind = 'queue' AND q.name = c.queue"
    "   LEFT JOIN keys AS k ON k.job_type = c.job_type AND k.concurrency_key = c.concurrency_key"
    "   LEFT JOIN kb AS b ON b.job_type = c.job_type AND b.concurrency_key = c.concurrency_key),"
    # Each limit ranks only the candidates the limits before it let pass:
    # per key, then per type, then per queue.
    " by_key AS (SELECT id, queue, job_type, priority, run_at, troom, qroom FROM ("
    "   SELECT *, row_number() OVER (PARTITION BY job_type, concurrency_key"
    "     ORDER BY priority DESC, run_at, id) AS kn FROM cand) AS c"
    "   WHERE concurrency_key IS NULL OR kroom IS NULL OR kn <= kroom),"
    " by_type AS (SELECT id, queue, priority, run_at, qroom FROM ("
    "   SELECT *, row_number() OVER (PARTITION BY job_type"
    "     ORDER BY priority DESC, run_at, id) AS tn FROM by_key) AS c"
    "   WHERE tn <= coalesce(troom, tn))"
    " SELECT id FROM (SELECT id, priority, run_at, qroom, row_number() OVER ("
    "   PARTITION BY queue ORDER BY priority DESC, run_at, id) AS qn FROM by_type) AS c"
    "   WHERE qn <= coalesce(qroom, qn)"
    "   ORDER BY priority DESC, run_at, id LIMIT :limit)"
    " RETURNING id, queue, job_type, payload, priority, run_at, status, attempts,"
    " max_attempts, last_error, correlation_id, dedupe_key, lease_expires_at, claim_token,"
    " worker_id, created_at, started_at, finished_at, meta"
)

LIMIT_TAKE_TOKENS: Final[LiteralString] = (
    # After JOB_CLAIM_LIMITED with the same `now`, `lease` and `token`: refill
    # the buckets of the groups it started jobs of to now and take those jobs
    # from them (found by their lease's end, an index lookup, and the token).
    "UPDATE jobvisor_limits SET tokens = min(rate_count * 1.0,"
    "   coalesce(tokens, rate_count) + max(0, :now - coalesce(refilled_at, :now))"
    "   * rate_count / rate_period) - c.n,"
    " refilled_at = max(coalesce(refilled_at, :now), :now)"
    " FROM (SELECT g.kind, g.name, count(*) AS n FROM ("
    "   SELECT 'type' AS kind, job_type AS name FROM jobvisor_jobs"
    "   WHERE status = 'running' AND lease_expires_at = :now + :lease AND claim_token = :token"
    "   UNION ALL SELECT 'queue', queue FROM jobvisor_jobs"
    "   WHERE status = 'running' AND lease_expires_at = :now + :lease AND claim_token = :token"
    "   ) AS g GROUP BY g.kind, g.name) AS c"
    " WHERE jobvisor_limits.kind = c.kind AND jobvisor_limits.name = c.name"
    " AND jobvisor_limits.rate_count IS NOT NULL"
)

KEY_BUCKET_TAKE: Final[LiteralString] = (
    # After LIMIT_TAKE_TOKENS: take the claim's jobs from their keys' buckets,
    # refilled to now; a key's first take makes its row (see the PostgreSQL
    # module).
    "INSERT INTO jobvisor_key_buckets (job_type, concurrency_key, tokens, refilled_at)"
    " SELECT j.job_type, j.concurrency_key, min(l.key_rate_count) - count(*), :now"
    " FROM jobvisor_jobs AS j JOIN jobvisor_limits AS l ON l.kind = 'type'"
    "   AND l.name = j.job_type AND l.key_rate_count IS NOT NULL"
    " WHERE j.status = 'running' AND j.lease_expires_at = :now + :lease"
    "   AND j.claim_token = :token AND j.concurrency_key IS NOT NULL"
    " GROUP BY j.job_type, j.concurrency_key"
    " ON CONFLICT (job_type, concurrency_key) DO UPDATE SET tokens = excluded.tokens"
    "   + (SELECT min(l.key_rate_count * 1.0, jobvisor_key_buckets.tokens + max(0,"
    "     excluded.refilled_at - jobvisor_key_buckets.refilled_at)"
    "     * l.key_rate_count / l.key_rate_period) - l.key_rate_count"
    "     FROM jobvisor_limits AS l"
    "     WHERE l.kind = 'type' AND l.name = jobvisor_key_buckets.job_type),"
    " refilled_at = max(jobvisor_key_buckets.refilled_at, excluded.refilled_at)"
)

KEY_BUCKET_PRUNE: Final[LiteralString] = (
    # Delete the key buckets that have refilled and those of types without a
    # key rate; returns how many.
    "DELETE FROM jobvisor_key_buckets WHERE NOT EXISTS (SELECT 1 FROM jobvisor_limits AS l"
    "   WHERE l.kind = 'type' AND l.name = jobvisor_key_buckets.job_type"
    "   AND l.key_rate_count IS NOT NULL"
    "   AND jobvisor_key_buckets.tokens + max(0, :now - jobvisor_key_buckets.refilled_at)"
    "     * l.key_rate_count / l.key_rate_period < l.key_rate_count)"
)

LIMIT_TABLE_LOCK: Final[LiteralString] = (
    # PostgreSQL's wait for the claims in flight; SQLite's write lock does it.
    "SELECT 1"
)

LIMIT_SET: Final[LiteralString] = (
    # Write one group's limits, replacing what it had; a bucket keeps its
    # tokens (at most the new size), a new one starts full.
    "INSERT INTO jobvisor_limits (kind, name, concurrency, key_concurrency, rate_count,"
    " rate_period, key_rate_count, key_rate_period, tokens, refilled_at, source, updated_at)"
    " VALUES (:kind, :name, :concurrency, :key_concurrency, :rate_count,"
    " :rate_period, :key_rate_count, :key_rate_period, :rate_count, :now, :source, :now)"
    " ON CONFLICT (kind, name) DO UPDATE SET concurrency = excluded.concurrency,"
    " key_concurrency = excluded.key_concurrency, rate_count = excluded.rate_count,"
    " rate_period = excluded.rate_period, key_rate_count = excluded.key_rate_count,"
    " key_rate_period = excluded.key_rate_period,"
    " tokens = min(coalesce(jobvisor_limits.tokens, excluded.tokens), excluded.tokens),"
    " refilled_at = coalesce(jobvisor_limits.refilled_at, excluded.refilled_at),"
    " source = excluded.source, updated_at = excluded.updated_at"
)

LIMIT_CLEAR: Final[LiteralString] = (
    # Remove one group's limits; returns its name when it had some.
    "DELETE FROM jobvisor_limits WHERE kind = :kind AND name = :name RETURNING name"
)

LIMIT_LIST: Final[LiteralString] = (
    # Every limit, by kind and name.
    "SELECT kind, name, concurrency, key_concurrency, rate_count, rate_period, source,"
    " key_rate_count, key_rate_period FROM jobvisor_limits ORDER BY kind, name"
)

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
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
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
    " status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
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
    " status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
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
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
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
    # culprit; or, with none known, it ran alone there, or this is its
    # `crash_limit`-th crash since it was last charged for one.
    "(CASE WHEN :culprit IS NOT NULL THEN id = :culprit"
    " ELSE crashes + 1 >= :crash_limit OR (SELECT count(*) FROM jobvisor_jobs AS held"
    "   WHERE held.status = 'running' AND held.worker_id = :worker_id) = 1 END)"
)

JOB_REQUEUE_CRASHED: Final[LiteralString] = (
    # Every job a dead worker held. A charged job (see _crash_charged) is
    # retryable now (attempt counted), or dead when spent; the others were
    # interrupted by someone else's fault: pending now, attempts given back,
    # error kept, and with no culprit known one more crash counted.
    # A job whose cancel was requested ends cancelled, keeping the request's text.
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    "   WHEN NOT " + _crash_charged + " THEN 'pending'"
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
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
    # ago; a workflow's jobs go with their workflow (WORKFLOW_DELETE_FINISHED).
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = :status AND workflow_id IS NULL"
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
