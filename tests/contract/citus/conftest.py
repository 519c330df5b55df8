"""A Citus cluster (a coordinator and its worker nodes; `.ci/run` builds Citus
and starts one with ../shared/citus/cluster.sh): each test process gets a
database of its own on every node, migrated once with `citus=True`, and each
test starts from empty tables. The contract suite's fixtures open their
queues there in Citus mode (docs/design.md, "Scale-out").

The coordinator is `JOBVISOR_TEST_CITUS_URL`, else the cluster.sh default;
without one answering, these tests are skipped with the reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.citus import create_database, drop_database, execute
from tests.support.postgres import answers

DEFAULT_CITUS_URL = "postgresql://postgres@127.0.0.1:56001/postgres"
# What each test empties (the schema's record and the buckets stay).
TABLES = (
    "jobvisor_jobs", "jobvisor_leader", "jobvisor_queue_pauses", "jobvisor_schedules",
    "jobvisor_limits", "jobvisor_supervisors", "jobvisor_key_buckets", "jobvisor_web_sessions",
    "jobvisor_claim_marks", "jobvisor_steps", "jobvisor_signals", "jobvisor_events",
)  # fmt: skip


@pytest.fixture(scope="session")
def citus_url(worker_id: str, testrun_uid: str) -> Iterator[str]:
    """A database of this test process's own on every node of the cluster
    (named for the run too: two runs may share the cluster), dropped after."""
    admin = os.environ.get("JOBVISOR_TEST_CITUS_URL", DEFAULT_CITUS_URL)
    if not answers(admin):
        pytest.skip(f"no Citus coordinator at {admin} (bash ../shared/citus/cluster.sh start)")
    dbname = f"jobvisor_citus_{testrun_uid[:12]}_{worker_id}"
    url, node_urls = create_database(admin, dbname)
    yield url
    drop_database([admin, *node_urls], dbname)


@pytest.fixture
def url(citus_url: str) -> str:
    execute(citus_url, "TRUNCATE " + ", ".join(TABLES))
    return citus_url


@pytest.fixture
def connect_options() -> dict[str, Any]:
    return {"citus": True}


@pytest.fixture(autouse=True)
def citus_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queues a test opens itself, and processes it starts, in Citus mode too."""
    monkeypatch.setenv("JOBVISOR_CITUS", "on")
