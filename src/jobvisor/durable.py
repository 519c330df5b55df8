"""Durable steps, sleeps and signals as a handler sees them (`JobContext`'s
`step`, `sleep`, `wait_signal`, `set_event` and their `_sync` twins for
thread handlers).

The job's step log is read once, at the first durable call of an attempt.
From then on `StepCursor` walks it as the handler asks for steps: the n-th
call gets the log's n-th entry, which must carry the same name (a handler
whose steps come in another order than the log records fails the attempt
with `StepMismatch`); a completed entry returns its stored result and the
function does not run. Every write goes through the queue's fenced
operations (`ops.steps`) on the worker's event loop: a thread handler's
calls are carried there and waited for.

A sleep or a wait that is not over parks the job (the queue gives its
attempt back and makes it due at the deadline) and raises `Parked`, which
ends the attempt with nothing more to write; a signal (or the deadline)
makes it due again, and the next attempt passes every completed step until
it reaches the wait, which then returns.

A transactional step (`transaction`, `transaction_sync`) is a step whose
function gets a connection in a transaction of the queue's own database:
its checkpoint row is written, fenced by the claim token, in that same
transaction just before the commit, so the application's writes and the
checkpoint commit together or not at all (a lost lease raises `LeaseLost`
there and rolls both back). A step that commits is never run again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .queue import ops, validate
from .queue.errors import InvalidArgument, LeaseLost, SignalTimeout, StepMismatch
from .queue.model import UTC, Job, RetryPolicy
from .queue.ops.settling import _error_text

if TYPE_CHECKING:
    from .queue.internal import AsyncServiceOps

T = TypeVar("T")

# The backoff between a step's retries inside one attempt, unless the step
# names its own.
STEP_BACKOFF: Final = RetryPolicy(base=0.5, cap=30.0, jitter=0.5)

SLEEP_STEP: Final = "sleep"
SIGNAL_STEP_PREFIX: Final = "signal:"


class Parked(Exception):
    """Raised by a sleep or a wait for a signal that is not over: the job is
    parked (not running, its attempt given back) and this attempt ends."""

    def __init__(self, step: str) -> None:
        self.step = step
        super().__init__(f"parked at step {step!r}")


def step_name(name: object) -> str:
    """A step's name as a handler gives it: a name (see `validate.name`)
    without '#', which marks a repeat in the log."""
    checked = validate.name("step name", name)
    if "#" in checked:
        raise InvalidArgument(f"step name={checked!r}: expected a name without '#'")
    return checked


class StepCursor:
    """Where an attempt stands in its job's step log: the next position, and
    how many times each name came so far (the n-th repeat is `name#n`)."""

    __slots__ = ("_job_id", "_log", "_seen", "position")

    def __init__(self, job_id: Any, log: list[ops.StepRecord]) -> None:
        self._job_id = job_id
        self._log = {entry.seq: entry for entry in log}
        self._seen: dict[str, int] = {}
        self.position = 0

    def next(self, name: str) -> tuple[int, str, ops.StepRecord | None]:
        """The next step's position, its name in the log and its entry (None:
        never reached before); `StepMismatch` when the log holds another step there."""
        count = self._seen.get(name, 0)
        self._seen[name] = count + 1
        key = name if count == 0 else f"{name}#{count}"
        seq = self.position
        self.position += 1
        entry = self._log.get(seq)
        if entry is not None and entry.name != key:
            raise StepMismatch(self._job_id, seq, key, entry.name)
        return seq, key, entry


class Durable:
    """One attempt's durable calls: its job, the worker's service operations
    and loop, and the cursor over the step log (read at the first call)."""

    __slots__ = ("_cursor", "_lock", "job", "loop", "max_result_bytes", "parked", "svc")

    def __init__(
        self,
        job: Job,
        svc: AsyncServiceOps,
        loop: asyncio.AbstractEventLoop,
        max_result_bytes: int,
    ) -> None:
        self.job, self.svc, self.loop = job, svc, loop
        self.max_result_bytes = max_result_bytes
        self._cursor: StepCursor | None = None
        self._lock = asyncio.Lock()
        self.parked = False  # set once the job is parked: its lease is gone on purpose

    # --- on the worker's loop -------------------------------------------------

    async def begin(self, name: str) -> tuple[int, str, ops.StepRecord | None]:
        if self._cursor is None:
            async with self._lock:
                if self._cursor is None:
                    log = await self.svc.step_log(self.job.id)
                    self._cursor = StepCursor(self.job.id, log)
        return self._cursor.next(name)

    async def save(
        self, seq: int, key: str, started: dt.datetime, *, result: Any = None, error: str = ""
    ) -> Any:
        """Record step `seq`'s end; returns its result as a later attempt
        will read it back (JSON's own types)."""
        svc = self.svc
        if error:
            await svc.step_save(self.job, seq, key, started=started, error=error)
            return None
        text = ops.result_json(result, self.max_result_bytes)
        await svc.step_save(self.job, seq, key, started=started, result=text)
        return None if text is None else json.loads(text)

    async def wait(
        self,
        name: str,
        *,
        signal: str | None = None,
        timeout: float | dt.timedelta | None = None,  # noqa: ASYNC109 (a deadline kept in the log)
        until: dt.datetime | None = None,
    ) -> Any:
        seq, key, entry = await self.begin(name)
        if entry is not None and entry.status is ops.StepStatus.COMPLETED:
            return _finished_wait(signal, timeout, entry.result)
        wait = await self.svc.step_wait(
            self.job, seq, key, signal=signal, timeout=timeout, until=until
        )
        if wait.outcome is ops.Waited.PARKED:
            self.parked = True
            raise Parked(key)
        if wait.outcome is ops.Waited.TIMED_OUT:
            raise SignalTimeout(signal or key, _seconds(timeout))
        return wait.payload

    async def set_event(self, key: str, value: Any) -> None:
        await self.svc.event_set(self.job, key, value)

    async def sleep(
        self, *, seconds: float | None = None, until: dt.datetime | None = None
    ) -> None:
        await self.wait(SLEEP_STEP, timeout=seconds, until=until)

    async def wait_signal(self, signal: str, within: float | None) -> Any:
        return await self.wait(SIGNAL_STEP_PREFIX + signal, signal=signal, timeout=within)

    async def step(
        self,
        name: str,
        fn: Callable[..., Awaitable[Any] | Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
    ) -> Any:
        """`JobContext.step`: run `fn` (a coroutine function or a plain one) once
        per job, retrying it `retries` times within the attempt."""
        count, policy = _retries(retries, backoff)
        seq, key, entry = await self.begin(step_name(name))
        if entry is not None and entry.status is ops.StepStatus.COMPLETED:
            return entry.result
        started = _now()

        async def once() -> Any:
            value = fn(*args, **kwargs)
            return await value if inspect.isawaitable(value) else value

        value = await self._tries(once, count, policy, seq=seq, key=key, started=started)
        return await self.save(seq, key, started, result=value)

    def step_sync(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
    ) -> Any:
        """`JobContext.step_sync`: `step` for a thread handler; `fn` runs
        in the handler's thread, the log's reads and writes on the worker's loop."""
        count, policy = _retries(retries, backoff)
        seq, key, entry = self.call(self.begin(step_name(name)))
        if entry is not None and entry.status is ops.StepStatus.COMPLETED:
            return entry.result
        started = _now()
        value = self._tries_sync(
            lambda: fn(*args, **kwargs), count, policy, seq=seq, key=key, started=started
        )
        return self.call(self.save(seq, key, started, result=value))

    async def transaction(
        self,
        name: str,
        fn: Callable[..., Awaitable[Any] | Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
    ) -> Any:
        """`JobContext.transaction`: `fn(conn, ...)` and the step's checkpoint
        in one transaction of the queue's database, once per job."""
        count, policy = _retries(retries, backoff)
        seq, key, entry = await self.begin(step_name(name))
        if entry is not None and entry.status is ops.StepStatus.COMPLETED:
            return entry.result
        started = _now()

        async def once() -> str | None:
            async with self.svc.step_transaction() as conn:
                value = fn(conn, *args, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
                text = ops.result_json(value, self.max_result_bytes)
                await self.svc.step_save(
                    self.job, seq, key, started=started, result=text, conn=conn
                )
            return text

        text = await self._tries(once, count, policy, seq=seq, key=key, started=started)
        return None if text is None else json.loads(text)

    def transaction_sync(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
    ) -> Any:
        """`JobContext.transaction_sync`: `transaction` for a thread handler,
        on a blocking connection in the handler's thread."""
        count, policy = _retries(retries, backoff)
        seq, key, entry = self.call(self.begin(step_name(name)))
        if entry is not None and entry.status is ops.StepStatus.COMPLETED:
            return entry.result
        started = _now()
        svc = self.svc.threads()

        def once() -> str | None:
            with svc.step_transaction() as conn:
                text = ops.result_json(fn(conn, *args, **kwargs), self.max_result_bytes)
                svc.step_save(self.job, seq, key, started=started, result=text, conn=conn)
            return text

        text = self._tries_sync(once, count, policy, seq=seq, key=key, started=started)
        return None if text is None else json.loads(text)

    async def _tries(
        self,
        once: Callable[[], Awaitable[T]],
        count: int,
        policy: RetryPolicy,
        *,
        seq: int,
        key: str,
        started: dt.datetime,
    ) -> T:
        """`once()`, tried again `count` times with `policy`'s delays while it
        raises; the last error is recorded in the step's entry and raised. A
        lost lease is raised at once (the transaction rolled back): whoever
        holds the job now runs the step."""
        for tried in range(count):
            try:
                return await once()
            except LeaseLost:
                raise
            except Exception:
                await asyncio.sleep(policy.delay(tried + 1, self.job.id))
        try:
            return await once()
        except LeaseLost:
            raise
        except Exception as exc:
            await self.save(seq, key, started, error=_error(exc))
            raise

    def _tries_sync(
        self,
        once: Callable[[], T],
        count: int,
        policy: RetryPolicy,
        *,
        seq: int,
        key: str,
        started: dt.datetime,
    ) -> T:
        """`_tries` for a thread handler: `once` runs in the handler's thread."""
        for tried in range(count):
            try:
                return once()
            except LeaseLost:
                raise
            except Exception:
                time.sleep(policy.delay(tried + 1, self.job.id))
        try:
            return once()
        except LeaseLost:
            raise
        except Exception as exc:
            self.call(self.save(seq, key, started, error=_error(exc)))
            raise

    # --- from a thread handler ------------------------------------------------

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the worker's loop and wait for it (a thread handler's call)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


def _seconds(timeout: float | dt.timedelta | None) -> float | None:
    return timeout.total_seconds() if isinstance(timeout, dt.timedelta) else timeout


def _finished_wait(signal: str | None, timeout: Any, result: Any) -> Any:
    """A completed wait read back from the log: a signal's payload, or its
    timeout raised again (a sleep returns None)."""
    if signal is None or not isinstance(result, dict):
        return None
    if result.get("timed_out"):
        raise SignalTimeout(signal, _seconds(timeout))
    return result.get("payload")


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


def _retries(retries: object, backoff: object) -> tuple[int, RetryPolicy]:
    count = validate.count("retries", retries, low=0, high=1000)
    if backoff is None:
        return count, STEP_BACKOFF
    if not isinstance(backoff, RetryPolicy):
        raise InvalidArgument(f"backoff={validate.short(backoff)}: expected a RetryPolicy")
    return count, backoff


def _error(exc: BaseException) -> str:
    return _error_text("error", exc)
