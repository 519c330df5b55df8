"""Shared fixtures: a real PostgreSQL (a fresh database per test) and a real
SQLite file, and queues on both.

PostgreSQL is found in this order: `JOBVISOR_TEST_PG_URL`; the local server at
`postgresql://postgres@127.0.0.1:5432/postgres`; a throwaway cluster started for
the session when the server binaries (`initdb`, `pg_ctl`) exist. Without any of
them the PostgreSQL tests are skipped with the reason, and the SQLite ones run.

`tests` is a package (and so is each folder under it): otherwise pytest puts
`tests/` itself on sys.path and `tests/queue` shadows the standard library's
`queue`, which psycopg imports.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql

import jobvisor
from jobvisor import AsyncQueue, Queue

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ENGINES = ["postgres", "sqlite"]

T = TypeVar("T")


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion in a fresh event loop (async tests stay sync)."""

    async def main() -> T:
        return await make()

    return asyncio.run(main())


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Cluster:
    """A throwaway PostgreSQL cluster in a temp dir: trust auth, fsync off."""

    def __init__(self, initdb: str, pg_ctl: str) -> None:
        self.initdb, self.pg_ctl = initdb, pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="jobvisor-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            # initdb refuses to run as root: the cluster belongs to `postgres`.
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]

    def start(self) -> str:
        subprocess.run(
            [*self.prefix, self.initdb, "-D", str(self.data), "-U", "postgres",
             "-A", "trust", "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True,
        )  # fmt: skip
        self.ctl("-o", self.options(), "-w", "-t", "60", "start", timeout=None)
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def options(self, *, synchronous_commit: bool = False) -> str:
        """The server's settings: this cluster's port and socket, no fsync."""
        return (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.root} -c fsync=off "
            f"-c synchronous_commit={'on' if synchronous_commit else 'off'} "
            "-c full_page_writes=off -c max_connections=200"
        )

    def ctl(
        self, *args: str, check: bool = True, timeout: float | None = 180
    ) -> subprocess.CompletedProcess[bytes]:
        """`pg_ctl` on this cluster's data directory, logging to its log file."""
        return subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", str(self.data), "-l", str(self.root / "log"), *args],
            check=check,
            capture_output=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"],
            check=False, capture_output=True,
        )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A URL to a PostgreSQL superuser's maintenance database (skips without one)."""
    env = os.environ.get("JOBVISOR_TEST_PG_URL")
    if env:
        if not _answers(env):
            pytest.skip(f"JOBVISOR_TEST_PG_URL={env!r} does not answer")
        yield env
        return
    if _answers(DEFAULT_PG_URL):
        yield DEFAULT_PG_URL
        return
    if _pg_bin("initdb") is None or _pg_bin("pg_ctl") is None:
        pytest.skip(
            f"no PostgreSQL: {DEFAULT_PG_URL} does not answer, JOBVISOR_TEST_PG_URL is unset "
            "and no initdb/pg_ctl was found to start a throwaway cluster"
        )
    with throwaway_cluster() as (_, url):
        yield url


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[tuple[_Cluster, str]]:
    """A started throwaway cluster and its URL, removed afterwards; the test
    is skipped where no server binaries are found or the cluster cannot start."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) for a throwaway cluster")
    cluster = _Cluster(initdb, pg_ctl)
    try:
        try:
            url = cluster.start()
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or b"").decode(errors="replace").strip()
            pytest.skip(f"could not start a throwaway PostgreSQL cluster: {detail}")
        yield cluster, url
    finally:
        cluster.stop()


def _with_dbname(url: str, dbname: str) -> str:
    """The URL with its database name replaced."""
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{dbname}" + (f"?{query}" if query else "")


class _Databases:
    """Fresh databases for tests. Creating and dropping one takes the server a
    second on a busy machine, so the next database is created and the last one
    dropped in a background thread while the test runs."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jv-test-db")
        self.spare: concurrent.futures.Future[str] | None = None

    def _create(self) -> str:
        name = f"jv_t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return name

    def _drop(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def take(self) -> str:
        name = self.spare.result() if self.spare is not None else self._create()
        self.spare = self.pool.submit(self._create)
        return name

    def give_back(self, name: str) -> None:
        self.pool.submit(self._drop, name)

    def close(self) -> None:
        if self.spare is not None:
            with contextlib.suppress(Exception):
                self._drop(self.spare.result())
        self.pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def _pg_databases(pg_admin_url: str) -> Iterator[_Databases]:
    databases = _Databases(pg_admin_url)
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def pg_url(pg_admin_url: str, _pg_databases: _Databases) -> Iterator[str]:
    """A fresh, empty (unmigrated) PostgreSQL database for this test, dropped after."""
    name = _pg_databases.take()
    try:
        yield _with_dbname(pg_admin_url, name)
    finally:
        _pg_databases.give_back(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file (not yet created) in this test's temp dir."""
    return f"sqlite:///{(tmp_path / 'jobvisor.db').resolve()}"


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


def run_with(q: AsyncQueue, body: Callable[[AsyncQueue], Awaitable[T]]) -> T:
    """Run `body(q)` in a fresh event loop, then close `q` in that same loop."""

    async def main() -> T:
        try:
            return await body(q)
        finally:
            await q.close()

    return asyncio.run(main())
