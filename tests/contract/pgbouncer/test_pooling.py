"""What transaction pooling breaks, shown on a PgBouncer with one server
connection per database (so two clients surely share it), and that
`pgbouncer=True` breaks none of it."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.queue.errors import DatabaseError
from jobvisor.queue.plan import BEGIN, COMMIT, Plan, Steps, Stmt
from tests.support.pgbouncer import bouncer
from tests.support.postgres import with_dbname

REPEATS = 8  # past psycopg's prepare_threshold (5): the statement would be prepared


@pytest.fixture
def single(pg_admin_url: str, pg_url: str) -> Iterator[str]:
    """This test's database through a PgBouncer with one server connection."""
    with bouncer(pg_admin_url, pool_size=1) as started:
        dbname = str(psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"])
        yield with_dbname(started.url(), dbname)


def _show(url: str, setting: str) -> str:
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        row = conn.execute(f"SHOW {setting}").fetchone()
    assert row is not None
    return str(row[0])


def _claims(url: str, *, pgbouncer: bool) -> None:
    with jobvisor.connect(url, pgbouncer=pgbouncer, synchronous_commit=False) as q:
        q.enqueue("noop")
        [job] = q.claim("w-1")
        q.complete(job)


def test_no_setting_outlives_a_transaction(single: str) -> None:
    with jobvisor.connect(single, pgbouncer=True) as q:
        q.migrate()
    _claims(single, pgbouncer=True)
    assert _show(single, "enable_sort") == "on"
    assert _show(single, "synchronous_commit") == "on"
    # Without the mode, the session's settings reach the next client of the
    # server connection: what the mode is for.
    _claims(single, pgbouncer=False)
    assert _show(single, "enable_sort") == "off"
    assert _show(single, "synchronous_commit") == "off"


def _read_repeatedly(first: Queue, second: Queue) -> None:
    job_id = first.enqueue("noop")
    for _ in range(REPEATS):
        assert first.get(job_id).id == job_id
        assert second.get(job_id).id == job_id
        assert first.summary().total == second.summary().total


def test_no_statement_is_prepared_on_the_server(single: str) -> None:
    with jobvisor.connect(single, pgbouncer=True) as q:
        q.migrate()
    with (
        jobvisor.connect(single, pgbouncer=True) as first,
        jobvisor.connect(single, pgbouncer=True) as second,
    ):
        _read_repeatedly(first, second)
    # Without the mode, both clients prepare their statements under the same
    # names on the one server connection they share.
    with (
        jobvisor.connect(single) as first,
        jobvisor.connect(single) as second,
        pytest.raises(DatabaseError, match="prepared statement"),
    ):
        _read_repeatedly(first, second)


def _enable_sort() -> Steps[str]:
    row = yield Stmt("SELECT current_setting('enable_sort')", fetch="one")
    return str(row[0])


def _jit() -> Steps[str]:
    row = yield Stmt("SELECT current_setting('jit')", fetch="one")
    return str(row[0])


def test_a_planner_plan_has_its_settings_for_its_transaction(single: str) -> None:
    """The claim's settings (`Plan.planner`) hold inside its own transaction
    and end with it."""
    with jobvisor.connect(single, pgbouncer=True) as q:
        runner = q._runner
        assert runner.run(Plan(_enable_sort(), transaction=False, planner=True)) == "off"
        assert runner.run(Plan(_enable_sort(), transaction=False)) == "on"
        assert runner.run(Plan(_jit(), transaction=False, planner=True)) == "off"
        assert runner.run(Plan(_jit(), transaction=False)) == "on"


def _enable_sort_around_commits() -> Steps[list[str]]:
    seen = [(yield from _enable_sort())]
    yield COMMIT  # as the limited claim ends its own transaction
    seen.append((yield from _enable_sort()))
    yield BEGIN
    seen.append((yield from _enable_sort()))
    yield COMMIT
    return seen


def test_a_planner_plan_keeps_its_settings_past_its_commits(single: str) -> None:
    with jobvisor.connect(single, pgbouncer=True) as q:
        plan = Plan(_enable_sort_around_commits(), transaction=False, planner=True)
        assert q._runner.run(plan) == ["off", "off", "off"]
        assert q._runner.run(Plan(_enable_sort(), transaction=False)) == "on"
