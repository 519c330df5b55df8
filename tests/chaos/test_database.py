"""Chaos in the database: every session of the service terminated again and
again under load, and a PostgreSQL server restarted mid-run.

The restart runs on a throwaway cluster of its own (initdb + pg_ctl in a temp
dir, the code `tests/conftest.py` uses when no server answers): the shared
server on this machine serves other tests and must never be restarted."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.postgres import Cluster, throwaway_cluster
from tests.support.service import Service, terminate_backends
from tests.support.wait import wait_until

from .ledger import (
    Enqueuer,
    answers,
    assert_chaos_invariants,
    prepare,
    settings,
    wait_all_finished,
    wait_more_runs,
)

TERMINATIONS = 8
RESTARTS = 2


@pytest.mark.timeout(240)
def test_every_session_terminated_again_and_again_under_load(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    service = start_service(url, tmp_path, settings())
    backlog = Enqueuer(url, batch=200, total=200).start()
    stream = Enqueuer(url, batch=5, every=0.1, total=600).start()
    service.wait_ready()
    terminated = []
    for _ in range(TERMINATIONS):
        wait_more_runs(url, 30)
        # The supervisor's, the workers' (pools, LISTEN, ledger) and the
        # enqueuer's sessions: everything but the one that terminates them.
        terminated.append(terminate_backends(url))
    ids = backlog.stop() + stream.stop()
    wait_all_finished(url, len(ids), timeout=180)
    assert service.stop() == 0

    outcome = assert_chaos_invariants(url, ids, [service])
    print(f"sessions terminated in each round {terminated}, enqueues retried "
          f"{backlog.retries + stream.retries}: {outcome}")  # fmt: skip
    assert all(terminated)  # the jobs run since the last round left sessions to end
    assert outcome.statuses == {"completed": len(ids)}
    # Recovered by reconnecting: no worker died or was replaced.
    assert len(service.events("worker.spawned")) == 2
    assert {e["exit"] for e in service.events("worker.exited")} == {"exit code 0"}


class ThrowawayServer:
    """A PostgreSQL cluster of this test's own, which it may restart."""

    def __init__(self, cluster: Cluster, url: str) -> None:
        self.cluster, self.url = cluster, url

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: sessions are terminated, in-flight
        transactions rolled back, the server comes back on the same port."""
        self.cluster.ctl("-m", "fast", "-w", "-t", "120", "restart")


@pytest.fixture
def throwaway_server() -> Iterator[ThrowawayServer]:
    with throwaway_cluster() as (cluster, url):
        yield ThrowawayServer(cluster, url)


@pytest.mark.timeout(300)
def test_a_postgresql_restart_mid_run(
    throwaway_server: ThrowawayServer, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = throwaway_server.url
    prepare(url)
    service = start_service(url, tmp_path, settings())
    backlog = Enqueuer(url, batch=300, total=300).start()
    stream = Enqueuer(url, batch=5, every=0.1, total=600).start()
    service.wait_ready()
    for _ in range(RESTARTS):
        wait_more_runs(url, 60)
        throwaway_server.restart()
    wait_until(lambda: answers(url), what="the server back")
    ids = backlog.stop() + stream.stop()
    wait_all_finished(url, len(ids), timeout=180)
    assert service.stop() == 0

    outcome = assert_chaos_invariants(url, ids, [service])
    print(f"{RESTARTS} PostgreSQL restarts: {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    assert service.events("queue.listen_lost")  # the restart was felt
