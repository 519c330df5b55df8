"""Binding an operation to a runner: `bind_sync(ops.enqueue)` is a method
that runs the operation's plan on its object's runner and returns the result
(`bind_async`: awaits it). The public queues, their dead jobs and the
service's internal interfaces (`internal`) are made of such methods."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from . import ops
from .plan import AsyncRunner, Plan, SyncRunner

P = ParamSpec("P")
T = TypeVar("T")


class SyncBound:
    _runner: SyncRunner
    _ctx: ops.Ctx


class AsyncBound:
    _runner: AsyncRunner
    _ctx: ops.Ctx


def bind_sync(
    op: Callable[Concatenate[ops.Ctx, P], Plan[T]],
) -> Callable[Concatenate[SyncBound, P], T]:
    @functools.wraps(op)
    def method(self: SyncBound, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._runner.run(op(self._ctx, *args, **kwargs))

    return method


def bind_async(
    op: Callable[Concatenate[ops.Ctx, P], Plan[T]],
) -> Callable[Concatenate[AsyncBound, P], Awaitable[T]]:
    @functools.wraps(op)
    async def method(self: AsyncBound, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._runner.run(op(self._ctx, *args, **kwargs))

    return method
