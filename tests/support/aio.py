"""Async code run from plain (sync) tests, each in an event loop of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from jobvisor import AsyncQueue

T = TypeVar("T")


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion in a fresh event loop (async tests stay sync)."""

    async def main() -> T:
        return await make()

    return asyncio.run(main())


def run_with(q: AsyncQueue, body: Callable[[AsyncQueue], Awaitable[T]]) -> T:
    """Run `body(q)` in a fresh event loop, then close `q` in that same loop."""

    async def main() -> T:
        try:
            return await body(q)
        finally:
            await q.close()

    return asyncio.run(main())
