"""Each statement of a plan, routed to its bucket's shard on the way to the
server: `Routing` wraps an operation's steps, so the operations stay the
same on every engine."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...notices import Notice, NoticeKind
from ...plan import Batch, Steps, Stmt
from . import sql as sql_citus

if TYPE_CHECKING:
    from .dialect import CitusDialect


# The statements over held jobs by (id, token) that go one bucket at a time.
_HELD_MANY = frozenset(
    {sql_citus.JOB_COMPLETE_MANY, sql_citus.JOB_RENEW_MANY, sql_citus.JOB_RELEASE_MANY}
)

# The statements that cancel running jobs whose workers a notice should tell.
_CANCELS = frozenset({sql_citus.JOB_CANCEL, sql_citus.JOB_CANCEL_MANY})
# The statements that end held jobs, whose waiters or (for a limited job) idle
# workers a notice should tell.
_ENDS = frozenset({sql_citus.JOB_COMPLETE_MANY, sql_citus.JOB_FAIL})


class Routing:
    """Adds what the Citus statements take besides PostgreSQL's parameters:
    each job's bucket value (`bucket` from `id`, `buckets` from `ids`, a COPY
    row's from its id), and the times a shard must not compute inside a CASE
    (`retry_at`, `now_epoch`). Sends the notices a statement could not send
    from a shard (a running job's cancel, a waited-for or limited job's end)
    from the coordinator. Reads the
    buckets' values first, once per process."""

    def __init__(self, dialect: CitusDialect, now: Callable[[], Any]) -> None:
        self.d = dialect
        self.now = now

    def run(self, steps: Steps[Any]) -> Steps[Any]:
        result: Any = None
        try:
            while True:
                step = steps.send(result)
                if not self.d.values and isinstance(step, Batch | Stmt) and _names_buckets(step):
                    self.d.loaded((yield Stmt(sql_citus.BUCKET_VALUES, fetch="all")))
                if isinstance(step, Batch):
                    result = yield Batch(tuple(self.stmt(s) for s in step.stmts))
                elif isinstance(step, Stmt) and self._spans_buckets(step):
                    # One statement per bucket, sent together: each runs on one
                    # shard and commits alone (no two-phase commit across nodes).
                    parts = yield Batch(tuple(self.stmt(s) for s in self._per_bucket(step)))
                    result = _merged(step, parts)
                elif isinstance(step, Stmt):
                    result = yield self.stmt(step)
                else:
                    result = yield step
                if isinstance(step, Stmt) and (payloads := _notices(step, result)):
                    yield Stmt(sql_citus.NOTICES, {"payloads": payloads}, fetch="all")
        except StopIteration as stop:
            return stop.value

    def _spans_buckets(self, st: Stmt) -> bool:
        """Whether a statement over jobs by id (`ids`) reaches several buckets."""
        params = st.params
        if params is None or st.sql not in _HELD_MANY or "buckets" in params:
            return False
        ids = params.get("ids") or ()
        return len({self.d.bucket(i) for i in ids}) > 1

    def _per_bucket(self, st: Stmt) -> list[Stmt]:
        """`st` split by bucket: each part has the rows of the per-job arrays
        (those as long as `ids`) of the jobs of one bucket."""
        params = st.params or {}
        ids = params["ids"]
        rows: dict[int, list[int]] = {}
        for index, job_id in enumerate(ids):
            rows.setdefault(self.d.bucket(job_id), []).append(index)
        per_job = [k for k, v in params.items() if isinstance(v, list) and len(v) == len(ids)]
        parts = []
        for bucket, picked in rows.items():
            part = {**params, "buckets": [bucket]}
            for name in per_job:
                part[name] = [params[name][i] for i in picked]
            parts.append(dataclasses.replace(st, params=part))
        return parts

    def stmt(self, st: Stmt) -> Stmt:
        sql, params, d = st.sql, st.params, self.d
        if st.fetch == "copy" and sql is sql_citus.JOB_COLUMNS_COPY:
            return dataclasses.replace(st, rows=[(*row, d.bucket(row[0])) for row in st.rows])
        if params is None or "%(" not in sql:
            return st
        added: dict[str, Any] = {}
        if "%(bucket)s" in sql and "bucket" not in params:
            added["bucket"] = d.bucket(params["id"])
        if "%(buckets)s" in sql and "buckets" not in params:
            added["buckets"] = [d.bucket(i) for i in params["ids"]]
        if "%(retry_at)s" in sql or "%(now_epoch)s" in sql or "%(entry_at)s" in sql:
            now = params.get("now") or self.now()
            added["now"] = now
            if "%(retry_at)s" in sql:
                added["retry_at"] = now + dt.timedelta(seconds=params["delay"])
            if "%(now_epoch)s" in sql:
                added["now_epoch"] = now.timestamp()
            if "%(entry_at)s" in sql:
                added["entry_at"] = '"at": ' + json.dumps(now.isoformat())
        if "%(error_json)s" in sql:
            added["error_json"] = json.dumps(params["error"], ensure_ascii=False)
        return dataclasses.replace(st, params={**params, **added}) if added else st


def _notices(st: Stmt, result: Any) -> list[str]:
    """The notices a statement's shards could not send (see drivers.citus.sql):
    a running job's cancel; a held job's end that someone waits for, or that
    frees room in a limited group (its queue's workers claim again)."""
    if not result or (st.sql not in _CANCELS and st.sql not in _ENDS):
        return []
    rows = [result] if st.fetch == "one" else result
    found: dict[str, None] = {}  # in order, once each
    for row in rows:
        queue, job_id = row[-2], row[-1]
        if st.sql in _CANCELS:
            if row[0] == "running":
                found[Notice(NoticeKind.CANCEL, queue, job_id).payload()] = None
            continue
        if row[-4]:
            found[Notice(NoticeKind.DONE, queue, job_id).payload()] = None
        if row[-3]:
            found[Notice(NoticeKind.JOB, queue).payload()] = None
    return list(found)


def _names_buckets(step: Stmt | Batch) -> bool:
    """Whether a step needs the buckets' values."""
    stmts = step.stmts if isinstance(step, Batch) else (step,)
    return any("%(bucket" in st.sql or st.sql is sql_citus.JOB_COLUMNS_COPY for st in stmts)


def _merged(st: Stmt, parts: list[Any]) -> Any:
    """The result the split statement would have given."""
    if st.fetch == "all":
        return [row for part in parts for row in part]
    if st.fetch == "rowcount":
        return sum(parts)
    raise ValueError(f"a statement split by bucket fetches {st.fetch!r}")
