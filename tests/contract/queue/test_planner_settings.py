"""jobvisor's own PostgreSQL sessions carry the planner settings the claim
relies on (docs/design.md, "Planner settings"), whatever the server's."""

from __future__ import annotations

import psycopg

import jobvisor
from jobvisor.queue.plan import Plan, Steps, Stmt


def _settings() -> Steps[tuple[str, str, str]]:
    row = yield Stmt(
        "SELECT current_setting('jit'), current_setting('enable_sort'),"
        " current_setting('random_page_cost')",
        fetch="one",
    )
    return str(row[0]), str(row[1]), str(row[2])


def test_a_session_has_no_jit_no_sort_and_ssd_page_costs(pg_url: str) -> None:
    dbname = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # A server that would JIT-compile every statement, and sort freely.
        conn.execute(f'ALTER DATABASE "{dbname}" SET jit = on')
        conn.execute(f'ALTER DATABASE "{dbname}" SET jit_above_cost = 0')
        conn.execute(f'ALTER DATABASE "{dbname}" SET enable_sort = on')
        conn.execute(f'ALTER DATABASE "{dbname}" SET random_page_cost = 4')
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('jit')").fetchone()
        assert row is not None and row[0] == "on"  # what any other session gets
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        assert q._runner.run(Plan(_settings(), transaction=False)) == ("off", "off", "1.1")
