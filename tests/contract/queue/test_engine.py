"""The engine boundary: driver errors come out wrapped, `check()`,
`transaction()`, and the shape of the two faces and of the SQL."""

from __future__ import annotations

import ast
import inspect
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor.queue import (
    api,
    batches,
    browse,
    dead,
    fleet,
    internal,
    ops,
    web_sessions,
    workflows,
)
from jobvisor.queue.drivers.postgres import sql as sql_postgres
from jobvisor.queue.drivers.postgres.sql import batches as batches_postgres
from jobvisor.queue.drivers.postgres.sql import steps as steps_postgres
from jobvisor.queue.drivers.postgres.sql import workflows as workflows_postgres
from jobvisor.queue.drivers.sqlite import sql as sql_sqlite
from jobvisor.queue.drivers.sqlite.sql import batches as batches_sqlite
from jobvisor.queue.drivers.sqlite.sql import steps as steps_sqlite
from jobvisor.queue.drivers.sqlite.sql import workflows as workflows_sqlite
from jobvisor.queue.errors import (
    DatabaseError,
    DatabaseRefused,
    DatabaseUnavailable,
    InvalidArgument,
    JobvisorError,
    SchemaMissing,
)
from tests.support.aio import run_async
from tests.support.postgres import Cluster, free_port, pg_bin, with_dbname

SRC = Path(jobvisor.__file__).parent


def _unreachable(engine: str, tmp_path: Path) -> str:
    if engine == "postgres":
        return f"postgresql://postgres@127.0.0.1:{free_port()}/test?connect_timeout=5"
    return f"sqlite:///{tmp_path / 'no-such-dir' / 'jobs.db'}"


DRIVER_ERRORS: dict[str, type[Exception]] = {
    "postgres": psycopg.OperationalError,
    "sqlite": sqlite3.OperationalError,
}


@pytest.mark.parametrize("engine", ["postgres", "sqlite"])
def test_an_unreachable_database_is_unavailable_with_the_drivers_error(
    engine: str, tmp_path: Path
) -> None:
    q = jobvisor.connect(_unreachable(engine, tmp_path))
    with q, pytest.raises(DatabaseUnavailable) as raised:
        q.get(uuid.uuid4())
    cause = raised.value.__cause__
    assert isinstance(cause, DRIVER_ERRORS[engine])
    assert type(cause).__name__ in str(raised.value)


@pytest.mark.parametrize("engine", ["postgres", "sqlite"])
def test_an_unreachable_database_is_unavailable_async(engine: str, tmp_path: Path) -> None:
    async def body() -> BaseException:
        async with jobvisor.connect_async(_unreachable(engine, tmp_path)) as q:
            with pytest.raises(DatabaseUnavailable) as raised:
                await q.check()
            return raised.value

    error = run_async(body)
    assert isinstance(error.__cause__, DRIVER_ERRORS[engine])


def _drop_jobs_table(url: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute("DROP TABLE jobvisor_jobs")
        return
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("DROP TABLE jobvisor_jobs CASCADE")


def test_a_dropped_schema_is_schema_missing(queue: jobvisor.Queue, url: str) -> None:
    _drop_jobs_table(url)
    with pytest.raises(SchemaMissing, match="jobvisor migrate") as raised:
        queue.get(uuid.uuid4())
    assert isinstance(raised.value.__cause__, psycopg.Error | sqlite3.Error)
    assert isinstance(raised.value, JobvisorError)


def test_a_dropped_schema_is_schema_missing_async(aqueue: jobvisor.AsyncQueue, url: str) -> None:
    _drop_jobs_table(url)

    async def body() -> None:
        try:
            with pytest.raises(SchemaMissing) as raised:
                await aqueue.enqueue("t")
            assert isinstance(raised.value.__cause__, psycopg.Error | sqlite3.Error)
        finally:
            await aqueue.close()

    run_async(body)


def test_check_reports_the_schema_and_changes_nothing(url: str) -> None:
    with jobvisor.connect(url) as q:
        fresh = q.check()
        assert fresh.schema_version == 0 and not fresh.migrated
        assert fresh.engine == q.engine
        assert q.check() == fresh  # check() created no record table either
        q.migrate()
        current = q.check()
    assert current.migrated
    assert current.schema_version == current.latest_version == ops.latest_version(current.engine)


def test_check_async(aqueue: jobvisor.AsyncQueue) -> None:
    async def body() -> None:
        try:
            state = await aqueue.check()
            assert state.migrated
        finally:
            await aqueue.close()

    run_async(body)


def test_a_transaction_commits_together_or_not_at_all(queue: jobvisor.Queue) -> None:
    with queue.transaction() as conn:
        queue.enqueue("a", conn=conn)
        queue.enqueue_many([{"job_type": "b"}, {"job_type": "c"}], conn=conn)
    with pytest.raises(RuntimeError), queue.transaction() as conn:
        queue.enqueue("lost", conn=conn)
        raise RuntimeError("changed my mind")
    assert queue.summary().count() == 3


def test_a_transaction_async(aqueue: jobvisor.AsyncQueue) -> None:
    async def body() -> int:
        try:
            async with aqueue.transaction() as conn:
                await aqueue.enqueue("a", conn=conn)
            with pytest.raises(RuntimeError):
                async with aqueue.transaction() as conn:
                    await aqueue.enqueue("lost", conn=conn)
                    raise RuntimeError("changed my mind")
            return (await aqueue.summary()).count()
        finally:
            await aqueue.close()

    assert run_async(body) == 1


def test_an_error_inside_a_transaction_is_wrapped(queue: jobvisor.Queue, url: str) -> None:
    _drop_jobs_table(url)
    with pytest.raises(SchemaMissing), queue.transaction() as conn:
        queue.enqueue("t", conn=conn)


# --- refusals that no retry fixes ----------------------------------------------


def test_an_unknown_database_is_refused_at_once(pg_url: str) -> None:
    missing = with_dbname(pg_url, f"jv_missing_{uuid.uuid4().hex[:8]}")
    q = jobvisor.connect(missing)
    with q, pytest.raises(DatabaseRefused, match="does not exist") as raised:
        q.check()
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)


def test_an_unknown_role_is_refused_at_once_async(pg_url: str) -> None:
    nobody = pg_url.replace("postgres@", f"jv_nobody_{uuid.uuid4().hex[:8]}@", 1)

    async def body() -> None:
        async with jobvisor.connect_async(nobody) as q:
            with pytest.raises(DatabaseRefused, match="does not exist"):
                await q.check()

    run_async(body)


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_url_option_libpq_does_not_know_is_refused_before_connecting(face: str) -> None:
    url = "postgresql://postgres@127.0.0.1:5432/test?no_such_option=1"
    connect = jobvisor.connect if face == "sync" else jobvisor.connect_async
    with pytest.raises(InvalidArgument, match="no_such_option"):
        connect(url)


# --- the two faces and the SQL -------------------------------------------------

# Notices are heard by async code only; `threads` is the async service's
# blocking twin for a worker's thread handlers.
ASYNC_ONLY = {"notifications", "listens", "threads"}


def _public(cls: type) -> dict[str, Any]:
    return {
        name: value
        for klass in reversed(cls.__mro__)
        for name, value in vars(klass).items()
        if not name.startswith("_")
    }


@pytest.mark.parametrize(
    ("sync", "async_"),
    [
        (api.Queue, api.AsyncQueue),
        (dead.DeadJobs, dead.AsyncDeadJobs),
        (internal.ServiceOps, internal.AsyncServiceOps),
        (internal.DashboardOps, internal.AsyncDashboardOps),
    ],
)
def test_the_sync_and_async_faces_have_the_same_methods(sync: type, async_: type) -> None:
    sync_methods, async_methods = _public(sync), _public(async_)
    assert set(sync_methods) == set(async_methods) - ASYNC_ONLY
    for name, method in sync_methods.items():
        twin = async_methods[name]
        op = getattr(method, "__wrapped__", None)
        assert op is getattr(twin, "__wrapped__", None), f"{name}: bound to different operations"
        if op is not None:
            assert inspect.iscoroutinefunction(twin), f"AsyncQueue.{name} is not a coroutine"
            assert op.__module__.startswith(ops.__name__ + ".") or op.__module__ in (
                browse.__name__,
                fleet.__name__,
                web_sessions.__name__,
                batches.__name__,
                workflows.__name__,
            )


def test_the_service_and_dashboard_operations_are_not_on_the_public_queue() -> None:
    internal_only = set(_public(internal.ServiceOps)) | set(_public(internal.DashboardOps))
    assert internal_only
    for face in (api.Queue, api.AsyncQueue):
        assert not internal_only & set(_public(face))


def test_the_crash_requeue_keeps_its_former_name() -> None:
    assert api.Queue.release_worker is api.Queue.requeue_crashed
    assert api.AsyncQueue.release_worker is api.AsyncQueue.requeue_crashed


def _stmt_sql_args(tree: ast.AST) -> list[ast.expr]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Stmt":
            found += node.args[:1] + [k.value for k in node.keywords if k.arg == "sql"]
    return found


def test_statements_are_literals_never_built_at_run_time() -> None:
    """Every `Stmt`'s SQL is a name or an attribute (a constant of an engine's
    SQL module), and every constant there is a literal or a sum of literals:
    an f-string, a `%` or a `.format` anywhere here fails."""
    for path in sorted((SRC / "queue").rglob("*.py")):
        for arg in _stmt_sql_args(ast.parse(path.read_text())):
            assert isinstance(arg, ast.Name | ast.Attribute), (
                f"{path.name}:{arg.lineno}: Stmt SQL is built at run time"
            )
    for path in sorted(
        path
        for module in (sql_postgres, sql_sqlite)
        for path in Path(str(module.__file__)).parent.glob("*.py")
        if path.name != "__init__.py"  # it imports the statements, defines none
    ):
        tree = ast.parse(path.read_text())
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        for node in [*tree.body, *(n for c in classes for n in c.body)]:
            if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
                for part in ast.walk(node.value):
                    allowed = ast.Constant | ast.BinOp | ast.Add | ast.Name | ast.Load | ast.Tuple
                    assert isinstance(part, allowed), (
                        f"{path}:{node.lineno}: {type(part).__name__} in a statement"
                    )
                    if isinstance(part, ast.BinOp):
                        assert isinstance(part.op, ast.Add)


def test_both_engines_define_the_same_statements() -> None:
    def names(module: Any) -> set[str]:
        return {n for n in vars(module) if n.isupper() and not n.startswith("_")}

    assert names(sql_postgres) - {"NOTIFY_CHANNEL", "LISTEN"} == names(sql_sqlite)
    assert names(batches_postgres.BatchSql) == names(batches_sqlite.BatchSql)
    assert names(steps_postgres.StepSql) - {"STEP_TX_DURABLE"} == names(steps_sqlite.StepSql)
    assert names(workflows_postgres.WorkflowSql) == names(workflows_sqlite.WorkflowSql)


def test_only_the_queue_drivers_import_a_driver() -> None:
    drivers = SRC / "queue" / "drivers"
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(drivers):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] not in {"psycopg", "psycopg_pool", "sqlite3"}, (
                    f"{path.relative_to(SRC)} imports {module}"
                )


@pytest.fixture(scope="module")
def password_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway cluster that asks for a password: its URL, without one."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL server binaries for a throwaway cluster")
    cluster = Cluster(initdb, pg_ctl)
    pwfile = cluster.root / "pw"
    pwfile.write_text("right-password\n")
    prefix = cluster.prefix
    if prefix:
        shutil.chown(pwfile, "postgres")
    subprocess.run(
        [*prefix, initdb, "-D", str(cluster.data), "-U", "postgres", "-A", "scram-sha-256",
         f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True,
    )  # fmt: skip
    opts = (
        f"-c listen_addresses=127.0.0.1 -c port={cluster.port} "
        f"-c unix_socket_directories={cluster.root} -c fsync=off"
    )
    subprocess.run(
        [*prefix, pg_ctl, "-D", str(cluster.data), "-l", str(cluster.root / "log"),
         "-o", opts, "-w", "-t", "60", "start"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres"
    finally:
        cluster.stop()


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_wrong_password_is_refused_at_once(password_cluster: str, face: str) -> None:
    wrong = password_cluster.replace("postgres@", "postgres:wrong-password@", 1)
    right = password_cluster.replace("postgres@", "postgres:right-password@", 1)
    if face == "sync":
        q = jobvisor.connect(wrong)
        with q, pytest.raises(DatabaseRefused, match="password authentication failed") as raised:
            q.check()
        assert isinstance(raised.value.__cause__, psycopg.OperationalError)
        assert "wrong-password" not in str(raised.value)
        with jobvisor.connect(right) as good:
            assert good.check().schema_version == 0

    else:

        async def body() -> None:
            async with jobvisor.connect_async(wrong) as q:
                with pytest.raises(DatabaseRefused, match="password authentication failed"):
                    await q.check()
            async with jobvisor.connect_async(right) as good:
                assert (await good.check()).schema_version == 0

        run_async(body)


def test_synchronous_commit_off_applies_to_that_queue_only(pg_url: str) -> None:
    def setting(q: jobvisor.Queue) -> str:
        with q.transaction() as conn:
            return str(conn.execute("SHOW synchronous_commit").fetchone()[0])

    with psycopg.connect(pg_url) as plain:
        server_default = str(plain.execute("SHOW synchronous_commit").fetchone()[0])  # type: ignore[index]
    with jobvisor.connect(pg_url, synchronous_commit=False) as fast:
        assert setting(fast) == "off"
    with jobvisor.connect(pg_url) as durable:
        assert setting(durable) == server_default

    async def body() -> str:
        q = jobvisor.connect_async(pg_url, synchronous_commit=False)
        async with q, q.transaction() as conn:
            cur = await conn.execute("SHOW synchronous_commit")
            return str((await cur.fetchone())[0])

    assert run_async(body) == "off"


def test_any_other_driver_error_is_a_database_error(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        refused = pytest.raises(DatabaseError, match="DivisionByZero")
        with refused as raised, q.transaction() as conn:
            conn.execute("SELECT 1 / 0")
        assert isinstance(raised.value.__cause__, psycopg.errors.DivisionByZero)
        assert not isinstance(raised.value, DatabaseUnavailable | SchemaMissing)
        assert q.check().schema_version == 0  # the pool's connection is usable again
