"""What the supervisor decides, apart from what it does.

Every function here is pure: plain values in (times are `time.monotonic()`
seconds, passed in), a plain value out, no process, signal, clock or log
touched. The arbiter gathers the facts, asks, and carries the answer out;
`tests/unit/supervisor/test_decisions.py` asks the same questions in milliseconds.

- What an exit means: `classify_exit` (and `charge_after_requeue` for a
  booted worker whose held jobs are known only after the requeue).
- How hard to stop: `escalate` (a signal, given the stop under way).
- Whether to kill: `watchdog_kill` (silence, a hard time limit), `due_sigkill`
  (the SIGKILL after a SIGABRT or a missed drain deadline), `stop_kill` (what a
  stop of some mode does to one worker).
- When to restart: `restart_delay` (its one impurity: the jitter drawn), `resets_backoff`,
  `CrashBudget`.
- What the endpoints answer: `health`, `readiness` (with `xmin_warning`).

The rules they state:

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
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import signal
from collections.abc import Mapping, Sequence
from typing import Final

from ..backoff import backoff
from ..exitcodes import ExitCode

ABORT_GRACE: Final = 2.0  # SIGABRT (stack dump) to SIGKILL
STOP_MARGIN: Final = 5.0  # beyond the drain: time to release what is left and exit
BOOT_GRACE: Final = 30.0  # a new worker's first message may take this long
BACKOFF_BASE: Final = 0.1  # first restart delay of a slot, doubled per failure
BACKOFF_CAP: Final = 30.0
UNAVAILABLE_CAP: Final = 5.0  # while the database is away: retry at least this often
STABLE_UPTIME: Final = 30.0  # a worker that lived this long resets its slot's backoff

# A worker that exits with one of these before it is ready cannot work:
# restarting it would be a fork storm, so the supervisor stops with the code.
BOOT_FAILURE_CODES: Final = frozenset({ExitCode.BOOT_FAILED, ExitCode.CONFIG})


class StopMode(enum.IntEnum):
    """How hard a stop is; a stop only ever gets harder."""

    GRACEFUL = 1  # SIGTERM: drain until shutdown_timeout
    FAST = 2  # SIGQUIT: release running jobs at once
    KILL = 3  # SIGKILL now


class KillReason(enum.StrEnum):
    """Why the parent ended a worker (the `reason` of `worker.killed`)."""

    UNRESPONSIVE = "unresponsive"  # silent for worker_timeout: its event loop was blocked
    HARD_LIMIT = "hard_limit"  # a job ran past its hard time limit
    DRAIN_DEADLINE = "did not stop by its drain deadline"
    STOPPED_AT_ONCE = "stopped at once"
    EXITING = "the supervisor is exiting"


class RestartReason(enum.StrEnum):
    """Why a worker was replaced (the `reason` label of the restarts metric)."""

    CRASHED = "crashed"
    KILLED = "killed"  # by a signal; SIGKILL is usually the OOM killer
    UNRESPONSIVE = "unresponsive"
    HARD_LIMIT = "hard_limit"
    UNAVAILABLE = "unavailable"  # the database could not be reached at boot
    BOOT_FAILED = "boot_failed"  # a replacement that cannot boot, after a good start
    RELOAD = "reload"


class ExitKind(enum.StrEnum):
    """What a worker's exit means for the service."""

    EXPECTED = "expected"  # retiring, a reload candidate, or the service is stopping
    BOOT_FAILED = "boot_failed"  # cannot boot at start-up: stop the service with its code
    CANNOT_BOOT = "cannot_boot"  # a replacement cannot boot after a good start: retry it
    UNAVAILABLE = "unavailable"  # the database is away: restart, never charged
    CRASH = "crash"  # died before it was ready: charged to the restart budget
    BOOTED_CRASH = "booted_crash"  # died after ready: charged to its jobs, if it held any


class Charge(enum.StrEnum):
    JOBS = "jobs"  # each held job's attempt is counted; the budget is not
    BUDGET = "budget"  # one crash against max_restarts


@dataclasses.dataclass(frozen=True, slots=True)
class Kill:
    """What the parent has done to end one worker, and what follows.

    A stop (`reason` None) is a request: SIGTERM (drain) or SIGQUIT (at once),
    then SIGKILL at `sigkill_at`. A forced kill (`reason` set) is SIGABRT (the
    worker dumps its stacks) and SIGKILL at `sigkill_at`, or SIGKILL at once
    (`sigkill_at` None). `cause` is the error written on its requeued jobs;
    `culprit` the job past its hard limit, the only one charged."""

    signal: int
    sigkill_at: float | None
    reason: KillReason | None = None
    cause: str | None = None
    culprit: str | None = None

    @property
    def forced(self) -> bool:
        return self.reason is not None

    @property
    def sigkilled(self) -> bool:
        return self.signal == signal.SIGKILL


def escalate(signum: int, current: StopMode | None) -> StopMode | None:
    """The stop a signal asks for, given the stop under way (None: running);
    None for a signal that is not a stop. SIGTERM/SIGINT: graceful, each one
    more a step harder; SIGQUIT: fast, or kill when already fast."""
    if signum in (signal.SIGTERM, signal.SIGINT):
        return StopMode.GRACEFUL if current is None else StopMode(min(current + 1, StopMode.KILL))
    if signum == signal.SIGQUIT:
        return StopMode.FAST if current in (None, StopMode.GRACEFUL) else StopMode.KILL
    return None


def sigkill(kill: Kill | None, reason: KillReason, worker_id: str) -> Kill | None:
    """The record after SIGKILL for `reason`; None if SIGKILL was already sent.
    A reason and cause already given (an abort) are kept."""
    if kill is not None and kill.sigkilled:
        return None
    if kill is not None and kill.forced:
        return dataclasses.replace(kill, signal=signal.SIGKILL, sigkill_at=None)
    cause = f"worker {worker_id} was killed: {reason}"
    return Kill(signal.SIGKILL, None, reason, cause)


def due_sigkill(kill: Kill | None, now: float) -> KillReason | None:
    """Why to SIGKILL now, or None: a SIGABRT's grace or a stop's deadline is over."""
    if kill is None or kill.sigkilled or kill.sigkill_at is None or now < kill.sigkill_at:
        return None
    return kill.reason or KillReason.DRAIN_DEADLINE


def watchdog_kill(
    *,
    worker_id: str,
    now: float,
    spawned_at: float,
    last_message_at: float | None,
    worker_timeout: float,
    hard_deadlines: Mapping[str, float],
    hard_limits: Mapping[str, float],
) -> Kill | None:
    """The SIGABRT a live worker has earned, or None: silent for longer than
    `worker_timeout` (`BOOT_GRACE` at least before its first message), or
    running a job past its hard time limit."""
    heard = last_message_at
    silent = now - (heard if heard is not None else spawned_at)
    allowed = worker_timeout if heard is not None else max(worker_timeout, BOOT_GRACE)
    if silent > allowed:
        cause = (
            f"worker {worker_id} sent nothing for {silent:.1f}s "
            f"(worker_timeout {worker_timeout:g}s: its event loop was blocked) and was killed"
        )
        return Kill(signal.SIGABRT, now + ABORT_GRACE, KillReason.UNRESPONSIVE, cause)
    overdue = [job_id for job_id, deadline in hard_deadlines.items() if now >= deadline]
    if not overdue:
        return None
    job_id = overdue[0]
    limit = hard_limits.get(job_id, 0.0)
    cause = f"hard time limit of {limit:g}s exceeded by job {job_id}; worker {worker_id} was killed"
    return Kill(signal.SIGABRT, now + ABORT_GRACE, KillReason.HARD_LIMIT, cause, culprit=job_id)


def stop_kill(
    kill: Kill | None, mode: StopMode, *, now: float, shutdown_timeout: float
) -> Kill | None:
    """The record after a stop of `mode` reaches a worker; None when nothing
    changes (a signal is sent only when the returned record's differs).

    Graceful: SIGTERM, SIGKILL after the drain and `STOP_MARGIN`. Fast:
    SIGQUIT, SIGKILL after `STOP_MARGIN`. A later stop only brings the
    deadline forward. A worker already being killed keeps its course; the
    KILL mode is handled by `sigkill`."""
    if mode is StopMode.KILL:
        raise ValueError("StopMode.KILL is a sigkill, not a stop request")
    if kill is not None and kill.forced:
        return None
    signum = signal.SIGTERM if mode is StopMode.GRACEFUL else signal.SIGQUIT
    grace = STOP_MARGIN + (shutdown_timeout if mode is StopMode.GRACEFUL else 0.0)
    deadline = now + grace
    if kill is None:
        return Kill(signum, deadline)
    if kill.sigkill_at is not None and kill.sigkill_at <= deadline:
        deadline = kill.sigkill_at
    if kill.signal == signum and kill.sigkill_at == deadline:
        return None
    return dataclasses.replace(kill, signal=signum, sigkill_at=deadline)


def classify_exit(
    *, code: int, ready: bool, forced: bool, expected: bool, started: bool = False
) -> ExitKind:
    """What a worker's exit means. `code` is `os.waitstatus_to_exitcode`'s
    (negative for a signal); `forced`: the parent killed it; `expected`: it
    was retiring, a reload candidate, or the service is stopping; `started`:
    every slot has had a ready worker (a good start).

    A worker that cannot boot stops the service at start-up (nothing works
    yet, and a retry cannot fix it); after a good start it is a deploy
    broken under running workers (the app's code changed on disk), and the
    workers that run the old code are worth more than a clean exit: only the
    slot is retried, with backoff."""
    if expected:
        return ExitKind.EXPECTED
    if not forced and not ready:
        if code in BOOT_FAILURE_CODES:
            return ExitKind.CANNOT_BOOT if started else ExitKind.BOOT_FAILED
        if code == ExitCode.UNAVAILABLE:
            return ExitKind.UNAVAILABLE
    if not ready:
        return ExitKind.CRASH
    return ExitKind.BOOTED_CRASH


def charge_after_requeue(held: int | None) -> Charge:
    """A booted worker died: its jobs pay if it held any (so a poison job ends
    `dead` after its attempts, not the service); otherwise, or when the
    database could not say (`None`), the restart budget pays."""
    return Charge.JOBS if held else Charge.BUDGET


def describe_exit(code: int) -> str:
    """The exit in words, e.g. `exit code 3` or `killed by SIGKILL (probably the
    OOM killer)`."""
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code == signal.SIGKILL:
        return f"killed by {name} (probably the OOM killer)"
    return f"killed by {name}"


def requeue_error(kill: Kill | None, worker_id: str, code: int) -> tuple[str, str | None]:
    """The error written on a dead worker's requeued jobs, and the one job to
    charge when it was killed for a hard limit (None: all are charged)."""
    if kill is not None and kill.cause:
        return kill.cause, kill.culprit
    return f"worker {worker_id} exited ({describe_exit(code)})", None


def restart_reason(*, code: int, kill: Kill | None, kind: ExitKind) -> RestartReason:
    kill_reason = kill.reason if kill is not None else None
    if kill_reason is KillReason.UNRESPONSIVE:
        return RestartReason.UNRESPONSIVE
    if kill_reason is KillReason.HARD_LIMIT:
        return RestartReason.HARD_LIMIT
    if kind is ExitKind.UNAVAILABLE:
        return RestartReason.UNAVAILABLE
    if kind is ExitKind.CANNOT_BOOT:
        return RestartReason.BOOT_FAILED
    return RestartReason.KILLED if code < 0 else RestartReason.CRASHED


def restart_delay(failures: int, *, unavailable: bool = False) -> float:
    """Seconds before a slot is filled again after `failures` exits in a row:
    doubled per failure with jitter, capped lower while the database is away
    so the service resumes soon after it returns."""
    return backoff(failures, base=BACKOFF_BASE, cap=UNAVAILABLE_CAP if unavailable else BACKOFF_CAP)


def resets_backoff(*, ready_at: float | None, now: float) -> bool:
    """A worker that was ready for `STABLE_UPTIME` clears its slot's failures."""
    return ready_at is not None and now - ready_at >= STABLE_UPTIME


def health(
    *,
    state: str,
    lag: float,
    max_lag: float,
    alive: int,
    slots: int,
    waiting: bool,
    failing: Sequence[str] = (),
    cannot_boot: Sequence[str] = (),
) -> tuple[bool, str]:
    """Liveness (`/healthz`): the main loop turned within `max_lag` and a
    worker is alive, none with a `failing` loop (one entry per such worker,
    naming it and its loops), or start-up is waiting for the database. Never
    the database itself, or an outage would restart every pod.

    Slots whose worker `cannot_boot` (one entry per slot) are named in the
    detail but do not fail the check while another worker lives: the
    process restarted would load the same broken app and take the healthy
    workers down with it."""
    running = state == "running"
    if waiting:
        return running and lag < max_lag, "waiting for the database"
    detail = f"{alive}/{slots} workers alive, state {state}"
    if failing:
        detail += f", failing loops: {'; '.join(failing)}"
    if cannot_boot:
        detail += f", cannot boot: {'; '.join(cannot_boot)}"
    return running and alive > 0 and not failing and lag < max_lag, detail


def readiness(
    *, running: bool, database_up: bool, ready: int, warning: str | None = None
) -> tuple[bool, str]:
    """Readiness (`/readyz`): the database answers and a worker is ready. A
    `warning` (`xmin_warning`) goes into the detail and changes nothing else:
    the service still works."""
    detail = f"database {'answers' if database_up else 'not answering'}, {ready} workers ready"
    if warning:
        detail += f"; warning: {warning}"
    return running and database_up and ready > 0, detail


def xmin_warning(
    *, pid: int, application_name: str, state: str, age: float, warn_after: float
) -> str | None:
    """What `/readyz` says of the transaction holding back the database's
    oldest xmin: None until it has been open `warn_after` seconds."""
    if age < warn_after:
        return None
    app = application_name or "no application name"
    return (
        f"oldest xmin held {age:.0f}s (over {warn_after:g}s) by pid {pid} "
        f"({app}, {state or 'unknown state'}): vacuum cannot clean up behind it"
    )


class CrashBudget:
    """At most `max_restarts` charged crashes within `window` seconds."""

    def __init__(self, *, max_restarts: int, window: float) -> None:
        self.max_restarts, self.window = max_restarts, window
        self._crashes: collections.deque[float] = collections.deque()

    def __len__(self) -> int:
        return len(self._crashes)

    def charge(self, now: float) -> bool:
        """Count a crash at `now`; False when that spends the budget."""
        self._crashes.append(now)
        while self._crashes and self._crashes[0] < now - self.window:
            self._crashes.popleft()
        return len(self._crashes) <= self.max_restarts
