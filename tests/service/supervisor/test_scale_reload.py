"""SIGTTIN / SIGTTOU change the number of workers (never below one); SIGHUP
replaces them one at a time while jobs keep flowing."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from jobvisor import Queue
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status
from tests.support.wait import wait_until


def test_sigttin_and_sigttou_change_the_worker_count(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    service = start_service(url, tmp_path)
    service.wait_ready()
    assert len(service.live_workers()) == 2

    service.signal(signal.SIGTTIN)
    service.wait_event("worker.ready", count=3)
    assert len(service.live_workers()) == 3

    for expected in (2, 1, 1):
        service.signal(signal.SIGTTOU)
        wait_until(lambda n=expected: len(service.live_workers()) == n,  # type: ignore[misc]
                   what=f"{expected} workers")  # fmt: skip
    assert service.events("supervisor.scaled", workers=1)
    # The retired workers drained and exited on their own.
    assert not service.events("worker.killed")
    ids = queue.enqueue_many([{"job_type": "noop"}] * 20)
    wait_until(lambda: by_status(url).get("completed") == len(ids), what="jobs on one worker")
    assert service.stop() == 0
    assert_invariants(url)


def test_sighup_replaces_the_workers_one_at_a_time_losing_no_job(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    # About five seconds of work: the reload happens while it flows.
    ids = pg_queue.enqueue_many([{"job_type": "sleep", "payload": {"seconds": 0.1}}] * 400)
    service = start_service(url, tmp_path)
    service.wait_ready()
    old = set(service.worker_pids())
    wait_until(lambda: by_status(url).get("completed", 0) >= 10, what="jobs flowing")

    service.signal(signal.SIGHUP)
    service.wait_event("supervisor.reloaded")

    new = set(service.worker_pids()) - old
    assert len(new) == 2
    wait_until(lambda: by_status(url).get("completed") == len(ids), what="every job completed")
    # One at a time: the second new worker starts only after the first old one
    # was told to go, and each old one goes only once its successor is ready.
    order = [
        (e["event"], e["worker_id"])
        for e in service.events()
        if e.get("event") in ("worker.spawned", "worker.ready", "worker.retiring")
        and e.get("worker_id") in old | new
    ]
    first_new, second_new = [w for kind, w in order if kind == "worker.spawned" and w in new]
    retired = [w for kind, w in order if kind == "worker.retiring"]
    assert set(retired) == old
    assert order.index(("worker.ready", first_new)) < order.index(("worker.retiring", retired[0]))
    assert order.index(("worker.retiring", retired[0])) < order.index(
        ("worker.spawned", second_new)
    )
    assert order.index(("worker.ready", second_new)) < order.index(("worker.retiring", retired[1]))
    wait_until(lambda: len(service.live_workers()) == 2, what="the old workers gone")
    assert not service.events("worker.killed")
    assert service.stop() == 0
    assert set(by_status(url)) == {"completed"}
    assert_invariants(url)
