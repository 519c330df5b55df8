"""Run the real `jobvisor` console script against a real database."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import jobvisor
from jobvisor import Queue
from tests.support.cli import JOBVISOR, Cli


@pytest.fixture
def cli(url: str, tmp_path: Path) -> Cli:
    """The CLI on each engine, its database not yet migrated."""
    if not JOBVISOR.exists():
        pytest.skip(f"no jobvisor console script beside {sys.executable}")
    return Cli(url, tmp_path)


@pytest.fixture
def db(cli: Cli) -> Iterator[Queue]:
    """The same database, migrated through the CLI, opened in the test."""
    cli.ok("migrate")
    q = jobvisor.connect(cli.url)
    try:
        yield q
    finally:
        q.close()
