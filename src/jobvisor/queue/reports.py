"""What operations report back beyond jobs: a renewal's lost and cancel-
requested jobs, a bulk cancel's counts, the summary (with its table as
text), the holder of the oldest xmin, and readiness."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

from . import validate
from .model import Job, JobStatus, Limit


@dataclasses.dataclass(frozen=True, slots=True)
class Renewal:
    """What `renew_held` found: the jobs whose lease was lost (their handlers
    should stop, their results are dropped) and the ids of the jobs still held
    whose cancel was requested (their handlers should stop too)."""

    lost: tuple[Job, ...] = ()
    cancel_requested: frozenset[uuid.UUID] = frozenset()


@dataclasses.dataclass(frozen=True, slots=True)
class Cancelled:
    """What a bulk `cancel_many` did: jobs cancelled at once (they were
    waiting to run) and running jobs whose workers were asked to stop them."""

    cancelled: int = 0
    requested: int = 0


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class SummaryRow:
    queue: str
    status: JobStatus
    count: int


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    """Job counts by queue and status, the age of each queue's oldest
    claimable job (seconds, from the database clock), the paused queues, and
    the fleet-wide limits."""

    rows: tuple[SummaryRow, ...]
    oldest_pending_age: Mapping[str, float]
    paused: tuple[str, ...] = ()
    limits: tuple[Limit, ...] = ()

    def count(self, status: JobStatus | str | None = None, queue: str | None = None) -> int:
        return sum(
            r.count
            for r in self.rows
            if (status is None or r.status == status) and (queue is None or r.queue == queue)
        )

    def queues(self) -> list[str]:
        """Every queue with a job or a pause, by name."""
        return sorted({r.queue for r in self.rows} | set(self.paused))

    def by_status(self) -> dict[JobStatus, int]:
        return {s: self.count(s) for s in JobStatus}

    @property
    def total(self) -> int:
        return self.count()

    def to_dict(self) -> dict[str, Any]:
        queues: dict[str, dict[str, Any]] = {}
        for r in self.rows:
            entry = queues.setdefault(r.queue, {s.value: 0 for s in JobStatus})
            entry[r.status.value] = r.count
        for name, entry in queues.items():
            entry["oldest_pending_age_seconds"] = self.oldest_pending_age.get(name)
        return {"queues": queues, "total": self.total}

    def __str__(self) -> str:
        statuses = list(JobStatus)
        header = ["queue", *[s.value for s in statuses], "oldest pending"]
        names = sorted({r.queue for r in self.rows})
        table: list[list[str]] = [header]
        for name in names:
            age = self.oldest_pending_age.get(name)
            cells = [str(self.count(s, name)) for s in statuses]
            table.append([validate.printable(name), *cells, _age(age)])
        table.append(["total", *[str(self.count(s)) for s in statuses], ""])
        return _aligned(table)


def _aligned(table: list[list[str]]) -> str:
    """The rows as text: the first column left-aligned, the others right, a
    rule under the header and above the last row (the total)."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for i, row in enumerate(table):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0 or i == len(table) - 2:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


@dataclasses.dataclass(frozen=True, slots=True)
class XminHolder:
    """The server process whose open transaction holds back the oldest xmin of
    the queue's database: while it stays open, VACUUM can remove no row
    version that died after it began, so the jobs table and its indexes grow.

    `age` is how long its transaction has been open, in seconds; `state` is
    `pg_stat_activity.state` (`idle in transaction`, `active`, ...) and
    `backend_type` says what kind of process it is (`client backend`,
    `autovacuum worker`, ...)."""

    pid: int
    application_name: str
    state: str
    backend_type: str
    age: float


@dataclasses.dataclass(frozen=True, slots=True)
class Readiness:
    """What `check()` found: the database answered, and which schema it has.

    `schema_version` is the newest migration applied (0 when none),
    `latest_version` the newest this code ships."""

    engine: str
    schema_version: int
    latest_version: int

    @property
    def migrated(self) -> bool:
        """The schema is at least as new as the code's: the queue is usable."""
        return self.schema_version >= self.latest_version
