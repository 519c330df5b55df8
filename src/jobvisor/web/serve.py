"""`jobvisor web`: the dashboard alone, against any database URL, until
SIGINT or SIGTERM. It changes no schema: a database not yet migrated is
refused with the command that migrates it.

Also what `jobvisor run` shares to serve it: the dashboard its settings
describe, and the warning when it listens beyond this host (its pages show
every job's payload to whoever reaches them, token or not)."""

from __future__ import annotations

import asyncio
import ipaddress
import signal

from starlette.applications import Starlette

from ..config import Config, admin_token
from ..http import serve
from ..log import get_logger
from ..queue.api import AsyncQueue, connect_async
from ..queue.errors import JobvisorError
from ..redact import redact_url
from .app import app

POOL_SIZE = 4

log = get_logger("web")


class NotMigrated(JobvisorError):
    """The database's schema is older than this jobvisor's."""


def dashboard(queue: AsyncQueue, config: Config) -> Starlette:
    """The dashboard over `queue` as the settings and `JOBVISOR_ADMIN_TOKEN` say."""
    return app(
        queue,
        admin_token=admin_token(),
        secure_cookie=config.dashboard_secure_cookie,
        trust_proxy=config.dashboard_trust_proxy,
    )


def loopback(host: str) -> bool:
    """Whether `host` (an address or a name) reaches this host only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def warn_if_exposed(host: str, port: int, *, read_only: bool) -> None:
    """Log a warning when the dashboard listens on `host` beyond loopback."""
    if loopback(host):
        return
    log.warning(
        "web.exposed",
        addr=f"{host}:{port}",
        actions="none (read-only)" if read_only else "with the admin token",
        detail="the dashboard listens beyond this host and its pages show every job's"
        " payload, result and errors to whoever reaches it, without a login: listen on"
        " 127.0.0.1, or only behind a proxy that authenticates",
    )


async def run(config: Config) -> None:
    """Serve the dashboard on `config.web_addr` until SIGINT or SIGTERM.
    Raises `NotMigrated`, a `JobvisorError` when the database cannot be
    reached, OSError when the address cannot be bound."""
    queue = connect_async(config.database_url, pool_size=POOL_SIZE, **config.connection())
    try:
        readiness = await queue.check()
        if not readiness.migrated:
            raise NotMigrated(
                f"the database's schema is version {readiness.schema_version}, this jobvisor"
                f" needs {readiness.latest_version}: run `jobvisor migrate` first"
            )
        token = admin_token()
        server = await serve(dashboard(queue, config), config.web_addr)
        host, port = server.address
        warn_if_exposed(host, port, read_only=token is None)
        log.info(
            "web.serving",
            url=f"http://{host}:{port}/",
            database=redact_url(config.database_url),
            actions="allowed with the admin token" if token else "none (read-only)",
        )
        # The handlers before the line that says it serves: a SIGTERM sent on
        # reading it stops it cleanly.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        print(f"dashboard on http://{host}:{port}/ (Ctrl-C stops it)", flush=True)
        try:
            await stop.wait()
        finally:
            await server.close()
    finally:
        await queue.close()
