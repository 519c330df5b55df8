"""procrastinate's app (`procrastinate --app=procrastinate_app.app worker`): one no-op task."""

from __future__ import annotations

import os

from common import record_start
from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=os.environ["PEER_DSN"]))


@app.task(name="noop")
async def noop(n: int = 0) -> None:
    record_start(n)
