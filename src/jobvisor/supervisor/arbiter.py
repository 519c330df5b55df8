"""The supervisor: the parent process of `jobvisor run`.

Design note. The parent holds no job and runs no handler; it keeps N worker
processes alive and runs the queue's maintenance. Everything happens on one
asyncio loop, and nothing on it blocks: database calls go through the async
queue (a slow query delays maintenance, never a restart), and signal handlers
only record the signal and wake the loop. The loop (`_supervise`) reads like
the process's state machine; every turn it

    handles the recorded signals      (stop, reload, scale)
    reap_workers()                    collect exits, requeue the dead's jobs, plan restarts
    murder_workers()                  SIGABRT the silent and the overrunning, SIGKILL after
    manage_workers()                  start workers whose slot is empty and due

State: RUNNING → STOPPING → STOPPED. Nothing is started once STOPPING.

- Slots. There are N slots; each holds at most one active worker. A slot's
  worker that dies unexpectedly is restarted with exponential backoff and
  jitter, per slot. Besides the active ones there are *candidates* (started
  by a reload, not yet in a slot) and *retiring* workers (told to stop by a
  reload or SIGTTOU); their exit is expected and never respawned.
- Requeue at once. When any worker has exited, its jobs are handed back with
  `release_worker` (attempt counted: a job that kills its worker ends `dead`
  after `max_attempts`), right after the exit is reaped, so nothing waits for
  the lease to expire and no live process can still complete them. When the
  supervisor killed it for a job past its hard limit, that job alone is
  charged; the jobs beside it get their attempt back.
- Boot failures halt. A worker that exits with `EXIT_BOOT_FAILED` or
  `EXIT_CONFIG` before saying `ready` cannot work; restarting it would be a
  fork storm, so the supervisor stops with that code. More than
  `max_restarts` unexpected exits within `restart_window` stop it with
  `EXIT_CRASH_LOOP`, so systemd or Kubernetes back off. A booted worker that
  died holding jobs is charged to those jobs instead (each one's attempt is
  counted, so a job that kills every worker ends `dead`): one poison job
  must not take the whole service down before its attempts are spent. Its
  slot still backs off.
- Kills. A worker silent for `worker_timeout` (its event loop is blocked), or
  running a job past its hard time limit, gets SIGABRT (the worker's
  faulthandler dumps every thread's stack to the log), then SIGKILL after
  `ABORT_GRACE`. A worker told to stop that is still alive at its drain
  deadline gets SIGKILL.
- Stops. SIGTERM/SIGINT: SIGTERM to every worker (they drain until
  `shutdown_timeout`, then release what is left), SIGKILL at
  `shutdown_timeout + STOP_MARGIN`. SIGQUIT, or a second SIGTERM/SIGINT:
  SIGQUIT to every worker (release at once), SIGKILL after `STOP_MARGIN`.
  One more: SIGKILL at once. Exit code 0 unless a failure caused the stop.

Hooks for the rest of the service: `metrics` (a `jobvisor.metrics.Metrics`)
receives every worker `metrics` message, restarts, reaps and summaries;
`on_worker_message` sees every control message; `tasks` are extra coroutines
started on the loop once workers are being started and cancelled at the end;
`health()`, `readiness()` and `snapshot()` answer the HTTP endpoints.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import os
import random
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final

import uvloop

from .. import systemd
from ..config import SETTINGS, Config, ConfigError
from ..http import HttpServer, start_http_server
from ..log import get_logger, setup_logging
from ..metrics import Metrics
from ..queue.api import AsyncQueue, connect_async, redact_url
from ..queue.model import JobStatus, Summary
from ..worker import protocol
from . import children
from .children import WorkerProcess
from .maintenance import (
    Cleaner,
    CleanerConfig,
    Leadership,
    LeaseReaper,
    ReaperConfig,
    SummaryConfig,
    SummaryLogger,
    run_periodically,
)

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1  # the HTTP address could not be bound, or a bug
EXIT_CRASH_LOOP: Final = 1
BOOT_FAILURE_CODES: Final = frozenset({protocol.EXIT_BOOT_FAILED, protocol.EXIT_CONFIG})

TICK: Final = 0.5  # the loop turns at least this often
STOP_MARGIN: Final = 5.0  # beyond the drain: time to release what is left and exit
ABORT_GRACE: Final = 2.0  # SIGABRT (stack dump) to SIGKILL
BOOT_GRACE: Final = 30.0  # a new worker's first message may take this long
BACKOFF_BASE: Final = 0.1  # first restart delay of a slot, doubled per failure
BACKOFF_CAP: Final = 30.0
STABLE_UPTIME: Final = 30.0  # a worker that lived this long resets its slot's backoff
REQUEUE_TIMEOUT: Final = 10.0  # one release_worker call
REQUEUE_PATIENCE: Final = 60.0  # retrying it; then the lease reaper takes over
FINAL_REQUEUE_WAIT: Final = 15.0  # at exit, for the requeues still in flight
MIGRATE_TIMEOUT: Final = 60.0
READY_WINDOW: Final = 30.0  # /readyz: the database answered this recently

HANDLED_SIGNALS: Final = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGHUP,
    signal.SIGTTIN,
    signal.SIGTTOU,
)

log = get_logger("supervisor")


class State(enum.StrEnum):
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class StopMode(enum.IntEnum):
    """How hard a stop is; a stop only ever gets harder."""

    GRACEFUL = 1  # SIGTERM: drain until shutdown_timeout
    FAST = 2  # SIGQUIT: release running jobs at once
    KILL = 3  # SIGKILL now


@dataclasses.dataclass(eq=False)
class Slot:
    index: int
    worker: WorkerProcess | None = None
    failures: int = 0  # unexpected exits in a row
    respawn_at: float = 0.0  # monotonic; an empty slot is filled from then on


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


class Supervisor:
    """The parent process: see the module's design note. `run()` returns the
    exit code."""

    def __init__(
        self,
        config: Config,
        *,
        load_config: Callable[[], Config] | None = None,
        worker_command: Sequence[str] = children.WORKER_COMMAND,
        metrics: Metrics | None = None,
        on_worker_message: Callable[[WorkerProcess, dict[str, Any]], None] | None = None,
        tasks: Sequence[Callable[[Supervisor], Coroutine[Any, Any, None]]] = (),
        migrate: bool = True,
    ) -> None:
        self.config = config
        self.id = "s-" + secrets.token_hex(6)
        self.state = State.RUNNING
        self.exit_code = EXIT_OK
        self.metrics = metrics or Metrics()
        self.slots: list[Slot] = [Slot(i) for i in range(config.workers)]
        self.workers: dict[int, WorkerProcess] = {}  # every live worker, by pid
        self.candidates: set[WorkerProcess] = set()
        self.retiring: set[WorkerProcess] = set()
        self.queue: AsyncQueue | None = None
        self.leadership: Leadership | None = None
        self.http: HttpServer | None = None
        self.started_at = time.monotonic()
        self.last_tick = self.started_at
        self._load_config = load_config or reload_with_same_flags(config)
        self._worker_command = tuple(worker_command)
        self._on_worker_message = on_worker_message
        self._extra_tasks = tuple(tasks)
        self._migrate = migrate
        self._signals: collections.deque[int] = collections.deque()
        self._crashes: collections.deque[float] = collections.deque()
        self._requeues: set[asyncio.Task[int | None]] = set()
        self._maintenance: list[asyncio.Task[None]] = []
        self._background: list[asyncio.Task[None]] = []
        self._reload_task: asyncio.Task[None] | None = None
        self._stop_mode: StopMode | None = None
        self._announced_ready = False
        self._wakeup: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_slot = config.workers

    # --- the lifecycle ---------------------------------------------------------

    async def run(self) -> int:
        """Start the workers and supervise them until stopped; the exit code.
        It returns with the handled signals ignored (see `_ignore_signals`)."""
        self._loop = loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        for signum in HANDLED_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        subreaper = children.become_subreaper()
        log.info(
            "supervisor.starting",
            supervisor_id=self.id,
            pid=os.getpid(),
            workers=self.config.workers,
            app=self.config.app,
            database=redact_url(self.config.database_url),
            subreaper=subreaper,
        )
        if self.config.sources.get("app", "default") == "default":
            log.info("supervisor.example_app", app=self.config.app,
                     detail="JOBVISOR_APP is not set: running the bundled example app")  # fmt: skip
        systemd.status(f"starting {self.config.workers} workers")
        self.queue = connect_async(self.config.database_url, pool_size=2)
        self.leadership = Leadership(self.queue, holder=self.id)
        try:
            code = await self._start()
            if code is None:
                await self._supervise()
                code = self.exit_code
            return code
        finally:
            await self._finish()
            _ignore_signals(loop)

    async def _start(self) -> int | None:
        """Migrate, listen, spawn; an exit code if start-up failed or was stopped."""
        if self._migrate:
            migrated = await self._until_stopped(self._migrate_database())
            if migrated is None:
                return self.exit_code
            if not migrated:
                return protocol.EXIT_BOOT_FAILED
        if self.config.http_addr:
            try:
                self.http = await start_http_server(
                    self.config.http_addr,
                    health=self.health,
                    ready=self.readiness,
                    metrics=self.metrics.exposition,
                )
            except (OSError, ValueError) as exc:
                log.error("http.failed", addr=self.config.http_addr, error=_error(exc))
                return EXIT_FAILED
        if self._stop_requested():
            return self.exit_code
        for slot in self.slots:
            self._spawn_into(slot)
        self._start_maintenance()
        watchdog = systemd.watchdog_interval()
        if watchdog is not None:
            self._background.append(asyncio.create_task(self._watchdog(watchdog)))
        for make in self._extra_tasks:
            self._background.append(asyncio.create_task(make(self)))
        return None

    async def _migrate_database(self) -> bool:
        assert self.queue is not None
        try:
            applied = await asyncio.wait_for(self.queue.migrate(), MIGRATE_TIMEOUT)
        except Exception as exc:
            log.error(
                "supervisor.database_unavailable",
                database=redact_url(self.config.database_url),
                error=_error(exc),
            )
            return False
        if applied:
            log.info("database.migrated", versions=",".join(map(str, applied)))
        return True

    async def _until_stopped(self, coro: Awaitable[bool]) -> bool | None:
        """Await `coro` unless a stop signal comes first (then None)."""
        assert self._wakeup is not None
        task = asyncio.ensure_future(coro)
        while not task.done():
            waiter = asyncio.create_task(self._wakeup.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            self._wakeup.clear()
            if self._stop_requested():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                return None
        return task.result()

    def _stop_requested(self) -> bool:
        stops = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
        if any(s in stops for s in self._signals):
            log.info("supervisor.stopped_during_startup")
            return True
        return False

    async def _supervise(self) -> None:
        """The main loop; returns once every worker has exited after a stop."""
        assert self._wakeup is not None
        while self.state is not State.STOPPED:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._next_turn_in()):
                    await self._wakeup.wait()
            self._wakeup.clear()
            self.last_tick = time.monotonic()
            while self._signals:
                self._handle_signal(self._signals.popleft())
            self.reap_workers()
            self.murder_workers()
            self.manage_workers()

    def _next_turn_in(self) -> float:
        """Seconds until something is due (a restart, a kill, a deadline), at most TICK."""
        due = [s.respawn_at for s in self.slots if s.worker is None]
        for w in self.workers.values():
            due += [t for t in (w.sigkill_at, w.stop_deadline) if t is not None]
            due += w.hard_deadlines.values()
        return max(0.0, min([TICK, *(t - time.monotonic() for t in due)]))

    async def _finish(self) -> None:
        """Whatever happened: no worker outlives us, their jobs are requeued,
        leadership is given up, connections are closed."""
        self.state = State.STOPPED
        for task in [*self._maintenance, *self._background]:
            task.cancel()
        if self._reload_task is not None:
            self._reload_task.cancel()
        if self.workers:  # only after an error in the loop itself
            for worker in self.workers.values():
                self._kill_now(worker, "the supervisor is exiting")
            deadline = time.monotonic() + 5.0
            while self.workers and time.monotonic() < deadline:
                self.reap_workers()
                await asyncio.sleep(0.05)
        if self._requeues:
            _, pending = await asyncio.wait(self._requeues, timeout=FINAL_REQUEUE_WAIT)
            for unfinished in pending:
                unfinished.cancel()
            if pending:
                log.error(
                    "supervisor.requeue_unfinished",
                    workers=len(pending),
                    note="their jobs go back when their lease expires",
                )
        await asyncio.gather(*self._maintenance, *self._background, return_exceptions=True)
        if self.leadership is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.leadership.resign(), 5.0)
        if self.http is not None:
            await self.http.close()
        if self.queue is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.queue.close(), 10.0)
        self.metrics.set_workers(0)
        log.info("supervisor.stopped", supervisor_id=self.id, exit_code=self.exit_code)

    # --- signals -----------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        self._signals.append(signum)
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _handle_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        log.info("supervisor.signal", signal=name, state=self.state.value)
        if signum in (signal.SIGTERM, signal.SIGINT):
            if self._stop_mode is None:
                self.stop(StopMode.GRACEFUL)
            else:
                self.stop(StopMode(min(self._stop_mode + 1, StopMode.KILL)))
        elif signum == signal.SIGQUIT:
            if self._stop_mode is None or self._stop_mode is StopMode.GRACEFUL:
                self.stop(StopMode.FAST)
            else:
                self.stop(StopMode.KILL)
        elif self.state is not State.RUNNING:
            log.info("supervisor.signal_ignored", signal=name, reason="stopping")
        elif signum == signal.SIGHUP:
            self.reload()
        elif signum == signal.SIGTTIN:
            self.scale(len(self.slots) + 1)
        elif signum == signal.SIGTTOU:
            self.scale(len(self.slots) - 1)

    # --- stopping -----------------------------------------------------------------

    def stop(self, mode: StopMode, *, exit_code: int | None = None) -> None:
        """Stop the service (or make a stop under way harder)."""
        if exit_code is not None and self.exit_code == EXIT_OK:
            self.exit_code = exit_code
        if self._stop_mode is not None and mode <= self._stop_mode:
            return
        if self.state is State.RUNNING:
            self.state = State.STOPPING
            systemd.stopping()
            if self._reload_task is not None:
                self._reload_task.cancel()
        self._stop_mode = mode
        log.info(
            "supervisor.stopping",
            mode=mode.name.lower(),
            workers=len(self.workers),
            shutdown_timeout=self.config.shutdown_timeout,
        )
        for worker in list(self.workers.values()):
            self._stop_worker(worker, mode)
        self._wake()

    def _stop_worker(self, worker: WorkerProcess, mode: StopMode) -> None:
        if mode is StopMode.KILL:
            self._kill_now(worker, "stopped at once")
            return
        signum = signal.SIGTERM if mode is StopMode.GRACEFUL else signal.SIGQUIT
        grace = STOP_MARGIN
        if mode is StopMode.GRACEFUL:
            grace += self.config.shutdown_timeout
        deadline = time.monotonic() + grace
        if worker.stop_signal != signum:
            worker.stop_signal = signum
            worker.signal(signum)
        if worker.stop_deadline is None or deadline < worker.stop_deadline:
            worker.stop_deadline = deadline

    def _retire(self, worker: WorkerProcess, reason: str) -> None:
        """Stop one worker gracefully; its exit is expected and not replaced."""
        self.retiring.add(worker)
        log.info("worker.retiring", worker_id=worker.worker_id, pid=worker.pid, reason=reason)
        self._stop_worker(worker, StopMode.GRACEFUL)

    # --- reload and scale -----------------------------------------------------------

    def reload(self) -> None:
        """SIGHUP: read the configuration again and replace the workers one at
        a time; an invalid configuration is logged and the old one kept."""
        if self._reload_task is not None and not self._reload_task.done():
            log.info("supervisor.reload_ignored", reason="a reload is under way")
            return
        self._reload_task = asyncio.create_task(self._reload())

    async def _reload(self) -> None:
        try:
            config = self._load_config()
        except ConfigError as exc:
            log.error("supervisor.reload_failed", error=str(exc), note="keeping the old settings")
            return
        systemd.reloading()
        log.info("supervisor.reloading", workers=config.workers)
        self.config = config
        self._start_maintenance()
        for slot in list(self.slots):
            if self.state is not State.RUNNING:
                return
            if slot not in self.slots or slot.worker is None:
                continue  # gone, or refilled by manage_workers() with the new settings
            fresh = self._spawn(slot.index)
            if fresh is None:
                log.error("supervisor.reload_failed", error="could not start a worker")
                return
            self.candidates.add(fresh)
            if not await self._wait_ready(fresh):
                self.candidates.discard(fresh)
                if fresh.alive:
                    self._retire(fresh, "reload abandoned")
                log.error(
                    "supervisor.reload_failed",
                    worker_id=fresh.worker_id,
                    error=fresh.fatal_error or "the new worker did not become ready",
                    note="keeping the running workers",
                )
                systemd.ready()
                return
            self.candidates.discard(fresh)
            if self.state is not State.RUNNING or slot not in self.slots:
                self._retire(fresh, "no longer needed")
                continue
            old, slot.worker = slot.worker, fresh
            slot.failures = 0
            if old is not None and old.alive:
                self._retire(old, "reload")
                self.metrics.record_restart("reload")
        self.scale(config.workers)
        systemd.ready()
        log.info("supervisor.reloaded", workers=len(self.slots))

    async def _wait_ready(self, worker: WorkerProcess) -> bool:
        ready = asyncio.create_task(worker.ready_event.wait())
        exited = asyncio.create_task(worker.exited_event.wait())
        timeout = max(self.config.worker_timeout, BOOT_GRACE) + ABORT_GRACE + TICK * 4
        try:
            await asyncio.wait({ready, exited}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            ready.cancel()
            exited.cancel()
        return worker.ready and worker.alive

    def scale(self, count: int) -> None:
        """Run `count` workers (at least 1): add empty slots, or retire the last."""
        count = max(1, count)
        if count == len(self.slots):
            return
        while len(self.slots) < count:
            slot = Slot(self._next_slot)
            self._next_slot += 1
            self.slots.append(slot)
        while len(self.slots) > count:
            slot = self.slots.pop()
            if slot.worker is not None:
                self._retire(slot.worker, "scaled down")
                slot.worker = None
        log.info("supervisor.scaled", workers=len(self.slots))
        self._wake()

    # --- workers --------------------------------------------------------------------

    def _worker_env(self) -> dict[str, str]:
        return {**os.environ, **self.config.to_env()}

    def _spawn(self, slot_index: int) -> WorkerProcess | None:
        assert self._loop is not None
        try:
            worker = children.spawn_worker(
                slot=slot_index, env=self._worker_env(), command=self._worker_command
            )
        except OSError as exc:
            log.error("worker.spawn_failed", slot=slot_index, error=_error(exc))
            return None
        self.workers[worker.pid] = worker
        children.watch(self._loop, worker, on_readable=self._on_readable, on_exit=self._wake)
        log.info("worker.spawned", worker_id=worker.worker_id, pid=worker.pid, slot=slot_index)
        return worker

    def _spawn_into(self, slot: Slot) -> None:
        worker = self._spawn(slot.index)
        if worker is None:
            self._crashed(slot)
            return
        slot.worker = worker

    def _on_readable(self, worker: WorkerProcess) -> None:
        messages, eof = children.read_messages(worker)
        for message in messages:
            self._handle_message(worker, message)
        if eof:
            assert self._loop is not None
            self._loop.remove_reader(worker.control_fd)
            self._wake()  # it is exiting: reap it now rather than at the next tick

    def _handle_message(self, worker: WorkerProcess, message: dict[str, Any]) -> None:
        now = time.monotonic()
        worker.last_message_at = now
        kind = message.get("t")
        if kind == "job":
            job_id, hard = message.get("id"), message.get("hard")
            if isinstance(job_id, str) and isinstance(hard, int | float) and hard > 0:
                worker.hard_deadlines[job_id] = now + float(hard)
                worker.hard_limits[job_id] = float(hard)
        elif kind == "end":
            job_id = message.get("id")
            if isinstance(job_id, str):
                worker.hard_deadlines.pop(job_id, None)
                worker.hard_limits.pop(job_id, None)
        elif kind == "metrics":
            self.metrics.record_worker_message(message)
        elif kind == "ready" and worker.ready_at is None:
            worker.ready_at = now
            worker.ready_event.set()
            log.info(
                "worker.ready",
                worker_id=worker.worker_id,
                pid=worker.pid,
                boot_seconds=round(now - worker.spawned_at, 3),
            )
            self._announce_ready()
        elif kind == "fatal":
            error = message.get("error")
            worker.fatal_error = str(error) if error is not None else "unknown"
            log.error("worker.fatal", worker_id=worker.worker_id, error=worker.fatal_error)
        if self._on_worker_message is not None:
            try:
                self._on_worker_message(worker, message)
            except Exception as exc:
                log.error("supervisor.hook_failed", hook="on_worker_message", error=_error(exc))

    def _announce_ready(self) -> None:
        if self._announced_ready or self.state is not State.RUNNING:
            return
        if all(s.worker is not None and s.worker.ready for s in self.slots):
            self._announced_ready = True
            systemd.ready()
            log.info("supervisor.ready", workers=len(self.slots))

    def reap_workers(self) -> None:
        """Collect every exited child; handle the workers among them."""
        for pid, code in children.reap_children():
            worker = self.workers.pop(pid, None)
            if worker is None:
                log.debug("supervisor.orphan_reaped", pid=pid, exit=children.describe_exit(code))
                continue
            self._worker_exited(worker, code)
        if self.state is State.STOPPING and not self.workers:
            self.state = State.STOPPED

    def _worker_exited(self, worker: WorkerProcess, code: int) -> None:
        assert self._loop is not None
        worker.exit_code = code
        children.unwatch(self._loop, worker)
        messages, _ = children.read_messages(worker)  # e.g. a `fatal` written just before exit
        for message in messages:
            self._handle_message(worker, message)
        worker.close_fds()
        worker.exited_event.set()
        now = time.monotonic()
        exit_text = children.describe_exit(code)
        fields: dict[str, Any] = {
            "worker_id": worker.worker_id,
            "pid": worker.pid,
            "slot": worker.slot,
            "exit": exit_text,
            "uptime": round(now - worker.spawned_at, 3),
        }
        expected = (
            worker in self.retiring or worker in self.candidates or self.state is not State.RUNNING
        )
        if worker.kill_reason is not None:
            log.warning("worker.exited", reason=worker.kill_reason, **fields)
        elif expected and code == 0:
            log.info("worker.exited", **fields)
        else:
            log.error("worker.exited", error=worker.fatal_error, **fields)
        cause = worker.kill_cause or f"worker {worker.worker_id} exited ({exit_text})"
        requeue = self._requeue(worker, cause)

        slot = next((s for s in self.slots if s.worker is worker), None)
        if slot is not None:
            slot.worker = None
        self.retiring.discard(worker)
        if worker in self.candidates or slot is None or self.state is not State.RUNNING:
            return
        self.metrics.record_restart(self._restart_reason(worker, code))
        if worker.kill_reason is None and not worker.ready and code in BOOT_FAILURE_CODES:
            log.error(
                "supervisor.worker_cannot_boot",
                worker_id=worker.worker_id,
                exit_code=code,
                error=worker.fatal_error,
                note="stopping instead of restarting it",
            )
            self.stop(StopMode.FAST, exit_code=code)
            return
        if worker.ready_at is not None and now - worker.ready_at >= STABLE_UPTIME:
            slot.failures = 0
        if not worker.ready:
            self._crashed(slot)
            return
        # Booted, then died: charged to the service only if it held no job
        # (known once release_worker has answered; a failed requeue counts).
        self._schedule_restart(slot)
        requeue.add_done_callback(lambda task: self._charge_unless_jobs(worker, task))

    def _charge_unless_jobs(self, worker: WorkerProcess, task: asyncio.Task[int | None]) -> None:
        held = None if task.cancelled() or task.exception() else task.result()
        if held:
            log.info("worker.crash_charged_to_jobs", worker_id=worker.worker_id, jobs=held,
                     note="their attempts are counted; max_restarts is not")  # fmt: skip
            return
        if self.state is State.RUNNING:
            self._charge_crash()

    @staticmethod
    def _restart_reason(worker: WorkerProcess, code: int) -> str:
        if worker.kill_reason in ("unresponsive", "hard_limit"):
            return worker.kill_reason
        return "killed" if code < 0 else "crashed"

    def _crashed(self, slot: Slot) -> None:
        """Count an unexpected exit (or failed spawn) and plan the slot's restart,
        unless there have been too many."""
        if self._charge_crash():
            self._schedule_restart(slot)

    def _charge_crash(self) -> bool:
        """Count one crash against `max_restarts`; False (and a fast stop with
        `EXIT_CRASH_LOOP`) when that makes too many within the window."""
        now = time.monotonic()
        self._crashes.append(now)
        while self._crashes and self._crashes[0] < now - self.config.restart_window:
            self._crashes.popleft()
        if len(self._crashes) <= self.config.max_restarts:
            return True
        log.error(
            "supervisor.crash_loop",
            crashes=len(self._crashes),
            window=self.config.restart_window,
            max_restarts=self.config.max_restarts,
        )
        self.stop(StopMode.FAST, exit_code=EXIT_CRASH_LOOP)
        return False

    def _schedule_restart(self, slot: Slot) -> None:
        """Respawn the slot after its backoff: doubled per failure, with jitter."""
        now = time.monotonic()
        slot.failures += 1
        delay = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (slot.failures - 1))
        delay *= random.uniform(0.5, 1.0)
        slot.respawn_at = now + delay
        log.info("worker.restart_scheduled", slot=slot.index, delay=round(delay, 3))

    def _requeue(self, worker: WorkerProcess, error: str) -> asyncio.Task[int | None]:
        task = asyncio.create_task(self._requeue_jobs(worker.worker_id, error, worker.culprit))
        self._requeues.add(task)
        task.add_done_callback(self._requeues.discard)
        return task

    async def _requeue_jobs(self, worker_id: str, error: str, culprit: str | None) -> int | None:
        """`release_worker`, retried while the database is away; the lease
        reaper is the fallback if it stays away. With a `culprit` (the job past
        its hard limit), only that job is charged; the jobs beside it go back
        with their attempt given back. Returns how many jobs the worker held,
        or None when the database could not say."""
        assert self.queue is not None
        give_up_at = time.monotonic() + REQUEUE_PATIENCE
        delay = 0.2
        while True:
            try:
                count = await asyncio.wait_for(
                    self.queue.release_worker(worker_id, error=error, culprit=culprit),
                    REQUEUE_TIMEOUT,
                )
            except Exception as exc:
                if time.monotonic() + delay > give_up_at or self.state is State.STOPPED:
                    log.error(
                        "worker.requeue_failed",
                        worker_id=worker_id,
                        error=_error(exc),
                        note="its jobs go back when their lease expires",
                    )
                    return None
                log.warning("worker.requeue_retry", worker_id=worker_id, error=_error(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if count:
                log.warning("worker.jobs_requeued", worker_id=worker_id, count=count, error=error)
            return count

    def murder_workers(self) -> None:
        """Kill the workers that are silent, overrunning a hard limit, or past
        their drain deadline."""
        now = time.monotonic()
        timeout = self.config.worker_timeout
        for worker in list(self.workers.values()):
            if not worker.alive or worker.sigkilled:
                continue
            if worker.sigkill_at is not None and now >= worker.sigkill_at:
                self._kill_now(worker, worker.kill_reason or "killed")
                continue
            if worker.stop_deadline is not None and now >= worker.stop_deadline:
                self._kill_now(worker, "did not stop by its drain deadline")
                continue
            if worker.kill_reason is not None:
                continue
            heard = worker.last_message_at
            silent = now - (heard if heard is not None else worker.spawned_at)
            allowed = timeout if heard is not None else max(timeout, BOOT_GRACE)
            if silent > allowed:
                self._abort(
                    worker,
                    "unresponsive",
                    f"worker {worker.worker_id} sent nothing for {silent:.1f}s "
                    f"(worker_timeout {timeout:g}s: its event loop was blocked) and was killed",
                )
                continue
            overdue = [j for j, deadline in worker.hard_deadlines.items() if now >= deadline]
            if overdue:
                job_id = overdue[0]
                limit = worker.hard_limits.get(job_id, 0.0)
                worker.culprit = job_id
                self._abort(
                    worker,
                    "hard_limit",
                    f"hard time limit of {limit:g}s exceeded by job {job_id}; "
                    f"worker {worker.worker_id} was killed",
                    job_id=job_id,
                )

    def _abort(self, worker: WorkerProcess, reason: str, cause: str, **fields: Any) -> None:
        worker.kill_reason, worker.kill_cause = reason, cause
        worker.sigkill_at = time.monotonic() + ABORT_GRACE
        log.error(
            "worker.killed",
            worker_id=worker.worker_id,
            pid=worker.pid,
            reason=reason,
            signal="SIGABRT",
            detail=cause,
            **fields,
        )
        worker.signal(signal.SIGABRT)

    def _kill_now(self, worker: WorkerProcess, reason: str) -> None:
        if worker.sigkilled:
            return
        worker.sigkilled = True
        if worker.kill_reason is None:
            worker.kill_reason = reason
        if worker.kill_cause is None:
            worker.kill_cause = f"worker {worker.worker_id} was killed: {reason}"
        log.warning(
            "worker.killed", worker_id=worker.worker_id, pid=worker.pid, reason=reason,
            signal="SIGKILL",
        )  # fmt: skip
        worker.signal(signal.SIGKILL)

    def manage_workers(self) -> None:
        """Start a worker in every empty slot whose restart is due."""
        if self.state is State.RUNNING:
            now = time.monotonic()
            for slot in self.slots:
                if slot.worker is None and now >= slot.respawn_at:
                    self._spawn_into(slot)
        self.metrics.set_workers(len(self.workers))

    # --- maintenance -------------------------------------------------------------------

    def _start_maintenance(self) -> None:
        assert self.queue is not None and self.leadership is not None
        for task in self._maintenance:
            task.cancel()
        c, queue, leadership = self.config, self.queue, self.leadership
        retention: dict[JobStatus | str, float | None] = {
            JobStatus.COMPLETED: c.retention_completed,
            JobStatus.CANCELLED: c.retention_cancelled,
            JobStatus.DEAD: c.retention_dead,
        }
        services = (
            LeaseReaper(queue, ReaperConfig(c.reap_interval), on_reaped=self.metrics.record_reaped),
            Cleaner(queue, CleanerConfig(c.cleanup_interval, retention)),
            SummaryLogger(queue, SummaryConfig(c.summary_interval), on_summary=self._on_summary),
        )
        self._maintenance = [asyncio.create_task(run_periodically(leadership, first_delay=0.0))]
        for service in services:
            loop = run_periodically(service, when=lambda: leadership.is_leader)
            self._maintenance.append(asyncio.create_task(loop))

    def _on_summary(self, summary: Summary) -> None:
        self.metrics.record_summary(summary)
        systemd.status(
            f"{len(self.workers)} workers; {summary.count(JobStatus.PENDING)} pending, "
            f"{summary.count(JobStatus.RUNNING)} running"
        )

    async def _watchdog(self, interval: float) -> None:
        # Pinged from this loop's own task, so a wedged loop stops the pings.
        while True:
            if time.monotonic() - self.last_tick < max(interval, TICK * 4):
                systemd.watchdog()
            await asyncio.sleep(interval)

    # --- for the HTTP endpoints ------------------------------------------------------------

    def health(self) -> tuple[bool, str]:
        """Liveness: the main loop turns and workers are alive. Not the database."""
        lag = time.monotonic() - self.last_tick
        alive = sum(1 for s in self.slots if s.worker is not None and s.worker.alive)
        detail = f"{alive}/{len(self.slots)} workers alive, state {self.state.value}"
        return self.state is State.RUNNING and alive > 0 and lag < TICK * 10, detail

    def readiness(self) -> tuple[bool, str]:
        """Readiness: the database answered recently and a worker is ready."""
        answered = self.leadership.answered_at if self.leadership else None
        db_ok = answered is not None and time.monotonic() - answered < READY_WINDOW
        ready = sum(1 for s in self.slots if s.worker is not None and s.worker.ready)
        detail = f"database {'answers' if db_ok else 'not answering'}, {ready} workers ready"
        return self.state is State.RUNNING and db_ok and ready > 0, detail

    def snapshot(self) -> dict[str, Any]:
        return {
            "supervisor_id": self.id,
            "state": self.state.value,
            "leader": bool(self.leadership and self.leadership.is_leader),
            "slots": len(self.slots),
            "workers": [w.describe() for w in self.workers.values()],
        }


def _ignore_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Hand the signals back from the loop, ignored. Removing a loop's handler
    restores the default action, and a SIGTERM arriving then, while the
    process winds down after a clean stop (a storm of them, an impatient
    operator), would kill it and turn exit code 0 into death by SIGTERM (or
    SIGINT into a KeyboardInterrupt). Blocked meanwhile, so none slips through
    between the two steps; one pending is discarded by SIG_IGN."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    try:
        for signum in HANDLED_SIGNALS:
            loop.remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def reload_with_same_flags(config: Config) -> Callable[[], Config]:
    """What SIGHUP reads by default: the environment again, with the values that
    came from command-line flags (`config.sources`) still winning over it."""
    values = config.to_env()
    flags = {s.field: values[s.env] for s in SETTINGS if config.sources.get(s.field) == "flag"}
    return lambda: Config.load(overrides=flags)


def main(config: Config, *, load_config: Callable[[], Config] | None = None) -> int:
    """Run the supervisor until it stops; the process exit code. `load_config`
    is what SIGHUP reads (default: `reload_with_same_flags(config)`)."""
    setup_logging(config.log_format, config.log_level)
    supervisor = Supervisor(config, load_config=load_config)
    return int(uvloop.run(supervisor.run()))
