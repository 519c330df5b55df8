"""Taking jobs out: `claim` and its variants (plain, above a priority, past a
bound, within the limits)."""

from __future__ import annotations

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

    if above_priority is not None:
        return _claim_above(ctx, {**params, "above": above_priority})
    seen = ctx.limits_seen
    key = (queue_list and tuple(queue_list), type_list and tuple(type_list))

    def steps() -> Steps[list[Job]]:
        trying = seen.worth_trying(key)
        plain = not trying or seen.plain_worth_trying(key)
        jobs: list[Job] = []
        if trying and (not plain or seen.limited_first(key)):
            jobs = yield from _claim_limited(ctx, params, limit, key)
            trying = False
        if plain and len(jobs) < limit:
            asked = limit - len(jobs)
            got = yield from _claim_plain(ctx, {**params, "limit": asked}, key)
            seen.plain_came_back(key, short=len(got) < asked)
            jobs.extend(got)
        if trying and len(jobs) < limit:
            jobs.extend((yield from _claim_limited(ctx, params, limit - len(jobs), key)))
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    # Each statement commits by itself, but for the limited claim's few.
    return Plan(steps(), transaction=False, planner=True)


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
