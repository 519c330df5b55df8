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
  `requeue_crashed` (attempt counted: a job that kills its worker ends `dead`
  after `max_attempts`), right after the exit is reaped, so nothing waits for
  the lease to expire and no live process can still complete them. When the
  supervisor killed it for a job past its hard limit, that job alone is
  charged; the jobs beside it get their attempt back.
- Boot failures halt at start-up. A worker that exits with
  `ExitCode.BOOT_FAILED` or `ExitCode.CONFIG` before saying `ready` cannot
  work; restarting it would be a fork storm, so the supervisor stops with
  that code. After a good start (every slot has had a ready worker) the
  same exit means a deploy broken under running workers: the healthy
  workers keep running, and only that slot is retried, with its backoff,
  never charged, and named on `/healthz` and in
  `jobvisor_worker_slots_cannot_boot` until one of its workers is ready. One that exits
  `ExitCode.UNAVAILABLE` (the database unreachable at boot) can: it is
  restarted with backoff for as long as the outage lasts, never charged. More
  than `max_restarts` other unexpected exits within `restart_window` stop it
  with `ExitCode.CRASH_LOOP`, so systemd or Kubernetes back off. A booted
  worker that died holding jobs is charged to those jobs instead (each one's attempt is
  counted, so a job that kills every worker ends `dead`): one poison job
  must not take the whole service down before its attempts are spent. Its
  slot still backs off.
- Kills and stops: see `decisions` (SIGABRT then SIGKILL for the silent and
  the overrunning; SIGTERM, SIGQUIT, SIGKILL as a stop gets harder).

What each exit means, when to kill and how long to wait are decided by the
pure functions of `decisions`; this module carries them out. Reload and scale
are in `reload`, maintenance and the database watch in `services`.

Start: the HTTP endpoints first (`/readyz` answers 503), then the database is
waited for (and migrated), then the workers start.

Hooks for the rest of the service: `metrics` (a `jobvisor.metrics.Metrics`)
receives every worker `metrics` message, restarts, reaps and summaries;
`on_worker_message` sees every control message; `tasks` are extra coroutines
started on the loop once workers are being started and cancelled at the end;
`endpoints` answers the HTTP endpoints from its state.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import os
import secrets
import signal
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

import uvloop

from .. import systemd
from ..config import Config
from ..errortext import one_line
from ..exitcodes import ExitCode
from ..http import HttpServer
from ..log import get_logger, setup_logging
from ..metrics import Metrics
from ..queue.api import AsyncQueue, connect_async
from . import children, decisions, endpoints, fleet, reload, restarts, services, startup
from .children import Slot, WorkerProcess
from .decisions import STOP_MARGIN, CrashBudget, ExitKind, KillReason, StopMode
from .maintenance import Leadership, run_periodically
from .reload import reload_with_same_flags
from .signals import HANDLED_SIGNALS, ignore_signals

__all__ = ["STOP_MARGIN", "State", "StopMode", "Supervisor", "main", "reload_with_same_flags"]

TICK: Final = 0.5  # the loop turns at least this often
FINAL_REQUEUE_WAIT: Final = 15.0  # at exit, for the requeues still in flight
TASKS_END_WAIT: Final = 5.0  # at exit, for the cancelled service tasks to end
RESIGN_WAIT: Final = 5.0  # at exit, for giving up leadership
CLOSE_WAIT: Final = 10.0  # at exit, for the queue's connections to close

log = get_logger("supervisor")


class State(enum.StrEnum):
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Supervisor:
    """The parent process: see the module's design note. `run()` returns the
    exit code."""

    tick = TICK

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
        self.exit_code = ExitCode.OK
        self.metrics = metrics or Metrics()
        self.slots: list[Slot] = [Slot(i) for i in range(config.workers)]
        self.workers: dict[int, WorkerProcess] = {}  # every live worker, by pid
        self.candidates: set[WorkerProcess] = set()
        self.retiring: set[WorkerProcess] = set()
        self.queue: AsyncQueue | None = None
        self.leadership: Leadership | None = None
        self.database: services.DatabaseWatch | None = None
        self.xmin: services.XminWatch | None = None
        self.http: HttpServer | None = None
        self.web_queue: AsyncQueue | None = None  # the dashboard's own, when it is on
        self.heartbeat: fleet.Heartbeat | None = None
        self.last_tick = time.monotonic()
        self.waiting_for_database = False
        self._load_config = load_config or reload_with_same_flags(config)
        self._worker_command = tuple(worker_command)
        self._on_worker_message = on_worker_message
        self._extra_tasks = tuple(tasks)
        self._migrate = migrate
        self._signals: collections.deque[int] = collections.deque()
        self._budget = CrashBudget(max_restarts=config.max_restarts, window=config.restart_window)
        self._requeues: set[asyncio.Task[int | None]] = set()
        self._maintenance: list[asyncio.Task[None]] = []
        self.declared_schedules: list[dict[str, Any]] | None = None  # the app's, from a worker
        self._background: list[asyncio.Task[None]] = []
        self._reload_task: asyncio.Task[None] | None = None
        self._stop_mode: StopMode | None = None
        self._announced_ready = False
        self._wakeup: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.next_slot = config.workers  # slot indexes are never reused

    @property
    def running(self) -> bool:
        return self.state is State.RUNNING

    def _stopped(self) -> bool:
        return self.state is State.STOPPED

    # --- the lifecycle ---------------------------------------------------------

    async def run(self) -> int:
        """Start the workers and supervise them until stopped; the exit code.
        It returns with the handled signals ignored (see `ignore_signals`)."""
        self._loop = loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        for signum in HANDLED_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        startup.log_start(self.config, supervisor_id=self.id, subreaper=children.become_subreaper())
        systemd.status(f"starting {self.config.workers} workers")
        self.queue = connect_async(
            self.config.database_url, pool_size=2, **self.config.connection()
        )
        self.leadership = Leadership(self.queue, holder=self.id)
        self.database = services.DatabaseWatch(self.queue)
        self.xmin = services.xmin_watch(self.queue, self.metrics, lambda: self.config.xmin_warn)
        try:
            if await self._start():
                await self._supervise()
            return int(self.exit_code)
        finally:
            await self._finish()
            ignore_signals()

    def _fail(self, code: ExitCode) -> bool:
        if self.exit_code == ExitCode.OK:
            self.exit_code = code
        return False

    async def _start(self) -> bool:
        """Serve HTTP, wait for the database (and migrate), spawn; False if
        start-up failed (the exit code set) or was stopped."""
        assert self.queue is not None and self.database is not None
        assert self._wakeup is not None
        if self.config.http_addr:
            if self.config.dashboard == "on":
                self.web_queue = connect_async(
                    self.config.database_url, pool_size=2, **self.config.connection()
                )
            self.http = await startup.serve_http(
                self.config,
                health=lambda: endpoints.health(self, tick=TICK),
                ready=lambda: endpoints.readiness(self),
                metrics=self.metrics,
                dashboard_queue=self.web_queue,
            )
            if self.http is None:
                return self._fail(ExitCode.FAILED)
        self._background.append(asyncio.create_task(self.database.run()))
        if self.xmin is not None:
            self._background.append(asyncio.create_task(self.xmin.run()))
        self.waiting_for_database = True
        reached = await startup.until_stopped(
            self._wakeup,
            self._stop_requested,
            startup.wait_for_database(
                self.queue,
                self.database,
                run_migrations=self._migrate,
                database_url=self.config.database_url,
                on_wait=lambda: setattr(self, "last_tick", time.monotonic()),
            ),
        )
        self.waiting_for_database = False
        if reached is None or self._stop_requested():
            return False
        if reached is not ExitCode.OK:
            return self._fail(reached)
        for slot in self.slots:
            self._spawn_into(slot)
        self._start_maintenance()
        self._start_heartbeat()
        watchdog = systemd.watchdog_interval()
        if watchdog is not None:
            ticker = services.watchdog(watchdog, lambda: self.last_tick, TICK)
            self._background.append(asyncio.create_task(ticker))
        for make in self._extra_tasks:
            self._background.append(asyncio.create_task(make(self)))
        return True

    def _stop_requested(self) -> bool:
        if any(decisions.escalate(s, None) is not None for s in self._signals):
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
            if w.kill is not None and w.kill.sigkill_at is not None:
                due.append(w.kill.sigkill_at)
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
        await self._kill_leftovers()
        await services.await_requeues(self._requeues, patience=FINAL_REQUEUE_WAIT)
        tasks = [*self._maintenance, *self._background]
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=TASKS_END_WAIT)
            if stuck:
                log.error("supervisor.tasks_stuck", tasks=sorted(t.get_name() for t in stuck))
        if self.leadership is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(RESIGN_WAIT):
                    await self.leadership.resign()
        if self.heartbeat is not None:
            await self.heartbeat.forget()
        if self.http is not None:
            await self.http.close()
        for queue in (self.web_queue, self.queue):
            if queue is None:
                continue
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_WAIT):
                    await queue.close()
        self.metrics.set_workers(0)
        log.info("supervisor.stopped", supervisor_id=self.id, exit_code=int(self.exit_code))

    async def _kill_leftovers(self) -> None:
        if not self.workers:  # workers are left only after an error in the loop itself
            return
        for worker in self.workers.values():
            worker.sigkill(KillReason.EXITING)
        deadline = time.monotonic() + 5.0
        while self.workers and time.monotonic() < deadline:
            self.reap_workers()
            await asyncio.sleep(0.05)

    # --- signals -----------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        self._signals.append(signum)
        self.wake()

    def wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _handle_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        log.info("supervisor.signal", signal=name, state=self.state.value)
        mode = decisions.escalate(signum, self._stop_mode)
        if mode is not None:
            self.stop(mode)
        elif not self.running:
            log.info("supervisor.signal_ignored", signal=name, reason="stopping")
        elif signum == signal.SIGHUP:
            self.reload()
        elif signum == signal.SIGTTIN:
            reload.scale(self, len(self.slots) + 1)
        elif signum == signal.SIGTTOU:
            reload.scale(self, len(self.slots) - 1)

    # --- stopping -----------------------------------------------------------------

    def stop(self, mode: StopMode, *, exit_code: ExitCode | None = None) -> None:
        """Stop the service (or make a stop under way harder)."""
        if exit_code is not None:
            self._fail(exit_code)
        if self._stop_mode is not None and mode <= self._stop_mode:
            return
        if self.running:
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
            worker.stop(mode, shutdown_timeout=self.config.shutdown_timeout)
        self.wake()

    def retire(self, worker: WorkerProcess, reason: str) -> None:
        """Stop one worker gracefully; its exit is expected and not replaced."""
        self.retiring.add(worker)
        log.info("worker.retiring", worker_id=worker.worker_id, pid=worker.pid, reason=reason)
        worker.stop(StopMode.GRACEFUL, shutdown_timeout=self.config.shutdown_timeout)

    # --- reload and scale -----------------------------------------------------------

    def reload(self) -> None:
        """SIGHUP: read the configuration again and replace the workers one at
        a time (see `reload`); an invalid configuration is logged and the old
        one kept."""
        if self._reload_task is not None and not self._reload_task.done():
            log.info("supervisor.reload_ignored", reason="a reload is under way")
            return
        self._reload_task = asyncio.create_task(self._reload())

    async def _reload(self) -> None:
        await reload.reload(self, self._load_config)

    def apply_config(self, config: Config) -> None:
        """Take a reloaded configuration: new workers and services use it."""
        self.config = config
        self._budget.max_restarts, self._budget.window = config.max_restarts, config.restart_window
        for slot in self.slots:
            if slot.cannot_boot is not None:
                slot.respawn_at = 0.0  # the new deploy may boot: try it now
        self._start_maintenance()

    # --- workers --------------------------------------------------------------------

    def spawn(self, slot_index: int) -> WorkerProcess | None:
        """Start a worker for a slot (not put in it); None if it could not start."""
        assert self._loop is not None
        env = {**os.environ, **self.config.to_env()}
        try:
            worker = children.spawn_worker(slot=slot_index, env=env, command=self._worker_command)
        except OSError as exc:
            log.error("worker.spawn_failed", slot=slot_index, error=one_line(exc))
            return None
        self.workers[worker.pid] = worker
        children.watch(self._loop, worker, on_readable=self._on_readable, on_exit=self.wake)
        log.info("worker.spawned", worker_id=worker.worker_id, pid=worker.pid, slot=slot_index)
        return worker

    def _spawn_into(self, slot: Slot) -> None:
        worker = self.spawn(slot.index)
        if worker is None:
            restarts.crashed(self, slot)
            return
        slot.worker = worker
        slot.starts += 1

    def _on_readable(self, worker: WorkerProcess) -> None:
        messages, eof = children.read_messages(worker)
        for message in messages:
            self._handle_message(worker, message)
        if eof:
            assert self._loop is not None
            self._loop.remove_reader(worker.control_fd)
            self.wake()  # it is exiting: reap it now rather than at the next tick

    def _handle_message(self, worker: WorkerProcess, message: dict[str, Any]) -> None:
        if worker.hear(message):
            restarts.booted(self, worker)
            self._note_schedules(message)
            self._announce_ready()
        elif message.get("t") == "metrics":
            self.metrics.record_worker_message(message)
        if self._on_worker_message is not None:
            try:
                self._on_worker_message(worker, message)
            except Exception as exc:
                log.error("supervisor.hook_failed", hook="on_worker_message", error=one_line(exc))

    def _note_schedules(self, ready: dict[str, Any]) -> None:
        """Keep the schedules a booted worker declares, for the scheduler;
        a new list (a reload changed the app) replaces the old one."""
        declared = ready.get("schedules")
        if isinstance(declared, list) and declared != self.declared_schedules:
            self.declared_schedules = declared

    def _announce_ready(self) -> None:
        if self._announced_ready or not self.running:
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
                log.debug("supervisor.orphan_reaped", pid=pid, exit=decisions.describe_exit(code))
                continue
            self._worker_exited(worker, code)
        if self.state is State.STOPPING and not self.workers:
            self.state = State.STOPPED

    def _worker_exited(self, worker: WorkerProcess, code: int) -> None:
        assert self._loop is not None
        children.unwatch(self._loop, worker)
        for message in worker.exited(code):  # e.g. a `fatal` written just before exit
            self._handle_message(worker, message)
        slot = next((s for s in self.slots if s.worker is worker), None)
        expected = worker in self.candidates or slot is None or not self.running
        worker.log_exit(code, expected=expected or worker in self.retiring)
        kill = worker.forced_kill
        requeue = self._requeue(worker, *decisions.requeue_error(kill, worker.worker_id, code))
        if slot is not None:
            slot.worker = None
        self.retiring.discard(worker)
        kind = decisions.classify_exit(
            code=code,
            ready=worker.ready,
            forced=kill is not None,
            expected=expected,
            started=self._announced_ready,
        )
        if kind is ExitKind.EXPECTED or slot is None:
            return
        self.metrics.record_restart(decisions.restart_reason(code=code, kill=kill, kind=kind))
        restarts.after_exit(self, worker, slot, kind, requeue)

    def _requeue(
        self, worker: WorkerProcess, error: str, culprit: str | None
    ) -> asyncio.Task[int | None]:
        assert self.queue is not None
        requeue = services.requeue_jobs(
            self.queue, worker.worker_id, error=error, culprit=culprit, stopped=self._stopped
        )
        task = asyncio.create_task(requeue)
        self._requeues.add(task)
        task.add_done_callback(self._requeues.discard)
        return task

    def murder_workers(self) -> None:
        """Kill the workers that are silent, overrunning a hard limit, or past
        their drain deadline (`decisions.due_sigkill`, `decisions.watchdog_kill`)."""
        now = time.monotonic()
        for worker in list(self.workers.values()):
            if not worker.alive:
                continue
            due = decisions.due_sigkill(worker.kill, now)
            if due is not None:
                worker.sigkill(due)
                continue
            kill = worker.watchdog_kill(now, worker_timeout=self.config.worker_timeout)
            if kill is not None:
                worker.abort(kill)

    def manage_workers(self) -> None:
        """Start a worker in every empty slot whose restart is due."""
        if self.running:
            now = time.monotonic()
            for slot in self.slots:
                if slot.worker is None and now >= slot.respawn_at:
                    self._spawn_into(slot)
        cannot_boot = sum(1 for s in self.slots if s.cannot_boot is not None)
        self.metrics.set_workers(len(self.workers), cannot_boot=cannot_boot)

    # --- maintenance -------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        """This supervisor's row in the fleet table, written every few seconds."""
        assert self.queue is not None and self.leadership is not None
        leadership = self.leadership
        self.heartbeat = fleet.Heartbeat(
            self.queue,
            supervisor_id=self.id,
            leader=lambda: leadership.is_leader,
            slots=lambda: self.slots,
        )
        task = run_periodically(self.heartbeat, first_delay=0.0)
        self._background.append(asyncio.create_task(task, name="heartbeat"))

    def _start_maintenance(self) -> None:
        assert self.queue is not None and self.leadership is not None
        for task in self._maintenance:
            task.cancel()
        self._maintenance = services.start_maintenance(
            self.config,
            self.queue,
            self.leadership,
            self.metrics,
            lambda: len(self.workers),
            declared=lambda: self.declared_schedules,
        )


def main(config: Config, *, load_config: Callable[[], Config] | None = None) -> int:
    """Run the supervisor until it stops; the process exit code. `load_config`
    is what SIGHUP reads (default: `reload_with_same_flags(config)`)."""
    setup_logging(config.log_format, config.log_level)
    supervisor = Supervisor(config, load_config=load_config)
    return int(uvloop.run(supervisor.run()))
