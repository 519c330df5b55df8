"""Typed tasks for the batch service tests
(`JOBVISOR_APP=tests.service.supervisor.batch_app:registry`): members that square a
number (one may kill its own worker once), a member that adds more members
to its own batch, and a callback that reads the batch's results page by page."""

from __future__ import annotations

import functools
import os
import signal
from typing import Any

import jobvisor
from jobvisor.tasks import current_job
from jobvisor.worker.registry import Registry

registry = Registry()


@functools.cache
def _queue() -> jobvisor.Queue:
    return jobvisor.connect(os.environ["JOBVISOR_DATABASE_URL"], pool_size=2)


@registry.task
def square(n: int, die_once: str | None = None) -> int:
    """n * n; with `die_once` (a file path), the first run kills its own worker."""
    if die_once is not None:
        try:
            os.close(os.open(die_once, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            pass
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    return n * n


@registry.task
def fan_out(first: int, count: int) -> int:
    """Adds `count` squares to its own batch, while it runs."""
    job = current_job()
    assert job is not None and job.batch_id is not None
    _queue().batch_add_many(job.batch_id, [square.args(n=i) for i in range(first, first + count)])
    return 0


@registry.task(queue="reports")
def report(batch_id: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The batch's callback: sums its members' results, three at a time."""
    total, members, pages = 0, 0, 0
    cursor = None
    while True:
        page = _queue().batch_results(batch_id, cursor, limit=3)
        pages += 1
        for job in page.jobs:
            members += 1
            total += job.result
        if page.cursor is None:
            break
        cursor = page.cursor
    return {"sum": total, "members": members, "pages": pages, "meta": meta}
