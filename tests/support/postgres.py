"""PostgreSQL for the tests: finding a server (or starting a throwaway
cluster), and fresh databases, empty or cloned from a migrated template.

Migrating a database takes twelve scripts; cloning one already migrated is a
single `CREATE DATABASE ... TEMPLATE`. The template is named after a hash of
the migration files, so a change to them makes a new one, and it is built
under an advisory lock and published by a rename: pytest runs sharing one
server (several checkouts, say) build it once and never clone a half-built
one. It takes no connections, so a clone never finds it busy."""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import jobvisor

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A throwaway PostgreSQL cluster in a temp dir: trust auth, fsync off."""

    def __init__(self, initdb: str, pg_ctl: str) -> None:
        self.initdb, self.pg_ctl = initdb, pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="jobvisor-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
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


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[tuple[Cluster, str]]:
    """A started throwaway cluster and its URL, removed afterwards; the test
    is skipped where no server binaries are found or the cluster cannot start."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) for a throwaway cluster")
    cluster = Cluster(initdb, pg_ctl)
    try:
        try:
            url = cluster.start()
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or b"").decode(errors="replace").strip()
            pytest.skip(f"could not start a throwaway PostgreSQL cluster: {detail}")
        yield cluster, url
    finally:
        cluster.stop()


def with_dbname(url: str, dbname: str) -> str:
    """The URL with its database name replaced."""
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{dbname}" + (f"?{query}" if query else "")


def migrations_digest(engine: str) -> str:
    """A short hash of the migration files shipped for `engine`."""
    digest = hashlib.sha256()
    folder = resources.files("jobvisor.queue").joinpath("migrations", engine)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            digest.update(entry.name.encode() + b"\0" + entry.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def ensure_template(admin_url: str) -> str:
    """The name of the migrated template database, built first if missing."""
    name = f"jv_template_{migrations_digest('postgres')}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [name])
        try:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if found is None:
                building = f"jv_tbuild_{uuid.uuid4().hex[:16]}"
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
                try:
                    with jobvisor.connect(with_dbname(admin_url, building), pool_size=1) as q:
                        q.migrate()
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(
                            sql.Identifier(building)
                        )
                    )
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(building), sql.Identifier(name)
                        )
                    )
                except BaseException:
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(building)
                        )
                    )
                    raise
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])
    return name


class Databases:
    """Fresh databases for tests, empty or cloned from the migrated template.
    The server may take a while to create or drop one on a busy machine, so
    the next of each kind is made, and the last one dropped, in a background
    thread while the test runs."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jv-test-db")
        self.template: str | None = None
        self.spare: dict[bool, concurrent.futures.Future[str]] = {}

    def _create(self, migrated: bool) -> str:
        name = f"jv_t_{uuid.uuid4().hex[:16]}"
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if migrated:
            if self.template is None:
                self.template = ensure_template(self.admin_url)
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(self.template))
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement)
        return name

    def _drop(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def take(self, *, migrated: bool = False) -> str:
        """A new database's name: empty, or with the queue's schema current."""
        spare = self.spare.pop(migrated, None)
        name = spare.result() if spare is not None else self._create(migrated)
        self.spare[migrated] = self.pool.submit(self._create, migrated)
        return name

    def give_back(self, name: str) -> None:
        self.pool.submit(self._drop, name)

    def close(self) -> None:
        for spare in self.spare.values():
            with contextlib.suppress(Exception):
                self._drop(spare.result())
        self.pool.shutdown(wait=True)
