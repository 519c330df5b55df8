"""A Citus cluster of a test's own (a coordinator and two worker nodes on
127.0.0.1, started with ../shared/citus/cluster.sh), for what a shared one
cannot take: a node's postmaster killed. Needs Citus installed (.ci/run
builds it) and root, as cluster.sh does; a test without them is skipped."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import jobvisor
from tests.support.postgres import with_dbname
from tests.support.service import is_alive
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]


def citus_dir() -> Path | None:
    """Where cluster.sh is: `JOBVISOR_CITUS_DIR`, else ../shared/citus beside
    the project, else the workplace's shared folder."""
    for candidate in (os.environ.get("JOBVISOR_CITUS_DIR"), ROOT.parent / "shared" / "citus",
                      Path("/work/shared/citus")):  # fmt: skip
        if candidate and (Path(candidate) / "cluster.sh").is_file():
            return Path(candidate)
    return None


@dataclasses.dataclass
class CitusCluster:
    """A coordinator on `base` and worker nodes on `base + 1`, `base + 2`."""

    script: Path
    base: int
    url: str

    @property
    def worker_ports(self) -> tuple[int, int]:
        return (self.base + 1, self.base + 2)

    def postmaster_pid(self, port: int) -> int:
        pid_file = Path(f"/tmp/citus-{port}/data/postmaster.pid")
        return int(pid_file.read_text().split("\n", 1)[0])

    def kill_node(self, port: int) -> None:
        """SIGKILL to a node's postmaster: nothing flushed, crash recovery at
        the next start."""
        pid = self.postmaster_pid(port)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not is_alive(pid), timeout=30, what=f"node {port}'s postmaster gone")

    def start(self) -> None:
        """Start every node that is down (again, after a kill: its backends
        may hold its shared memory a moment longer)."""
        wait_until(lambda: self._run("start", check=False) == 0, timeout=90, what="cluster up")

    def _run(self, command: str, *, check: bool = True) -> int:
        done = subprocess.run(
            ["bash", str(self.script), command, str(self.base)],
            cwd="/tmp", capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"cluster.sh {command} {self.base}: {done.stderr[-2000:]}")
        return done.returncode


@contextlib.contextmanager
def private_cluster(base: int) -> Iterator[CitusCluster]:
    """A fresh 3-node cluster on ports `base`..`base + 2`, removed after."""
    folder = citus_dir()
    if folder is None or os.geteuid() != 0:
        pytest.skip("no cluster.sh, or not root: a Citus cluster of the test's own needs both")
    if not Path("/usr/lib/postgresql").exists() or not list(
        Path("/usr/lib/postgresql").glob("*/lib/citus.so")
    ):
        pytest.skip("Citus is not installed (bash ../shared/citus/build.sh)")
    cluster = CitusCluster(
        folder / "cluster.sh", base, f"postgresql://postgres@127.0.0.1:{base}/postgres"
    )
    _remove(base)
    try:
        cluster._run("start")
        yield cluster
    finally:
        cluster._run("stop", check=False)
        _remove(base)


def _remove(base: int) -> None:
    for port in (base, base + 1, base + 2):
        shutil.rmtree(f"/tmp/citus-{port}", ignore_errors=True)


# --- a database of a test process's own on a shared cluster ---------------------


def execute(url: str, *statements: str) -> list[Any]:
    """Run `statements` on `url` in autocommit; the last one's rows."""
    rows: list[Any] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            cur = conn.execute(statement)
            rows = cur.fetchall() if cur.description else []
    return rows


def create_database(
    admin: str, dbname: str, *, migrate: bool = True, workers: int | None = None
) -> tuple[str, list[str]]:
    """Create `dbname` on every node and add the workers to it (the first
    `workers` of them, all by default); migrate it in Citus mode unless
    `migrate` is False. Its URL and the nodes' URLs."""
    with psycopg.connect(admin, autocommit=True) as lock:
        # Adding nodes to two databases at once deadlocks on the nodes (each
        # syncs the same role): one set-up at a time across the cluster.
        lock.execute("SELECT pg_advisory_lock(7428930915630211)")
        return _create(admin, dbname, migrate, workers)


def _create(admin: str, dbname: str, migrate: bool, workers: int | None) -> tuple[str, list[str]]:
    nodes = execute(admin, "SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary'"
                  " AND groupid <> 0 ORDER BY nodeport")[:workers]  # fmt: skip
    coordinator = psycopg.conninfo.conninfo_to_dict(admin)
    node_urls = [f"postgresql://postgres@{h}:{p}/postgres" for h, p in nodes]
    for url in (admin, *node_urls):
        _clear_stale(url)
        _drop(url, dbname)
        execute(url, f"CREATE DATABASE {dbname}")
        execute(with_dbname(url, dbname), "CREATE EXTENSION citus")
    url = with_dbname(admin, dbname)
    execute(
        url,
        f"SELECT citus_set_coordinator_host('{coordinator.get('host', '127.0.0.1')}',"
        f" {coordinator.get('port', 5432)})",
        *(f"SELECT citus_add_node('{h}', {p})" for h, p in nodes),
    )
    if migrate:
        with jobvisor.connect(url, citus=True) as q:
            q.migrate()
    return url, node_urls


def drop_database(nodes: list[str], dbname: str) -> None:
    """Drop `dbname` on every node, the coordinator (first in `nodes`) first:
    while it has the database, its Citus maintenance daemon connects to the
    nodes' every two seconds (the distributed deadlock check), and a node's
    drop then finds it there. Dropping it stops the daemon."""
    for node in nodes:
        _drop(node, dbname)


# How long one node's drop is tried again (a cluster test's own timeout,
# its teardown included, is 300 s).
DROP_PATIENCE = 120.0


def _drop(node: str, dbname: str) -> None:
    """DROP DATABASE ... WITH (FORCE), tried again while another session holds
    it: the force ends the sessions there, but under load one may be slow to
    end, or a new one come, within the server's five seconds' wait."""
    began = time.monotonic()
    tries = 0
    while True:
        tries += 1
        try:
            execute(node, f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
            return
        except psycopg.errors.ObjectInUse as exc:
            took = time.monotonic() - began
            if took > DROP_PATIENCE:
                raise AssertionError(f"{dbname} on {node}: {tries} tries in {took:.0f}s") from exc
            time.sleep(1)


def _clear_stale(node: str) -> None:
    """Roll back what an interrupted run left prepared on a node for a test
    database (a two-phase commit whose coordinator went away holds its locks
    for ever), and drop the test databases of runs over an hour old."""
    stale = execute(
        node,
        "SELECT gid, database FROM pg_prepared_xacts WHERE database LIKE 'jobvisor_citus_%'"
        " AND prepared < now() - interval '1 minute'",
    )
    for gid, database in stale:
        execute(with_dbname(node, database), f"ROLLBACK PREPARED '{gid}'")
    old = execute(
        node,
        "SELECT d.datname FROM pg_database AS d WHERE d.datname LIKE 'jobvisor_citus_%'"
        " AND NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.datname = d.datname"
        "   AND a.backend_start > now() - interval '1 hour')"
        # (true: a database another process drops meanwhile has no file to read)
        " AND (pg_stat_file('base/' || d.oid || '/PG_VERSION', true)).modification"
        "   < now() - interval '1 hour'",
    )
    for (database,) in old:
        _drop(node, database)
