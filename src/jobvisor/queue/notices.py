"""Wake-ups from the queue: what `AsyncQueue.notifications()` yields.

Every notice travels on one PostgreSQL channel (`drivers.postgres.sql.NOTIFY_CHANNEL`).
A new job's notice is the bare queue name, the smallest payload for the most
frequent notice (and the one every deployed worker understands); any other
kind is a JSON object `{"kind": …, "queue": …, "id": …}` that may carry more
keys, so a feature that needs its own notice adds a kind, not a channel. A
new job of a priority other than 0 is such an object too, with its
`priority`: a worker busy with jobs of a lower priority claims it at once.
In Citus mode every new job's notice is an object with its `bucket`: an idle
worker claims from that bucket first, without a look across the shards.
SQLite has no notifications: a poll of the file's change counter stands in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Final

from ..backoff import backoff
from ..errortext import driver_text
from ..log import get_logger

log = get_logger("queue")

LISTEN_CONNECT_TIMEOUT: Final = 10.0  # seconds for the listening connection to connect
RECONNECT_BASE: Final = 0.1  # first reconnect delay after the connection broke
RECONNECT_CAP: Final = 5.0
SQLITE_MIN_POLL: Final = 0.005  # the poll right after a change
SQLITE_MAX_POLL: Final = 0.1  # the slowest poll: SQLite stays responsive
UNHEARD_POLL: Final = 1.0  # PostgreSQL without LISTEN: how often to look again


class NoticeKind(enum.StrEnum):
    JOB = "job"  # a job became due on `queue` (None: on some queue)
    MISSED = "missed"  # notices may have been lost: look again
    CANCEL = "cancel"  # job `id`, running on `queue`, was asked to stop
    DONE = "done"  # job `id` that someone waits for ended (completed or dead)


@dataclasses.dataclass(frozen=True, slots=True)
class Notice:
    """One wake-up. `kind` is a `NoticeKind` value, or a newer kind this
    code does not know (a caller skips those); `queue` and `id` say what it is
    about when known."""

    kind: str
    queue: str | None = None
    id: uuid.UUID | None = None
    priority: int | None = None  # a new job's, when not 0
    bucket: int | None = None  # a new job's bucket value (Citus mode, `drivers.citus`)

    def payload(self) -> str:
        """The NOTIFY payload that carries this notice."""
        bare = self.id is None and not self.priority and self.bucket is None
        if self.kind == NoticeKind.JOB and self.queue is not None and bare:
            return self.queue
        fields: dict[str, Any] = {"kind": str(self.kind)}
        if self.queue is not None:
            fields["queue"] = self.queue
        if self.id is not None:
            fields["id"] = str(self.id)
        if self.priority:
            fields["priority"] = self.priority
        if self.bucket is not None:
            fields["bucket"] = self.bucket
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def parse(cls, payload: str) -> Notice:
        """The notice a NOTIFY payload carries (see the module docstring)."""
        if payload.startswith("{"):
            try:
                fields = json.loads(payload)
                raw_id = fields.get("id")
                priority, bucket = fields.get("priority"), fields.get("bucket")
                return cls(
                    kind=str(fields["kind"]),
                    queue=fields.get("queue"),
                    id=None if raw_id is None else uuid.UUID(raw_id),
                    priority=priority if type(priority) is int and priority else None,
                    bucket=bucket if type(bucket) is int else None,
                )
            except (ValueError, TypeError, KeyError, AttributeError):
                pass  # a queue whose name starts with "{"
        return cls(NoticeKind.JOB, payload)

    def concerns(self, queues: Sequence[str] | None) -> bool:
        return queues is None or self.queue is None or self.queue in queues


MISSED: Final = Notice(NoticeKind.MISSED)


async def _pause(event: str, exc: BaseException, failures: int) -> None:
    delay = backoff(failures, base=RECONNECT_BASE, cap=RECONNECT_CAP)
    log.warning(event, error=driver_text(exc), retry_in=round(delay, 3))
    await asyncio.sleep(delay)


async def poll_unheard(interval: float) -> AsyncGenerator[Notice, None]:
    """Where no notice can be heard (PostgreSQL behind PgBouncer, without a
    direct connection to LISTEN on): a `missed` at once, then a `job` notice
    for every queue each `interval` seconds."""
    yield MISSED
    while True:
        await asyncio.sleep(interval)
        yield Notice(NoticeKind.JOB)
