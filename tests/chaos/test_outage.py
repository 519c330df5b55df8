"""A database outage longer than a worker's boot timeout, on a throwaway
cluster of this test's own: the supervisor waits for the database instead of
giving up. A worker that cannot reach it at boot exits `UNAVAILABLE` and is
started again with backoff for as long as the outage lasts, `/readyz`
answers 503 meanwhile, and once the server is back every job completes and
none is left running. A supervisor started while the database is down
serves HTTP first and starts its workers only once the database answers."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobvisor.exitcodes import ExitCode
from tests.support.postgres import Cluster, throwaway_cluster
from tests.support.service import Service, http_get
from tests.support.wait import wait_until

from .ledger import Enqueuer, answers, assert_chaos_invariants, prepare, settings, wait_all_finished

OUTAGE = 20.0  # longer than a worker's boot timeout (15 s)
APP = "tests.chaos.outage_app:registry"


class StoppableServer:
    """A throwaway PostgreSQL cluster that the test stops and starts again
    on the same port."""

    def __init__(self, cluster: Cluster, url: str) -> None:
        self.cluster, self.url = cluster, url

    def stop(self) -> None:
        self.cluster.ctl("-m", "fast", "-w", "-t", "120", "stop")

    def start(self) -> None:
        self.cluster.ctl("-o", self.cluster.options(), "-w", "-t", "120", "start")


@pytest.fixture
def server() -> Iterator[StoppableServer]:
    with throwaway_cluster() as (cluster, url):
        yield StoppableServer(cluster, url)


def enqueue(url: str, count: int, **options: Any) -> list[uuid.UUID]:
    """`count` chaos jobs, enqueued before the scenario starts."""
    enqueuer = Enqueuer(url, batch=count, total=count, **options).start()
    wait_until(lambda: len(enqueuer.ids) >= count, what=f"{count} jobs enqueued")
    return enqueuer.stop()


def http_port(service: Service) -> int:
    return int(service.wait_event("http.listening")[0]["port"])


def readyz(port: int) -> int:
    return http_get(port, "/readyz")[0]


def assert_never_gave_up(service: Service) -> None:
    assert not service.events("supervisor.worker_cannot_boot")
    assert not service.events("supervisor.crash_loop")
    assert not service.events("supervisor.database_failed")


@pytest.mark.long
@pytest.mark.timeout(300)
def test_a_worker_that_exits_during_a_long_outage_is_restarted_until_the_database_is_back(
    server: StoppableServer, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = server.url
    prepare(url)
    ids = enqueue(url, 300, seconds=(0.05, 0.2))
    service = start_service(
        url, tmp_path, settings(JOBVISOR_APP=APP, JOBVISOR_HTTP_ADDR="127.0.0.1:0")
    )
    port = http_port(service)
    service.wait_ready()
    wait_until(lambda: readyz(port) == 200, what="/readyz 200")

    server.stop()
    stopped_at = time.monotonic()
    (victim, *_) = sorted(service.live_workers())
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: readyz(port) == 503, what="/readyz 503 while the database is away")
    # The replacement cannot reach the database: restarted again and again,
    # for longer than a worker's boot timeout, and the service stays up.
    service.wait_event("worker.database_unavailable", count=3, timeout=60)
    wait_until(
        lambda: time.monotonic() - stopped_at > OUTAGE, timeout=OUTAGE + 5, what="the outage"
    )
    service.check_running("the end of the outage")
    assert readyz(port) == 503

    server.start()
    wait_until(lambda: answers(url), what="the server back")
    wait_until(lambda: readyz(port) == 200, timeout=60, what="/readyz 200 again")
    wait_all_finished(url, len(ids), timeout=180)
    assert service.stop() == ExitCode.OK

    outcome = assert_chaos_invariants(url, ids, [service])
    print(f"a worker killed during a {OUTAGE:g}s outage: {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    assert_never_gave_up(service)
    (exited,) = service.events("worker.exited", pid=victim)
    assert "SIGKILL" in exited["exit"]
    restarts = service.events("worker.exited", exit="exit code 69")
    assert len(restarts) >= 3
    assert service.events("supervisor.stopped", exit_code=0)


@pytest.mark.timeout(240)
def test_a_supervisor_started_during_an_outage_serves_http_and_waits_for_the_database(
    server: StoppableServer, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = server.url
    prepare(url)
    ids = enqueue(url, 100)
    server.stop()

    service = start_service(
        url, tmp_path, settings(JOBVISOR_APP=APP, JOBVISOR_HTTP_ADDR="127.0.0.1:0")
    )
    port = http_port(service)
    service.wait_event("supervisor.waiting_for_database")
    assert readyz(port) == 503
    assert http_get(port, "/healthz")[0] == 200
    assert not service.events("worker.spawned")  # no worker before the database

    server.start()
    service.wait_ready(timeout=60)
    wait_until(lambda: readyz(port) == 200, timeout=60, what="/readyz 200")
    wait_all_finished(url, len(ids), timeout=120)
    assert service.stop() == ExitCode.OK

    outcome = assert_chaos_invariants(url, ids, [service])
    assert outcome.statuses == {"completed": len(ids)}
    assert_never_gave_up(service)
    assert not service.events("worker.database_unavailable")
    spawned = service.events("worker.spawned")
    waited = service.events("supervisor.waiting_for_database")
    assert waited[0]["ts"] < spawned[0]["ts"]
