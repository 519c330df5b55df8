"""Every statement the Citus mode runs: PostgreSQL's, but for those that lock
or change jobs, which name the jobs' buckets so that Citus sends each one to
the shard that holds them (a statement that locks rows must name one), and
which leave out what a shard cannot run: a volatile function in RETURNING
(pg_notify: the notices go from the coordinator instead, see
`routing.Routing`) and a STABLE one inside a CASE (`timestamptz + interval`:
the time comes computed, as `retry_at` or epoch seconds).

Each changed statement is derived from PostgreSQL's by edits checked at
import, so the two never drift apart unnoticed."""

from __future__ import annotations

from typing import Final, LiteralString

from ..postgres import sql as _pg
from ..postgres.sql.intake import NOTIFY_CHANNEL


def __getattr__(name: str) -> LiteralString:
    """Every statement not defined here: PostgreSQL's, as it is."""
    value: LiteralString = getattr(_pg, name)
    return value


_BUCKET: Final = "bucket = %(bucket)s::int4 AND "
_BUCKETS: Final = "j.bucket = ANY(%(buckets)s::int4[]) AND "


def _edited(
    name: str, *edits: tuple[str, str], quiet: bool = False, cut: str | None = None
) -> LiteralString:
    """PostgreSQL's statement `name` with each (old, new) edit made (every
    `old` must occur), with `quiet` every pg_notify call made NULL, and with
    `cut` only what comes before that text."""
    text: str = getattr(_pg, name)
    if cut is not None:
        text = text[: text.index(cut)]
    for old, new in edits:
        if old not in text:
            raise AssertionError(f"{name}: {old!r} not found")
        text = text.replace(old, new)
    if quiet:
        text = _without_notices(text)
    return text


def _without_notices(text: str) -> str:
    """`text` with each `pg_notify(...)` call replaced by NULL."""
    while (start := text.find("pg_notify(")) >= 0:
        depth, end = 0, start + len("pg_notify")
        while True:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
            end += 1
        text = text[:start] + "NULL" + text[end + 1 :]
    return text


# An error history entry (see JOB_FAIL) without jsonb_build_object, which is
# STABLE and so refused with column arguments in an UPDATE on a shard: JSON
# text put together with immutable functions (a worker id holds no control
# characters: only a backslash and a quote need escaping), cast to jsonb.
# `entry_at` and `error_json` come from the client (`routing.Routing`).
_WORKER_TEXT: Final = "replace(replace(worker_id, '\\', '\\\\'), '\"', '\\\"')"


def _entry(error: str) -> str:
    return (
        "('[{\"attempt\": ' || attempts::text || ', ' || %(entry_at)s::text"
        " || ', \"error\": ' || " + error + ' || \', "worker_id": "\' || ' + _WORKER_TEXT + ""
        " || '\"}]')::jsonb"
    )


_BUILT_ENTRY: Final = (
    "jsonb_build_array(jsonb_build_object(   'attempt', attempts, 'at', %(now)s::timestamptz,"
    "   'error', %(error)s::text, 'worker_id', worker_id))"
)
_REAPED_ENTRY: Final = (
    "jsonb_build_array(jsonb_build_object(   'attempt', attempts, 'at', %(now)s::timestamptz,"
    "   'error', 'lease expired on worker ' || worker_id, 'worker_id', worker_id))"
)
_ENTRY: Final = (_BUILT_ENTRY, _entry("%(error_json)s::text"))


# --- where jobs go in ---------------------------------------------------------

JOB_COLUMNS_COPY: Final = _edited(
    "JOB_COLUMNS_COPY", ("concurrency_key) FROM STDIN", "concurrency_key, bucket) FROM STDIN")
)

# A new job's notice names its bucket (`queue.notices`): an idle worker claims
# there first.
_NOTICE_EDITS: Final = (
    ("RETURNING id, queue, priority)", "RETURNING id, queue, priority, bucket)"),
    (
        "CASE WHEN priority = 0 THEN queue ELSE json_build_object('kind', 'job', 'queue', queue,"
        " 'priority', priority)::text END)",
        "json_strip_nulls(json_build_object('kind', 'job', 'queue', queue,"
        " 'priority', nullif(priority, 0), 'bucket', bucket))::text)",
    ),
)
JOB_INSERT: Final = _edited(
    "JOB_INSERT",
    ("meta, concurrency_key)", "meta, concurrency_key, bucket)"),
    ("%(concurrency_key)s)", "%(concurrency_key)s, %(bucket)s::int4)"),
    ("ON CONFLICT (dedupe_key)", "ON CONFLICT (bucket, dedupe_key)"),
    *_NOTICE_EDITS,
)

JOB_INSERT_KEYED_MANY: Final = _edited(
    "JOB_INSERT_KEYED_MANY",
    ("meta, concurrency_key)", "meta, concurrency_key, bucket)"),
    ("r.meta, r.concurrency_key", "r.meta, r.concurrency_key, r.bucket"),
    ("%(concurrency_keys)s::text[])", "%(concurrency_keys)s::text[], %(buckets)s::int4[])"),
    (
        "correlation_id, meta, concurrency_key, n)",
        "correlation_id, meta, concurrency_key, bucket, n)",
    ),
    ("ON CONFLICT (dedupe_key)", "ON CONFLICT (bucket, dedupe_key)"),
)

# A unique job lives in its unique base's bucket (`NewJob.placement_key`),
# where the (bucket, unique_key) index sees every holder of its key.
_UNIQUE_EDITS: Final = (
    (" concurrency_key) VALUES", " concurrency_key, bucket) VALUES"),
    ("%(concurrency_key)s) ON CONFLICT", "%(concurrency_key)s, %(bucket)s::int4) ON CONFLICT"),
    ("ON CONFLICT (unique_key)", "ON CONFLICT (bucket, unique_key)"),
)
JOB_INSERT_UNIQUE: Final = _edited("JOB_INSERT_UNIQUE", *_UNIQUE_EDITS, *_NOTICE_EDITS)
JOB_INSERT_UNIQUE_REPLACE: Final = _edited(
    "JOB_INSERT_UNIQUE_REPLACE", *_UNIQUE_EDITS, *_NOTICE_EDITS
)

# --- the claim: one bucket at a time (`ops.claiming`) ----------------------------

_CLAIM_EDITS: Final = (
    (
        " WHERE status IN ('pending', 'retryable')",
        " WHERE " + _BUCKET + "status IN ('pending', 'retryable')",
    ),
    (" FROM picked WHERE j.id", " FROM picked WHERE j." + _BUCKET + "j.id"),
)
JOB_CLAIM: Final = _edited("JOB_CLAIM", *_CLAIM_EDITS)
JOB_CLAIM_ABOVE: Final = _edited("JOB_CLAIM_ABOVE", *_CLAIM_EDITS)

# The buckets of the first due jobs, in claim order, read across every shard
# without locking anything: where a claim then takes from (`ops.claiming`).
# Like the claim it leaves out paused queues (their jobs at the head would
# hide every other queue's) and limited groups (the limited claim's).
_PEEK_EDITS: Final = (
    ("WITH picked AS ( SELECT id FROM", "SELECT bucket FROM"),
    (" LIMIT %(limit)s FOR UPDATE SKIP LOCKED)", " LIMIT %(limit)s"),
)
JOB_CLAIM_PEEK: Final = _edited("JOB_CLAIM", *_PEEK_EDITS, cut=" UPDATE jobvisor_jobs AS j")
JOB_CLAIM_ABOVE_PEEK: Final = _edited(
    "JOB_CLAIM_ABOVE", *_PEEK_EDITS, cut=" UPDATE jobvisor_jobs AS j"
)
# The peek where no limit is known to the claimer: without the limits'
# subqueries (each a step of its own over the shards, ~1.5 ms). The claim on
# the bucket still leaves limited jobs out, so one set meanwhile costs a
# short claim at worst (which looks again).
_UNLIMITED: Final = (
    ("   AND job_type <> ALL(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'type'))", ""),
    ("   AND queue <> ALL(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'queue'))", ""),
)
JOB_CLAIM_PEEK_UNLIMITED: Final = _edited(
    "JOB_CLAIM", *_PEEK_EDITS, *_UNLIMITED, cut=" UPDATE jobvisor_jobs AS j"
)

# --- the limited claim: read across the shards, decided by the client -----------
# (`ops.claiming._claim_limited_buckets`). Under LIMIT_LOCK, which claims of
# a group take on the coordinator, the claim reads the groups' limits, their
# running jobs and key buckets, and the first due jobs of the groups with
# room; it picks the jobs within every room, takes them one bucket at a time
# by id, and takes them from the token buckets: all in one transaction.

LIMIT_ROOMS: Final = _edited(
    "JOB_CLAIM_LIMITED",
    ("WITH lim AS MATERIALIZED ( SELECT", "SELECT"),
    cut=" run AS MATERIALIZED (",
)[:-2]  # every limit, its rate's whole tokens refilled to `now`

LIMITED_RUNNING: Final[LiteralString] = (
    # The running jobs of these limited types and queues, per queue, type and
    # concurrency key (the names as parameters: each subquery in a statement
    # over every shard is a step of its own).
    "SELECT queue, job_type, concurrency_key, count(*) FROM jobvisor_jobs"
    " WHERE status = 'running'"
    " AND (job_type = ANY(%(limited_types)s::text[]) OR queue = ANY(%(limited_queues)s::text[]))"
    " GROUP BY queue, job_type, concurrency_key"
)

KEY_BUCKETS_IN_USE: Final = _edited(
    "JOB_CLAIM_LIMITED",
    (
        "JOIN lim AS l ON l.kind = 'type'   AND l.name = b.job_type AND l.key_rate_count"
        " IS NOT NULL),",
        "JOIN jobvisor_limits AS l ON l.kind = 'type' AND l.name = b.job_type"
        " AND l.key_rate_count IS NOT NULL",
    ),
    cut=" full_keys AS MATERIALIZED (",
).split(" kb AS MATERIALIZED (", 1)[1]  # (type, key, whole tokens refilled to `now`)

JOB_LIMITED_PEEK: Final[LiteralString] = (
    # The first `window` due jobs, in claim order, of groups with room
    # (`open_types`, `open_queues`) and none without (`full_types`,
    # `full_queues`, `full_keys`: type and key joined by chr(1), which no
    # name holds), read across the shards without locks.
    "SELECT id, bucket, queue, job_type, concurrency_key FROM jobvisor_jobs"
    " WHERE status IN ('pending', 'retryable')"
    " AND run_at <= %(now)s::timestamptz + %(slack)s::float8 * interval '1 second'"
    " AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))"
    " AND (%(job_types)s::text[] IS NULL OR job_type = ANY(%(job_types)s::text[]))"
    " AND queue <> ALL(ARRAY(SELECT queue FROM jobvisor_queue_pauses))"
    " AND (job_type = ANY(%(open_types)s::text[]) OR queue = ANY(%(open_queues)s::text[]))"
    " AND job_type <> ALL(%(full_types)s::text[]) AND queue <> ALL(%(full_queues)s::text[])"
    " AND (concurrency_key IS NULL"
    "   OR job_type || chr(1) || concurrency_key <> ALL(%(full_keys)s::text[]))"
    " ORDER BY priority DESC, run_at, id LIMIT %(window)s"
)

JOB_CLAIM_IDS: Final[LiteralString] = (
    # Claim these jobs of one bucket that are still waiting (`ids`), as the
    # claim does.
    "WITH picked AS ( SELECT id FROM jobvisor_jobs"
    " WHERE bucket = %(bucket)s::int4 AND id = ANY(%(ids)s::uuid[])"
    " AND status IN ('pending', 'retryable') FOR UPDATE SKIP LOCKED)"
    + _edited("JOB_CLAIM", _CLAIM_EDITS[1]).split(" LIMIT %(limit)s FOR UPDATE SKIP LOCKED)")[1]
)

# The claimed jobs taken from their groups' and keys' buckets: PostgreSQL's,
# with the jobs given (one row each) rather than found by their claim.
LIMIT_TAKE_TOKENS: Final = _edited(
    "LIMIT_TAKE_TOKENS",
    (
        "FROM jobvisor_jobs AS j,",
        "FROM unnest(%(taken_types)s::text[], %(taken_queues)s::text[]) AS j(job_type, queue),",
    ),
    (
        "   WHERE j.status = 'running' AND j.lease_expires_at = %(now)s::timestamptz"
        "     + %(lease)s::float8 * interval '1 second' AND j.claim_token = %(token)s::uuid",
        "",
    ),
)

KEY_BUCKET_TAKE: Final[LiteralString] = (
    # PostgreSQL's KEY_BUCKET_TAKE with each key's tokens refilled in the
    # read of its row (a shard would run a subquery in ON CONFLICT as a
    # query of its own), under the type's lock: no other take between.
    "INSERT INTO jobvisor_key_buckets AS b (job_type, concurrency_key, tokens, refilled_at)"
    " SELECT j.job_type, j.concurrency_key, min(CASE WHEN o.tokens IS NULL"
    "   THEN l.key_rate_count ELSE least(l.key_rate_count::float8, o.tokens + greatest(0,"
    "   extract(epoch FROM %(now)s::timestamptz - o.refilled_at))"
    "   * l.key_rate_count / l.key_rate_period) END) - count(*),"
    " greatest(min(o.refilled_at), %(now)s::timestamptz)"
    " FROM unnest(%(key_types)s::text[], %(keys)s::text[]) AS j(job_type, concurrency_key)"
    " JOIN jobvisor_limits AS l ON l.kind = 'type' AND l.name = j.job_type"
    "   AND l.key_rate_count IS NOT NULL"
    " LEFT JOIN jobvisor_key_buckets AS o ON o.job_type = j.job_type"
    "   AND o.concurrency_key = j.concurrency_key"
    " GROUP BY j.job_type, j.concurrency_key"
    " ON CONFLICT (job_type, concurrency_key) DO UPDATE SET tokens = excluded.tokens,"
    " refilled_at = excluded.refilled_at"
)

# --- a held job's outcomes ------------------------------------------------------

# A held job's end that someone waits for, or that frees a limited group's
# room, sends a notice: not from the shard (pg_notify in RETURNING) but from
# the coordinator (`routing.Routing`), told by what the statement returns
# instead. Each such statement ends its RETURNING with: whether a waiter
# wants the notice, whether the job is of a limited group, its queue, its id.
_LIMITED: Final = (
    "(job_type = ANY(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'type'))"
    " OR queue = ANY(ARRAY(SELECT name FROM jobvisor_limits WHERE kind = 'queue')))"
)

_HELD_MANY: Final = (" WHERE j.id = c.id", " WHERE " + _BUCKETS + "j.id = c.id")
JOB_RENEW_MANY: Final = _edited("JOB_RENEW_MANY", _HELD_MANY)
JOB_COMPLETE_MANY: Final = (
    _edited("JOB_COMPLETE_MANY", _HELD_MANY, cut=" RETURNING")
    + " RETURNING j.id, j.wait_notify, "
    + _LIMITED.replace("job_type =", "j.job_type =").replace("OR queue", "OR j.queue")
    + ", j.queue, j.id"
)
JOB_RELEASE_MANY: Final = _edited("JOB_RELEASE_MANY", _HELD_MANY)

_ONE: Final = (" WHERE id = %(id)s", " WHERE " + _BUCKET + "id = %(id)s")
JOB_FAIL: Final = (
    _edited(
        "JOB_FAIL",
        _ONE,
        (
            "ELSE %(now)s::timestamptz + %(delay)s::float8 * interval '1 second' END",
            "ELSE %(retry_at)s::timestamptz END",
        ),
        _ENTRY,
        cut=" RETURNING",
    )
    + " RETURNING status, wait_notify AND status = 'dead', "
    + _LIMITED
    + ", queue, id"
)
JOB_SNOOZE: Final = _edited("JOB_SNOOZE", _ONE)
JOB_CANCEL_HELD: Final = _edited("JOB_CANCEL_HELD", _ONE)
JOB_GET: Final = _edited("JOB_GET", _ONE)
JOB_STATUS: Final = _edited("JOB_STATUS", _ONE)
JOB_WAIT_MARK: Final = _edited("JOB_WAIT_MARK", _ONE)

# The running job's worker hears of it from the coordinator (NOTICES).
JOB_CANCEL: Final = _edited("JOB_CANCEL", _ONE, quiet=True) + ", queue, id"

NOTICES: Final[LiteralString] = (
    # Notices a shard could not send, sent on the coordinator, where the
    # workers listen.
    "SELECT pg_notify('" + NOTIFY_CHANNEL + "', p) FROM unnest(%(payloads)s::text[]) AS p"
)

# --- the dashboard's reads -------------------------------------------------------
# Citus plans no correlated subquery beside a set-returning function: the
# per-queue and per-minute probes become one aggregate, which every shard
# computes over its own rows and the coordinator merges.

JOB_OLDEST_DUE_OF_QUEUES: Final[LiteralString] = (
    # PostgreSQL's JOB_OLDEST_DUE_OF_QUEUES: per queue, seconds since its oldest
    # claimable job became due (NULL: none is due).
    "SELECT q.name, a.age FROM unnest(%(queues)s::text[]) AS q(name)"
    " LEFT JOIN (SELECT queue, extract(epoch FROM %(now)s::timestamptz - min(run_at)) AS age"
    "   FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')"
    "   AND queue = ANY(%(queues)s::text[]) AND run_at <= %(now)s::timestamptz"
    "   GROUP BY queue) AS a ON a.queue = q.name"
)

JOB_FINISHED_PER_MINUTE: Final[LiteralString] = (
    # PostgreSQL's JOB_FINISHED_PER_MINUTE, every count exact (no cap): for
    # each Unix minute `first`..`last` with any, the jobs completed and died
    # in it, each with the finish time of the last one.
    "SELECT minute, count(*) FILTER (WHERE status = 'completed'),"
    " max(finished_at) FILTER (WHERE status = 'completed'),"
    " count(*) FILTER (WHERE status = 'dead'), max(finished_at) FILTER (WHERE status = 'dead')"
    " FROM (SELECT status, finished_at,"
    "   floor(extract(epoch FROM finished_at) / 60)::bigint AS minute FROM jobvisor_jobs"
    "   WHERE status IN ('completed', 'dead')"
    "   AND finished_at >= to_timestamp(%(first)s::bigint * 60)"
    "   AND finished_at < to_timestamp((%(last)s::bigint + 1) * 60)) AS f"
    " GROUP BY minute ORDER BY minute"
)


# --- recovery -------------------------------------------------------------------

JOB_REAP_EXPIRED: Final = _edited(
    "JOB_REAP_EXPIRED",
    ("ELSE %(now)s::timestamptz + (SELECT", "ELSE to_timestamp(%(now_epoch)s::float8 + (SELECT"),
    ("LIMIT 1) * interval '1 second' END", "LIMIT 1)) END"),
    (_REAPED_ENTRY, _entry("'\"lease expired on worker ' || " + _WORKER_TEXT + " || '\"'")),
)

JOB_REQUEUE_CRASHED: Final = _edited("JOB_REQUEUE_CRASHED", _ENTRY)

# A dead job back to pending unless a live job holds its dedupe key: every
# job of a key is in its bucket, so the read of live holders stays there.
JOB_REQUEUE_DEAD: Final = _edited(
    "JOB_REQUEUE_DEAD",
    _ONE,
    ("WHERE live.dedupe_key", "WHERE live." + _BUCKET + "live.dedupe_key"),
)

# Retention: every shard deletes its own finished jobs at once (a statement
# that locks rows must name one bucket, so no batch of SKIP LOCKED picks).
JOB_DELETE_FINISHED: Final = _edited(
    "JOB_DELETE_FINISHED",
    ("WHERE id IN ( SELECT id FROM jobvisor_jobs WHERE", "WHERE"),
    (" LIMIT %(limit)s FOR UPDATE SKIP LOCKED)", ""),
)

# Work over many jobs of a type or queue: each shard does its own part at
# once, rather than in batches of SKIP LOCKED picks across buckets.
_EVERY_SHARD: Final = ("WHERE id IN ( SELECT id FROM jobvisor_jobs WHERE", "WHERE")
_NO_PICK: Final = (" LIMIT %(limit)s FOR UPDATE SKIP LOCKED)", "")
JOB_REQUEUE_DEAD_OF_TYPE: Final = _edited("JOB_REQUEUE_DEAD_OF_TYPE", _EVERY_SHARD, _NO_PICK)
JOB_DELETE_DEAD_OF_TYPE: Final = _edited("JOB_DELETE_DEAD_OF_TYPE", _EVERY_SHARD, _NO_PICK)
JOB_DELETE_DEAD: Final = _edited("JOB_DELETE_DEAD", _ONE)
JOB_CANCEL_MANY: Final[LiteralString] = (
    # PostgreSQL's JOB_CANCEL_MANY over every shard at once; the running jobs'
    # workers hear of it from the coordinator (NOTICES).
    "UPDATE jobvisor_jobs SET"
    " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
    " finished_at = CASE WHEN status = 'running' THEN finished_at ELSE %(now)s::timestamptz END,"
    " cancel_requested_at = CASE WHEN status = 'running' THEN %(now)s::timestamptz END,"
    " last_error = %(error)s"
    " WHERE status IN ('pending', 'retryable', 'running') AND cancel_requested_at IS NULL"
    "   AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)"
    "   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)"
    " RETURNING status, NULL, queue, id"
)

BUCKET_VALUES: Final[LiteralString] = (
    # The value standing for each bucket, in bucket order (migrations/citus).
    "SELECT value FROM jobvisor_buckets ORDER BY k"
)

CITUS_EXTENSION: Final[LiteralString] = (
    # Whether the database is a Citus coordinator.
    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
)

CITUS_DISTRIBUTED: Final[LiteralString] = (
    # Whether the jobs table is spread over the cluster already.
    "SELECT to_regclass('jobvisor_buckets') IS NOT NULL"
)
