"""`migrate` on a Citus cluster, from an empty database: the contract's
migration tests (versioned, recorded and idempotent; two migrators on two
connections, in threads and in processes, of which exactly one applies the
migrations; readers of the version racing the first migrate), and the
engine's (`check()` on an empty database and after `migrate`, a dropped
schema, transactions), rerun in Citus mode. Each test gets a database of its
own, created on every node with Citus in it and the workers added, and
nothing else (the cluster's other tests share one migrated database)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.citus import create_database, drop_database
from tests.support.rerun import rerun


@pytest.fixture
def url(citus_url: str) -> Iterator[str]:
    admin = citus_url.rsplit("/", 1)[0] + "/postgres"
    name = f"{citus_url.rsplit('/', 1)[1]}_{uuid.uuid4().hex[:8]}"
    fresh, nodes = create_database(admin, name, migrate=False)
    try:
        yield fresh
    finally:
        drop_database([admin, *nodes], name)


globals().update(rerun(("connect_migrate", "engine"), own_queues=True))
