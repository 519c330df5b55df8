"""Worker processes as the parent sees them: how one is started, how its
control channel is read, how every child is reaped, and what an exit means.

Reaping is owned here, not by asyncio. The parent starts workers with
`os.posix_spawn` (fork + exec in one call: a fresh interpreter, nothing of the
parent's loop or connections crosses over) and collects every exit with
`waitpid(-1, WNOHANG)` in `reap_children()`. That one call reaps workers and
orphans alike: when the supervisor is PID 1 in a container, or a subreaper
(`become_subreaper`), the kernel hands it every orphaned descendant, and a
zombie nobody collects would stay in the process table forever. asyncio's child
watchers cannot do both: they wait on the pids they started, and a
`waitpid(-1)` next to them would steal a worker's exit status from under them
(uvloop even refuses a SIGCHLD handler of our own). So the parent starts no
child by any other means, and a worker's death is noticed three ways, all of
which only wake the loop to call `reap_children()`: its pidfd becomes readable
(Linux 5.3+), its control pipe reaches end of file, and the loop's periodic
tick, which also sweeps up orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..log import get_logger
from ..worker import protocol
from . import decisions
from .decisions import Kill, KillReason, StopMode, describe_exit

__all__ = [
    "Slot",
    "WorkerProcess",
    "become_subreaper",
    "describe_exit",
    "read_messages",
    "reap_children",
    "spawn_worker",
    "unwatch",
    "watch",
]

WORKER_COMMAND: Final = (sys.executable, "-m", "jobvisor.worker")
READ_CHUNK: Final = 65536
PR_SET_CHILD_SUBREAPER: Final = 36

log = get_logger("supervisor")


@dataclasses.dataclass(eq=False)
class WorkerProcess:
    """One incarnation of a worker: its pid, its random id and what the parent
    has heard from it. Times are `time.monotonic()` seconds."""

    slot: int
    worker_id: str
    pid: int
    control_fd: int
    spawned_at: float
    pidfd: int | None = None
    last_message_at: float | None = None
    ready_at: float | None = None
    # Jobs with a hard time limit that have started and not ended: id -> deadline.
    hard_deadlines: dict[str, float] = dataclasses.field(default_factory=dict)
    hard_limits: dict[str, float] = dataclasses.field(default_factory=dict)
    fatal_error: str | None = None
    # The loops its last heartbeat reported failing (`worker.protocol.Heartbeat`).
    unhealthy: list[str] = dataclasses.field(default_factory=list)
    # What the parent has done to end it (a stop or a kill); None: nothing yet.
    kill: Kill | None = None
    exit_code: int | None = None  # os.waitstatus_to_exitcode: -N for signal N
    buffer: bytearray = dataclasses.field(default_factory=bytearray)
    ready_event: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    exited_event: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    @property
    def alive(self) -> bool:
        return self.exit_code is None

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def forced_kill(self) -> Kill | None:
        """The kill under way (SIGABRT or SIGKILL), not a stop; None if none."""
        return self.kill if self.kill is not None and self.kill.forced else None

    def signal(self, signum: int) -> bool:
        """Send `signum`; False if the process is already gone."""
        if not self.alive:
            return False
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def abort(self, kill: Kill) -> None:
        """SIGABRT for `kill`'s reason (a stack dump), SIGKILL at its `sigkill_at`."""
        self.kill = kill
        fields = {"job_id": kill.culprit} if kill.culprit else {}
        log.error(
            "worker.killed",
            worker_id=self.worker_id,
            pid=self.pid,
            reason=kill.reason,
            signal="SIGABRT",
            detail=kill.cause,
            **fields,
        )
        self.signal(signal.SIGABRT)

    def sigkill(self, reason: KillReason) -> None:
        """SIGKILL now, unless already sent."""
        kill = decisions.sigkill(self.kill, reason, self.worker_id)
        if kill is None:
            return
        self.kill = kill
        log.warning(
            "worker.killed", worker_id=self.worker_id, pid=self.pid, reason=reason, signal="SIGKILL"
        )
        self.signal(signal.SIGKILL)

    def stop(self, mode: StopMode, *, shutdown_timeout: float) -> None:
        """Ask it to stop (`decisions.stop_kill`); KILL is SIGKILL now."""
        if mode is StopMode.KILL:
            self.sigkill(KillReason.STOPPED_AT_ONCE)
            return
        kill = decisions.stop_kill(
            self.kill, mode, now=time.monotonic(), shutdown_timeout=shutdown_timeout
        )
        if kill is None:
            return
        previous, self.kill = self.kill, kill
        if previous is None or previous.signal != kill.signal:
            self.signal(kill.signal)

    def hear(self, message: dict[str, Any]) -> bool:
        """Take in one control message; True when it is the `ready` that ends
        the boot."""
        now = time.monotonic()
        self.last_message_at = now
        kind, job_id = message.get("t"), message.get("id")
        if kind == "hb":
            self.unhealthy = protocol.unhealthy_loops(message)
        elif kind == "job" and isinstance(job_id, str):
            hard = message.get("hard")
            if isinstance(hard, int | float) and hard > 0:
                self.hard_deadlines[job_id] = now + float(hard)
                self.hard_limits[job_id] = float(hard)
        elif kind == "end" and isinstance(job_id, str):
            self.hard_deadlines.pop(job_id, None)
            self.hard_limits.pop(job_id, None)
        elif kind == "fatal":
            error = message.get("error")
            self.fatal_error = str(error) if error is not None else "unknown"
            log.error("worker.fatal", worker_id=self.worker_id, error=self.fatal_error)
        elif kind == "ready" and self.ready_at is None:
            self.ready_at = now
            self.ready_event.set()
            boot = round(now - self.spawned_at, 3)
            log.info("worker.ready", worker_id=self.worker_id, pid=self.pid, boot_seconds=boot)
            return True
        return False

    def log_exit(self, code: int, *, expected: bool) -> None:
        """The `worker.exited` line: a warning with the reason when the parent
        killed it, info for an expected clean exit, an error otherwise."""
        fields: dict[str, Any] = {
            "worker_id": self.worker_id,
            "pid": self.pid,
            "slot": self.slot,
            "exit": describe_exit(code),
            "uptime": round(time.monotonic() - self.spawned_at, 3),
        }
        if self.kill is not None and self.kill.forced:
            log.warning("worker.exited", reason=self.kill.reason, **fields)
        elif expected and code == 0:
            log.info("worker.exited", **fields)
        else:
            log.error("worker.exited", error=self.fatal_error, **fields)

    def watchdog_kill(self, now: float, *, worker_timeout: float) -> Kill | None:
        """The SIGABRT it has earned (`decisions.watchdog_kill`); None while
        it is being killed already."""
        if self.kill is not None and self.kill.forced:
            return None
        return decisions.watchdog_kill(
            worker_id=self.worker_id,
            now=now,
            spawned_at=self.spawned_at,
            last_message_at=self.last_message_at,
            worker_timeout=worker_timeout,
            hard_deadlines=self.hard_deadlines,
            hard_limits=self.hard_limits,
        )

    def exited(self, code: int) -> list[dict[str, Any]]:
        """Record its exit and close its fds; the messages it wrote last."""
        self.exit_code = code
        messages, _ = read_messages(self)
        self.close_fds()
        self.exited_event.set()
        return messages

    def close_fds(self) -> None:
        for fd in (self.control_fd, self.pidfd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.control_fd, self.pidfd = -1, None


@dataclasses.dataclass(eq=False)
class Slot:
    """One of the N places for an active worker."""

    index: int
    worker: WorkerProcess | None = None
    failures: int = 0  # unexpected exits in a row
    respawn_at: float = 0.0  # monotonic; an empty slot is filled from then on
    starts: int = 0  # workers started in it (the fleet view shows the restarts)
    # Why its workers cannot boot (a deploy broken after a good start), since
    # when (monotonic); None once one of them is ready.
    cannot_boot: str | None = None
    cannot_boot_since: float | None = None


def spawn_worker(
    *,
    slot: int,
    env: Mapping[str, str],
    command: Sequence[str] = WORKER_COMMAND,
) -> WorkerProcess:
    """Start one worker as a fresh interpreter with a new random id.

    It inherits the write end of a new pipe (named by `JOBVISOR_CONTROL_FD`) and
    stdout/stderr; stdin is /dev/null. It gets its own process group, so a
    terminal's Ctrl-C reaches only the parent, which decides what the workers
    are told. Raises OSError if the process cannot be started."""
    worker_id = protocol.new_worker_id()
    read_fd, write_fd = os.pipe()  # both close-on-exec
    try:
        os.set_inheritable(write_fd, True)
        child_env = {
            **env,
            protocol.WORKER_ID_ENV: worker_id,
            protocol.CONTROL_FD_ENV: str(write_fd),
        }
        pid = os.posix_spawn(
            command[0],
            list(command),
            child_env,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)],
            setpgroup=0,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child holds the only write end: EOF means it is gone
    os.set_blocking(read_fd, False)
    worker = WorkerProcess(
        slot=slot, worker_id=worker_id, pid=pid, control_fd=read_fd, spawned_at=time.monotonic()
    )
    # No race: only reap_children() collects exits, and it runs on this thread.
    with contextlib.suppress(OSError, AttributeError):
        worker.pidfd = os.pidfd_open(pid)
    return worker


def read_messages(worker: WorkerProcess) -> tuple[list[dict[str, Any]], bool]:
    """Everything the worker has written so far, and whether its end is closed."""
    messages: list[dict[str, Any]] = []
    eof = False
    while worker.control_fd >= 0:
        try:
            chunk = os.read(worker.control_fd, READ_CHUNK)
        except BlockingIOError:
            break
        except OSError:
            eof = True
            break
        if not chunk:
            eof = True
            break
        worker.buffer += chunk
        messages += protocol.decode_lines(worker.buffer)
        if len(worker.buffer) > READ_CHUNK:  # a line that never ends: drop it
            worker.buffer.clear()
    return messages, eof


def reap_children() -> list[tuple[int, int]]:
    """Collect every child that has exited: (pid, exit code), the code negative
    for a signal (`os.waitstatus_to_exitcode`). Never blocks."""
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == 0:
            break
        with contextlib.suppress(ValueError):
            reaped.append((pid, os.waitstatus_to_exitcode(status)))
    return reaped


def become_subreaper() -> bool:
    """Ask Linux to hand us orphaned descendants (`PR_SET_CHILD_SUBREAPER`), so
    a worker's own children are reaped here when the worker dies. False where
    that is not available; PID 1 gets them anyway."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def watch(
    loop: asyncio.AbstractEventLoop,
    worker: WorkerProcess,
    *,
    on_readable: Callable[[WorkerProcess], None],
    on_exit: Callable[[], None],
) -> None:
    """Call `on_readable(worker)` when its pipe has data or closes, and
    `on_exit()` when its pidfd says it has exited."""
    loop.add_reader(worker.control_fd, on_readable, worker)
    if worker.pidfd is not None:
        loop.add_reader(worker.pidfd, on_exit)


def unwatch(loop: asyncio.AbstractEventLoop, worker: WorkerProcess) -> None:
    for fd in (worker.control_fd, worker.pidfd):
        if fd is not None and fd >= 0:
            loop.remove_reader(fd)
