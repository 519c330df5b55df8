"""`jobvisor run` on a Citus cluster: the cluster tests' database
(tests/contract/citus/conftest.py), and services started with
`JOBVISOR_CITUS=1`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from jobvisor import Queue
from tests.contract.citus.conftest import (  # noqa: F401
    citus_mode,
    citus_url,
    connect_options,
    url,
)
from tests.support.service import Service, services


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    with services() as make:

        def on_the_cluster(
            url: str, workdir: Path, settings: Mapping[str, str] | None = None, **options: object
        ) -> Service:
            return make(url, workdir, {**(settings or {}), "JOBVISOR_CITUS": "1"}, **options)

        yield on_the_cluster


@pytest.fixture
def pg_queue(queue: Queue) -> Queue:
    """What the one-server scenarios run on PostgreSQL only: here the cluster's."""
    return queue
