"""A throwaway PostgreSQL cluster for a benchmark: initdb in a temp dir, started
on a free port with the server's stock settings (fsync and synchronous_commit
on, shared_buffers 128 MB), and removed at the end. A benchmark that needs a
setting the shared server must not change (autovacuum on, say) runs on one,
and no other session of the shared server can hold its xmin horizon back.

    with throwaway_cluster(["autovacuum=on", "autovacuum_naptime=10s"]) as url:
        ...
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path


def pg_bin(name: str) -> str:
    """The newest installed PostgreSQL server binary `name` (initdb, pg_ctl)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if not candidates:
        raise SystemExit(f"no {name} found on PATH or under /usr/lib/postgresql/*/bin")
    return candidates[0]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def throwaway_cluster(settings: Sequence[str] = (), *, port: int | None = None) -> Iterator[str]:
    """Start a cluster with `settings` ("name=value") on top of the stock ones;
    yields the URL of its `postgres` database (user postgres, trust)."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="jobvisor-bench-pg-"))
    data, log = root / "data", root / "log"
    prefix: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root: the cluster belongs to `postgres`.
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = port or free_port()
    options = ["listen_addresses=127.0.0.1", f"port={port}",
               f"unix_socket_directories={root}", "max_connections=200", *settings]  # fmt: skip
    try:
        subprocess.run([*prefix, initdb, "-D", str(data), "-U", "postgres", "-A", "trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True)  # fmt: skip
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "120",
                        "-o", " ".join(f"-c {o}" for o in options), "start"],
                       check=True, capture_output=True)  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"],
                       check=False, capture_output=True)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
