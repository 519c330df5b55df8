"""A deploy broken under a running service (the app's module no longer
imports) never takes down the workers that were fine: SIGHUP refuses it and
keeps them; a worker that dies then is replaced by one that cannot boot, and
its slot alone is retried with backoff, named on `/healthz` and in
`/metrics`, until the app is fixed. At first start the same app still stops
the service (see `test_crashes`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import jobvisor
from tests.support.invariants import assert_invariants
from tests.support.service import ROOT, Service, by_status, http_get, is_alive
from tests.support.wait import wait_until

GOOD_APP = '''
from jobvisor.worker import JobContext, Registry

registry = Registry()


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    """Does nothing."""
'''

BROKEN_APP = GOOD_APP + "\ndef oops(:\n"


def _metric(port: int, name: str) -> float | None:
    for line in http_get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_replacement_that_cannot_boot_keeps_the_healthy_workers(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    app = tmp_path / "deployed_app.py"
    app.write_text(GOOD_APP)
    settings = {
        "JOBVISOR_APP": "deployed_app:registry",
        "JOBVISOR_HTTP_ADDR": "127.0.0.1:0",
        "JOBVISOR_MAX_RESTARTS": "1",  # the slot's retries must not spend it
        "PYTHONDONTWRITEBYTECODE": "1",  # no cached bytecode hides the edit
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
    }
    service = start_service(url, tmp_path, settings)
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()
    wait_until(lambda: len(service.live_workers()) == 2, what="two workers")
    workers = service.live_workers()

    # The deploy breaks; a reload is refused and keeps both workers.
    app.write_text(BROKEN_APP)
    service.signal(signal.SIGHUP)
    service.wait_event("supervisor.reload_failed", note="keeping the running workers")
    assert service.live_workers() >= workers

    # One worker dies: its replacement cannot boot, and is retried.
    victim, survivor = sorted(workers)
    os.kill(victim, signal.SIGKILL)
    service.wait_event("supervisor.worker_cannot_boot", count=2, timeout=90)
    assert service.proc is not None and service.proc.poll() is None
    assert is_alive(survivor) and survivor in service.live_workers()

    # Between its retries the slot's next try is a process too, alive while it
    # boots: the health counts it then, so it is read until the try has died.
    read: list[tuple[int, str]] = []

    def one_alive() -> bool:
        read.append(http_get(port, "/healthz"))
        return "1/2 workers alive" in read[-1][1]

    wait_until(one_alive, what="/healthz: 1/2 workers alive")
    status, body = read[-1]
    assert status == 200 and "1/2 workers alive" in body and "cannot boot: slot" in body
    assert _metric(port, "jobvisor_worker_slots_cannot_boot") == 1.0
    assert not service.events("supervisor.crash_loop")

    # The surviving worker still runs jobs.
    q = jobvisor.connect(url)
    try:
        ids = q.enqueue_many([{"job_type": "noop"}] * 5)
        wait_until(lambda: by_status(url).get("completed") == len(ids), what="the jobs done")
    finally:
        q.close()

    # The deploy is fixed: the slot boots again (at once after a SIGHUP).
    app.write_text(GOOD_APP)
    service.signal(signal.SIGHUP)
    service.wait_event("supervisor.slot_recovered", timeout=90)
    wait_until(lambda: _metric(port, "jobvisor_worker_slots_cannot_boot") == 0.0,
               what="the metric back at 0")  # fmt: skip
    healthy = (200, "ok: 2/2 workers alive, state running\n")
    wait_until(lambda: http_get(port, "/healthz") == healthy, what="/healthz healthy again")
    assert service.stop() == 0
    assert by_status(url).get("running", 0) == 0
    assert_invariants(url)
