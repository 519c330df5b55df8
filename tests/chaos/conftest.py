"""Fixtures of the chaos scenarios: a PostgreSQL database with the queue
migrated and the ledger created, and a factory of `jobvisor run` processes
(every one killed, with its workers, at the end)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.service import Service, services

from .ledger import prepare


@pytest.fixture
def chaos_url(pg_url: str) -> str:
    """A fresh PostgreSQL database, migrated, with an empty ledger."""
    prepare(pg_url)
    return pg_url


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    with services() as make:
        yield make
