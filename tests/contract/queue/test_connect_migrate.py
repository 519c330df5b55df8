"""connect() and migrate(): URL schemes, versioned and idempotent migrations,
and two migrators at once (threads and processes)."""

from __future__ import annotations

import threading

import pytest

import jobvisor
from jobvisor import InvalidArgument
from jobvisor.queue.ops import migration_files
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import child_migrate, run_in_processes


@pytest.mark.parametrize(
    "bad",
    ["mysql://root@localhost/db", "redis://x", "jobs.db", "", "sqlite:///", "sqlite://rel.db"],
)
def test_unknown_or_malformed_url_is_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        jobvisor.connect(bad)
    assert repr(bad) in str(info.value) or (bad.split(":", maxsplit=1)[0] in str(info.value))
    assert "expected" in str(info.value)


def test_url_password_is_redacted_in_errors_and_repr() -> None:
    with pytest.raises(InvalidArgument) as info:
        jobvisor.connect("mysql://root:hunter2@localhost/db")
    assert "hunter2" not in str(info.value)
    assert "***" in str(info.value)


@pytest.mark.parametrize(
    ("url", "options", "named"),
    [
        ("sqlite:///x.db", {"pgbouncer": True}, "pgbouncer=True"),
        ("sqlite:///x.db", {"listen_url": "postgresql://db/x"}, "listen_url"),
        ("postgresql://db/x", {"pgbouncer": "yes"}, "pgbouncer='yes'"),
        ("postgresql://db/x", {"listen_url": "sqlite:///x.db"}, "listen_url='sqlite:///x.db'"),
        ("postgresql://db/x", {"listen_url": "postgresql://u:hunter2@db/x?nope=1"}, "listen_url:"),
    ],
)
def test_pgbouncer_options_are_refused_where_they_do_not_apply(
    url: str, options: dict[str, object], named: str
) -> None:
    for connect in (jobvisor.connect, jobvisor.connect_async):
        with pytest.raises(InvalidArgument) as info:
            connect(url, **options)  # type: ignore[arg-type]
        message = str(info.value)
        assert named in message and ("expected" in message or "nope" in message)
        assert "hunter2" not in message


def test_a_queue_listens_unless_behind_pgbouncer_without_a_listen_url(pg_url: str) -> None:
    listening = jobvisor.connect_async(pg_url)
    polling = jobvisor.connect_async(pg_url, pgbouncer=True)
    direct = jobvisor.connect_async(pg_url, pgbouncer=True, listen_url=pg_url)
    assert (listening.listens, polling.listens, direct.listens) == (True, False, True)
    assert not jobvisor.connect_async("sqlite:///unused.db").listens


def test_connect_picks_the_engine(url: str) -> None:
    with jobvisor.connect(url) as q:
        assert q.engine == ("sqlite" if url.startswith("sqlite") else "postgres")
        assert "Queue(" in repr(q)


def test_migrate_is_versioned_recorded_and_idempotent(url: str) -> None:
    engine = "sqlite" if url.startswith("sqlite") else "postgres"
    shipped = [v for v, _, _ in migration_files(engine)]
    assert shipped and shipped == sorted(shipped) and shipped[0] == 1
    with jobvisor.connect(url) as q:
        assert q.schema_version() == 0
        assert q.migrate() == shipped
        assert q.schema_version() == shipped[-1]
        assert q.migrate() == []
        assert q.migrate() == []
        q.enqueue("after_migrate", {"ok": True})
    (rows,) = query_all(url, ["SELECT version, name FROM jobvisor_migrations ORDER BY version"])
    assert [r[0] for r in rows] == shipped
    assert all(str(name).startswith(f"{v:04d}_") for v, name in rows)
    assert_invariants(url)


def test_migrate_twice_from_two_connections(url: str) -> None:
    with jobvisor.connect(url) as a, jobvisor.connect(url) as b:
        applied = a.migrate()
        assert applied
        assert b.migrate() == []
        assert a.schema_version() == b.schema_version() == applied[-1]


def test_concurrent_migrate_in_threads(url: str) -> None:
    n = 4
    start = threading.Barrier(n)
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with jobvisor.connect(url) as q:
                start.wait(30)
                results.append(q.migrate())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(results) == n
    applied = [r for r in results if r]
    assert len(applied) == 1, f"exactly one migrator applies the migrations: {results}"
    (rows,) = query_all(url, ["SELECT version FROM jobvisor_migrations"])
    assert sorted(r[0] for r in rows) == applied[0]


def test_concurrent_migrate_in_processes(url: str) -> None:
    results = run_in_processes(child_migrate, [(url,)] * 3)
    applied = [r for r in results if r]
    assert len(applied) == 1, results
    with jobvisor.connect(url) as q:
        assert q.schema_version() == applied[0][-1]
        q.enqueue("works", None)
    assert_invariants(url)


def test_schema_version_races_migrate_on_a_fresh_database(url: str) -> None:
    """Readers of the version may start while the first migrate runs."""
    n = 6
    start = threading.Barrier(n)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            with jobvisor.connect(url) as q:
                start.wait(30)
                for _ in range(5):
                    q.schema_version() if i % 2 else q.migrate()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
