"""A worker whose loop fails is never left alive and healthy: an error that
will not pass makes it exit, and the supervisor requeues its jobs and
replaces it; while a loop fails, `/healthz` answers 503 and names it.
Faults are injected by `tests.service.worker.faulty_app`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from jobvisor import Queue
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, http_get
from tests.support.wait import wait_until

FAULTY_APP = "tests.service.worker.faulty_app:registry"
LOOPS = ["claim", "flush", "renew", "listen"]


def fault_settings(loop: str, kind: str, fault: Path, **more: str) -> dict[str, str]:
    return {
        "JOBVISOR_APP": FAULTY_APP,
        "FAULT_LOOP": loop,
        "FAULT_KIND": kind,
        "FAULT_FILE": str(fault),
        **more,
    }


@pytest.mark.parametrize("loop", LOOPS)
def test_a_loop_meeting_an_error_that_will_not_pass_gets_its_worker_replaced(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], loop: str
) -> None:
    if loop == "listen" and queue.engine != "postgres":
        pytest.skip("SQLite has no LISTEN")
    url = queue.url
    fault = tmp_path / "fault"
    fault.touch()  # one call, in one worker, finds it, removes it and raises
    settings = fault_settings(loop, "permanent", fault, FAULT_ONCE="1")
    if loop == "renew":  # jobs held across a renewal (every 2 s), done by themselves
        settings["JOBVISOR_LEASE"] = "4"
        job = {"job_type": "wait", "payload": {"dir": str(tmp_path), "seconds": 3}}
        jobs = [job] * 8
    else:
        jobs = [{"job_type": "ok"}] * 40
    ids: list[uuid.UUID] = []
    if loop != "listen":  # waiting at start: the first claim and flush meet the fault
        ids += queue.enqueue_many(jobs)
    service = start_service(url, tmp_path, settings)

    (failed,) = service.wait_event("worker.loop_failed")
    assert (failed["loop"], failed["fault"], failed["level"]) == (loop, "permanent", "error")
    raised = "NumericValueOutOfRange" if queue.engine == "postgres" else "OverflowError"
    assert raised in failed["error"] and 'File "' in failed["error"], failed
    (exited,) = service.wait_event("worker.exited", worker_id=failed["worker_id"])
    assert exited["exit"] == "exit code 1", exited
    service.wait_event("worker.spawned", count=3)  # its replacement
    service.wait_ready()
    if loop == "listen":
        ids += queue.enqueue_many(jobs)
    wait_until(lambda: by_status(url) == {"completed": len(ids)}, what="every job completed")
    assert service.stop() == 0
    assert not fault.exists()
    assert by_status(url) == {"completed": len(ids)}  # nothing left running
    assert_invariants(url)


def test_healthz_names_a_failing_loop_until_it_recovers(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    fault = tmp_path / "fault"
    fault.touch()
    ids = pg_queue.enqueue_many([{"job_type": "ok"}] * 20)
    settings = fault_settings("claim", "may_pass", fault, JOBVISOR_HTTP_ADDR="127.0.0.1:0")
    service = start_service(url, tmp_path, settings)
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()

    def unhealthy() -> str:
        status, body = http_get(port, "/healthz")
        return body if status == 503 else ""

    body = wait_until(unhealthy, what="/healthz answering 503")
    assert "failing loops:" in body and "claim" in body, body
    assert by_status(url) == {"pending": len(ids)}
    fault.unlink()
    wait_until(lambda: http_get(port, "/healthz")[0] == 200, what="/healthz healthy again")
    wait_until(lambda: by_status(url) == {"completed": len(ids)}, what="every job completed")
    assert len(service.events("worker.spawned")) == 2  # recovered in place: none replaced
    assert service.stop() == 0
    assert_invariants(url)
