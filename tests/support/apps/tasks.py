"""Tasks for the typed-task tests, loaded by real worker processes as
`JOBVISOR_APP=tests.support.apps.tasks:registry`.

Each task uses its arguments as the types it declares (attributes of a
dataclass, methods of a datetime), so a job whose arguments came back as
plain JSON fails instead of passing by accident."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import enum

import pydantic

from jobvisor import Registry, RetryPolicy, Unique
from jobvisor.tasks import current_job

registry = Registry()
NO_WAIT = RetryPolicy(base=0.0, cap=0.0, jitter=0.0)


class Speed(enum.StrEnum):
    STANDARD = "standard"
    EXPRESS = "express"


@dataclasses.dataclass(frozen=True)
class Address:
    street: str
    city: str


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    quantity: int
    price: decimal.Decimal


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    lines: list[Line]
    ship_to: Address
    placed_at: dt.datetime


class Customer(pydantic.BaseModel):
    name: str
    email: str
    since: dt.date


@dataclasses.dataclass(frozen=True)
class Receipt:
    order_id: int
    total: decimal.Decimal
    city: str
    customer_years: int
    speed: Speed
    deliver_by: dt.date


@registry.task(queue="mail", priority=3, max_attempts=5)
def send_email(to: str, subject: str, body: str = "") -> str:
    return f"to {to}: {subject}{' / ' + body if body else ''}"


@registry.task
async def add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@registry.task("ship_order", retry=NO_WAIT, max_attempts=2)
def ship(
    order: Order,
    customer: Customer,
    speed: Speed = Speed.STANDARD,
    note: str | None = None,
) -> Receipt:
    total = sum((line.price * line.quantity for line in order.lines), decimal.Decimal(0))
    days = 1 if speed is Speed.EXPRESS else 5
    return Receipt(
        order_id=order.id,
        total=total,
        city=order.ship_to.city.upper(),
        customer_years=order.placed_at.year - customer.since.year,
        speed=speed,
        deliver_by=(order.placed_at + dt.timedelta(days=days)).date(),
    )


@registry.task
async def whoami(tag: str) -> dict[str, object]:
    job = current_job()
    assert job is not None
    return {"tag": tag, "job_id": str(job.id), "attempt": job.attempt}


@registry.task(retry=NO_WAIT, max_attempts=1)
def explode(message: str) -> None:
    raise RuntimeError(message)


@registry.task
def fan_out(n: int) -> int:
    """Enqueue `n` more jobs (on the queue bound on the registry)."""
    add.enqueue_many([add.args(i, i) for i in range(n)])
    return n


@registry.task
def later(seconds: float) -> None:
    job = current_job()
    assert job is not None
    job.snooze(seconds)


@registry.task(unique=Unique(by_args=True))
def sync_account(account: int, full: bool = False) -> None: ...
