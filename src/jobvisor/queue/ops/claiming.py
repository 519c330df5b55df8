"""Taking jobs out: `claim` and its variants (plain, above a priority, past a
bound, within the limits)."""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from .. import validate
from ..model import (
    Job,
)
from ..plan import BEGIN, COMMIT, Batch, Plan, Steps, Stmt
from .context import Ctx, _names
from .settling import _lease

# A limited claim looks at this many candidates per job it may claim (at
# least CLAIM_WINDOW_MIN), so a few jobs over their group's room at the head
# do not hide the others.
CLAIM_WINDOW_FACTOR = 4
CLAIM_WINDOW_MIN = 64


# --- the claim and its outcomes -----------------------------------------------


def claim(
    ctx: Ctx,
    worker_id: str,
    *,
    queues: Iterable[str] | None = None,
    job_types: Iterable[str] | None = None,
    limit: int = 1,
    lease: float | dt.timedelta | None = None,
    above_priority: int | None = None,
) -> Plan[list[Job]]:
    """Claim up to `limit` due jobs for `worker_id`, highest priority first, then
    oldest `run_at`, then id. Each claimed job has its attempt counted, the
    claim's fresh token and a lease of `lease` seconds from the database clock. Two
    claimers never receive the same job. An empty or missing filter means all.

    With `above_priority`, only jobs of a higher priority than that, and none
    of a limited type or queue: the claim of a worker busy with jobs of that
    priority when a job that jumps the queue arrives. It reads the claim
    index from its head, so it is quick while few such jobs wait."""
    validate.name("worker_id", worker_id)
    validate.count("limit", limit, high=validate.MAX_CLAIM_LIMIT)
    if above_priority is not None:
        validate.count("above_priority", above_priority, low=-(2**31), high=validate.MAX_INT32)
    seconds = _lease(ctx, lease)
    d = ctx.dialect
    queue_list, type_list = _names("queues", queues), _names("job_types", job_types)
    params = {
        "worker_id": worker_id,
        "queues": d.names(queue_list),
        "job_types": d.names(type_list),
        "limit": limit,
        "lease": seconds,
        "now": ctx.now(),
        "slack": 0.0 if ctx.clock is not None else d.clock_slack,
        # One token for the jobs of this claim: each pair (id, token) is
        # still unique, and the statement calls no volatile function.
        "token": d.claim_token(uuid.uuid4()),
    }

    key = (queue_list and tuple(queue_list), type_list and tuple(type_list))
    if above_priority is not None:
        params["above"] = above_priority
        if d.bucket_count:
            above = _claim_buckets(ctx, params, above=True, key=(*key, above_priority))
            return Plan(above, transaction=False, planner=True)
        return _claim_above(ctx, params)
    seen = ctx.limits_seen
    claim_plain, claim_limited = (
        (_claim_buckets_plain, _claim_limited_buckets)
        if d.bucket_count
        else (_claim_plain, _claim_limited)
    )

    def steps() -> Steps[list[Job]]:
        trying = seen.worth_trying(key)
        # The plain claim rests a moment after coming back short only while
        # limited groups are about (its short claim read past their jobs):
        # a look for limits that finds none does not skip it.
        plain = not trying or not seen.present(key) or seen.plain_worth_trying(key)
        jobs: list[Job] = []
        if trying and (not plain or seen.limited_first(key)):
            jobs = yield from claim_limited(ctx, params, limit, key)
            trying = False
        if plain and len(jobs) < limit:
            asked = limit - len(jobs)
            got = yield from claim_plain(ctx, {**params, "limit": asked}, key)
            seen.plain_came_back(key, short=len(got) < asked)
            jobs.extend(got)
        if trying and len(jobs) < limit:
            jobs.extend((yield from claim_limited(ctx, params, limit - len(jobs), key)))
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    # Each statement commits by itself, but for the limited claim's few.
    return Plan(steps(), transaction=False, planner=True)


# How many times a claim on a cluster looks across the shards again when
# others took the jobs it saw first.
_BUCKET_ROUNDS = 3


def _claim_buckets_plain(ctx: Ctx, params: dict[str, Any], key: Any) -> Steps[list[Job]]:
    """The claim of jobs of no limited group on a Citus cluster; its look
    across the shards leaves the limited groups out only where this queue's
    claims saw some lately (`LimitsSeen.present`; the claim on a bucket always
    does)."""
    unlimited = not ctx.limits_seen.present(key)
    return _claim_buckets(ctx, params, above=False, key=(*key, None), unlimited=unlimited)


def _claim_buckets(
    ctx: Ctx, params: dict[str, Any], *, above: bool, key: Any, unlimited: bool = False
) -> Steps[list[Job]]:
    """The claim on a Citus cluster (`drivers.citus`): every claim statement
    names one bucket and runs on its shard alone.

    A read across every shard without locks finds the buckets of the first
    `limit` due jobs in claim order (JOB_CLAIM_PEEK: each shard reads the head
    of its claim index, the coordinator merges them), and the claim takes from
    each of those buckets as many jobs as it showed there, in that order: the
    jobs it gets are the first due across the cluster (as far as claimers
    racing for the same heads allow; one that finds its jobs taken looks
    again). A claim of several jobs whose last one came back full from one
    bucket (a busy worker's) goes back to that bucket first next time
    (`BucketHints`): one statement per claim, and its completions on one
    shard too; within that bucket the order is the claim index's, and every
    `BucketHints.REFRESH` claims it looks across the shards again. A bucket a
    new job's notice named (`BucketHints.heard`) is tried first, once, and
    what it gives is the claim: an idle worker picks that job up without the
    look (the worker claims again soon after a claim that came back short)."""
    d, hints = ctx.dialect, ctx.bucket_hints
    sql: Any = d.sql  # drivers.citus.sql, which has the peeks besides
    claim_sql = sql.JOB_CLAIM_ABOVE if above else sql.JOB_CLAIM
    peek_sql = (
        sql.JOB_CLAIM_ABOVE_PEEK
        if above
        else sql.JOB_CLAIM_PEEK_UNLIMITED
        if unlimited
        else sql.JOB_CLAIM_PEEK
    )
    limit = params["limit"]

    def take(bucket: Any, count: int, jobs: list[Job]) -> Steps[bool]:
        asked = min(count, limit - len(jobs))
        rows = yield Stmt(claim_sql, {**params, "limit": asked, "bucket": bucket}, "all")
        jobs.extend(d.job(r) for r in rows)
        return bool(len(rows) == asked)

    def steps() -> Steps[list[Job]]:
        jobs: list[Job] = []
        heard = hints.take_heard()
        if heard is not None:
            yield from take(heard, limit, jobs)
            if jobs:  # what the notice was about, at once; a short claim comes again soon
                return jobs
        sticky = hints.bucket(key) if limit > 1 else None
        if sticky is not None and (yield from take(sticky, limit, jobs)):
            return jobs
        hints.short(key)
        for _ in range(_BUCKET_ROUNDS):
            seen = yield Stmt(peek_sql, {**params, "limit": limit - len(jobs)}, fetch="all")
            if not seen:
                break
            for bucket, count in collections.Counter(row[0] for row in seen).items():
                if (yield from take(bucket, count, jobs)) and len(jobs) == limit:
                    hints.full(key, bucket)
                    break
            if len(jobs) == limit:
                break
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    return steps()


def _claim_above(ctx: Ctx, params: dict[str, Any]) -> Plan[list[Job]]:
    def steps() -> Steps[list[Job]]:
        rows = yield Stmt(ctx.dialect.sql.JOB_CLAIM_ABOVE, params, fetch="all")
        jobs = [ctx.dialect.job(r) for r in rows]
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    return Plan(steps(), transaction=False, planner=True)


def _claim_plain(ctx: Ctx, params: dict[str, Any], key: Any) -> Steps[list[Job]]:
    """The claim of jobs of no limited group: bounded when this queue knows
    where its last claims left off (`ClaimBounds`), else, or when the bounded
    claim finds nothing, the full claim from the head of the claim index."""
    d, bounds = ctx.dialect, ctx.claim_bounds
    bound = bounds.bound(key) if d.bounded_claim else None
    jobs: list[Job] = []
    if bound is not None:
        after = {
            "after_priority": -bound[0],
            "after_run_at": bound[1],
            "after_id": bound[2],
            "mark_filter": _mark_filter(key),
        }
        began = time.monotonic()
        rows = yield Stmt(d.sql.JOB_CLAIM_AFTER, {**params, **after}, fetch="all")
        jobs = [d.job(r) for r in rows]
        bounds.claimed(key, jobs, full=False)
        if len(jobs) == params["limit"] or not bounds.full_after_dry(key, time.monotonic() - began):
            return jobs
    # Past a bounded claim that came back short, the full claim asks for the rest.
    began = time.monotonic()
    asked = params["limit"] - len(jobs)
    rows = yield Stmt(d.sql.JOB_CLAIM, {**params, "limit": asked}, fetch="all")
    took = time.monotonic() - began
    full = [d.job(r) for r in rows]
    if d.bounded_claim:
        bounds.claimed(key, full, full=True, took=took, asked=asked)
    return jobs + full


def _mark_filter(key: Any) -> str:
    """The name a claim filter's marks go by (JOB_CLAIM_AFTER): the same for
    every claimer whose filter takes the same queues and types, whatever their
    order, and short however many it names."""
    queues, types = key
    text = json.dumps([sorted(queues) if queues else None, sorted(types) if types else None])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _claim_limited(ctx: Ctx, params: dict[str, Any], room: int, key: Any) -> Steps[list[Job]]:
    """Claim up to `room` jobs of limited groups, in a transaction of its own:
    lock the groups the claim could take jobs of (PostgreSQL: an advisory
    lock per group, so claims of other groups and unlimited claims never wait
    on it; SQLite: the write lock already held), claim within every group's
    and key's room, and take the started jobs from the groups' and keys'
    token buckets. Every statement's parameters are known before the first
    runs, so on PostgreSQL the transaction is one round trip, and a group's
    lock is held only while the server works."""
    d = ctx.dialect
    window = max(CLAIM_WINDOW_MIN, room * CLAIM_WINDOW_FACTOR)
    claim_params = {**params, "limit": room, "window": window}
    taking = {k: params[k] for k in ("now", "lease", "token")}
    groups, rows, _, _ = (
        yield Batch(
            (
                BEGIN,
                Stmt(d.sql.LIMIT_LOCK, params, fetch="all"),
                Stmt(d.sql.JOB_CLAIM_LIMITED, claim_params, fetch="all"),
                Stmt(d.sql.LIMIT_TAKE_TOKENS, taking),
                Stmt(d.sql.KEY_BUCKET_TAKE, taking),
                COMMIT,
            )
        )
    )[1:5]
    ctx.limits_seen.saw(key, bool(groups))
    return [d.job(r) for r in rows]


def _claim_limited_buckets(
    ctx: Ctx, params: dict[str, Any], room: int, key: Any
) -> Steps[list[Job]]:
    """The limited claim on a Citus cluster, in a transaction of its own:
    take the locks of the groups it could claim jobs of (LIMIT_LOCK, on the
    coordinator, where every claim of a group takes them), read the limits,
    the key buckets in use and the running jobs of the limited groups; read
    the first due jobs of the groups with room across the shards, without
    locks (JOB_LIMITED_PEEK); pick those within every group's and key's room,
    in claim order (`Rooms.pick`); claim them one bucket at a time by id; and
    take them from the token buckets that have a rate. No other claim of a
    group runs between the reads and the commit, and a completion only frees
    room, so no group goes past its limits; a job changed meanwhile (a
    cancel) is skipped. Four round trips, two of them over every shard:
    about 20 ms on a quiet cluster, where one server's is one round trip."""
    d = ctx.dialect
    sql: Any = d.sql  # drivers.citus.sql
    groups, limits, key_buckets = (
        yield Batch(
            (
                BEGIN,
                Stmt(sql.LIMIT_LOCK, params, fetch="all"),
                Stmt(sql.LIMIT_ROOMS, params, fetch="all"),
                Stmt(sql.KEY_BUCKETS_IN_USE, params, fetch="all"),
            )
        )
    )[1:]
    ctx.limits_seen.saw(key, bool(groups))
    if not groups:  # no limited group this claim could take jobs of
        yield COMMIT
        return []
    names = {
        "limited_types": [row[1] for row in limits if row[0] == "type"],
        "limited_queues": [row[1] for row in limits if row[0] == "queue"],
    }
    running = yield Stmt(sql.LIMITED_RUNNING, names, fetch="all")
    rooms = Rooms(limits, running, key_buckets, locked={(g[0], g[1]) for g in groups})
    window = max(CLAIM_WINDOW_MIN, room * CLAIM_WINDOW_FACTOR)
    picked: dict[Any, Any] = {}
    if rooms.open:
        seen = yield Stmt(
            sql.JOB_LIMITED_PEEK, {**params, **rooms.filters(), "window": window}, "all"
        )
        picked = {row[0]: row for row in rooms.pick(seen, room)}
    by_bucket: dict[Any, list[Any]] = {}
    for job_id, bucket, *_ in picked.values():
        by_bucket.setdefault(bucket, []).append(job_id)
    claims = tuple(
        Stmt(sql.JOB_CLAIM_IDS, {**params, "bucket": bucket, "ids": ids}, "all")
        for bucket, ids in by_bucket.items()
    )
    rated = {(g[0], g[1]) for g in groups if g[2]}
    if not claims or not (rated or rooms.key_rated):
        # No bucket of tokens to take from: the claims and the commit go together.
        jobs = [d.job(r) for rows in (yield Batch((*claims, COMMIT)))[:-1] for r in rows]
        return jobs
    jobs = [d.job(r) for rows in (yield Batch(claims)) for r in rows]
    # The claimed jobs with a key, as picked (id, bucket, queue, type, key);
    # of those, the ones whose type rates its keys.
    keyed = [picked[j.id] for j in jobs if picked[j.id][4] is not None]
    rated_keys = [row for row in keyed if row[3] in rooms.key_rated]
    taking = {
        "now": params["now"],
        "taken_types": [j.job_type for j in jobs],
        "taken_queues": [j.queue for j in jobs],
        "key_types": [row[3] for row in rated_keys],
        "keys": [row[4] for row in rated_keys],
    }
    takes = [Stmt(sql.LIMIT_TAKE_TOKENS, taking)] if rated else []
    if taking["keys"]:
        takes.append(Stmt(sql.KEY_BUCKET_TAKE, taking))
    yield Batch((*takes, COMMIT))
    return jobs


_NO_LIMIT = 2**31 - 1


class Rooms:
    """What the limited groups have room for, from the limited claim's reads
    on a cluster (`_claim_limited_buckets`): each group's room (its
    concurrency left, its rate's whole tokens), each key's (its type's
    key_concurrency left, its key bucket's whole tokens)."""

    def __init__(
        self,
        limits: Iterable[Any],
        running: Iterable[Any],
        key_buckets: Iterable[Any],
        *,
        locked: set[tuple[str, str]],
    ) -> None:
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.key_running: collections.Counter[tuple[str, str]] = collections.Counter()
        for queue, job_type, concurrency_key, n in running:
            counts["queue", queue] += n
            counts["type", job_type] += n
            if concurrency_key is not None:
                self.key_running[job_type, concurrency_key] += n
        self.group: dict[tuple[str, str], int] = {}
        self.key_limits: dict[str, tuple[int | None, int | None]] = {}
        for kind, name, concurrency, key_concurrency, key_rate_count, _, tokens in limits:
            left = _NO_LIMIT if concurrency is None else concurrency - counts[kind, name]
            self.group[kind, name] = min(left, _NO_LIMIT if tokens is None else int(tokens))
            if kind == "type" and (key_concurrency is not None or key_rate_count is not None):
                self.key_limits[name] = (key_concurrency, key_rate_count)
        self.key_rated = {t for t, (_, rate) in self.key_limits.items() if rate is not None}
        self.key_tokens = {(t, k): int(tokens) for t, k, tokens in key_buckets}
        self.open = [g for g in self.group if g in locked and self.group[g] > 0]
        self.closed = [g for g in self.group if g not in self.open]
        self.full_keys = [
            (t, k) for t, k in {*self.key_running, *self.key_tokens} if self.key_room(t, k) == 0
        ]

    def key_room(self, job_type: str, concurrency_key: str) -> int | None:
        """How many more jobs of a key may start, or None: no key limit."""
        key_concurrency, key_rate = self.key_limits.get(job_type, (None, None))
        rooms = []
        if key_concurrency is not None:
            rooms.append(key_concurrency - self.key_running[job_type, concurrency_key])
        if key_rate is not None:
            rooms.append(self.key_tokens.get((job_type, concurrency_key), key_rate))
        return max(0, min(rooms)) if rooms else None

    def filters(self) -> dict[str, list[str]]:
        """JOB_LIMITED_PEEK's parameters."""
        return {
            "open_types": [name for kind, name in self.open if kind == "type"],
            "open_queues": [name for kind, name in self.open if kind == "queue"],
            "full_types": [name for kind, name in self.closed if kind == "type"],
            "full_queues": [name for kind, name in self.closed if kind == "queue"],
            "full_keys": [f"{t}\x01{k}" for t, k in self.full_keys],
        }

    def pick(self, rows: Iterable[Any], limit: int) -> list[Any]:
        """The rows (id, bucket, queue, job_type, concurrency_key), in claim
        order, that fit every room they count toward, at most `limit`."""
        taken: collections.Counter[tuple[str, str]] = collections.Counter()
        keys: collections.Counter[tuple[str, str]] = collections.Counter()
        picked = []
        for row in rows:
            _, _, queue, job_type, concurrency_key = row
            groups = [g for g in (("type", job_type), ("queue", queue)) if g in self.group]
            if any(taken[g] >= self.group[g] for g in groups):
                continue
            if concurrency_key is not None:
                key_room = self.key_room(job_type, concurrency_key)
                if key_room is not None and keys[job_type, concurrency_key] >= key_room:
                    continue
                keys[job_type, concurrency_key] += 1
            taken.update(groups)
            picked.append(row)
            if len(picked) == limit:
                break
        return picked
