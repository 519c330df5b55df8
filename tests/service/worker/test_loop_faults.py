"""Every loop of a worker meets database errors in turn (through
`tests.service.worker.faulty_app`): one that may pass is logged and retried until it
passes, with the heartbeat naming the failing loop meanwhile; one that lasts
past the limit stops the worker with a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.exitcodes import ExitCode
from tests.support.invariants import assert_invariants
from tests.support.wait import wait_until
from tests.support.worker import WorkerProcess

FAULTY_APP = "tests.service.worker.faulty_app:registry"
LOOPS = ["claim", "flush", "renew", "listen"]
RENEW_LEASE = "6"  # a renewal every 3 s: the jobs of the renew case run longer


@pytest.fixture
def migrated(url: str) -> Iterator[Queue]:
    q = jobvisor.connect(url)
    try:
        q.migrate()
        yield q
    finally:
        q.close()


def faulty_worker(
    monkeypatch: pytest.MonkeyPatch, url: str, loop: str, kind: str, fault: Path, **settings: str
) -> WorkerProcess:
    """A worker whose `loop` meets `kind` errors while the file `fault` exists."""
    for name, value in {"FAULT_LOOP": loop, "FAULT_KIND": kind, "FAULT_FILE": str(fault)}.items():
        monkeypatch.setenv(name, value)
    return WorkerProcess(url, control=True, app=FAULTY_APP, **settings)


def failed_event(loop: str) -> str:
    return "worker.listen_lost" if loop == "listen" else f"worker.{loop}_failed"


def reported_unhealthy(worker: WorkerProcess, loop: str) -> bool:
    return any(loop in m.get("unhealthy", []) for m in worker.control("hb"))


def enqueue_for(queue: Queue, loop: str, folder: Path, count: int = 12) -> list[object]:
    if loop == "renew":  # held past a renewal, then finished by themselves
        job = {"job_type": "wait", "payload": {"dir": str(folder), "seconds": 4}}
        return list(queue.enqueue_many([job] * 4))
    return list(queue.enqueue_many([{"job_type": "ok"}] * count))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_loop_meeting_an_error_that_may_pass_recovers_by_itself(
    url: str, migrated: Queue, tmp_path: Path, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if loop == "listen" and migrated.engine != "postgres":
        pytest.skip("SQLite has no LISTEN")
    fault = tmp_path / "fault"
    fault.touch()
    settings = {"lease": RENEW_LEASE} if loop == "renew" else {}
    if loop in ("claim", "flush"):  # queued before the worker starts: the first try fails
        ids = enqueue_for(migrated, loop, tmp_path)
    with faulty_worker(monkeypatch, url, loop, "may_pass", fault, **settings) as worker:
        worker.wait_started()
        if loop in ("renew", "listen"):
            ids = enqueue_for(migrated, loop, tmp_path)
        # Logged at error level once, with the traceback, and reported unhealthy.
        failed = worker.wait_log(failed_event(loop), level="error", fault="may_pass")
        assert 'File "' in failed["error"], failed  # the innermost frames
        wait_until(lambda: reported_unhealthy(worker, loop), f"a heartbeat naming {loop}")
        if loop == "claim":
            assert migrated.summary().count(JobStatus.PENDING) == len(ids)
        assert worker.proc.poll() is None  # it waits for the error to pass
        fault.unlink()
        worker.wait_log(f"worker.{loop}_restored")
        wait_until(
            lambda: migrated.summary().count(JobStatus.COMPLETED) == len(ids),
            f"all {len(ids)} jobs completed",
        )
        wait_until(
            lambda: worker.control("hb") and not worker.control("hb")[-1].get("unhealthy"),
            "a heartbeat with no failing loop",
        )
        assert worker.stop() == ExitCode.OK, worker.tail()
        assert not worker.events("worker.loop_failed")
    assert_invariants(url)


def test_an_error_that_may_pass_but_lasts_stops_the_worker(
    url: str, migrated: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = tmp_path / "fault"
    fault.touch()  # never removed
    ids = migrated.enqueue_many([{"job_type": "ok"}] * 5)
    monkeypatch.setenv("FAULT_LIMIT", "1")
    with faulty_worker(monkeypatch, url, "claim", "may_pass", fault) as worker:
        assert worker.wait_exit() == ExitCode.FAILED, worker.tail()
        gave_up = worker.wait_log("worker.loop_failed", loop="claim", fault="may_pass")
        assert gave_up["level"] == "error"
        assert "read-only" in gave_up["error"] or "readonly" in gave_up["error"]
        assert len(worker.events("worker.claim_failed")) > 1  # retried before giving up
        assert worker.wait_log("worker.stopped")["clean"] is False
    summary = migrated.summary()
    assert summary.count(JobStatus.PENDING) == len(ids)  # never claimed: nothing left running
    assert_invariants(url)


def test_an_unreachable_database_is_waited_out_past_the_limit_and_stays_healthy(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = jobvisor.connect(pg_url)
    queue.migrate()
    fault = tmp_path / "fault"
    fault.touch()
    ids = queue.enqueue_many([{"job_type": "ok"}] * 5)
    monkeypatch.setenv("FAULT_LIMIT", "0.5")
    try:
        with faulty_worker(monkeypatch, pg_url, "claim", "unreachable", fault) as worker:
            worker.wait_started()

            def past_the_limit() -> bool:
                failed = worker.events("worker.claim_failed")
                return any(e["failing_for"] > 0.5 for e in failed)

            wait_until(past_the_limit, "claims failing for longer than the limit")
            failed = worker.events("worker.claim_failed")
            assert {(e["level"], e["fault"]) for e in failed} == {("warning", "unreachable")}
            assert worker.proc.poll() is None and not worker.events("worker.loop_failed")
            assert not any(m.get("unhealthy") for m in worker.control("hb"))
            fault.unlink()
            worker.wait_log("worker.claim_restored")
            wait_until(
                lambda: queue.summary().count(JobStatus.COMPLETED) == len(ids),
                "every job completed",
            )
            assert worker.stop() == ExitCode.OK, worker.tail()
    finally:
        queue.close()
    assert_invariants(pg_url)


def test_renewals_failing_until_nothing_is_held_leave_no_failing_loop(
    url: str, migrated: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = tmp_path / "fault"
    fault.touch()  # never removed: every renewal fails
    with faulty_worker(monkeypatch, url, "renew", "may_pass", fault, lease=RENEW_LEASE) as worker:
        worker.wait_started()
        ids = enqueue_for(migrated, "renew", tmp_path)  # done before their leases expire
        worker.wait_log("worker.renew_failed", level="error", fault="may_pass")
        wait_until(lambda: reported_unhealthy(worker, "renew"), "a heartbeat naming renew")
        wait_until(
            lambda: migrated.summary().count(JobStatus.COMPLETED) == len(ids),
            f"all {len(ids)} jobs completed",
        )
        # With nothing held, nothing is failing: the worker is healthy again.
        worker.wait_log("worker.renew_restored")
        hb_count = len(worker.control("hb"))
        wait_until(lambda: len(worker.control("hb")) > hb_count, "a later heartbeat")
        assert not worker.control("hb")[-1].get("unhealthy")
        assert fault.exists()
        assert worker.stop() == ExitCode.OK, worker.tail()
    assert_invariants(url)
