"""`jobvisor web`: the dashboard served alone, on JOBVISOR_WEB_ADDR."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from ..config import FLAG_DEST, Config
from ..log import setup_logging
from .args import _database_flag, _subcommand
from .common import EXIT_OK, OperationFailed, UsageError


def cmd_web(args: argparse.Namespace, config: Config) -> int:
    if not config.web_addr:
        raise UsageError("JOBVISOR_WEB_ADDR is empty: expected host:port")
    # Imported here: only this command (and `run` with the dashboard on) needs it.
    from ..web import serve  # noqa: PLC0415

    setup_logging(config.log_format, config.log_level)
    try:
        asyncio.run(serve.run(config))
    except OSError as exc:
        raise OperationFailed(f"cannot serve on {config.web_addr}: {exc}") from None
    return EXIT_OK


def add_web(commands: Any) -> None:
    """Add `jobvisor web` to the top-level parser."""
    web = _subcommand(
        commands,
        "web",
        "serve the dashboard on JOBVISOR_WEB_ADDR (127.0.0.1:8080) until Ctrl-C",
        cmd_web,
    )
    _database_flag(web)
    web.add_argument(
        "--web-addr", dest=FLAG_DEST + "web_addr", metavar="HOST:PORT", help="where to listen"
    )
