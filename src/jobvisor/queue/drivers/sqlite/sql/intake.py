"""SQLite's statements for the schema, the clock, the enqueue, the claim and
the limits."""

from __future__ import annotations

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
