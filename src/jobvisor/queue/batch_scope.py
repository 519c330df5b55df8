"""`with queue.batch(...) as b`: a batch opened, filled and closed by a block.

The block opens the batch as it starts (the callbacks were checked when
`batch(...)` was called, so bad input writes nothing), each `b.enqueue`
adds a member in its own transaction, and the block's end closes it, also
when the block raises: the members already enqueued stay and run, and the
callbacks fire once they finish. A block that adds nothing closes an empty
batch, which finishes at once: its `on_finish` and `on_success` callbacks
are enqueued as it closes."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from . import batches
from .errors import InvalidArgument
from .ops import Ctx
from .plan import AsyncRunner, Plan, SyncRunner


class _Scope:
    """What both faces share: the opening plan, checked when made, and the id."""

    def __init__(self, ctx: Ctx, opening: Plan[uuid.UUID]) -> None:
        self._ctx = ctx
        self._opening: Plan[uuid.UUID] | None = opening
        self._id: uuid.UUID | None = None

    @property
    def id(self) -> uuid.UUID:
        """The batch's id, once the block has opened it."""
        if self._id is None:
            raise InvalidArgument("batch: not open yet; use it as `with queue.batch(...) as b`")
        return self._id

    def _take_opening(self) -> Plan[uuid.UUID]:
        if self._opening is None:
            raise InvalidArgument(f"batch {self._id}: already opened; a batch block runs once")
        opening, self._opening = self._opening, None
        return opening

    def _add(self, job_type: Any, payload: Any, options: dict[str, Any]) -> Plan[uuid.UUID]:
        return batches.batch_add(self._ctx, self.id, job_type, payload, **options)

    def _add_many(self, jobs: Iterable[Any], conn: Any) -> Plan[list[uuid.UUID]]:
        return batches.batch_add_many(self._ctx, self.id, jobs, conn=conn)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._id})"


class OpenBatch(_Scope):
    """A batch being filled, for blocking code (`Queue.batch`)."""

    def __init__(self, runner: SyncRunner, ctx: Ctx, opening: Plan[uuid.UUID]) -> None:
        super().__init__(ctx, opening)
        self._runner = runner

    def __enter__(self) -> OpenBatch:
        self._id = self._runner.run(self._take_opening())
        return self

    def __exit__(self, *exc: object) -> None:
        self._runner.run(batches.batch_close(self._ctx, self.id))

    def enqueue(self, job_type: Any, payload: Any = None, **options: Any) -> uuid.UUID:
        """Add a member: `Queue.enqueue`'s arguments (no `dedupe_key` or
        `unique`), or a task call, `b.enqueue(send_email.args(to=...))`."""
        return self._runner.run(self._add(job_type, payload, options))

    def enqueue_many(self, jobs: Iterable[Any], *, conn: Any = None) -> list[uuid.UUID]:
        """Add members in one transaction: `Queue.enqueue_many`'s items, or task calls."""
        return self._runner.run(self._add_many(jobs, conn))


class AsyncOpenBatch(_Scope):
    """A batch being filled, for asyncio code (`AsyncQueue.batch`, `async with`)."""

    def __init__(self, runner: AsyncRunner, ctx: Ctx, opening: Plan[uuid.UUID]) -> None:
        super().__init__(ctx, opening)
        self._runner = runner

    async def __aenter__(self) -> AsyncOpenBatch:
        self._id = await self._runner.run(self._take_opening())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._runner.run(batches.batch_close(self._ctx, self.id))

    async def enqueue(self, job_type: Any, payload: Any = None, **options: Any) -> uuid.UUID:
        """`OpenBatch.enqueue` for asyncio code."""
        return await self._runner.run(self._add(job_type, payload, options))

    async def enqueue_many(self, jobs: Iterable[Any], *, conn: Any = None) -> list[uuid.UUID]:
        """`OpenBatch.enqueue_many` for asyncio code."""
        return await self._runner.run(self._add_many(jobs, conn))
