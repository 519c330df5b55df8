"""Shared fixtures: a real PostgreSQL (a fresh database per test) and a real
SQLite file, and queues on both; and each test's level marker, from its folder.

PostgreSQL is found in this order: `JOBVISOR_TEST_PG_URL`; the local server at
`postgresql://postgres@127.0.0.1:5432/postgres`; a throwaway cluster started for
the session when the server binaries (`initdb`, `pg_ctl`) exist. Without any of
them the PostgreSQL tests are skipped with the reason, and the SQLite ones run.

`tests` is a package (and so is each folder under it): otherwise pytest puts
`tests/` itself on sys.path and `tests/support/queue.py` shadows the standard
library's `queue`, which psycopg imports.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor import AsyncQueue, Queue
from tests.support.aio import run_async
from tests.support.postgres import (
    DEFAULT_PG_URL,
    Databases,
    answers,
    pg_bin,
    throwaway_cluster,
    with_dbname,
)
from tests.support.sqlite import copy_database, migrated_sqlite

ENGINES = ["postgres", "sqlite"]

# The levels, by top folder under tests/: each test gets its folder's marker
# (`pytest -m unit`, `-m "not service and not chaos"`, ...).
LEVELS = ("unit", "contract", "service", "chaos", "web")
TESTS = Path(__file__).resolve().parent


# `JOBVISOR_TEST_ENGINES=sqlite` (what `make test-fast` sets) leaves out every
# test that needs PostgreSQL; the default runs both engines.
ENGINES_ENV = "JOBVISOR_TEST_ENGINES"


def _needs_postgres(item: pytest.Item) -> bool:
    if "pg_admin_url" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.params.values()


# A test on the shared Citus cluster (tests/contract/citus/conftest.py) may
# also carry its test process's database set-up there, which runs one at a
# time across the cluster: the first such test of each process waits behind
# the others' (most of a minute in a loaded run), on cores that three more
# servers share. Unless it names a timeout of its own, it gets this one.
CLUSTER_TIMEOUT = 300


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        on_the_cluster = "citus_url" in getattr(item, "fixturenames", ())
        if on_the_cluster and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(CLUSTER_TIMEOUT))
        try:
            level = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if level in LEVELS:
            item.add_marker(getattr(pytest.mark, level))
    engines = {e.strip() for e in os.environ.get(ENGINES_ENV, "postgres,sqlite").split(",")}
    unknown = engines - set(ENGINES)
    if unknown:
        raise pytest.UsageError(
            f"{ENGINES_ENV}: unknown engine(s) {sorted(unknown)}, expected {ENGINES}"
        )
    if "postgres" not in engines:
        left_out = [item for item in items if _needs_postgres(item)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not _needs_postgres(item)]
    # The tests that run for a quarter of a minute or more go first: in a parallel run
    # (pytest-xdist) each then overlaps the rest instead of ending the run
    # alone. A stable sort: the same order in every worker's collection.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A URL to a PostgreSQL superuser's maintenance database (skips without one)."""
    env = os.environ.get("JOBVISOR_TEST_PG_URL")
    if env:
        if not answers(env):
            pytest.skip(f"JOBVISOR_TEST_PG_URL={env!r} does not answer")
        yield env
        return
    if answers(DEFAULT_PG_URL):
        yield DEFAULT_PG_URL
        return
    if pg_bin("initdb") is None or pg_bin("pg_ctl") is None:
        pytest.skip(
            f"no PostgreSQL: {DEFAULT_PG_URL} does not answer, JOBVISOR_TEST_PG_URL is unset "
            "and no initdb/pg_ctl was found to start a throwaway cluster"
        )
    with throwaway_cluster() as (_, url):
        yield url


@pytest.fixture(scope="session")
def pg_databases(pg_admin_url: str) -> Iterator[Databases]:
    """The session's source of fresh PostgreSQL databases."""
    databases = Databases(pg_admin_url)
    try:
        yield databases
    finally:
        databases.close()


# A test that asks for one of these fixtures (directly or through another)
# has its database migrated by them before it starts: its database may as
# well be a clone of the migrated template, which leaves it the same.
MIGRATING = frozenset({"queue", "aqueue", "make_queue", "cqueue", "pg_queue", "chaos_url", "alias"})


def _migrated_anyway(request: pytest.FixtureRequest) -> bool:
    return not MIGRATING.isdisjoint(request.fixturenames)


@pytest.fixture
def pg_url(
    pg_admin_url: str, pg_databases: Databases, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh PostgreSQL database for this test, dropped after: empty
    (unmigrated), or a clone of the migrated template when the test's
    fixtures migrate it anyway."""
    name = pg_databases.take(migrated=_migrated_anyway(request))
    try:
        yield with_dbname(pg_admin_url, name)
    finally:
        pg_databases.give_back(name)


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path, request: pytest.FixtureRequest) -> str:
    """A fresh SQLite file in this test's temp dir: not yet created, or a copy
    of the migrated one when the test's fixtures migrate it anyway."""
    path = (tmp_path / "jobvisor.db").resolve()
    if _migrated_anyway(request):
        copy_database(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once for the session, copied by `sqlite_url`."""
    return migrated_sqlite(tmp_path_factory.mktemp("sqlite-template") / "jobvisor.db")


@pytest.fixture(params=ENGINES)
def url(request: pytest.FixtureRequest) -> str:
    """An empty database on each engine in turn (test ids: postgres, sqlite)."""
    name = "pg_url" if request.param == "postgres" else "sqlite_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def connect_options() -> dict[str, Any]:
    """What the queue fixtures pass to `connect` besides the URL (a folder's
    conftest overrides it: tests/pgbouncer runs the contract suite with
    `pgbouncer=True`)."""
    return {}


@pytest.fixture
def queue(url: str, connect_options: dict[str, Any]) -> Iterator[Queue]:
    """A migrated `Queue` on each engine, closed after the test."""
    q = jobvisor.connect(url, **connect_options)
    try:
        q.migrate()
        yield q
    finally:
        q.close()


@pytest.fixture
def aqueue(url: str, connect_options: dict[str, Any]) -> Iterator[AsyncQueue]:
    """A migrated `AsyncQueue` on each engine.

    Its pool belongs to no event loop until first use: drive it with
    `run_with(aqueue, body)`, which runs `body(aqueue)` and closes the queue in
    the same loop. Teardown closes it again, which is then a no-op."""
    with jobvisor.connect(url, **connect_options) as migrator:
        migrator.migrate()
    q = jobvisor.connect_async(url, **connect_options)
    yield q
    with contextlib.suppress(Exception):
        run_async(q.close)
