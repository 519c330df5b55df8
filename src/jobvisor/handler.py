"""A handler and what it sees of its job: `Handler` (one registered handler
and its options), `JobContext` (the job as its handler sees it), and the
exceptions a handler raises to snooze (`Snooze`) or give up (`Cancel`) its job.

A job cancelled while it runs (`queue.cancel(id)`): an `async def` handler
gets `asyncio.CancelledError` at its next await; a plain function sees
`job.cancel_requested` turn true and should return soon (or call
`job.raise_if_cancelled()`), else its worker is replaced after
`JOBVISOR_CANCEL_GRACE` seconds.

A handler that wants its job to run again later, without counting this
attempt, calls `job.snooze(seconds)`; one that gives the job up for good calls
`job.cancel(reason)`. Both raise (`Snooze`, `Cancel`), so nothing after the
call runs; a handler may also raise those exceptions itself.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

from .queue import placeholders, validate
from .queue.errors import InvalidArgument
from .queue.jsonvalue import progress_json
from .queue.model import Job, Limit, OnConflict, RetryPolicy, Unique

if TYPE_CHECKING:
    from .durable import Durable

HandlerFunc = Callable[["JobContext"], Awaitable[Any]] | Callable[["JobContext"], Any]


class Snooze(Exception):
    """Raised by a handler: run this job again after `delay` seconds; the
    attempt is given back (the job did not fail, it asked to wait)."""

    def __init__(self, delay: float | dt.timedelta) -> None:
        self.delay = validate.seconds("snooze delay", delay, high=validate.MAX_DELAY)
        super().__init__(f"snoozed for {self.delay:g}s")


class Cancel(Exception):
    """Raised by a handler: give this job up for good (status `cancelled`,
    never retried); `reason` is kept as the job's last error."""

    def __init__(self, reason: str = "cancelled by its handler") -> None:
        if not isinstance(reason, str) or not reason:
            raise InvalidArgument(f"cancel reason={reason!r}: expected a non-empty string")
        self.reason = reason
        super().__init__(reason)


class JobContext:
    """The job as its handler sees it: read-only fields, and `snooze`/`cancel`/`progress`."""

    __slots__ = ("_cancel_requested", "_durable", "_report", "job", "worker_id")

    def __init__(
        self,
        job: Job,
        worker_id: str,
        report: Callable[[uuid.UUID, str], None] | None = None,
        durable: Durable | None = None,
    ) -> None:
        self.job = job
        self.worker_id = worker_id
        self._report = report  # where progress goes: the worker's next lease renewal
        self._cancel_requested = False  # set by the worker's loop, read by the handler
        self._durable = durable  # the step log's reader and writer (see `durable`)

    @property
    def cancel_requested(self) -> bool:
        """True once someone asked to cancel this job (`queue.cancel`): stop soon."""
        return self._cancel_requested

    def raise_if_cancelled(self) -> None:
        """Raise `Cancel` if this job's cancel was requested: the job ends
        `cancelled`, keeping the request's text as its last error."""
        if self._cancel_requested:
            raise Cancel("cancel requested")

    @property
    def id(self) -> uuid.UUID:
        return self.job.id

    @property
    def job_type(self) -> str:
        return self.job.job_type

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def batch_id(self) -> uuid.UUID | None:
        """The batch this job is a member of, or None: a member may add more
        to it with `queue.batch_add(job.batch_id, ...)` while it runs."""
        return self.job.batch_id

    @property
    def payload(self) -> Any:
        """The job's payload; in a workflow job, each placeholder replaced by
        its parent's result (which the claim brought in the job's meta)."""
        parents = placeholders.parent_results(self.job.meta)
        if not parents and not placeholders.failed_parents(self.job.meta):
            return self.job.payload
        return placeholders.substitute(self.job.payload, parents)

    @property
    def parent_results(self) -> dict[str, Any]:
        """A workflow job's completed parents' results, by node key (empty
        for any other job)."""
        return placeholders.parent_results(self.job.meta)

    @property
    def failed_parents(self) -> dict[str, str]:
        """A workflow job's parents that failed when it runs anyway
        (`on_parent_failure="run"`), each with its status, by node key."""
        return placeholders.failed_parents(self.job.meta)

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self.job.attempts

    @property
    def max_attempts(self) -> int:
        return self.job.max_attempts

    @property
    def correlation_id(self) -> str | None:
        return self.job.correlation_id

    def snooze(self, delay: float | dt.timedelta) -> NoReturn:
        """Run again after `delay`, this attempt not counted. Does not return."""
        raise Snooze(delay)

    def progress(self, fraction: float, note: str | None = None) -> None:
        """Report how far the job has come: `fraction` 0.0..1.0 and an
        optional short `note`. Kept in memory and written with the worker's
        next lease renewal (no statement of its own, so call it as often as
        you like); `queue.get(id).progress` shows the latest written.
        `InvalidArgument` for a fraction or note out of bounds."""
        text = progress_json(fraction, note)
        if self._report is not None:
            self._report(self.job.id, text)

    def cancel(self, reason: str = "cancelled by its handler") -> NoReturn:
        """Give the job up for good. Does not return."""
        raise Cancel(reason)

    # --- durable steps, sleeps and signals (see `durable`) ------------

    def _steps(self) -> Durable:
        if self._durable is None:
            raise InvalidArgument(
                f"job {self.job.id}: durable steps need a job run by a jobvisor worker"
            )
        return self._durable

    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` (awaited when it returns an awaitable)
        once per job: its JSON result is stored in the job's step log, and a
        later attempt (after a crash, a retry, a redeploy) gets the stored
        result back without running it. A name repeated gets `#1`, `#2`...
        in the log. A step that raises is retried `retries` times in this
        attempt (waiting `backoff`'s delays), then its error is recorded and
        raised: the attempt fails, and the next one runs it again.
        `StepMismatch` when the log holds another step at this point;
        `LeaseLost` when this worker no longer holds the job (nothing written)."""
        return await self._steps().step(name, fn, args, kwargs, retries=retries, backoff=backoff)

    def step_sync(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> Any:
        """`step` for a plain-function (thread) handler: `fn` runs in its thread."""
        return self._steps().step_sync(name, fn, args, kwargs, retries=retries, backoff=backoff)

    async def transaction(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> Any:
        """A step whose database writes commit with its checkpoint: runs
        `fn(conn, *args, **kwargs)` (awaited when it returns an awaitable) in
        one transaction of the queue's database, `conn` its connection
        (PostgreSQL: a psycopg `AsyncConnection`; SQLite: a `sqlite3`
        connection on the queue's file, holding its write lock), and writes
        the step's row in that same transaction before it commits. So what
        `fn` writes through `conn` commits exactly once per job: a later
        attempt gets the stored result (JSON) without running `fn`; `fn`
        raising rolls its writes back and fails the step as `step` does
        (retried `retries` times, each try a new transaction). `LeaseLost`
        when this worker no longer holds the job: nothing commits. Named and
        ordered as `step`s are. Not a `with` block: Python cannot skip a
        block's body, and a completed step must not run. `fn` should make
        no other durable call of this job: on SQLite it would wait for the
        write lock its own transaction holds."""
        return await self._steps().transaction(
            name, fn, args, kwargs, retries=retries, backoff=backoff
        )

    def transaction_sync(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retries: int = 0,
        backoff: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> Any:
        """`transaction` for a plain-function (thread) handler: `fn(conn, ...)`
        runs in its thread on a blocking connection (PostgreSQL: a psycopg
        `Connection` of a pool the worker opens for its threads at the first
        such step; SQLite: a `sqlite3` connection)."""
        return self._steps().transaction_sync(
            name, fn, args, kwargs, retries=retries, backoff=backoff
        )

    async def sleep(self, seconds: float | dt.timedelta) -> None:
        """Wait `seconds` without holding a worker: the first time, the job
        is parked (not running, this attempt given back, due then) and this
        attempt ends here; the attempt that runs when it is due passes the
        completed steps and returns from this call. Recorded as a step."""
        delay = validate.seconds("seconds", seconds, high=validate.MAX_DELAY)
        await self._steps().sleep(seconds=delay)

    async def sleep_until(self, when: dt.datetime) -> None:
        """`sleep` until the timezone-aware datetime `when`."""
        await self._steps().sleep(until=when)

    async def wait_signal(
        self,
        name: str,
        timeout: float | dt.timedelta | None = None,  # noqa: ASYNC109 (a deadline kept in the log)
    ) -> Any:
        """The payload of the signal `name` sent to this job
        (`queue.signal(job_id, name, payload)`), parking the job until it
        comes (no worker held, no attempt counted); a signal sent before is
        kept and returned at once. `SignalTimeout` when none came within
        `timeout` seconds of the attempt that first waited (None: no limit)."""
        signal = validate.name("signal", name)
        if timeout is not None:
            timeout = validate.seconds("timeout", timeout, high=validate.MAX_DELAY)
        return await self._steps().wait_signal(signal, timeout)

    async def set_event(self, key: str, value: Any) -> None:
        """Publish `value` (JSON) under `key` for others to read
        (`queue.get_event`, `queue.wait_event`); the latest value wins."""
        await self._steps().set_event(key, value)

    def sleep_sync(self, seconds: float | dt.timedelta) -> None:
        """`sleep` for a thread handler."""
        durable = self._steps()
        durable.call(self.sleep(seconds))

    def sleep_until_sync(self, when: dt.datetime) -> None:
        """`sleep_until` for a thread handler."""
        self._steps().call(self.sleep_until(when))

    def wait_signal_sync(self, name: str, timeout: float | dt.timedelta | None = None) -> Any:
        """`wait_signal` for a thread handler."""
        return self._steps().call(self.wait_signal(name, timeout))

    def set_event_sync(self, key: str, value: Any) -> None:
        """`set_event` for a thread handler."""
        self._steps().call(self.set_event(key, value))

    def __repr__(self) -> str:
        return f"JobContext(id={self.id}, job_type={self.job_type!r}, attempt={self.attempt})"


@dataclasses.dataclass(frozen=True, slots=True)
class Handler:
    """One registered handler and its options.

    `timeout`: the worker fails an attempt that runs longer (an async handler
    is cancelled; a thread is abandoned, its result ignored).
    `hard_timeout`: the supervisor kills the whole worker if the attempt runs
    longer, the only way to stop blocking code; the job is then requeued or
    dead as its attempts allow.
    `max_attempts`: the default `max_attempts` of jobs built with
    `Registry.job` (the queue stores a job's attempts when it is enqueued).
    `retry`: the backoff between this type's attempts (`Registry.retry_policies`).
    `limit`: the type's fleet-wide limits (`concurrency`: running jobs across
    every host; `key_concurrency`: per `concurrency_key`; `rate`: starts per
    second, minute or hour, "100/s"; `key_rate`: such a rate per
    `concurrency_key`, each key with a bucket of its own; a job without a
    key counts toward neither key limit), written to the database at each
    worker's boot; None when it declares none.
    `unique`, `on_conflict`: the defaults of jobs built with `Registry.job`
    (see `jobvisor.Unique`): at most one job of the type per key.
    """

    job_type: str
    func: HandlerFunc
    is_async: bool
    timeout: float | None = None
    hard_timeout: float | None = None
    max_attempts: int | None = None
    retry: RetryPolicy | None = None
    limit: Limit | None = None
    unique: Unique | None = None
    on_conflict: OnConflict | None = None


class AttemptFailed(Exception):
    """Raised by a handler that writes its own account of a failed attempt:
    the attempt failed, and `record` is kept as the job's error as it is,
    instead of the exception's name and innermost frames (a framework's
    runner keeps the traceback its framework hands on). Its first line
    should name the error: every jobvisor tool shows that line."""

    def __init__(self, record: str) -> None:
        self.record = record
        super().__init__(record.split("\n", 1)[0])
