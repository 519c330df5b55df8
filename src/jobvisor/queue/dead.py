"""`queue.dead`: the dead jobs of a `Queue` or an `AsyncQueue`, bound to its
runner as the queue's own operations are (`ops.control`'s dead-job ones)."""

from __future__ import annotations

from . import ops
from .bound import AsyncBound, SyncBound, bind_async, bind_sync
from .plan import AsyncRunner, SyncRunner


class DeadJobs(SyncBound):
    """`queue.dead`: jobs that ran out of attempts."""

    def __init__(self, runner: SyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    list = bind_sync(ops.dead_list)
    count = bind_sync(ops.dead_count)
    get = bind_sync(ops.dead_get)
    requeue = bind_sync(ops.dead_requeue)
    requeue_type = bind_sync(ops.dead_requeue_type)
    discard = bind_sync(ops.dead_discard)
    discard_type = bind_sync(ops.dead_discard_type)


class AsyncDeadJobs(AsyncBound):
    """`queue.dead` of an `AsyncQueue`."""

    def __init__(self, runner: AsyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    list = bind_async(ops.dead_list)
    count = bind_async(ops.dead_count)
    get = bind_async(ops.dead_get)
    requeue = bind_async(ops.dead_requeue)
    requeue_type = bind_async(ops.dead_requeue_type)
    discard = bind_async(ops.dead_discard)
    discard_type = bind_async(ops.dead_discard_type)
