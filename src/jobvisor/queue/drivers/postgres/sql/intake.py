"""PostgreSQL's statements for the schema, the clock, the enqueue, the claim
and the limits."""

from __future__ import annotations

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

CLOCK_SAMPLE: Final[LiteralString] = (
    # The server's clock, read now and then to reckon its time (DatabaseClock).
    "SELECT clock_timestamp()"
)

CLOCK_NOW: Final[LiteralString] = (
    # The time every other statement of this transaction would use.
    "SELECT %(now)s::timestamptz"
)

JOB_COLUMNS_COPY: Final[LiteralString] = (
    # Bulk insert, in binary; rows carry every column JOB_INSERT sets, of the
    # types the dialect's `copy_types` lists (payload and meta as JSON text).
    "COPY jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,"
    " dedupe_key, correlation_id, created_at, meta, concurrency_key) FROM STDIN (FORMAT BINARY)"
)

_JOB_NOTICE: Final[LiteralString] = (
    # A new job's notice (see `notices`): the bare queue name, or with a
    # priority other than 0 a JSON object that carries it.
    "pg_notify('" + NOTIFY_CHANNEL + "', CASE WHEN priority = 0 THEN queue ELSE"
    " json_build_object('kind', 'job', 'queue', queue, 'priority', priority)::text END)"
)

JOB_INSERT: Final[LiteralString] = (
    # Insert one job unless a live job has its dedupe key; returns the new id or
    # nothing. With `notify`, a new job wakes idle workers (at its commit).
    "WITH inserted AS ("
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, dedupe_key, correlation_id, created_at, meta, concurrency_key)"
    " VALUES (%(id)s, %(queue)s, %(job_type)s, %(payload)s::jsonb, %(priority)s,"
    " coalesce(%(run_at)s::timestamptz, %(now)s::timestamptz"
    "   + coalesce(%(delay)s::float8, 0) * interval '1 second'),"
    " %(max_attempts)s, %(dedupe_key)s, %(correlation_id)s,"
    " %(now)s::timestamptz, %(meta)s::jsonb, %(concurrency_key)s)"
    " ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL"
    "   AND status IN ('pending', 'running', 'retryable') DO NOTHING"
    " RETURNING id, queue, priority)"
    " SELECT id, CASE WHEN %(notify)s::bool THEN " + _JOB_NOTICE + " END"
    " FROM inserted"
)

UNIQUE_KEY: Final[LiteralString] = (
    # A unique job's key: its base text, and with a period the start of the
    # database clock's current bucket, floor(now / period) * period, in UTC.
    "(%(unique_key)s::text || CASE WHEN %(unique_period)s::bigint IS NULL THEN '' ELSE '@'"
    " || to_char(to_timestamp(floor(extract(epoch FROM %(now)s::timestamptz)"
    "   / %(unique_period)s::bigint) * %(unique_period)s::bigint) AT TIME ZONE 'UTC',"
    '   \'YYYY-MM-DD"T"HH24:MI:SS"Z"\') END)'
)

_UNIQUE_INSERT: Final[LiteralString] = (
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, correlation_id, created_at, meta, unique_key, unique_states,"
    " concurrency_key)"
    " VALUES (%(id)s, %(queue)s, %(job_type)s, %(payload)s::jsonb, %(priority)s,"
    " coalesce(%(run_at)s::timestamptz, %(now)s::timestamptz"
    "   + coalesce(%(delay)s::float8, 0) * interval '1 second'),"
    " %(max_attempts)s, %(correlation_id)s, %(now)s::timestamptz,"
    " %(meta)s::jsonb, " + UNIQUE_KEY + ", %(unique_states)s::text[], %(concurrency_key)s)"
    " ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL"
)

JOB_INSERT_UNIQUE: Final[LiteralString] = (
    # Insert one job unless a job holds its unique key; returns the new id or
    # nothing. With `notify`, a new job wakes idle workers (at its commit).
    "WITH written AS (" + _UNIQUE_INSERT + " DO NOTHING RETURNING id, queue, priority)"
    " SELECT id, CASE WHEN %(notify)s::bool THEN " + _JOB_NOTICE + " END"
    " FROM written"
)

JOB_INSERT_UNIQUE_REPLACE: Final[LiteralString] = (
    # JOB_INSERT_UNIQUE, but a pending holder of the key takes the new payload
    # and run_at (and its id is returned); a holder in any other status is
    # left as it is and nothing is returned.
    "WITH written AS (" + _UNIQUE_INSERT + " DO UPDATE SET payload = excluded.payload,"
    " run_at = excluded.run_at WHERE jobvisor_jobs.status = 'pending'"
    " RETURNING id, queue, priority)"
    " SELECT id, CASE WHEN %(notify)s::bool THEN " + _JOB_NOTICE + " END"
    " FROM written"
)

JOB_GET_BY_UNIQUE_KEY: Final[LiteralString] = (
    # The job holding a unique key (its bucket read from the clock again).
    "SELECT id FROM jobvisor_jobs WHERE unique_key = " + UNIQUE_KEY
)

JOB_INSERT_KEYED_MANY: Final[LiteralString] = (
    # Insert many jobs with dedupe keys (one array per column, in the order of
    # JOB_COLUMNS_COPY's), each unless a live job has its key (an earlier row
    # of the same statement included); returns the ids inserted.
    "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at,"
    " max_attempts, dedupe_key, correlation_id, created_at, meta, concurrency_key)"
    " SELECT r.id, r.queue, r.job_type, r.payload, r.priority, r.run_at, r.max_attempts,"
    " r.dedupe_key, r.correlation_id, %(now)s::timestamptz, r.meta, r.concurrency_key"
    " FROM unnest(%(ids)s::uuid[], %(queues)s::text[], %(job_types)s::text[],"
    "   %(payloads)s::jsonb[], %(priorities)s::int4[], %(run_ats)s::timestamptz[],"
    "   %(max_attempts)s::int4[], %(dedupe_keys)s::text[], %(correlation_ids)s::text[],"
    "   %(metas)s::jsonb[], %(concurrency_keys)s::text[]) WITH ORDINALITY"
    "   AS r(id, queue, job_type, payload, priority, run_at, max_attempts, dedupe_key,"
    "   correlation_id, meta, concurrency_key, n) ORDER BY r.n"
    " ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL"
    "   AND status IN ('pending', 'running', 'retryable') DO NOTHING"
    " RETURNING id"
)

JOB_GET_LIVE_BY_DEDUPE_KEYS: Final[LiteralString] = (
    # The live jobs holding any of these dedupe keys: (key, id).
    "SELECT dedupe_key, id FROM jobvisor_jobs WHERE dedupe_key = ANY(%(keys)s::text[])"
    " AND status IN ('pending', 'running', 'retryable')"
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

# What every claim of unlimited jobs asks of a job besides its status and place.
_claim_filter: Final[LiteralString] = (
    "   AND run_at <= %(now)s::timestamptz + %(slack)s::float8 * interval '1 second'"
    "   AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))"
    "   AND (%(job_types)s::text[] IS NULL OR job_type = ANY(%(job_types)s::text[]))"
    "   AND queue <> ALL(ARRAY(SELECT queue FROM jobvisor_queue_pauses))"
    "   AND job_type <> ALL(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'type'))"
    "   AND queue <> ALL(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'queue'))"
)

_claim_take: Final[LiteralString] = (
    # Every claim's end: the jobs of its `picked` set turn running under the
    # claim's token and lease, and come back whole.
    " UPDATE jobvisor_jobs AS j SET status = 'running', attempts = j.attempts + 1,"
    " claim_token = %(token)s::uuid, worker_id = %(worker_id)s,"
    " lease_expires_at = %(now)s::timestamptz"
    "   + %(lease)s::float8 * interval '1 second',"
    " started_at = %(now)s::timestamptz"
    " FROM picked WHERE j.id = picked.id"
    " RETURNING j.id, j.queue, j.job_type, j.payload, j.priority, j.run_at, j.status,"
    " j.attempts, j.max_attempts, j.last_error, j.correlation_id, j.dedupe_key,"
    " j.lease_expires_at, j.claim_token, j.worker_id, j.created_at, j.started_at,"
    " j.finished_at, j.meta"
)

JOB_CLAIM: Final[LiteralString] = (
    # Claim up to `limit` due jobs in priority order, skipping rows others hold,
    # jobs of paused queues and jobs of limited types and queues (JOB_CLAIM_LIMITED
    # takes those); the pause and limit lists are read once per statement.
    # `token` is the claim's own, made by the caller.
    "WITH picked AS ("
    " SELECT id FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable')"
    + _claim_filter
    + " ORDER BY priority DESC, run_at, id"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)" + _claim_take
)

JOB_CLAIM_ABOVE: Final[LiteralString] = (
    # JOB_CLAIM of jobs of a priority above `above` only: a worker busy with
    # jobs of that priority takes a job that jumps the queue (the claim
    # index's range of higher priorities, read from its head).
    "WITH picked AS ("
    " SELECT id FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable') AND priority > %(above)s::int4"
    + _claim_filter
    + " ORDER BY priority DESC, run_at, id"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)" + _claim_take
)

# How many claim marks the table keeps: each bounded claim deletes the one
# this many claims older than its own.
_MARKS_KEPT: Final[LiteralString] = "256"

JOB_CLAIM_AFTER: Final[LiteralString] = (
    # JOB_CLAIM from a bound onwards: jobs of a higher priority than the bound's,
    # then jobs of its priority past (run_at, id). Each branch is a range of the
    # claim index that starts at its bound, so the entries of jobs claimed
    # before it (dead row versions an old snapshot may still see, which no
    # vacuum can remove meanwhile) are never read. Jobs behind the bound and
    # of lower priorities are JOB_CLAIM's (see `ops.ClaimBounds`).
    # The bound is the caller's own, or the newest mark of its filter
    # (`mark_filter`) when that is of the same priority and further on: the
    # jobs other claimers took since this one's last claim are not read
    # again. The claim leaves its own end as the newest mark.
    "WITH newest AS MATERIALIZED ("
    " SELECT priority, run_at, id FROM jobvisor_claim_marks"
    " WHERE filter = %(mark_filter)s ORDER BY seq DESC LIMIT 1),"
    " bound AS MATERIALIZED ("
    " SELECT run_at, id FROM newest WHERE priority = %(after_priority)s::int4"
    "   AND (run_at, id) > (%(after_run_at)s::timestamptz, %(after_id)s::uuid)"
    " UNION ALL SELECT %(after_run_at)s::timestamptz, %(after_id)s::uuid"
    " ORDER BY run_at DESC, id DESC LIMIT 1),"
    " higher AS ("
    " SELECT id FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable') AND priority > %(after_priority)s::int4"
    + _claim_filter
    + " ORDER BY priority DESC, run_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED),"
    " after AS ("
    " SELECT id FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable') AND priority = %(after_priority)s::int4"
    "   AND (run_at, id) > ((SELECT run_at FROM bound), (SELECT id FROM bound))"
    + _claim_filter
    + " ORDER BY priority DESC, run_at, id"
    " LIMIT %(limit)s - (SELECT count(*) FROM higher) FOR UPDATE SKIP LOCKED),"
    " picked AS (SELECT id FROM higher UNION ALL SELECT id FROM after),"
    " taken AS (" + _claim_take + "),"
    " marked AS (INSERT INTO jobvisor_claim_marks (filter, priority, run_at, id)"
    " SELECT %(mark_filter)s, priority, run_at, id FROM taken"
    " ORDER BY priority, run_at DESC, id DESC LIMIT 1 RETURNING seq),"
    " pruned AS (DELETE FROM jobvisor_claim_marks"
    " WHERE seq = (SELECT seq - " + _MARKS_KEPT + " FROM marked))"
    " SELECT * FROM taken"
)

LIMIT_LOCK: Final[LiteralString] = (
    # Take, in (kind, name) order, the transaction's lock of every limited group
    # a claim with these filters could take jobs of; returns the groups, each
    # with whether it has a rate. Claims
    # of one group wait for each other here, and nothing else does.
    # For the rest of the transaction the limited claim is not JIT-compiled:
    # its sorts, priced out on our sessions, look costly enough for the JIT,
    # whose compile would take 100 times the claim.
    "SELECT g.kind, g.name, g.rated,"
    " pg_advisory_xact_lock(74289309, hashtext(g.kind || ':' || g.name))"
    " FROM (SELECT set_config('jit', 'off', true)) AS s,"
    " (SELECT kind, name, rate_count IS NOT NULL AS rated FROM jobvisor_limits"
    "   WHERE (kind = 'type' AND (%(job_types)s::text[] IS NULL"
    "     OR name = ANY(%(job_types)s::text[])))"
    "   OR (kind = 'queue' AND (%(queues)s::text[] IS NULL OR name = ANY(%(queues)s::text[])))"
    "   ORDER BY kind, name) AS g"
)

JOB_CLAIM_LIMITED: Final[LiteralString] = (
    # Under LIMIT_LOCK: claim up to `limit` due jobs of limited groups in
    # priority order, never more per group than its concurrency left (its
    # limit less its running jobs), its bucket's whole tokens, and per
    # concurrency key its key_concurrency left and its key bucket's whole
    # tokens (a key without a bucket row has a full one). `now` is the one of
    # the whole limited claim (LIMIT_TAKE_TOKENS matches its jobs by it);
    # `token` is the claim's own. Saturated groups and
    # keys are skipped before the `window` of candidates is taken; within it a job
    # passes only if it ranks within the room of every group it belongs to.
    "WITH lim AS MATERIALIZED ("
    " SELECT kind, name, concurrency, key_concurrency, key_rate_count, key_rate_period,"
    "   CASE WHEN rate_count IS NOT NULL"
    "   THEN floor(least(rate_count::float8, coalesce(tokens, rate_count) + greatest(0,"
    "   extract(epoch FROM %(now)s::timestamptz"
    "     - coalesce(refilled_at, %(now)s::timestamptz)))"
    "   * rate_count / rate_period) + 0.000001) END AS tokens FROM jobvisor_limits),"
    " run AS MATERIALIZED (SELECT queue, job_type, concurrency_key FROM jobvisor_jobs"
    "   WHERE status = 'running'),"
    " room AS MATERIALIZED (SELECT l.kind, l.name, l.key_concurrency, l.key_rate_count,"
    "   least(coalesce(l.concurrency - (SELECT count(*) FROM run AS r"
    "     WHERE CASE WHEN l.kind = 'type' THEN r.job_type ELSE r.queue END = l.name),"
    "     2147483647), coalesce(l.tokens, 2147483647)) AS room FROM lim AS l),"
    " keys AS MATERIALIZED (SELECT job_type, concurrency_key, count(*) AS n FROM run"
    "   WHERE concurrency_key IS NOT NULL GROUP BY job_type, concurrency_key),"
    # The key buckets in use, refilled to now, in whole tokens.
    " kb AS MATERIALIZED (SELECT b.job_type, b.concurrency_key,"
    "   floor(least(l.key_rate_count::float8, b.tokens + greatest(0,"
    "   extract(epoch FROM %(now)s::timestamptz - b.refilled_at))"
    "   * l.key_rate_count / l.key_rate_period) + 0.000001) AS tokens"
    "   FROM jobvisor_key_buckets AS b JOIN lim AS l ON l.kind = 'type'"
    "   AND l.name = b.job_type AND l.key_rate_count IS NOT NULL),"
    " full_keys AS MATERIALIZED (SELECT k.job_type, k.concurrency_key FROM keys AS k"
    "   JOIN room AS t ON t.kind = 'type' AND t.name = k.job_type"
    "   WHERE k.n >= t.key_concurrency"
    "   UNION SELECT job_type, concurrency_key FROM kb WHERE tokens < 1),"
    " picks AS (SELECT j.id, j.queue, j.job_type, j.concurrency_key, j.priority, j.run_at"
    "   FROM jobvisor_jobs AS j"
    "   WHERE j.status IN ('pending', 'retryable')"
    "   AND j.run_at <= %(now)s::timestamptz + %(slack)s::float8 * interval '1 second'"
    "   AND (%(queues)s::text[] IS NULL OR j.queue = ANY(%(queues)s::text[]))"
    "   AND (%(job_types)s::text[] IS NULL OR j.job_type = ANY(%(job_types)s::text[]))"
    "   AND j.queue <> ALL(ARRAY(SELECT queue FROM jobvisor_queue_pauses))"
    "   AND EXISTS (SELECT 1 FROM room WHERE room > 0)"  # else no scan at all
    # Limited jobs of groups with room, keys not saturated: each test reads
    # a small list once per statement (an array, a hashed subplan).
    "   AND (j.job_type = ANY(ARRAY(SELECT name FROM room WHERE kind = 'type'))"
    "     OR j.queue = ANY(ARRAY(SELECT name FROM room WHERE kind = 'queue')))"
    "   AND j.job_type <> ALL(ARRAY(SELECT name FROM room WHERE kind = 'type' AND room <= 0))"
    "   AND j.queue <> ALL(ARRAY(SELECT name FROM room WHERE kind = 'queue' AND room <= 0))"
    "   AND (j.concurrency_key IS NULL"
    "     OR (j.job_type, j.concurrency_key) NOT IN (SELECT * FROM full_keys))"
    "   ORDER BY j.priority DESC, j.run_at, j.id LIMIT %(window)s FOR UPDATE OF j SKIP LOCKED),"
    # A key's room: the least of its key_concurrency left and its whole tokens.
    " cand AS (SELECT c.*, t.room AS troom, q.room AS qroom,"
    "   least(t.key_concurrency - coalesce(k.n, 0), CASE WHEN t.key_rate_count IS NOT NULL"
    "     THEN coalesce(b.tokens, t.key_rate_count) END) AS kroom FROM picks AS c"
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
    "   WHERE tn <= coalesce(troom, tn)),"
    " picked AS (SELECT id FROM (SELECT id, priority, run_at, qroom, row_number() OVER ("
    "   PARTITION BY queue ORDER BY priority DESC, run_at, id) AS qn FROM by_type) AS c"
    "   WHERE qn <= coalesce(qroom, qn)"
    "   ORDER BY priority DESC, run_at, id LIMIT %(limit)s)" + _claim_take
)

LIMIT_TAKE_TOKENS: Final[LiteralString] = (
    # Under LIMIT_LOCK, after JOB_CLAIM_LIMITED with the same `now`, `lease`
    # and `token`: refill the buckets of the groups it started jobs of to now
    # and take those jobs from them (found by their lease's end, an index
    # lookup, and the claim's token).
    "UPDATE jobvisor_limits AS l SET tokens = least(l.rate_count::float8,"
    "   coalesce(l.tokens, l.rate_count) + greatest(0, extract(epoch FROM"
    "   %(now)s::timestamptz - coalesce(l.refilled_at,"
    "   %(now)s::timestamptz)))"
    "   * l.rate_count / l.rate_period) - c.n,"
    " refilled_at = greatest(l.refilled_at, %(now)s::timestamptz)"
    " FROM (SELECT g.kind, g.name, count(*) AS n FROM jobvisor_jobs AS j,"
    "   LATERAL (VALUES ('type', j.job_type), ('queue', j.queue)) AS g(kind, name)"
    "   WHERE j.status = 'running' AND j.lease_expires_at = %(now)s::timestamptz"
    "     + %(lease)s::float8 * interval '1 second' AND j.claim_token = %(token)s::uuid"
    "   GROUP BY g.kind, g.name) AS c"
    " WHERE l.kind = c.kind AND l.name = c.name AND l.rate_count IS NOT NULL"
)

KEY_BUCKET_TAKE: Final[LiteralString] = (
    # Under LIMIT_LOCK, after LIMIT_TAKE_TOKENS: take the claim's jobs from
    # their keys' buckets, refilled to now; a key's first take makes its row
    # (the bucket was full). The limit's size and period come from its row.
    "INSERT INTO jobvisor_key_buckets AS b (job_type, concurrency_key, tokens, refilled_at)"
    " SELECT j.job_type, j.concurrency_key, min(l.key_rate_count) - count(*),"
    "   %(now)s::timestamptz"
    " FROM jobvisor_jobs AS j JOIN jobvisor_limits AS l ON l.kind = 'type'"
    "   AND l.name = j.job_type AND l.key_rate_count IS NOT NULL"
    " WHERE j.status = 'running' AND j.lease_expires_at = %(now)s::timestamptz"
    "   + %(lease)s::float8 * interval '1 second' AND j.claim_token = %(token)s::uuid"
    "   AND j.concurrency_key IS NOT NULL"
    " GROUP BY j.job_type, j.concurrency_key"
    " ON CONFLICT (job_type, concurrency_key) DO UPDATE SET tokens = excluded.tokens"
    "   + (SELECT least(l.key_rate_count::float8, b.tokens + greatest(0, extract(epoch FROM"
    "     excluded.refilled_at - b.refilled_at)) * l.key_rate_count / l.key_rate_period)"
    "     - l.key_rate_count FROM jobvisor_limits AS l"
    "     WHERE l.kind = 'type' AND l.name = b.job_type),"
    " refilled_at = greatest(b.refilled_at, excluded.refilled_at)"
)

KEY_BUCKET_PRUNE: Final[LiteralString] = (
    # Delete the key buckets that have refilled (a missing row is a full
    # bucket) and those of types without a key rate; returns how many.
    "DELETE FROM jobvisor_key_buckets AS b WHERE NOT EXISTS (SELECT 1 FROM jobvisor_limits AS l"
    "   WHERE l.kind = 'type' AND l.name = b.job_type AND l.key_rate_count IS NOT NULL"
    "   AND b.tokens + greatest(0, extract(epoch FROM %(now)s::timestamptz - b.refilled_at))"
    "     * l.key_rate_count / l.key_rate_period < l.key_rate_count)"
)

LIMIT_TABLE_LOCK: Final[LiteralString] = (
    # Wait for every claim in flight and hold new ones until this transaction
    # commits (each reads the limit list), so a limit holds from its commit on.
    "LOCK TABLE jobvisor_limits IN ACCESS EXCLUSIVE MODE"
)

LIMIT_SET: Final[LiteralString] = (
    # Write one group's limits, replacing what it had; a bucket keeps its
    # tokens (at most the new size), a new one starts full.
    "INSERT INTO jobvisor_limits (kind, name, concurrency, key_concurrency, rate_count,"
    " rate_period, key_rate_count, key_rate_period, tokens, refilled_at, source, updated_at)"
    " VALUES (%(kind)s, %(name)s, %(concurrency)s::integer, %(key_concurrency)s::integer,"
    " %(rate_count)s::integer, %(rate_period)s::float8, %(key_rate_count)s::integer,"
    " %(key_rate_period)s::float8, %(rate_count)s::integer::float8,"
    " %(now)s::timestamptz, %(source)s,"
    " %(now)s::timestamptz)"
    " ON CONFLICT (kind, name) DO UPDATE SET concurrency = excluded.concurrency,"
    " key_concurrency = excluded.key_concurrency, rate_count = excluded.rate_count,"
    " rate_period = excluded.rate_period, key_rate_count = excluded.key_rate_count,"
    " key_rate_period = excluded.key_rate_period,"
    " tokens = least(coalesce(jobvisor_limits.tokens, excluded.tokens), excluded.tokens),"
    " refilled_at = coalesce(jobvisor_limits.refilled_at, excluded.refilled_at),"
    " source = excluded.source, updated_at = excluded.updated_at"
)

LIMIT_CLEAR: Final[LiteralString] = (
    # Remove one group's limits; returns its name when it had some.
    "DELETE FROM jobvisor_limits WHERE kind = %(kind)s AND name = %(name)s RETURNING name"
)

LIMIT_LIST: Final[LiteralString] = (
    # Every limit, by kind and name.
    "SELECT kind, name, concurrency, key_concurrency, rate_count, rate_period, source,"
    " key_rate_count, key_rate_period FROM jobvisor_limits ORDER BY kind, name"
)
