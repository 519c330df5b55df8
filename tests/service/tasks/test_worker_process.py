"""Tasks run by a real worker process: arguments rebuilt as their declared
types, the return value stored as the job's result, errors kept."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from jobvisor import InvalidArgument, JobStatus, Queue
from tests.support.apps.tasks import (
    Address,
    Customer,
    Line,
    Order,
    Receipt,
    Speed,
    add,
    explode,
    registry,
    ship,
)
from tests.support.apps.tasks import whoami as whoami_task
from tests.support.worker import running_worker

APP = "tests.support.apps.tasks:registry"
DEADLINE = 30.0


def test_a_worker_runs_tasks_with_their_declared_types(queue: Queue, url: str) -> None:
    order = Order(
        id=42,
        lines=[Line("tea", 3, decimal.Decimal("2.10"))],
        ship_to=Address("5 Quai", "Nantes"),
        placed_at=dt.datetime(2026, 6, 30, 22, 0, tzinfo=dt.UTC),
    )
    customer = Customer(name="Grace", email="grace@example.org", since=dt.date(2019, 1, 2))
    with registry.bind(queue):
        shipped = ship.enqueue(order, customer, speed=Speed.EXPRESS)
        summed = add.enqueue(40, 2)
        asked = whoami_task.enqueue("me")
        failed = explode.enqueue("boom")
    with running_worker(url, app=APP):
        done = [queue.wait(job_id, timeout=DEADLINE) for job_id in (shipped, summed, asked)]
        dead = queue.wait(failed, timeout=DEADLINE)
    assert [job.status for job in done] == [JobStatus.COMPLETED] * 3, [j.last_error for j in done]
    assert done[0].result == {
        "order_id": 42,
        "total": "6.30",
        "city": "NANTES",
        "customer_years": 7,
        "speed": "express",
        "deliver_by": "2026-07-01",
    }
    assert ship.result(done[0]) == Receipt(
        order_id=42,
        total=decimal.Decimal("6.30"),
        city="NANTES",
        customer_years=7,
        speed=Speed.EXPRESS,
        deliver_by=dt.date(2026, 7, 1),
    )
    assert done[1].result == 42
    assert add.result(done[1]) == 42
    with pytest.raises(InvalidArgument, match="expected a job of the task 'add'"):
        add.result(done[0])
    with pytest.raises(InvalidArgument, match="is dead: expected a completed job"):
        explode.result(dead)
    assert done[2].result == {"tag": "me", "job_id": str(asked), "attempt": 1}
    assert dead.status == JobStatus.DEAD
    assert dead.last_error is not None
    assert dead.last_error.startswith("RuntimeError: boom")


def test_a_payload_that_does_not_fit_fails_with_the_reason(queue: Queue, url: str) -> None:
    job_id = queue.enqueue("add", {"a": 1}, max_attempts=1)  # by hand, missing `b`
    with running_worker(url, app=APP):
        job = queue.wait(job_id, timeout=DEADLINE)
    assert job.status == JobStatus.DEAD
    assert job.last_error is not None
    assert job.last_error.startswith("TypeError: missing a required argument: 'b'")
