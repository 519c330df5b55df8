"""`JobvisorBackend` in a real Django project (tests/django_project), on
PostgreSQL and on SQLite: enqueue on Django's own connection and in its
transaction, the framework's options mapped onto the job, its checks on bad
input, and results read back through the framework's API."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import sys
import uuid
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from jobvisor import JobStatus, Queue
from jobvisor.contrib.django import JobvisorBackend
from jobvisor.contrib.django.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from tests.django_project.shop import tasks


class Rollback(Exception):
    pass


def test_the_backend_says_what_it_supports(alias: str) -> None:
    backend = tasks.add.using(backend=alias).get_backend()
    assert isinstance(backend, JobvisorBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority
    assert list(backend.check()) == []


def test_an_enqueue_in_a_rolled_back_atomic_block_leaves_no_job(alias: str, jobs: Queue) -> None:
    add = tasks.add.using(backend=alias)
    with pytest.raises(Rollback), transaction.atomic(using=alias):
        result = add.enqueue(1, 2)
        assert jobs.summary().total == 0  # not committed: no one else sees it
        raise Rollback
    assert jobs.summary().total == 0
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(result.id)


def test_an_enqueue_commits_with_the_atomic_block(alias: str, jobs: Queue) -> None:
    add = tasks.add.using(backend=alias)
    with transaction.atomic(using=alias):
        inside = add.enqueue(1, 2)
        assert jobs.summary().total == 0
    outside = add.enqueue(3, 4)  # autocommit: at once
    assert jobs.get(inside.id).status is JobStatus.PENDING
    assert jobs.get(outside.id).payload == {"args": [3, 4], "kwargs": {}, "backend": alias}


def test_the_tasks_options_become_the_jobs(alias: str, jobs: Queue) -> None:
    later = timezone.now() + dt.timedelta(hours=1)
    receipt = tasks.send_receipt.using(backend=alias, priority=-100, run_after=later)
    order = {"id": 7, "lines": ({"price": 3},)}  # a tuple goes as a JSON list
    result = receipt.enqueue(order, to="ada@example.org")
    job = jobs.get(result.id)
    assert job.job_type == "tests.django_project.shop.tasks.send_receipt"
    assert (job.queue, job.priority, job.run_at) == ("mail", -100, later)
    assert job.payload["args"] == [{"id": 7, "lines": [{"price": 3}]}]
    assert job.payload["kwargs"] == {"to": "ada@example.org"}
    assert job.max_attempts == 1  # the backend's default: FAILED at the first error
    assert (result.status, result.args, result.kwargs) == (
        TaskResultStatus.READY,
        [{"id": 7, "lines": [{"price": 3}]}],
        {"to": "ada@example.org"},
    )
    assert result.enqueued_at is not None
    urgent = tasks.add.using(backend=alias, priority=100).enqueue(1, 1)
    assert jobs.claim("w-1")[0].id == uuid.UUID(urgent.id)  # higher Django priority first

    fetched = receipt.get_result(result.id)
    assert fetched.task.backend == alias  # so that refresh() asks this backend again
    fetched.refresh()
    assert fetched.status == TaskResultStatus.READY
    assert (fetched.task.priority, fetched.task.queue_name) == (-100, "mail")
    assert fetched.args == result.args and fetched.attempts == 0
    assert fetched.enqueued_at == job.created_at


def test_enqueue_sends_the_frameworks_signal(alias: str) -> None:
    seen: list[Any] = []

    def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result)

    task_enqueued.connect(receive)
    try:
        result = tasks.add.using(backend=alias).enqueue(5, 6)
    finally:
        task_enqueued.disconnect(receive)
    assert [r.id for r in seen] == [result.id]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"queue_name": "nope"}, "nope"),
        ({"priority": 101}, "priority"),
        ({"priority": -101}, "priority"),
        ({"run_after": dt.datetime(2030, 1, 1)}, "aware"),  # naive
    ],
)
def test_bad_options_raise_the_frameworks_error(
    alias: str, jobs: Queue, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidTask, match=named):
        tasks.add.using(backend=alias, **options).enqueue(1, 2)
    assert jobs.summary().total == 0


def test_arguments_that_are_not_json_are_refused_before_writing(alias: str, jobs: Queue) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.add.using(backend=alias).enqueue({1, 2}, 3)
    with pytest.raises(TypeError):
        tasks.add.using(backend=alias).enqueue(object(), 3)
    assert jobs.summary().total == 0


def test_a_queue_name_jobvisor_refuses_is_the_frameworks_error(alias: str) -> None:
    backend = tasks.add.using(backend=alias).get_backend()
    backend.queues = set()  # any queue allowed by the framework: jobvisor still checks
    try:
        with pytest.raises(InvalidTask, match="queue_name"):
            tasks.add.using(backend=alias, queue_name="q" * 300).enqueue(1, 2)
    finally:
        backend.queues = {"default", "mail"}


@pytest.mark.parametrize("result_id", ["not-a-uuid", "0b7d2c8e-5f1a-4c3e-9a6d-2e8f4b1c7a90", ""])
def test_an_unknown_result_does_not_exist(alias: str, result_id: str) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.using(backend=alias).get_backend().get_result(result_id)


def test_a_job_that_is_no_task_has_no_result(alias: str, jobs: Queue) -> None:
    job_id = jobs.enqueue("os.path.join", {"args": ["a"], "kwargs": {}})
    with pytest.raises(TaskResultDoesNotExist, match="not a task"):
        tasks.add.using(backend=alias).get_backend().get_result(str(job_id))


def test_the_async_faces_enqueue_and_read_back(alias: str, jobs: Queue) -> None:
    add = tasks.add.using(backend=alias)

    async def both() -> tuple[Any, Any]:
        result = await add.aenqueue(7, 8)
        return result, await add.aget_result(result.id)

    enqueued, fetched = asyncio.run(both())
    assert fetched.id == enqueued.id and fetched.args == [7, 8]
    assert jobs.get(enqueued.id).status is JobStatus.PENDING


@pytest.mark.parametrize("value", [0, -1, "3", 10**6, True])
def test_max_attempts_out_of_bounds_is_a_configuration_error(value: object) -> None:
    with pytest.raises(ImproperlyConfigured, match="MAX_ATTEMPTS"):
        JobvisorBackend("broken", {"OPTIONS": {"MAX_ATTEMPTS": value}})


def test_max_attempts_is_the_jobs(alias: str, jobs: Queue) -> None:
    backend = JobvisorBackend(alias, {"OPTIONS": {"DATABASE": alias, "MAX_ATTEMPTS": 3}})
    result = backend.enqueue(tasks.add.using(backend=alias), [1], {"b": 2})
    assert jobs.get(result.id).max_attempts == 3


def test_the_enqueued_result_is_the_one_read_back(alias: str) -> None:
    add = tasks.add.using(backend=alias)
    result = add.enqueue(1, 2)
    assert result == add.get_backend().get_result(result.id)
    with transaction.atomic(using=alias):
        inside = add.enqueue(3, 4)
        assert inside == add.get_backend().get_result(inside.id)


@pytest.mark.parametrize(
    "argument",
    [float("nan"), float("inf"), "a\x00b", "\ud800"],
    ids=["nan", "inf", "nul", "surrogate"],
)
def test_arguments_jobvisor_cannot_store_are_a_value_error(
    alias: str, jobs: Queue, argument: object
) -> None:
    named = re.escape(repr(argument))
    with pytest.raises(ValueError, match=named) as raised:
        tasks.add.using(backend=alias).enqueue(argument, 1)
    assert type(raised.value) is ValueError  # the framework's word (the Django guide's table)
    assert "tests.django_project.shop.tasks.add" in str(raised.value)
    with pytest.raises(ValueError, match=named):
        tasks.add.using(backend=alias).enqueue(1, b=argument)
    assert jobs.summary().total == 0


@pytest.mark.parametrize("job_type", ["this.x", "..", "os.path.join"])
def test_a_job_type_is_never_imported_to_read_a_result(
    alias: str, jobs: Queue, job_type: str
) -> None:
    before = set(sys.modules)
    job_id = jobs.enqueue(job_type, {"args": [], "kwargs": {}})
    with pytest.raises(TaskResultDoesNotExist, match="not a task of this project"):
        tasks.add.using(backend=alias).get_backend().get_result(str(job_id))
    assert set(sys.modules) == before
