"""Every statement the PostgreSQL engine runs. The SQLite module defines the
same names. `%(now)s` is the time, always a parameter: the injected clock's,
or the database's as the runner reads it (`engine.DatabaseClock`). No
statement that changes a row calls a volatile function (a claim token is the
caller's, a retry's jitter is drawn from the job's id): each one would run
as it is on a distributed PostgreSQL.

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
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
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
    " status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
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
    " status = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
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
    "   WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,"
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
    # culprit; or, with none known, it ran alone there, or this is its
    # `crash_limit`-th crash since it was last charged for one.
    "(CASE WHEN %(culprit)s::uuid IS NOT NULL THEN id = %(culprit)s::uuid"
    " ELSE crashes + 1 >= %(crash_limit)s OR (SELECT count(*) FROM jobvisor_jobs AS held"
    "   WHERE held.status = 'running' AND held.worker_id = %(worker_id)s) = 1 END)"
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
    # One batch of terminal jobs of one status finished more than `age` seconds ago.
    "DELETE FROM jobvisor_jobs WHERE id IN ("
    " SELECT id FROM jobvisor_jobs WHERE status = %(status)s"
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
