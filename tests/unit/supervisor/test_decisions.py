"""The supervisor's decisions, asked directly: no process, no signal, no
database. Each case is what the process tests show end to end (boot
failure, crash loop, poison job, hard-limit culprit, stop escalation,
reload), reduced to the question the arbiter asks and its answer."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Sequence

import psycopg
import psycopg_pool
import pytest

from jobvisor.exitcodes import ExitCode
from jobvisor.queue.errors import DatabaseUnavailable
from jobvisor.supervisor import decisions
from jobvisor.supervisor.decisions import (
    ABORT_GRACE,
    BOOT_GRACE,
    STOP_MARGIN,
    Charge,
    CrashBudget,
    ExitKind,
    Kill,
    KillReason,
    RestartReason,
    StopMode,
)
from jobvisor.supervisor.reload import Verdict, judge_candidate
from jobvisor.supervisor.services import may_pass

# --- what an exit means ----------------------------------------------------------


@pytest.mark.parametrize("code", [ExitCode.BOOT_FAILED, ExitCode.CONFIG])
def test_a_worker_that_cannot_boot_stops_the_service(code: ExitCode) -> None:
    kind = decisions.classify_exit(code=code, ready=False, forced=False, expected=False)
    assert kind is ExitKind.BOOT_FAILED


@pytest.mark.parametrize("code", [ExitCode.BOOT_FAILED, ExitCode.CONFIG])
def test_a_replacement_that_cannot_boot_after_a_good_start_is_retried(code: ExitCode) -> None:
    kind = decisions.classify_exit(
        code=code, ready=False, forced=False, expected=False, started=True
    )
    assert kind is ExitKind.CANNOT_BOOT
    reason = decisions.restart_reason(code=code, kill=None, kind=kind)
    assert reason is RestartReason.BOOT_FAILED
    # Any other exit after a good start means what it meant before.
    crash = decisions.classify_exit(code=1, ready=False, forced=False, expected=False, started=True)
    assert crash is ExitKind.CRASH


def test_the_same_code_after_ready_or_after_a_kill_is_a_crash_not_a_boot_failure() -> None:
    ready = decisions.classify_exit(code=3, ready=True, forced=False, expected=False)
    killed = decisions.classify_exit(code=3, ready=False, forced=True, expected=False)
    assert ready is ExitKind.BOOTED_CRASH
    assert killed is ExitKind.CRASH


def test_an_unreachable_database_at_boot_is_retried_and_never_charged() -> None:
    kind = decisions.classify_exit(
        code=ExitCode.UNAVAILABLE, ready=False, forced=False, expected=False
    )
    assert kind is ExitKind.UNAVAILABLE
    reason = decisions.restart_reason(code=ExitCode.UNAVAILABLE, kill=None, kind=kind)
    assert reason is RestartReason.UNAVAILABLE
    # Backoff without limit, capped low enough to resume soon after the outage.
    delays = [decisions.restart_delay(n, unavailable=True) for n in range(1, 200)]
    assert max(delays) <= decisions.UNAVAILABLE_CAP
    # A crash that is not an outage backs off further (jitter takes half at most).
    assert decisions.restart_delay(200) >= decisions.BACKOFF_CAP / 2 > decisions.UNAVAILABLE_CAP


def test_an_expected_exit_is_never_replaced_whatever_its_code() -> None:
    for code in (0, 1, 3, 69, 78, -9):
        kind = decisions.classify_exit(code=code, ready=False, forced=False, expected=True)
        assert kind is ExitKind.EXPECTED


def test_a_death_before_ready_is_charged_to_the_budget() -> None:
    kind = decisions.classify_exit(code=1, ready=False, forced=False, expected=False)
    assert kind is ExitKind.CRASH
    assert decisions.restart_reason(code=1, kill=None, kind=kind) is RestartReason.CRASHED
    assert decisions.restart_reason(code=-9, kill=None, kind=kind) is RestartReason.KILLED


# --- crash loop and poison job ----------------------------------------------------


def test_the_crash_budget_is_spent_by_one_crash_too_many_within_the_window() -> None:
    budget = CrashBudget(max_restarts=2, window=60.0)
    assert budget.charge(100.0)
    assert budget.charge(110.0)
    assert not budget.charge(120.0)


def test_crashes_older_than_the_window_are_forgotten() -> None:
    budget = CrashBudget(max_restarts=2, window=60.0)
    assert budget.charge(0.0)
    assert budget.charge(10.0)
    assert budget.charge(65.0)  # the first one has left the window
    assert len(budget) == 2


def test_a_booted_worker_that_died_holding_jobs_is_charged_to_its_jobs() -> None:
    # A poison job kills every worker that runs it: its attempts pay, so it
    # ends dead after max_attempts while the service keeps running.
    kind = decisions.classify_exit(code=-9, ready=True, forced=False, expected=False)
    assert kind is ExitKind.BOOTED_CRASH
    assert decisions.charge_after_requeue(2) is Charge.JOBS


def test_a_booted_worker_that_died_holding_nothing_is_charged_to_the_budget() -> None:
    assert decisions.charge_after_requeue(0) is Charge.BUDGET
    assert decisions.charge_after_requeue(None) is Charge.BUDGET  # the database could not say


def test_restart_delay_doubles_and_is_capped() -> None:
    exact = [decisions.restart_delay(n) for n in range(1, 12)]
    assert all(0 < d <= decisions.BACKOFF_CAP for d in exact)
    assert decisions.restart_delay(1) <= decisions.BACKOFF_BASE
    assert decisions.restart_delay(100) >= decisions.BACKOFF_CAP / 2


def test_a_worker_ready_long_enough_resets_its_slots_backoff() -> None:
    assert decisions.resets_backoff(ready_at=0.0, now=decisions.STABLE_UPTIME)
    assert not decisions.resets_backoff(ready_at=0.0, now=decisions.STABLE_UPTIME - 1)
    assert not decisions.resets_backoff(ready_at=None, now=1e9)


# --- whether and when to kill ------------------------------------------------------


def watch(now: float, **facts: object) -> Kill | None:
    args: dict[str, object] = {
        "worker_id": "w-1",
        "now": now,
        "spawned_at": 0.0,
        "last_message_at": None,
        "worker_timeout": 10.0,
        "hard_deadlines": {},
        "hard_limits": {},
    }
    args.update(facts)
    return decisions.watchdog_kill(**args)  # type: ignore[arg-type]


def test_a_silent_worker_is_aborted_after_worker_timeout() -> None:
    assert watch(109.0, last_message_at=100.0) is None
    kill = watch(110.5, last_message_at=100.0)
    assert kill is not None
    assert kill.reason is KillReason.UNRESPONSIVE
    assert kill.signal == signal.SIGABRT
    assert kill.sigkill_at == 110.5 + ABORT_GRACE
    assert kill.culprit is None
    assert "sent nothing for 10.5s" in (kill.cause or "")


def test_a_booting_worker_has_boot_grace_before_its_first_message() -> None:
    assert watch(BOOT_GRACE - 1) is None
    kill = watch(BOOT_GRACE + 1)
    assert kill is not None and kill.reason is KillReason.UNRESPONSIVE


def test_a_job_past_its_hard_limit_is_the_culprit_alone() -> None:
    deadlines = {"job-a": 50.0, "job-b": 20.0}
    limits = {"job-a": 40.0, "job-b": 5.0}
    facts = {"last_message_at": 19.0, "hard_deadlines": deadlines, "hard_limits": limits}
    assert watch(19.5, **facts) is None
    kill = watch(20.0, **facts)
    assert kill is not None
    assert kill.reason is KillReason.HARD_LIMIT
    assert kill.culprit == "job-b"
    assert kill.cause == "hard time limit of 5s exceeded by job job-b; worker w-1 was killed"
    # The requeue charges only the culprit, with the kill's cause.
    assert decisions.requeue_error(kill, "w-1", -6) == (kill.cause, "job-b")
    assert decisions.restart_reason(code=-6, kill=kill, kind=ExitKind.BOOTED_CRASH) is (
        RestartReason.HARD_LIMIT
    )


def test_an_unforced_exit_charges_every_job_with_the_exit_in_words() -> None:
    assert decisions.requeue_error(None, "w-1", -9) == (
        "worker w-1 exited (killed by SIGKILL (probably the OOM killer))",
        None,
    )


def test_sigkill_follows_an_abort_once_its_grace_is_over() -> None:
    kill = Kill(signal.SIGABRT, 12.0, KillReason.UNRESPONSIVE, "silent")
    assert decisions.due_sigkill(kill, 11.9) is None
    assert decisions.due_sigkill(kill, 12.0) is KillReason.UNRESPONSIVE
    after = decisions.sigkill(kill, KillReason.UNRESPONSIVE, "w-1")
    assert after is not None
    assert after.sigkilled and after.reason is KillReason.UNRESPONSIVE
    assert after.cause == "silent"  # the abort's cause stays on the jobs
    assert decisions.due_sigkill(after, 1e9) is None  # sent once
    assert decisions.sigkill(after, KillReason.EXITING, "w-1") is None


# --- stop escalation -----------------------------------------------------------------


def test_signals_escalate_a_stop_and_never_soften_it() -> None:
    term, quit_ = signal.SIGTERM, signal.SIGQUIT
    assert decisions.escalate(term, None) is StopMode.GRACEFUL
    assert decisions.escalate(term, StopMode.GRACEFUL) is StopMode.FAST
    assert decisions.escalate(signal.SIGINT, StopMode.FAST) is StopMode.KILL
    assert decisions.escalate(term, StopMode.KILL) is StopMode.KILL
    assert decisions.escalate(quit_, None) is StopMode.FAST
    assert decisions.escalate(quit_, StopMode.GRACEFUL) is StopMode.FAST
    assert decisions.escalate(quit_, StopMode.FAST) is StopMode.KILL
    assert decisions.escalate(signal.SIGHUP, None) is None
    assert decisions.escalate(signal.SIGTTIN, StopMode.GRACEFUL) is None


def test_a_graceful_stop_drains_then_a_fast_one_brings_the_sigkill_forward() -> None:
    graceful = decisions.stop_kill(None, StopMode.GRACEFUL, now=0.0, shutdown_timeout=30.0)
    assert graceful == Kill(signal.SIGTERM, 30.0 + STOP_MARGIN)
    assert not graceful.forced
    again = decisions.stop_kill(graceful, StopMode.GRACEFUL, now=1.0, shutdown_timeout=30.0)
    assert again is None  # nothing new: no second SIGTERM, no later deadline
    fast = decisions.stop_kill(graceful, StopMode.FAST, now=2.0, shutdown_timeout=30.0)
    assert fast == Kill(signal.SIGQUIT, 2.0 + STOP_MARGIN)
    assert decisions.due_sigkill(fast, 2.0 + STOP_MARGIN) is KillReason.DRAIN_DEADLINE


def test_a_stop_never_delays_a_kill_under_way() -> None:
    abort = Kill(signal.SIGABRT, 5.0, KillReason.HARD_LIMIT, "overran", "job-a")
    assert decisions.stop_kill(abort, StopMode.GRACEFUL, now=4.0, shutdown_timeout=30.0) is None
    with pytest.raises(ValueError, match="KILL"):
        decisions.stop_kill(None, StopMode.KILL, now=0.0, shutdown_timeout=30.0)


def test_a_third_signal_kills_at_once_with_its_reason() -> None:
    draining = Kill(signal.SIGQUIT, 10.0)
    kill = decisions.sigkill(draining, KillReason.STOPPED_AT_ONCE, "w-1")
    assert kill == Kill(
        signal.SIGKILL,
        None,
        KillReason.STOPPED_AT_ONCE,
        "worker w-1 was killed: stopped at once",
    )
    assert kill.forced and kill.sigkilled


# --- reload ---------------------------------------------------------------------------


def test_a_ready_candidate_takes_the_slot() -> None:
    verdict = judge_candidate(ready=True, alive=True, running=True, slot_kept=True)
    assert verdict is Verdict.ADOPT


def test_a_candidate_that_never_became_ready_abandons_the_reload() -> None:
    for ready, alive in ((False, True), (False, False), (True, False)):
        verdict = judge_candidate(ready=ready, alive=alive, running=True, slot_kept=True)
        assert verdict is Verdict.ABANDON


def test_a_ready_candidate_whose_slot_went_away_retires() -> None:
    scaled_down = judge_candidate(ready=True, alive=True, running=True, slot_kept=False)
    stopping = judge_candidate(ready=True, alive=True, running=False, slot_kept=True)
    assert scaled_down is Verdict.SURPLUS
    assert stopping is Verdict.SURPLUS


# --- what counts as an outage -----------------------------------------------------------


def test_an_outage_is_waited_out_and_a_broken_setup_is_not() -> None:
    assert may_pass(TimeoutError())
    assert may_pass(DatabaseUnavailable("gone"))
    assert may_pass(psycopg.OperationalError("connection refused"))
    assert may_pass(psycopg_pool.PoolTimeout("couldn't get a connection"))
    assert may_pass(sqlite3.OperationalError("database is locked"))
    assert not may_pass(sqlite3.OperationalError("no such table: jobvisor_jobs"))
    assert not may_pass(psycopg.errors.UndefinedTable("relation does not exist"))
    assert not may_pass(ValueError("a bug"))


# --- what the endpoints answer ------------------------------------------------------------


def live(
    *,
    alive: int = 2,
    lag: float = 0.1,
    state: str = "running",
    waiting: bool = False,
    failing: Sequence[str] = (),
) -> tuple[bool, str]:
    return decisions.health(
        state=state, lag=lag, max_lag=5.0, alive=alive, slots=2, waiting=waiting, failing=failing
    )


def test_liveness_is_the_loop_and_the_workers_never_the_database() -> None:
    assert live() == (True, "2/2 workers alive, state running")
    assert live(alive=0)[0] is False
    assert live(lag=6.0)[0] is False  # a wedged loop
    assert live(state="stopping")[0] is False
    sick = live(failing=["w-1 claim"])
    assert sick == (False, "2/2 workers alive, state running, failing loops: w-1 claim")
    # A slot that cannot boot is named, and the process stays live while a
    # worker runs: restarting it would load the same broken app.
    broken = decisions.health(
        state="running", lag=0.1, max_lag=5.0, alive=1, slots=2, waiting=False,
        cannot_boot=["slot 1 (exit code 3, for 12s)"],
    )  # fmt: skip
    assert broken == (
        True,
        "1/2 workers alive, state running, cannot boot: slot 1 (exit code 3, for 12s)",
    )
    # Waiting for the database at start: alive, with no worker yet.
    assert live(alive=0, waiting=True) == (True, "waiting for the database")


def test_readiness_needs_the_database_and_a_ready_worker() -> None:
    assert decisions.readiness(running=True, database_up=True, ready=1)[0] is True
    assert decisions.readiness(running=True, database_up=False, ready=2) == (
        False,
        "database not answering, 2 workers ready",
    )
    assert decisions.readiness(running=True, database_up=True, ready=0)[0] is False
    assert decisions.readiness(running=False, database_up=True, ready=2)[0] is False


def test_a_transaction_holding_the_horizon_is_reported_but_keeps_readiness() -> None:
    def warning(age: float, app: str = "report-export") -> str | None:
        return decisions.xmin_warning(
            pid=4242, application_name=app, state="idle in transaction", age=age, warn_after=60
        )

    assert warning(59.9) is None
    held = warning(75.2)
    assert held == (
        "oldest xmin held 75s (over 60s) by pid 4242 (report-export, idle in transaction):"
        " vacuum cannot clean up behind it"
    )
    assert "no application name" in str(warning(60, app=""))
    assert decisions.readiness(running=True, database_up=True, ready=2, warning=held) == (
        True,
        f"database answers, 2 workers ready; warning: {held}",
    )
    assert decisions.readiness(running=True, database_up=False, ready=2, warning=held)[0] is False
