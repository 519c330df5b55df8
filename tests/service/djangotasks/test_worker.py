"""`jobvisor run` with `JOBVISOR_APP=django` runs the project's tasks; their
results, errors, attempts and times come back through the framework's API
(`get_result`, `refresh`), on PostgreSQL and on SQLite."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobvisor import JobStatus, Queue
from jobvisor.config import Config
from jobvisor.contrib.django.compat import TaskResultStatus
from tests.django_project.shop import tasks
from tests.support.django import django_env
from tests.support.invariants import assert_invariants
from tests.support.service import Service, services
from tests.support.wait import wait_until


@pytest.fixture
def service(url: str, alias: str, workdir: Path) -> Iterator[Service]:
    """`jobvisor run` on this test's database, running the Django project's tasks."""
    settings = {"JOBVISOR_APP": "django", **django_env(url)}
    with services() as start:
        running = start(url, workdir, settings)
        running.wait_ready()
        yield running
        assert running.stop() == 0


def _finished(result: Any) -> Any:
    def done() -> bool:
        result.refresh()
        return bool(result.is_finished)

    wait_until(done, timeout=60, what=f"task result {result.id}")
    return result


def test_tasks_run_and_their_results_read_back(
    alias: str, jobs: Queue, url: str, service: Service
) -> None:
    before = time.time()
    added = tasks.add.using(backend=alias).enqueue(2, 3)
    receipt = tasks.send_receipt.using(backend=alias).enqueue(
        {"lines": [{"price": 4}, {"price": 5}]}, to="ada@example.org"
    )
    doubled = tasks.slow_double.using(backend=alias).enqueue(21)

    assert _finished(added).return_value == 5
    assert _finished(receipt).return_value == {"sent_to": "ada@example.org", "total": 9}
    assert _finished(doubled).return_value == 42  # an async task, on the worker's loop
    fetched = tasks.add.using(backend=alias).get_result(added.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.return_value == 5 and fetched.errors == []
    assert fetched.attempts == 1 and fetched.worker_ids[0].startswith("w")
    assert fetched.enqueued_at is not None and fetched.started_at is not None
    assert fetched.finished_at is not None
    # Enqueue and claim stamp the database's time as each process reckons it
    # (`engine.DatabaseClock`: to within half a round trip of its reading), so
    # a job claimed at once may start a few milliseconds "before" its enqueue.
    slack = 0.25
    assert before - 1 < fetched.enqueued_at.timestamp() <= fetched.started_at.timestamp() + slack
    assert fetched.started_at <= fetched.finished_at
    assert jobs.get(added.id).job_type == "tests.django_project.shop.tasks.add"
    assert_invariants(url)


def test_a_task_that_takes_its_context_gets_it(alias: str, service: Service) -> None:
    result = _finished(tasks.which_attempt.using(backend=alias).enqueue("first"))
    assert result.return_value == {"label": "first", "attempt": 1, "id": result.id}


def test_a_failing_task_is_failed_with_its_exception(
    alias: str, jobs: Queue, service: Service
) -> None:
    result = _finished(tasks.reserve.using(backend=alias).enqueue("tea"))
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class is tasks.OutOfStock
    assert error.traceback.startswith("tests.django_project.shop.tasks.OutOfStock: no tea left")
    assert "tasks.py" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018 - the framework raises for a failed task
    job = jobs.get(result.id)
    assert job.status is JobStatus.DEAD and job.attempts == 1


def test_a_job_naming_no_task_fails_without_running_anything(
    jobs: Queue, url: str, service: Service
) -> None:
    job_id = jobs.enqueue("os.path.join", {"args": ["a", "b"], "kwargs": {}}, max_attempts=1)
    job = jobs.wait(job_id, timeout=60)
    assert job.status is JobStatus.DEAD
    assert "'os.path.join' is function, not a task" in (job.last_error or "")
    missing = jobs.wait(jobs.enqueue("tests.no_such_module.task", max_attempts=1), timeout=60)
    assert "cannot import the task 'tests.no_such_module.task'" in (missing.last_error or "")


def test_the_app_django_names_the_contrib_registry() -> None:
    config = Config.load(env={"JOBVISOR_APP": "django"})
    assert config.app == "jobvisor.contrib.django.worker:registry"
    assert config.to_env()["JOBVISOR_APP"] == "jobvisor.contrib.django.worker:registry"


def test_without_the_projects_settings_the_service_does_not_start(
    url: str, alias: str, workdir: Path
) -> None:
    service = Service(url, workdir, {"JOBVISOR_APP": "django"})
    service.env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        service.start()
        assert service.wait_exit(90) == 3
    finally:
        service.kill_everything()
    [failed, *_] = service.events("worker.boot_failed")
    assert "DJANGO_SETTINGS_MODULE is not set" in failed["error"]
