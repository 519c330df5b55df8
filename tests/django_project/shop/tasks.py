"""The project's tasks: each shows one thing a task can do."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from django.dispatch import receiver

from jobvisor.contrib.django.compat import TaskContext, task_finished

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


class OutOfStock(Exception):
    """The project's own exception: a task's error names it by its path."""


@task()
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="mail", priority=10)
def send_receipt(order: dict[str, Any], *, to: str) -> dict[str, Any]:
    return {"sent_to": to, "total": sum(line["price"] for line in order["lines"])}


@task(takes_context=True)
def which_attempt(context: TaskContext, label: str) -> dict[str, Any]:
    return {"label": label, "attempt": context.attempt, "id": context.task_result.id}


@task()
def reserve(sku: str) -> None:
    raise OutOfStock(f"no {sku} left")


@task()
async def slow_double(n: int) -> int:
    await asyncio.sleep(0.01)
    return 2 * n


@task()
def leave(code: int) -> None:
    raise SystemExit(code)


@task()
def interrupt() -> None:
    raise KeyboardInterrupt


@task()
async def leave_async() -> None:
    raise SystemExit("from the loop")


@task()
def wait_for(path: str) -> str:
    """Return once `path` exists (so that it runs beside the tasks the test
    starts after it), or after a minute."""
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "done"


@task()
def returns_a_set() -> Any:
    return {1, 2}


@task()
def returns_nan() -> float:
    return float("nan")


@task()
def returns_a_pair() -> Any:
    return (1, "two")


@receiver(task_finished)
def _record_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    """In a worker whose environment names a file, each `task_finished` as
    one JSON line: the result's id, status and the class of its last error."""
    path = os.environ.get("JOBVISOR_TEST_DJANGO_SIGNALS")
    if not path:
        return
    errors = task_result.errors
    line = {
        "id": task_result.id,
        "status": task_result.status.value,
        "error": errors[-1].exception_class_path if errors else None,
    }
    with open(path, "a") as out:
        out.write(json.dumps(line) + "\n")
