"""Chaos on a Citus cluster (Citus mode, docs/design.md "Scale-out"), on a
cluster of the test's own: `kill -9` of worker processes under load, then of
a Citus worker node's postmaster, which comes back after crash recovery.
Nothing is lost, nothing is left running, every job completes, and every run
that did not complete its job is explained (`assert_chaos_invariants`)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.citus import CitusCluster, private_cluster
from tests.support.service import Service
from tests.support.wait import wait_until

from .ledger import (
    Enqueuer,
    assert_chaos_invariants,
    prepare,
    settings,
    wait_all_finished,
    wait_more_runs,
)
from .test_workers import busy_workers


@pytest.fixture
def cluster(worker_id: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CitusCluster]:
    """A cluster on ports of this test process's own; this process's queues
    (the enqueuers, the ledger's set-up) in Citus mode."""
    index = 0 if worker_id == "master" else int(worker_id.removeprefix("gw"))
    monkeypatch.setenv("JOBVISOR_CITUS", "on")
    with private_cluster(56101 + 10 * index) as started:
        yield started


@pytest.mark.long
@pytest.mark.timeout(420)
def test_workers_and_a_node_killed_under_load_on_a_cluster(
    cluster: CitusCluster, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = cluster.url
    prepare(url)
    service = start_service(
        url, tmp_path, settings(JOBVISOR_CITUS="1", JOBVISOR_WORKERS="3", JOBVISOR_LEASE="30")
    )
    backlog = Enqueuer(url, batch=300, total=300).start()
    stream = Enqueuer(url, batch=2, every=0.2, total=300).start()
    service.wait_ready()

    killed: dict[str, int] = {}
    for _ in range(3):
        wait_more_runs(url, 25)

        def victim() -> tuple[str, int] | None:
            pids, children = service.worker_pids(), service.live_workers()
            candidates = sorted(
                (w, pids[w]) for w in busy_workers(url) - set(killed)
                if w in pids and pids[w] in children
            )  # fmt: skip
            return candidates[0] if candidates else None

        picked = wait_until(victim, timeout=120, what="a live worker holding jobs")
        assert picked is not None
        os.kill(picked[1], signal.SIGKILL)
        killed[picked[0]] = picked[1]

    wait_more_runs(url, 25)
    crashed_at = dt.datetime.now(dt.UTC)
    cluster.kill_node(cluster.worker_ports[0])
    time.sleep(2)  # the workers meet the missing node meanwhile
    cluster.start()
    ids = backlog.stop() + stream.stop()
    wait_all_finished(url, len(ids), timeout=240)
    assert service.stop() == 0

    outcome = assert_chaos_invariants(url, ids, [service], crashed=[crashed_at])
    print(f"Citus: kill -9 of 3 workers and of a node: {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    for worker_id in killed:
        (exited,) = service.events("worker.exited", worker_id=worker_id)
        assert "SIGKILL" in exited["exit"]
