"""Django, set up in the test process with `tests.django_project` when this
module is imported (or the importing test module skipped without Django),
the ways to point it, or a child process's, at a test's database, and the
fixtures of the Django tests: each test's fresh database (on each engine)
under the alias of that engine, `default` for SQLite, `pg` for PostgreSQL.
The task backends share the aliases, so `task.using(backend=alias)`
enqueues onto the test's database."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import jobvisor
from jobvisor import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.settings")
django = pytest.importorskip("django")
django.setup()

from django.db import connections  # noqa: E402

from tests.django_project.settings import postgres  # noqa: E402

SETTINGS_MODULE = "tests.django_project.settings"


def point_django_at(alias: str, url: str) -> None:
    """Point the Django database `alias` at `url` (its next connection goes there)."""
    wrapper = connections[alias]
    wrapper.close()
    if url.startswith("sqlite:///"):
        wrapper.settings_dict["NAME"] = url.removeprefix("sqlite:///")
    else:
        wrapper.settings_dict.update({k: v for k, v in postgres(url).items() if k != "ENGINE"})


def django_env(url: str) -> dict[str, str]:
    """The environment that points a process's Django at `url`."""
    key = "JOBVISOR_TEST_DJANGO_SQLITE" if url.startswith("sqlite") else "JOBVISOR_TEST_DJANGO_PG"
    value = url.removeprefix("sqlite:///") if url.startswith("sqlite") else url
    return {"DJANGO_SETTINGS_MODULE": SETTINGS_MODULE, key: value}


# --- fixtures (imported by the Django tests' conftest files) ---------------


@pytest.fixture
def alias(url: str) -> Iterator[str]:
    """This test's engine's Django alias (database and task backend), on its
    fresh database, migrated for jobvisor."""
    name = "default" if url.startswith("sqlite") else "pg"
    with jobvisor.connect(url) as q:
        q.migrate()
    point_django_at(name, url)
    try:
        yield name
    finally:
        connections[name].close()


@pytest.fixture
def jobs(url: str, alias: str) -> Iterator[Queue]:
    """A jobvisor queue of its own on the test's database, to look at the jobs."""
    with jobvisor.connect(url) as q:
        yield q


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
