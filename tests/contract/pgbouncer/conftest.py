"""A real PgBouncer in transaction pooling in front of the test PostgreSQL
(tests/support/pgbouncer.py): the fresh database each test gets is reached
through it as `bounced_url`, and the contract suite's fixtures open their
queues through it with `pgbouncer=True`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support.pgbouncer import Bouncer, bouncer
from tests.support.postgres import with_dbname


@pytest.fixture(scope="session")
def pgbouncer(pg_admin_url: str) -> Iterator[Bouncer]:
    """One PgBouncer for the session, 4 server connections per database."""
    with bouncer(pg_admin_url) as started:
        yield started


@pytest.fixture
def bounced_url(pgbouncer: Bouncer, pg_url: str) -> str:
    """This test's fresh database, reached through PgBouncer."""
    dbname = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    return with_dbname(pgbouncer.url(), str(dbname))


# --- the contract suite's fixtures (tests/contract/conftest.py), through PgBouncer --


@pytest.fixture
def url(bounced_url: str) -> str:
    return bounced_url


@pytest.fixture
def connect_options() -> dict[str, Any]:
    return {"pgbouncer": True}
