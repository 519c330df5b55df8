"""Pausing a queue under a running `jobvisor run`: no job of it starts once
`pause` has returned, the running ones finish, the other queues go on, and
after the resume the backlog drains; `/metrics` shows the pause."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobvisor import Queue
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import claimed_after_pause, queue_counts
from tests.support.service import Service, http_get
from tests.support.wait import wait_until

JOBS = 300


def test_pause_under_load_then_resume_drains_the_backlog(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    sleep = {"job_type": "sleep", "payload": {"seconds": 0.05}}
    queue.enqueue_many([{**sleep, "queue": q} for _ in range(JOBS) for q in ("held", "free")])
    service = start_service(url, tmp_path, {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0"})
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()
    wait_until(
        lambda: queue_counts(url, "held").get("completed", 0) >= 10, what="held jobs running"
    )

    queue.pause("held")

    wait_until(lambda: "running" not in queue_counts(url, "held"), what="running jobs finished")
    wait_until(lambda: queue_counts(url, "free") == {"completed": JOBS}, what="free drained")
    assert claimed_after_pause(url) == []
    held = queue_counts(url, "held")
    assert set(held) == {"pending", "completed"}, held
    late = queue.enqueue("sleep", {"seconds": 0.05}, queue="held")  # enqueue goes on
    wait_until(
        lambda: 'jobvisor_queue_paused{queue="held"} 1.0' in http_get(port, "/metrics")[1],
        what="the paused gauge",
    )
    assert claimed_after_pause(url) == []
    assert queue_counts(url, "held") == {**held, "pending": held["pending"] + 1}

    queue.resume("held")

    wait_until(
        lambda: queue_counts(url, "held") == {"completed": JOBS + 1}, what="the backlog drained"
    )
    assert queue.get(late).attempts == 1
    # Every job ran once: none was interrupted by the pause.
    ((n,),) = query_all(url, ["SELECT count(*) FROM jobvisor_jobs WHERE attempts <> 1"])[0]
    assert n == 0
    wait_until(
        lambda: 'jobvisor_queue_paused{queue="held"} 0.0' in http_get(port, "/metrics")[1],
        what="the gauge back to 0",
    )
    assert service.stop() == 0
    assert_invariants(url)
