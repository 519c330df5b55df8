"""Chaos in the workers: `kill -9` of random workers again and again under
load, and a worker frozen (SIGSTOP) past its lease whose late result must be
refused once it thaws (SIGCONT)."""

from __future__ import annotations

import os
import random
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import jobvisor
from tests.support.invariants import query_all
from tests.support.service import Service, is_alive, job
from tests.support.wait import wait_until

from .ledger import (
    MAX_ATTEMPTS,
    Enqueuer,
    assert_chaos_invariants,
    claim_of,
    runs_of,
    settings,
    wait_all_finished,
    wait_more_runs,
)

KILLS = 10


def busy_workers(url: str) -> set[str]:
    """Ids of the workers holding a running job right now."""
    (rows,) = query_all(
        url, ["SELECT DISTINCT worker_id FROM jobvisor_jobs WHERE status = 'running'"]
    )
    return {str(r[0]) for r in rows}


@pytest.mark.timeout(300)
def test_repeated_kill_9_of_random_workers_under_load(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    # A lease far longer than the scenario: only the supervisor's requeue of a
    # dead worker's jobs can bring them back in time.
    service = start_service(url, tmp_path, settings(JOBVISOR_WORKERS="3", JOBVISOR_LEASE="300"))
    backlog = Enqueuer(url, batch=300, total=300).start()
    stream = Enqueuer(url, batch=2, every=0.2).start()
    service.wait_ready()
    rng = random.Random()
    killed: dict[str, int] = {}

    for _ in range(KILLS):
        # Paced by progress, not by the clock: another 25 runs between kills.
        wait_more_runs(url, 25)

        def victim() -> tuple[str, int] | None:
            pids = service.worker_pids()  # worker id -> pid, from the log
            children = service.live_workers()  # from /proc: live children of the supervisor
            candidates = sorted(
                (w, pids[w]) for w in busy_workers(url) - set(killed)
                if w in pids and pids[w] in children
            )  # fmt: skip
            return rng.choice(candidates) if candidates else None

        picked = wait_until(victim, timeout=120, what="a live worker holding jobs")
        assert picked is not None
        worker_id, pid = picked
        os.kill(pid, signal.SIGKILL)
        killed[worker_id] = pid

    ids = backlog.stop() + stream.stop()
    wait_all_finished(url, len(ids), timeout=180)
    service.wait_event("worker.spawned", count=3 + KILLS)  # every slot refilled
    assert service.stop() == 0

    outcome = assert_chaos_invariants(url, ids, [service])
    print(f"kill -9 x{KILLS}: {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    # Every kill was seen and its worker replaced; every extra run was on a
    # worker we killed, and the killed workers' jobs were requeued at once.
    for worker_id in killed:
        (exited,) = service.events("worker.exited", worker_id=worker_id)
        assert "SIGKILL" in exited["exit"]
    assert {r.worker_id for r in outcome.extra_runs} <= set(killed)
    assert {r.why for r in outcome.extra_runs} <= {"its worker died"}
    requeued = sum(int(e["count"]) for e in service.events("worker.jobs_requeued"))
    assert requeued >= 1
    assert not service.events("maintenance.leases_reaped")
    assert len(service.events("worker.spawned")) == 3 + KILLS


@pytest.mark.timeout(180)
def test_a_worker_stopped_past_its_lease_has_its_late_result_refused(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    gate = tmp_path / "gate"
    # A short lease, reaped often; the supervisor itself must not kill the
    # frozen worker for its silence, so its worker_timeout is long.
    service = start_service(
        url, tmp_path,
        settings(JOBVISOR_LEASE="4", JOBVISOR_REAP_INTERVAL="0.5", JOBVISOR_WORKER_TIMEOUT="300"),
    )  # fmt: skip
    service.wait_ready()
    with jobvisor.connect(url, pool_size=1) as q:
        target = q.enqueue("chaos", {"gate": str(gate), "gate_per_attempt": True, "seconds": 0},
                           max_attempts=MAX_ATTEMPTS)  # fmt: skip

    first = wait_until(lambda: runs_of(url, target), what="the first run")[0]
    frozen_pid = service.worker_pids()[first.worker_id]
    os.kill(frozen_pid, signal.SIGSTOP)
    try:
        # While it is frozen the lease expires, the reaper takes the job back
        # and the other worker runs it under a new claim.
        second = wait_until(lambda: runs_of(url, target)[1:], timeout=90, what="a second run")[0]
        assert second.worker_id != first.worker_id
        assert second.claim_token != first.claim_token
        assert second.attempt == 2

        def held_by_second() -> bool:
            return claim_of(url, target) == ("running", second.claim_token, second.worker_id)

        wait_until(held_by_second, what="the row holding the second claim")
        # The frozen run may finish as soon as it thaws: its result is late.
        Path(f"{gate}.1").touch()
    finally:
        os.kill(frozen_pid, signal.SIGCONT)

    # Thawed, the frozen worker finds its lease gone: its completion (or its
    # renewal, whichever it writes first) is refused by the claim token and
    # the result dropped; the row still belongs to the second claim.
    service.wait_event("job.lease_lost", worker_id=first.worker_id, job_id=str(target), timeout=60)
    assert held_by_second()
    for attempt in range(2, MAX_ATTEMPTS + 1):  # the second run's, and any later one's
        Path(f"{gate}.{attempt}").touch()
    wait_until(lambda: job(url, target)["status"] == "completed", what="the job completed")

    row = job(url, target)
    runs = runs_of(url, target)
    lost_elsewhere = service.events("job.lease_lost", job_id=str(target))
    # Two runs; every run but the completing one lost its lease (on a loaded
    # machine the second could lose its lease too, and a third run follow).
    assert len(runs) == 1 + len(lost_elsewhere) >= 2
    assert runs[:2] == [first, second]
    assert (row["worker_id"], row["attempts"]) == (runs[-1].worker_id, runs[-1].attempt)
    assert is_alive(frozen_pid), "the thawed worker carries on"
    assert service.stop() == 0
    outcome = assert_chaos_invariants(url, [uuid.UUID(str(target))], [service])
    print(f"SIGSTOP past the lease: {outcome}")
