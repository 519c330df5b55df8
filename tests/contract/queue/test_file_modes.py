"""A SQLite database jobvisor creates is its owner's alone (0600), and so are
its -wal and -shm files: payloads are not readable by other users of the host."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

import jobvisor


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o000], ids=["022", "002", "000"])
def test_a_new_database_and_its_wal_and_shm_are_0600(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "jobs.db"
    previous = os.umask(umask)
    try:
        with jobvisor.connect(f"sqlite:///{path}") as q:
            q.migrate()
            q.enqueue("send_email", {"to": "someone"})
            files = {p.name: mode(p) for p in tmp_path.iterdir()}
    finally:
        os.umask(previous)
    assert set(files) == {"jobs.db", "jobs.db-wal", "jobs.db-shm"}
    assert files == dict.fromkeys(files, 0o600)


def test_an_existing_database_keeps_the_mode_its_owner_chose(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with jobvisor.connect(f"sqlite:///{path}") as q:
        q.migrate()
    path.chmod(0o640)
    with jobvisor.connect(f"sqlite:///{path}") as q:
        q.enqueue("send_email", {})
        assert mode(path) == 0o640


def test_the_async_queue_creates_the_file_0600_too(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"

    async def main() -> None:
        async with jobvisor.connect_async(f"sqlite:///{path}") as q:
            await q.migrate()

    asyncio.run(main())
    assert mode(path) == 0o600
