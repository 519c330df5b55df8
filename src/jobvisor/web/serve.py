"""`jobvisor web`: the dashboard alone, against any database URL, until
SIGINT or SIGTERM. It changes no schema: a database not yet migrated is
refused with the command that migrates it."""

from __future__ import annotations

import asyncio
import signal

from ..config import Config, admin_token
from ..http import serve
from ..log import get_logger
from ..queue.api import connect_async
from ..queue.errors import JobvisorError
from ..queue.redact import redact_url
from .app import app

POOL_SIZE = 4

log = get_logger("web")


class NotMigrated(JobvisorError):
    """The database's schema is older than this jobvisor's."""


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
        server = await serve(app(queue, admin_token=token), config.web_addr)
        host, port = server.address
        log.info(
            "web.serving",
            url=f"http://{host}:{port}/",
            database=redact_url(config.database_url),
            actions="allowed with the admin token" if token else "none (read-only)",
        )
        print(f"dashboard on http://{host}:{port}/ (Ctrl-C stops it)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            await server.close()
    finally:
        await queue.close()
