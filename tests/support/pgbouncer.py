"""A real PgBouncer in transaction pooling in front of the test PostgreSQL.

Debian's `pgbouncer` binary is started by the fixtures on a free port with a
configuration of their own (any client is let in as the server's `postgres`
user; every database name is passed through), so the fresh database each
test gets is reached through it as `bounced_url`. `.ci/run` installs the
package where it is missing; without the binary these tests are skipped,
saying so.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support.postgres import free_port

START_TIMEOUT = 30.0


def pgbouncer_binary() -> str | None:
    found = shutil.which("pgbouncer")
    if found:
        return found
    return "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None


class Bouncer:
    """One PgBouncer process in `pool_mode=transaction` in front of the
    server `admin_url` names, with `pool_size` server connections per
    database: the fewer, the more often two clients share one."""

    def __init__(self, binary: str, admin_url: str, *, pool_size: int) -> None:
        server = psycopg.conninfo.conninfo_to_dict(admin_url)
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="jobvisor-pgbouncer-"))
        self.admin_url = admin_url
        config = self.root / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={server.get('host', '127.0.0.1')} port={server.get('port', 5432)}"
            f" user={server.get('user', 'postgres')}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = any\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\n"
            "max_client_conn = 1000\n"
            "server_reset_query =\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self.root / 'pgbouncer.log'}\n"
            f"pidfile = {self.root / 'pgbouncer.pid'}\n"
        )
        command = [binary, str(config)]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root: it becomes `postgres` itself
            # (so that the process the test holds is PgBouncer's own).
            user = pwd.getpwnam("postgres")
            for path in (self.root, config):
                os.chown(path, user.pw_uid, user.pw_gid)
            command = [binary, "-u", "postgres", str(config)]
        # Its log goes to its logfile; a pipe nobody reads would fill and stop it.
        self.proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"pgbouncer exited with {self.proc.returncode}: {self.log()}")
            try:
                with psycopg.connect(self.url(), connect_timeout=2, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise AssertionError(f"pgbouncer did not answer: {self.log()}") from None
                time.sleep(0.05)

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "pgbouncer.log").read_text(errors="replace")[-3000:]
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # SIGINT would wait for its clients
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def bouncer(admin_url: str, *, pool_size: int = 4) -> Iterator[Bouncer]:
    """A started PgBouncer in front of `admin_url`'s server, stopped afterwards."""
    binary = pgbouncer_binary()
    if binary is None:
        pytest.skip("no pgbouncer binary: `apt-get install -y pgbouncer` (.ci/run does)")
    started = Bouncer(binary, admin_url, pool_size=pool_size)
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()
