"""The queue's contract suite, through PgBouncer in transaction pooling.

Every test of the contract modules that works on the `queue`-style fixtures
only (and on `url` for its own reads) runs again here, the fixtures opening
their queues with `pgbouncer=True` on this test's database behind PgBouncer
(`tests/contract/pgbouncer/conftest.py` overrides them). A test that opens a queue of
its own, or needs a particular engine, stays in its module."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

# The contract modules whose tests run again here.
CONTRACT = (
    "admin", "async", "cancel", "claim", "enqueue", "limits", "outcomes", "pause", "results",
    "unique", "wait",
)  # fmt: skip
MODULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"tests.contract.queue.test_{name}") for name in CONTRACT
)

# What a test may ask for to run here: the overridden queues, their clock,
# the URL (its reads go through PgBouncer too), and its own parameters.
SHARED = frozenset({"queue", "aqueue", "cqueue", "make_queue", "clock", "url"})
# A test whose source shows one of these opens queues of its own (in this
# process or in children), without `pgbouncer=True`: it would only show again
# what tests/contract/pgbouncer/test_pooling.py shows on purpose.
OPENS_ITS_OWN = ("connect(", "connect_async(", "run_in_processes", "child_")


def _parameters(func: Callable[..., Any]) -> set[str]:
    """The names its `parametrize` marks give values to."""
    names: set[str] = set()
    for mark in getattr(func, "pytestmark", []):
        if mark.name == "parametrize":
            given = mark.args[0]
            names |= set(given.split(",") if isinstance(given, str) else given)
    return {n.strip() for n in names}


def _portable(module: ModuleType, name: str, func: Callable[..., Any]) -> bool:
    if not name.startswith("test_") or not inspect.isfunction(func):
        return False
    if func.__module__ != module.__name__:
        return False
    wanted = set(inspect.signature(func).parameters)
    source = inspect.getsource(func)
    opens_its_own = any(sign in source for sign in OPENS_ITS_OWN)
    return wanted <= SHARED | _parameters(func) and not opens_its_own


def _collect() -> dict[str, Callable[..., Any]]:
    found: dict[str, Callable[..., Any]] = {}
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1].removeprefix("test_")
        for name, func in vars(module).items():
            if _portable(module, name, func):
                found[f"test_{short}__{name.removeprefix('test_')}"] = func
    return found


globals().update(_collect())
