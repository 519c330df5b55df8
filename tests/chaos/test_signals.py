"""Signal storms while the supervisor shuts down: thousands of SIGCHLD (and
SIGTERM/SIGINT) sent to the parent in a tight loop while it drains.

What must hold: nothing is started once the stop began (in the log, and in
the process tree), every child that exits is collected (no zombie is left
behind), the parent exits 0, and no job is left running or lost."""

from __future__ import annotations

import itertools
import signal
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tests.support.service import Service, is_alive

from .ledger import Enqueuer, assert_chaos_invariants, settings, wait_more_runs

BURST = 200  # signals between two looks at the process tree


def children_states(pid: int) -> dict[int, str]:
    """pid -> state letter of every child of `pid`, zombies included."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found[int(entry.name)] = fields[0]
    return found


class Storm:
    """Sends signals to the parent, `BURST` at a time, until it has exited;
    between bursts it records the parent's children. The signals go through
    `Popen.send_signal`, which collects an exit first and then sends nothing,
    so none can reach a recycled pid."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.sent = 0
        self.seen: dict[int, set[str]] = {}  # child pid -> states it was seen in
        self.after_stopped: list[dict[int, str]] = []  # looks once `supervisor.stopped` was logged

    def run(self, signals: Sequence[signal.Signals]) -> int:
        pid = self.service.pid
        cycle = itertools.cycle(signals)
        while is_alive(pid):
            stopped = bool(self.service.events("supervisor.stopped"))
            states = children_states(pid)
            if stopped and is_alive(pid):
                self.after_stopped.append(states)
            for child, state in states.items():
                self.seen.setdefault(child, set()).add(state)
            for _ in range(BURST):
                try:
                    self.service.proc.send_signal(next(cycle))  # type: ignore[union-attr]
                except ProcessLookupError:
                    break
                self.sent += 1
        return self.service.wait_exit(120)


def assert_clean_stop(service: Service, storm: Storm) -> None:
    """No respawn once stopping, every child collected, nothing left over."""
    events = service.events()
    first_stop = next(i for i, e in enumerate(events) if e.get("event") == "supervisor.stopping")
    spawned_late = [e for e in events[first_stop:] if e.get("event") == "worker.spawned"]
    assert not spawned_late, f"workers started while stopping: {spawned_late}"
    spawned = {int(e["pid"]) for e in events[:first_stop] if e.get("event") == "worker.spawned"}
    assert set(storm.seen) <= spawned, f"children that are no worker: {set(storm.seen) - spawned}"
    # Every worker's exit was collected by the parent (it logs each one it
    # reaps), the zombies seen on the way included.
    reaped = {int(e["pid"]) for e in service.events("worker.exited")}
    assert reaped == spawned
    zombies = {pid for pid, states in storm.seen.items() if "Z" in states}
    assert zombies <= reaped
    # Once it says it stopped, no child is left, not even a zombie.
    assert all(not states for states in storm.after_stopped), storm.after_stopped
    assert not any(is_alive(pid) for pid in spawned)


def stop_a_busy_service(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> tuple[Service, list[uuid.UUID], Storm]:
    """Three workers full of jobs of about a second, more waiting, then
    SIGTERM: the service, the ids enqueued, and a storm ready to run."""
    service = start_service(url, tmp_path, settings(JOBVISOR_WORKERS="3"))
    backlog = Enqueuer(url, batch=300, total=300, seconds=(0.3, 1.2)).start()
    service.wait_ready()
    wait_more_runs(url, 30)
    ids = backlog.stop()
    service.signal(signal.SIGTERM)
    return service, ids, Storm(service)


@pytest.mark.timeout(180)
def test_a_sigchld_storm_during_the_drain(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    service, ids, storm = stop_a_busy_service(url, tmp_path, start_service)
    assert storm.run([signal.SIGCHLD]) == 0

    assert_clean_stop(service, storm)
    # Still a graceful stop: every worker drained and exited 0, nothing requeued.
    assert {e["exit"] for e in service.events("worker.exited")} == {"exit code 0"}
    assert not service.events("worker.jobs_requeued")
    outcome = assert_chaos_invariants(url, ids, [service], settled=False)
    print(f"SIGCHLD storm of {storm.sent}: {outcome}")
    assert set(outcome.statuses) <= {"completed", "pending"}
    assert not outcome.extra_runs


@pytest.mark.timeout(180)
def test_a_sigterm_sigint_and_sigchld_storm_during_shutdown(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    service, ids, storm = stop_a_busy_service(url, tmp_path, start_service)
    # The stop only gets harder (the third stop signal kills the workers),
    # and is still a stop the operator asked for: exit 0.
    assert storm.run([signal.SIGTERM, signal.SIGINT, signal.SIGCHLD]) == 0

    assert_clean_stop(service, storm)
    outcome = assert_chaos_invariants(url, ids, [service], settled=False)
    print(f"SIGTERM/SIGINT/SIGCHLD storm of {storm.sent}: {outcome}")
    # What was running is back in the queue: released, or requeued with the
    # attempt counted when its worker was killed.
    assert set(outcome.statuses) <= {"completed", "pending", "retryable"}
