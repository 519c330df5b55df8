"""Workflows of Django tasks run by `jobvisor run` with `JOBVISOR_APP=django`,
on PostgreSQL and on SQLite: each child runs once, after its parents, called
with their results where its arguments held placeholders, and the
framework's API reads each node's result; a parent that fails cancels its
child under the default policy and hands None to one under "run"."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.contrib.django.compat import TaskResultStatus
from jobvisor.queue.drivers.postgres.dialect import CLOCK_SLACK
from tests.django_project.shop import tasks
from tests.support.django import django_env
from tests.support.invariants import assert_invariants
from tests.support.service import Service, services
from tests.support.wait import wait_until


@pytest.fixture
def service(url: str, alias: str, workdir: Path) -> Iterator[Service]:
    """`jobvisor run` on this test's database, running the Django project's
    tasks with two workers."""
    settings = {"JOBVISOR_APP": "django", "JOBVISOR_WORKERS": "2", **django_env(url)}
    with services() as start:
        running = start(url, workdir, settings)
        running.wait_ready()
        yield running
        assert running.stop() == 0


def _finished(jobs: Queue, wid: uuid.UUID) -> jobvisor.WorkflowStatus:
    wait_until(lambda: jobs.workflow(wid).finished, timeout=60, what=f"workflow {wid}")
    return jobs.workflow(wid)


def test_a_diamond_of_django_tasks_hands_each_result_down(
    alias: str, jobs: Queue, url: str, service: Service
) -> None:
    add = tasks.add.using(backend=alias)
    double = tasks.slow_double.using(backend=alias)  # an async task
    receipt = tasks.send_receipt.using(backend=alias)  # on the "mail" queue
    wf = jobvisor.Workflow("django-diamond")
    a = wf.add(add, 2, 3)
    b = wf.add(double, a.result)
    c = wf.add(add, a.result, b=100)
    d = wf.add(receipt, {"lines": [{"price": b.result}, {"price": c.result}]}, to="ada@example.org")
    wid = jobs.enqueue_workflow(wf)

    status = _finished(jobs, wid)
    assert status.counts == {JobStatus.COMPLETED: 4}, status
    assert all(job.attempts == 1 for job in status.jobs)  # each ran once
    assert [status.job(n.key).result for n in (a, b, c, d)] == [
        5,
        10,
        105,
        {"sent_to": "ada@example.org", "total": 115},
    ]
    runs = {n.key: jobs.get(status.job(n.key).id) for n in (a, b, c, d)}
    # Each process stamps times from its own reading of the database's
    # clock, and two readings may differ by a few milliseconds: a child
    # claimed right after its parent ended may read as starting up to the
    # claim's slack (CLOCK_SLACK) before it.
    slack = dt.timedelta(seconds=CLOCK_SLACK)
    for child, parents in [(b, [a]), (c, [a]), (d, [b, c])]:
        started = runs[child.key].started_at
        assert started is not None
        for parent in parents:
            finished = runs[parent.key].finished_at
            assert finished is not None and finished <= started + slack
    # Each node is a task result the framework reads, arguments as called.
    fetched = receipt.get_result(str(status.job(d.key).id))
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.args == [{"lines": [{"price": 10}, {"price": 105}]}]
    assert fetched.return_value == {"sent_to": "ada@example.org", "total": 115}
    assert add.get_result(str(status.job(c.key).id)).return_value == 105
    assert_invariants(url)


def test_a_failed_django_task_cancels_its_child_or_hands_it_none(
    alias: str, jobs: Queue, url: str, service: Service
) -> None:
    wf = jobvisor.Workflow("django-failure")
    failed = wf.add(tasks.reserve.using(backend=alias), "tea")
    cancelled = wf.add(tasks.add.using(backend=alias), failed.result, 1)
    ran = wf.after(failed, on_parent_failure="run").add(
        tasks.which_attempt.using(backend=alias), "after the failure"
    )
    wid = jobs.enqueue_workflow(wf)

    status = _finished(jobs, wid)
    assert status.job(failed.key).status is JobStatus.DEAD
    assert status.job(cancelled.key).status is JobStatus.CANCELLED
    assert status.job(cancelled.key).attempts == 0  # never ran
    assert status.job(ran.key).status is JobStatus.COMPLETED
    assert status.job(ran.key).result["label"] == "after the failure"
    result = tasks.add.using(backend=alias).get_result(str(status.job(cancelled.key).id))
    assert result.status == TaskResultStatus.FAILED  # the framework has no cancelled
    meta = jobs.get(status.job(ran.key).id).meta
    assert meta is not None and meta["failed_parents"] == {failed.key: "dead"}
    assert_invariants(url)
