"""Waiting for jobs to end on one listening connection per `AsyncQueue`."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Callable

from . import notices
from .notices import Notice


class Waiters:
    """Every `wait` of one `AsyncQueue` shares one listening connection:
    opened by the first wait, it wakes the waiters of each job whose `done`
    notice arrives, and every waiter after a `missed` one (notices may have
    been lost). It closes with the queue. A waiter polls now and then too,
    so a notice lost, or a listener that failed, costs time, never a result."""

    def __init__(self, listen: Callable[[], AsyncGenerator[Notice, None]]) -> None:
        self._listen = listen
        self._waiting: dict[uuid.UUID, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening: asyncio.Event | None = None

    def watch(self, job_id: uuid.UUID) -> asyncio.Event:
        """An event set when `job_id` may have ended; `unwatch` it when done."""
        event = asyncio.Event()
        self._waiting.setdefault(job_id, set()).add(event)
        if self._task is None or self._task.done():
            self._listening = asyncio.Event()
            self._task = asyncio.create_task(self._run(self._listening))
        return event

    def unwatch(self, job_id: uuid.UUID, event: asyncio.Event) -> None:
        events = self._waiting.get(job_id)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiting[job_id]

    async def listening(self, seconds: float) -> None:
        """Wait (at most `seconds`) until notices are heard: one sent after
        this returns reaches the waiters."""
        if self._listening is not None and self._task is not None:
            done = asyncio.ensure_future(self._listening.wait())
            try:
                await asyncio.wait(
                    {done, self._task}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                done.cancel()

    async def _run(self, listening: asyncio.Event) -> None:
        async for notice in self._listen():
            if notice.kind == notices.NoticeKind.MISSED:
                listening.set()
                for events in self._waiting.values():
                    for event in events:
                        event.set()
            elif notice.kind == notices.NoticeKind.DONE and notice.id in self._waiting:
                for event in self._waiting[notice.id]:
                    event.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
