"""Every way a handler can end settles its attempt: an exception that is not
an `Exception`, a `CancelledError` the worker did not ask for, an exception
that cannot be printed, `sys.exit` or `KeyboardInterrupt` in a handler. The
job fails with its own error recorded, and its worker and the jobs beside
it carry on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobvisor import Queue
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, job
from tests.support.wait import wait_until

from .outcomes_app import KINDS, THREAD_ONLY

APP = {"JOBVISOR_APP": "tests.service.supervisor.outcomes_app:registry", "JOBVISOR_WORKERS": "1"}

# What each ending records as the first word of its error.
RECORDED = {
    "cancelled": "CancelledError",
    "cancelled_future": "CancelledError",
    "generator_exit": "GeneratorExit",
    "custom_base": "Custom: the handler's own",
    "unprintable": "Unprintable",
    "system_exit": "SystemExit: 3",
    "keyboard_interrupt": "KeyboardInterrupt",
    "thread_exit": "SystemExit",
}


def test_every_way_a_handler_ends_fails_its_job_and_the_worker_carries_on(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    beside = queue.enqueue("sleep", {"seconds": 3})
    ended = {
        f"{mode}.{kind}": queue.enqueue(f"{mode}.{kind}", max_attempts=1)
        for kind in KINDS
        for mode in ("aio", "thread")
        if mode == "thread" or kind not in THREAD_ONLY
    }
    service = start_service(url, tmp_path, {**APP, "JOBVISOR_CONCURRENCY": "20"})

    wait_until(
        lambda: all(job(url, i)["status"] == "dead" for i in ended.values()),
        what="every job dead",
    )
    for job_type, job_id in ended.items():
        row = job(url, job_id)
        assert row["attempts"] == 1, (job_type, row)
        first_line = str(row["last_error"]).split("\n", 1)[0]
        assert first_line == RECORDED[job_type.split(".", 1)[1]], (job_type, row)
    wait_until(lambda: job(url, beside)["status"] == "completed", what="the job beside done")
    # One worker ran them all: none of these endings stopped it.
    assert len(service.events("worker.spawned")) == 1
    assert not service.events("worker.exited")
    assert not service.events("worker.released")
    abnormal = service.events("job.abnormal_error")
    # On the loop, concurrent.futures.CancelledError is a plain Exception.
    assert {e["job_type"] for e in abnormal} == set(ended) - {"aio.cancelled_future"}
    assert all(e["level"] == "error" for e in abnormal)
    assert service.stop() == 0
    assert by_status(url) == {"dead": len(ended), "completed": 1}
    assert_invariants(url)
