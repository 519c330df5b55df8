"""A workflow node's `result` is typed as what its task returns: `mypy
--strict` passes placeholders where the receiving task takes that type, and
refuses each mismatch marked in the file (`# E: <part of the message>`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.unit.tasks.test_typing import MARK, run_mypy
from tests.unit.tasks.test_typing import TASKS as TASKS_HEADER

GOOD = """
from jobvisor import Workflow


def build() -> Workflow:
    wf = Workflow("nightly-report")
    a = wf.add(fetch_orders, day="2026-12-04")
    b = wf.add(count, 3)
    c = wf.add(build_report, orders=a.result, refunds=b.result)
    d = wf.add(total, a.result)  # an async task's value, not a coroutine
    wf.after(c, d, on_parent_failure="run").add(notify, "done")
    wf.add("plain", {"orders": a.result}, after=[c], on_parent_failure="wait", priority=3)
    return wf
"""

BAD = """
from jobvisor import Workflow


def misbuild() -> None:
    wf = Workflow("bad")
    a = wf.add(fetch_orders, day="2026-12-04")
    b = wf.add(count, 3)
    wf.add(build_report, orders=b.result, refunds=b.result)  # E: str]", "int", "int"
    wf.add(build_report, orders=a.result, refunds=a.result)  # E: "list[Order]", "list[Order]"
    wf.add(fetch_orders, days="x")  # E: "Task[[str], list[Order]]", "str"
    wf.add(notify, a.result)  # E: "Task[[str], None]", "list[Order]"
"""

TASKS = """

@dataclasses.dataclass(frozen=True)
class Order:
    id: int


@registry.task
def fetch_orders(day: str) -> list[Order]:
    return []


@registry.task
def count(n: int) -> int:
    return n


@registry.task
async def total(orders: list[Order]) -> float:
    return 0.0


@registry.task
def build_report(orders: list[Order], refunds: int) -> str:
    return ""


@registry.task
def notify(text: str) -> None: ...
"""


@pytest.mark.timeout(600)
def test_placeholders_type_check_as_the_results_they_stand_for(tmp_path: Path) -> None:
    errors = run_mypy(tmp_path, good=TASKS + GOOD, bad=TASKS + BAD)
    assert [e for e in errors if e[0] == "good"] == []
    text = (textwrap.dedent(TASKS_HEADER) + textwrap.dedent(TASKS + BAD)).splitlines()
    expected = {n: m[1].strip() for n, line in enumerate(text, 1) if (m := MARK.search(line))}
    got: dict[int, list[str]] = {}
    for _, line, message in (e for e in errors if e[0] == "bad"):
        got.setdefault(line, []).append(message)
    assert sorted(got) == sorted(expected), f"mypy said:\n{errors}"
    for line, wanted in expected.items():
        assert any(wanted in message for message in got[line]), (line, wanted, got[line])
