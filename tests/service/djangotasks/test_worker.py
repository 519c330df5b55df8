"""`jobvisor run` with `JOBVISOR_APP=django` runs the project's tasks; their
results, errors, attempts and times come back through the framework's API
(`get_result`, `refresh`), on PostgreSQL and on SQLite."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobvisor import JobStatus, Queue
from jobvisor.config import Config
from jobvisor.contrib.django.compat import TaskResultStatus
from tests.django_project.shop import extra, tasks
from tests.support.django import django_env
from tests.support.invariants import assert_invariants
from tests.support.service import Service, services
from tests.support.wait import wait_until


@pytest.fixture
def service(url: str, alias: str, workdir: Path) -> Iterator[Service]:
    """`jobvisor run` on this test's database, running the Django project's
    tasks with one worker (so that tasks run beside each other), which
    records each `task_finished` signal in `workdir / SIGNALS`."""
    settings = {
        "JOBVISOR_APP": "django",
        "JOBVISOR_WORKERS": "1",
        "JOBVISOR_TEST_DJANGO_SIGNALS": str(workdir / SIGNALS),
        **django_env(url),
    }
    with services() as start:
        running = start(url, workdir, settings)
        running.wait_ready()
        yield running
        assert running.stop() == 0


SIGNALS = "finished.jsonl"


def _signals(workdir: Path) -> dict[str, list[tuple[str, str | None]]]:
    """result id -> (status, last error's class) of each `task_finished` sent."""
    sent: dict[str, list[tuple[str, str | None]]] = {}
    path = workdir / SIGNALS
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        sent.setdefault(record["id"], []).append((record["status"], record["error"]))
    return sent


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
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018 - the framework raises for a failed task
    job = jobs.get(result.id)
    assert job.status is JobStatus.DEAD and job.attempts == 1
    # jobvisor's tools show the first line: the class by its path, the message.
    assert (job.last_error or "").startswith(
        "tests.django_project.shop.tasks.OutOfStock: no tea left\n"
    )


def test_a_failed_tasks_traceback_is_the_one_python_prints(alias: str, service: Service) -> None:
    result = _finished(tasks.reserve.using(backend=alias).enqueue("tea"))
    [error] = result.errors
    printed = error.traceback
    assert printed.startswith("Traceback (most recent call last):\n  File ")
    assert printed.endswith("\ntests.django_project.shop.tasks.OutOfStock: no tea left\n")
    assert 'raise OutOfStock(f"no {sku} left")' in printed
    # The task's frames only: none of the worker's or of the runner's.
    files = re.findall(r'File "([^"]+)", line \d+, in (\w+)', printed)
    assert files == [(str(Path(tasks.__file__)), "reserve")]


def test_systemexit_and_keyboardinterrupt_fail_their_task_alone(
    alias: str, url: str, workdir: Path, service: Service
) -> None:
    flag = workdir / "go"
    beside = tasks.wait_for.using(backend=alias).enqueue(str(flag))

    def running() -> bool:
        beside.refresh()
        return bool(beside.status == TaskResultStatus.RUNNING)

    wait_until(running, timeout=60, what="the task beside them to start")
    leave = _finished(tasks.leave.using(backend=alias).enqueue(3))
    interrupt = _finished(tasks.interrupt.using(backend=alias).enqueue())
    leave_async = _finished(tasks.leave_async.using(backend=alias).enqueue())
    flag.touch()
    assert _finished(beside).return_value == "done"

    for failed, kind in [
        (leave, SystemExit),
        (interrupt, KeyboardInterrupt),
        (leave_async, SystemExit),
    ]:
        assert failed.status == TaskResultStatus.FAILED
        [error] = failed.errors
        assert error.exception_class is kind
        assert error.traceback.startswith("Traceback (most recent call last):\n")
    assert leave.errors[0].traceback.endswith("\nSystemExit: 3\n")
    # One worker ran them all and lives on.
    assert service.events("worker.exited") == []
    assert len(service.worker_pids()) == 1
    assert {r.worker_ids[0] for r in (beside, leave, interrupt, leave_async)} == set(
        beside.worker_ids
    )
    sent = _signals(workdir)
    assert sent[beside.id] == [("SUCCESSFUL", None)]
    assert sent[leave.id] == [("FAILED", "builtins.SystemExit")]
    assert sent[interrupt.id] == [("FAILED", "builtins.KeyboardInterrupt")]
    assert sent[leave_async.id] == [("FAILED", "builtins.SystemExit")]
    assert_invariants(url)


def test_a_return_value_that_is_not_json_fails_the_task(
    alias: str, jobs: Queue, workdir: Path, service: Service
) -> None:
    a_set = _finished(tasks.returns_a_set.using(backend=alias).enqueue())
    nan = _finished(tasks.returns_nan.using(backend=alias).enqueue())
    pair = _finished(tasks.returns_a_pair.using(backend=alias).enqueue())

    assert a_set.status == TaskResultStatus.FAILED
    [error] = a_set.errors
    assert error.exception_class is TypeError  # the framework's contract
    assert "Unsupported type" in error.traceback
    assert nan.status == TaskResultStatus.FAILED
    assert nan.errors[0].exception_class is ValueError
    assert "NaN" in nan.errors[0].traceback or "nan" in nan.errors[0].traceback
    assert pair.return_value == [1, "two"]  # made JSON as the framework makes it
    assert jobs.get(a_set.id).status is JobStatus.DEAD
    sent = _signals(workdir)
    assert sent[a_set.id] == [("FAILED", "builtins.TypeError")]  # never SUCCESSFUL first
    assert sent[nan.id] == [("FAILED", "builtins.ValueError")]
    assert sent[pair.id] == [("SUCCESSFUL", None)]


def test_a_job_type_is_looked_up_never_imported(
    alias: str, jobs: Queue, url: str, workdir: Path, service: Service
) -> None:
    # A test module in the worker's working directory: unittest's discovery
    # would import it.
    planted = workdir / "planted.ran"
    (workdir / "test_planted.py").write_text(
        f"import pathlib\npathlib.Path({str(planted)!r}).write_text('ran')\n"
    )
    ids = {
        job_type: jobs.enqueue(job_type, {"args": [], "kwargs": {}}, max_attempts=1)
        for job_type in ("unittest.__main__.x", "this.x", "..")
    }
    for job_type, job_id in ids.items():
        job = jobs.wait(job_id, timeout=60)
        assert job.status is JobStatus.DEAD
        assert (job.last_error or "").startswith(
            f"TaskNotFound: job type {job_type!r} is not a task of this project"
        )
    # The worker carries on: it runs a task after them.
    assert _finished(tasks.add.using(backend=alias).enqueue(1, 1)).return_value == 2
    assert not planted.exists()
    assert not any("Beautiful is better than ugly" in line for line in service.lines())
    assert service.events("worker.exited") == []
    assert_invariants(url)


def test_a_job_naming_no_task_fails_without_running_anything(
    jobs: Queue, url: str, service: Service
) -> None:
    job_id = jobs.enqueue("os.path.join", {"args": ["a", "b"], "kwargs": {}}, max_attempts=1)
    job = jobs.wait(job_id, timeout=60)
    assert job.status is JobStatus.DEAD
    assert "'os.path.join' is not a task of this project" in (job.last_error or "")
    missing = jobs.wait(jobs.enqueue("tests.no_such_module.task", max_attempts=1), timeout=60)
    assert "'tests.no_such_module.task' is not a task" in (missing.last_error or "")
    # A task, but in a module the project does not declare: not run either.
    undeclared = jobs.wait(
        jobs.enqueue(
            "tests.django_project.shop.undeclared.whisper",
            {"args": ["HI"], "kwargs": {}},
            max_attempts=1,
        ),
        timeout=60,
    )
    assert undeclared.status is JobStatus.DEAD and undeclared.result is None


def test_a_task_in_a_module_the_settings_list_runs(alias: str, service: Service) -> None:
    assert _finished(extra.shout.using(backend=alias).enqueue("hi")).return_value == "HI"


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
