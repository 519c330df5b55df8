"""Django tasks as workflow nodes, on PostgreSQL and on SQLite: a node is
the job the task's `enqueue` would write, its arguments may hold a parent's
result, the framework's checks refuse bad input before anything is written,
and a workflow enqueued on Django's own connection goes with its transaction."""

from __future__ import annotations

import pytest
from django.db import transaction

import jobvisor
from jobvisor import InvalidArgument, JobContext, JobStatus, Queue
from jobvisor.contrib.django import JobvisorBackend
from tests.django_project.shop import tasks
from tests.support.queue import row_count


class Rollback(Exception):
    pass


def _backend(alias: str) -> JobvisorBackend:
    backend = tasks.add.using(backend=alias).get_backend()
    assert isinstance(backend, JobvisorBackend)
    return backend


def test_a_node_is_the_job_the_tasks_enqueue_writes(alias: str, jobs: Queue) -> None:
    wf = jobvisor.Workflow("receipts")
    a = wf.add(tasks.add.using(backend=alias), 2, 3)
    receipt = tasks.send_receipt.using(backend=alias, priority=-7)
    b = wf.add(receipt, {"lines": ({"price": a.result},)}, to="ada@example.org")
    wid = jobs.enqueue_workflow(wf)

    status = jobs.workflow(wid)
    assert status.job("tests.django_project.shop.tasks.send_receipt").parents == (a.key,)
    first = jobs.get(status.job(a.key).id)
    assert (first.job_type, first.queue, first.status) == (
        "tests.django_project.shop.tasks.add",
        "default",
        JobStatus.PENDING,
    )
    assert first.payload == {"args": [2, 3], "kwargs": {}, "backend": alias}
    assert first.max_attempts == 1  # the backend's MAX_ATTEMPTS, as its enqueue has it
    second = jobs.get(status.job(b.key).id)
    assert (second.queue, second.priority, second.status) == ("mail", -7, JobStatus.WAITING)
    assert second.payload["args"] == [{"lines": [{"price": {"$jobvisor.result": a.key}}]}]

    (claimed,) = jobs.claim("w")
    jobs.complete(claimed, result=5)
    (child,) = jobs.claim("w", queues=["mail"])
    assert JobContext(child, "w").payload["args"] == [{"lines": [{"price": 5}]}]
    # The framework's own view of the child: its arguments with the result in place.
    fetched = receipt.get_result(str(child.id))
    assert fetched.args == [{"lines": [{"price": 5}]}]
    assert fetched.kwargs == {"to": "ada@example.org"}


def test_chain_and_group_take_django_tasks(alias: str, jobs: Queue) -> None:
    double = tasks.slow_double.using(backend=alias)
    wid = jobs.enqueue_workflow(jobvisor.chain(("seed", None), double, double))
    status = jobs.workflow(wid)
    assert [job.job_type for job in status.jobs] == [
        "seed",
        "tests.django_project.shop.tasks.slow_double",
        "tests.django_project.shop.tasks.slow_double",
    ]
    last = jobs.get(status.jobs[2].id)
    assert last.payload["args"] == [{"$jobvisor.result": status.jobs[1].node}]
    gid = jobs.enqueue_workflow(jobvisor.group(tasks.returns_a_pair.using(backend=alias), "x"))
    assert jobs.workflow(gid).counts == {JobStatus.PENDING: 2}


def test_bad_arguments_and_options_are_refused_before_anything_is_written(
    alias: str, jobs: Queue, url: str
) -> None:
    wf = jobvisor.Workflow("bad")
    with pytest.raises(TypeError, match="set"):
        wf.add(tasks.add.using(backend=alias), {1, 2}, 3)  # not JSON, as the framework says
    assert len(wf) == 0
    wf.add(tasks.add.using(backend=alias), float("nan"), 1)  # JSON, but not storable
    with pytest.raises(InvalidArgument, match=r"tests\.django_project\.shop\.tasks\.add"):
        jobs.enqueue_workflow(wf)
    assert row_count(url) == 0


def test_a_workflow_on_djangos_connection_goes_with_its_transaction(
    alias: str, jobs: Queue
) -> None:
    queue = _backend(alias).queue
    wf = jobvisor.Workflow("in-django")
    a = wf.add(tasks.add.using(backend=alias), 1, 2)
    wf.add(tasks.slow_double.using(backend=alias), a.result)
    with pytest.raises(Rollback), transaction.atomic(using=alias):
        queue.enqueue_workflow(wf)
        assert jobs.summary().total == 0  # not committed: no one else sees it
        raise Rollback
    assert jobs.summary().total == 0
    with transaction.atomic(using=alias):
        wid = queue.enqueue_workflow(wf)
    assert jobs.workflow(wid).counts == {JobStatus.PENDING: 1, JobStatus.WAITING: 1}
