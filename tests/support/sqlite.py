"""SQLite for the tests: a file migrated once, copied for each test that
would migrate its own (a copy costs far less than twelve migrations)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import jobvisor


def migrated_sqlite(path: Path) -> Path:
    """Create and migrate a SQLite database at `path`; return `path`. The
    queue is closed after, so the whole database is in the main file."""
    with jobvisor.connect(f"sqlite:///{path}") as q:
        q.migrate()
    for suffix in ("-wal", "-shm"):
        assert not Path(f"{path}{suffix}").exists(), f"{path}{suffix} outlived its queue"
    return path


def copy_database(template: Path, path: Path) -> None:
    """Copy the migrated `template` to `path`, created 0600 as the queue
    creates its own files."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, template.open("rb") as src:
        shutil.copyfileobj(src, out)
