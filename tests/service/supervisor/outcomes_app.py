"""The test app of handlers that end in every way a handler can
(`JOBVISOR_APP=tests.service.supervisor.outcomes_app:registry`): each kind of ending
is a job type, run on the event loop (`aio.KIND`) or in a thread
(`thread.KIND`), and `sleep` beside them."""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from jobvisor.worker import JobContext, Registry

__all__ = ["KINDS", "THREAD_ONLY", "registry"]


registry = Registry()


@registry.handler("sleep")
async def sleep(job: JobContext) -> None:
    """Sleeps `seconds` on the event loop: a job beside the others."""
    payload = job.payload if isinstance(job.payload, dict) else {}
    await asyncio.sleep(float(payload.get("seconds", 0.05)))


class Custom(BaseException):
    """A handler's own BaseException."""


class Unprintable(Exception):
    """An exception whose `__str__` breaks its contract."""

    def __str__(self) -> Any:
        return None  # noqa: PLE0307 - the point


def _own_cancel() -> NoReturn:
    raise asyncio.CancelledError()


def _cancelled_future() -> None:
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    future.cancel()
    future.result()


def _raise(exc: BaseException) -> Callable[[], NoReturn]:
    def run() -> NoReturn:
        raise exc

    return run


KINDS: dict[str, Callable[[], object]] = {
    "cancelled": _own_cancel,
    "cancelled_future": _cancelled_future,
    "generator_exit": _raise(GeneratorExit()),
    "custom_base": _raise(Custom("the handler's own")),
    "unprintable": _raise(Unprintable()),
    "system_exit": lambda: sys.exit(3),
    "keyboard_interrupt": _raise(KeyboardInterrupt()),
    "thread_exit": _thread.exit,
}
THREAD_ONLY = frozenset({"thread_exit"})


def _register(kind: str, end: Callable[[], object]) -> None:
    async def on_loop(job: JobContext) -> None:
        end()

    def in_thread(job: JobContext) -> None:
        end()

    if kind not in THREAD_ONLY:
        registry.add(f"aio.{kind}", on_loop)
    registry.add(f"thread.{kind}", in_thread)


for _kind, _end in KINDS.items():
    _register(_kind, _end)
