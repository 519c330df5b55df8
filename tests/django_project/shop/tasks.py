"""The project's tasks: each shows one thing a task can do."""

from __future__ import annotations

import asyncio
from typing import Any

from jobvisor.contrib.django.compat import TaskContext

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
