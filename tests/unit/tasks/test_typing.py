"""A task's `enqueue` has its function's signature: `mypy --strict` passes a
file that uses tasks as declared, and refuses a file that misuses them with
exactly the errors marked in it (`# E: <part of the message>`)."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
from mypy import api

SRC = Path(__file__).resolve().parents[3] / "src"

TASKS = """
import asyncio
import dataclasses
import uuid

from jobvisor import Job, Queue, Registry

registry = Registry()


@dataclasses.dataclass(frozen=True)
class Address:
    city: str


@registry.task(queue="mail", max_attempts=5)
def send_email(to: str, subject: str, cc: list[str] | None = None) -> str:
    return to


@registry.task
async def add(a: int, b: int) -> int:
    return a + b


@registry.task("ship")
def ship(address: Address, *, express: bool = False) -> None: ...
"""

GOOD = """
def use(q: Queue) -> None:
    registry.bind(q)
    first: uuid.UUID = send_email.enqueue("ada@example.org", subject="hi")
    send_email.enqueue(to="ada@example.org", subject="hi", cc=["bob@example.org"])
    send_email.with_options(delay=60, priority=5, queue="bulk").enqueue("a", "b")
    send_email.with_options(using=q, conn=None).enqueue("a", "b")
    ids: list[uuid.UUID] = send_email.enqueue_many(
        [send_email.args("a", "b"), send_email.with_options(priority=9).args("c", "d")]
    )
    ship.enqueue(Address("Lyon"), express=True)
    returned: str = send_email("a", "b")
    total: int = asyncio.run(add(1, 2))
    print(first, ids, returned, total)


def results(job: Job) -> None:
    sent: str = send_email.result(job)
    total: int = add.result(job)  # the async task's value, not a coroutine
    print(sent, total)


async def use_async() -> None:
    job_id: uuid.UUID = await add.enqueue_async(1, b=2)
    await add.enqueue_many_async([add.args(n, n) for n in range(3)])
    print(job_id)
"""

BAD = """
def misuse() -> None:
    send_email.enqueue(to="a", subjet="b")  # E: Unexpected keyword argument "subjet"
    send_email.enqueue(to=1, subject="b")  # E: Argument "to" to "enqueue" of "Task"
    send_email.enqueue("a")  # E: Missing positional argument "subject"
    send_email.enqueue("a", "b", cc="c")  # E: Argument "cc" to "enqueue" of "Task"
    add.enqueue(1, "2")  # E: Argument 2 to "enqueue" of "Task" has incompatible
    ship.enqueue(Address("Lyon"), True)  # E: Too many positional arguments
    ship.enqueue({"city": "Lyon"})  # E: incompatible type "dict[str, str]"; expected "Address"
    send_email.with_options(priority=9).enqueue(to="a", subject=None)  # E: "subject" to "enqueue"
    send_email.with_options(priority="high")  # E: Argument "priority" to "with_options"
    send_email.enqueue_many([add.args(1, 2)])  # E: List item 0 has incompatible
    send_email.args(to="a")  # E: Missing positional argument "subject"
    text: str = send_email.enqueue("a", "b")  # E: (expression has type "UUID"
    print(text)


def misread(job: Job) -> None:
    total: str = add.result(job)  # E: (expression has type "int", variable has type "str")
    print(total)


async def misuse_async() -> None:
    await add.enqueue_async(a="1", b=2)  # E: Argument "a" to "enqueue_async"
"""

MARK = re.compile(r"#\s*E:\s*(.+)$")
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")


def run_mypy(tmp_path: Path, **sources: str) -> list[tuple[str, int, str]]:
    """mypy --strict over the given modules; every error as (module, line, message)."""
    for name, body in sources.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(TASKS) + textwrap.dedent(body))
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\nstrict = True\npython_version = 3.11\nmypy_path = {SRC}\n")
    # mypy raises the interpreter's recursion limit for good; a later test
    # that counts on the default one (a payload nested too deep to show, say)
    # must still find it.
    limit = sys.getrecursionlimit()
    try:
        stdout, stderr, _ = api.run(
            [
                "--config-file", str(config),
                "--cache-dir", str(tmp_path / "cache"),
                "--no-error-summary", "--show-error-codes", "--hide-error-context",
                "--follow-imports", "silent",
                *(str(tmp_path / f"{name}.py") for name in sources),
            ]
        )  # fmt: skip
    finally:
        sys.setrecursionlimit(limit)
    assert not stderr, stderr
    errors = []
    for line in stdout.splitlines():
        found = ERROR.match(line)
        if found:
            module = Path(found["file"]).stem
            errors.append((module, int(found["line"]), found["message"]))
    return errors


@pytest.mark.timeout(600)
def test_mypy_passes_good_calls_and_refuses_each_bad_one(tmp_path: Path) -> None:
    errors = run_mypy(tmp_path, good=GOOD, bad=BAD)
    assert [e for e in errors if e[0] == "good"] == []
    text = (textwrap.dedent(TASKS) + textwrap.dedent(BAD)).splitlines()
    expected = {n: m[1].strip() for n, line in enumerate(text, 1) if (m := MARK.search(line))}
    got: dict[int, list[str]] = {}
    for _, line, message in (e for e in errors if e[0] == "bad"):
        got.setdefault(line, []).append(message)
    assert sorted(got) == sorted(expected), f"mypy said:\n{errors}"
    for line, wanted in expected.items():
        assert any(wanted in message for message in got[line]), (line, wanted, got[line])
