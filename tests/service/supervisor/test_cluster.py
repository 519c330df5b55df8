"""Several supervisors on one PostgreSQL, and a database that drops every
connection mid-run."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import jobvisor
from jobvisor import Queue
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, job, terminate_backends
from tests.support.wait import wait_until


def test_two_supervisors_run_every_job_once_and_one_leads_the_maintenance(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    runs = tmp_path / "runs.txt"
    ids = pg_queue.enqueue_many([{"job_type": "record", "payload": {"path": str(runs)}}] * 400)
    settings = {"JOBVISOR_SUMMARY_INTERVAL": "0.5", "JOBVISOR_REAP_INTERVAL": "0.5"}
    a = start_service(url, tmp_path, settings, name="a")
    b = start_service(url, tmp_path, settings, name="b")

    wait_until(lambda: by_status(url).get("completed") == len(ids), what="every job completed")
    counts = collections.Counter(runs.read_text().split())
    assert set(counts) == {str(i) for i in ids}
    assert set(counts.values()) == {1}, "a job ran twice"
    wait_until(lambda: len(a.events("queue.summary")) + len(b.events("queue.summary")) >= 3,
               what="a few summaries")  # fmt: skip

    leaders = [s for s in (a, b) if s.events("leader.elected")]
    assert len(leaders) == 1, "exactly one supervisor was elected"
    leader, other = leaders[0], (b if leaders[0] is a else a)
    assert not other.events("queue.summary") and not other.events("maintenance.failed")

    # The leader resigns on a clean stop; the other takes over at its next try.
    assert leader.stop() == 0
    assert leader.events("leader.resigned")
    other.wait_event("leader.elected", timeout=60)
    summaries_before = len(other.events("queue.summary"))
    other.wait_event("queue.summary", count=summaries_before + 1)
    assert other.stop() == 0
    assert_invariants(url)


def test_workers_recover_when_every_connection_is_terminated(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    ids = pg_queue.enqueue_many([{"job_type": "sleep", "payload": {"seconds": 0.05}}] * 300)
    service = start_service(url, tmp_path)
    service.wait_ready()
    wait_until(lambda: by_status(url).get("completed", 0) >= 20, what="jobs flowing")

    assert terminate_backends(url) > 0  # the workers', the supervisor's, and ours
    with jobvisor.connect(url) as fresh:
        meanwhile = fresh.enqueue("noop")

    wait_until(lambda: job(url, meanwhile)["status"] == "completed", what="the job enqueued then")
    wait_until(lambda: by_status(url).get("completed") == len(ids) + 1, what="nothing lost")
    # Recovered by reconnecting, not by replacing the workers.
    assert len(service.events("worker.spawned")) == 2
    assert service.stop() == 0
    assert_invariants(url)
