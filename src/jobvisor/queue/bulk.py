"""The rows of a bulk enqueue (`ops.enqueue_many`): `enqueue`'s checks over
many items at once, and no work on a row beyond what that row needs.

What is the same for the whole call is taken once: the context's correlation
id (or one draw of randomness for all the new ones), the trace context, the
ids' clock. Per row: its payload's JSON and the values it sets; a name (job
type, queue) is checked the first time the call meets it, then passes at a
set lookup. An item that sets anything rarer (`run_at`, `delay`, a dedupe
key, `unique`, a correlation id, a concurrency key), a `NewJob`, or an item
that fails a quick check goes through `NewJob.build`, so its error is the
one `enqueue` raises.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..correlation import current_correlation_id
from . import validate
from .errors import InvalidArgument, MissingCorrelationId
from .jsonvalue import payload_json
from .model import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, NewJob, new_job_ids
from .plan import Dialect

# The options a row may set and still take the quick checks.
QUICK_KEYS = frozenset({"job_type", "payload", "queue", "priority", "max_attempts"})

# A row's columns, in the order of the engines' JOB_COLUMNS_COPY.
(
    ID,
    QUEUE,
    JOB_TYPE,
    PAYLOAD,
    PRIORITY,
    RUN_AT,
    MAX_ATTEMPTS,
    DEDUPE_KEY,
    CORRELATION_ID,
    CREATED_AT,
    META,
    CONCURRENCY_KEY,
) = range(12)

_MIN_INT32 = -(2**31)


@dataclasses.dataclass(slots=True)
class Rows:
    """A checked bulk enqueue. `rows` holds one row per item, in order, its
    id and times in the engine's form; a row's `RUN_AT` is None until `timed`
    fills it (due now, or after its entry in `delays`), unless the item gave
    one. `keyed` maps the rows with a dedupe key or `unique` to their
    `NewJob`: a COPY cannot insert them (a job may hold the key), so they go
    in one by one."""

    rows: list[list[Any]]
    ids: list[uuid.UUID]
    delays: dict[int, float]
    keyed: dict[int, NewJob]
    queues: set[str]

    def timed(self, dialect: Dialect, now: Any) -> None:
        """Give every row its creation time `now` (the engine's form) and the
        run_at of the rows that had none."""
        delays = self.delays
        for index, row in enumerate(self.rows):
            row[CREATED_AT] = now
            if row[RUN_AT] is None:
                delay = delays.get(index) if delays else None
                row[RUN_AT] = now if delay is None else dialect.add_seconds(now, delay)

    def plain(self) -> list[list[Any]]:
        """The rows a COPY can insert: those without a dedupe key."""
        if not self.keyed:
            return self.rows
        keyed = self.keyed
        return [row for index, row in enumerate(self.rows) if index not in keyed]


class _Checker:
    """What one call has checked so far, and what it takes once."""

    def __init__(self, dialect: Dialect, max_payload_bytes: int, meta: str | None) -> None:
        self.dialect = dialect
        self.max_payload_bytes = max_payload_bytes
        self.meta = meta
        self.names: set[str] = set()

    def row(self, index: int, item: Any) -> tuple[list[Any], NewJob | None]:
        """The row of one item, and its `NewJob` when it took the full checks."""
        if type(item) is dict or isinstance(item, Mapping):
            row = self._quick(item)
            if row is not None:
                return row, None
        job = self._built(index, item)
        return self._row_of(job, given=isinstance(item, NewJob)), job

    def _quick(self, item: Mapping[str, Any]) -> list[Any] | None:
        """The row of an item that sets only the common options, all of them
        plainly valid; None when it needs the full checks."""
        if not QUICK_KEYS.issuperset(item):
            return None
        job_type = item.get("job_type")
        queue = item.get("queue", DEFAULT_QUEUE)
        priority = item.get("priority", 0)
        max_attempts = item.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
        try:
            if job_type not in self.names or queue not in self.names:
                return None
        except TypeError:  # an unhashable name: the full checks say what is wrong
            return None
        if type(priority) is not int or not _MIN_INT32 <= priority <= validate.MAX_INT32:
            return None
        if type(max_attempts) is not int or not 1 <= max_attempts <= validate.MAX_INT32:
            return None
        try:
            payload = payload_json(item.get("payload"))
        except InvalidArgument:
            return None
        if len(payload) * 4 > self.max_payload_bytes and self._too_big(payload):
            return None
        # id, queue, job_type, payload, priority, run_at, max_attempts,
        # dedupe_key, correlation_id, created_at, meta, concurrency_key
        row = [None, queue, job_type, payload, priority, None, max_attempts]
        row += (None, None, None, None, None)
        return row

    def _too_big(self, payload: str) -> bool:
        return len(payload.encode("utf-8")) > self.max_payload_bytes

    def _built(self, index: int, item: Any) -> NewJob:
        """The item through `NewJob.build` (or as given), its error naming its index."""
        if not isinstance(item, NewJob | Mapping):
            raise InvalidArgument(
                f"jobs[{index}]={validate.short(item)}: expected a mapping of enqueue arguments"
            )
        try:
            job = item if isinstance(item, NewJob) else NewJob.build(**item)
            if len(job.payload_json) * 4 > self.max_payload_bytes:  # else it fits for sure
                validate.payload_size(
                    "payload", job.payload_json, job.payload_bytes, self.max_payload_bytes
                )
        except (TypeError, InvalidArgument) as exc:
            raise InvalidArgument(f"jobs[{index}]: {exc}") from None
        self.names.add(job.job_type)
        self.names.add(job.queue)
        return job

    def _row_of(self, job: NewJob, *, given: bool) -> list[Any]:
        """`job`'s row; in Citus mode one built here without a key takes the
        call's id for its row, as a quickly checked one does
        (`Dialect.batch_ids`), and a `NewJob` given keeps its own."""
        d = self.dialect
        key = job.placement_key
        ours = key is None and d.bucket_count and not given
        return [
            None if ours else d.id(d.keyed_id(job.id, key)),
            job.queue,
            job.job_type,
            job.payload_json,
            job.priority,
            None if job.run_at is None else d.time(job.run_at),
            job.max_attempts,
            job.dedupe_key,
            job.correlation_id,
            None,
            self.meta if job.meta is None else d.meta(job.meta),
            job.concurrency_key,
        ]


def check(
    items: Iterable[Mapping[str, Any] | NewJob],
    *,
    dialect: Dialect,
    max_payload_bytes: int,
    meta: str | None,
    require_correlation_id: bool,
) -> Rows:
    """Check every item and build its row; `InvalidArgument` naming the
    first bad item (`jobs[i]`) before anything is written. `meta` is the
    JSON every job records (the trace context), or None."""
    checker = _Checker(dialect, max_payload_bytes, meta)
    rows: list[list[Any]] = []
    delays: dict[int, float] = {}
    keyed: dict[int, NewJob] = {}
    queues: set[str] = set()
    for index, item in enumerate(items):
        row, job = checker.row(index, item)
        if job is not None:
            if job.delay is not None:
                delays[index] = job.delay
            if job.dedupe_key is not None or job.unique is not None:
                keyed[index] = job
        rows.append(row)
    ids = dialect.batch_ids(new_job_ids(len(rows)))
    _identify(rows, ids, dialect, queues)
    _correlate(rows, require_correlation_id)
    return Rows(rows=rows, ids=ids, delays=delays, keyed=keyed, queues=queues)


def _identify(rows: list[list[Any]], ids: list[uuid.UUID], d: Dialect, queues: set[str]) -> None:
    """Give the quickly checked rows their ids (a `NewJob` brought its own),
    in order, and gather the queues."""
    for index, row in enumerate(rows):
        if row[ID] is None:  # no key, so no bucket of its key's
            row[ID] = d.id(ids[index])
        else:
            ids[index] = d.id_out(row[ID])
        queues.add(row[QUEUE])


def _correlate(rows: list[list[Any]], required: bool) -> None:
    """The context's correlation id for every row without one, or
    `MissingCorrelationId`; with neither, the rows keep NULL (each reads
    its own id as its correlation id)."""
    context = current_correlation_id()
    if context is None and not required:
        return
    missing = [row for row in rows if row[CORRELATION_ID] is None]
    if not missing:
        return
    if context is not None:
        for row in missing:
            row[CORRELATION_ID] = context
        return
    raise MissingCorrelationId(
        f"enqueue of {missing[0][JOB_TYPE]!r}: this queue requires a correlation id and "
        "none was given or set in the context"
    )
