"""The contract suite run again under other fixtures (through PgBouncer, on a
Citus cluster): the tests of some contract modules that work on the shared
queue fixtures only, collected into the module that runs them again, whose
conftest overrides those fixtures."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

# What a test may ask for to run again: the overridden queues, their clock,
# the URL (for its own reads), and its own parameters.
SHARED = frozenset({"queue", "aqueue", "cqueue", "make_queue", "clock", "url"})
# A test whose source shows one of these opens queues of its own (in this
# process or in children), without the overriding fixtures' options.
OPENS_ITS_OWN = ("connect(", "connect_async(", "run_in_processes", "child_")


def _parameters(func: Callable[..., Any]) -> set[str]:
    """The names its `parametrize` marks give values to."""
    names: set[str] = set()
    for mark in getattr(func, "pytestmark", []):
        if mark.name == "parametrize":
            given = mark.args[0]
            names |= set(given.split(",") if isinstance(given, str) else given)
    return {n.strip() for n in names}


def _portable(
    module: ModuleType,
    name: str,
    func: Callable[..., Any],
    *,
    skip: Iterable[str],
    shared: frozenset[str],
    own_queues: bool,
) -> bool:
    if not name.startswith("test_") or not inspect.isfunction(func) or name in skip:
        return False
    if func.__module__ != module.__name__:
        return False
    wanted = set(inspect.signature(func).parameters)
    source = inspect.getsource(func)
    opens_its_own = not own_queues and any(sign in source for sign in OPENS_ITS_OWN)
    given = _parameters(func)
    # One that asks for none of them runs the same anywhere: once is enough.
    return bool(wanted & (shared - given)) and wanted <= shared | given and not opens_its_own


def rerun(
    names: Iterable[str],
    *,
    skip: Iterable[str] = (),
    package: str = "tests.contract.queue",
    shared: Iterable[str] = SHARED,
    own_queues: bool = False,
) -> dict[str, Callable[..., Any]]:
    """The portable tests (asking for some of the `shared` fixtures and no
    other) of `package`/test_<name>.py for each name, by new names
    (`test_<name>__<test>`), but those named in `skip`; with `own_queues`,
    also those that open queues of their own (the caller's environment then
    makes those what it reruns them for)."""
    skipped, fixtures = frozenset(skip), frozenset(shared)
    found: dict[str, Callable[..., Any]] = {}
    for short in names:
        module = importlib.import_module(f"{package}.test_{short}")
        for name, func in vars(module).items():
            if _portable(module, name, func, skip=skipped, shared=fixtures, own_queues=own_queues):
                found[f"test_{short}__{name.removeprefix('test_')}"] = func
    return found
