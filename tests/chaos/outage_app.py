"""The chaos app (`tests.chaos.app`), for workers that may boot while the
database is away (`JOBVISOR_APP=tests.chaos.outage_app:registry`).

At import, in the worker, it connects to the database once; when that fails
the process exits `ExitCode.UNAVAILABLE` at once, as a worker does that
cannot reach the database within its boot timeout, without making every
scenario wait for that timeout."""

from __future__ import annotations

import os
import sys

import psycopg

from jobvisor.exitcodes import ExitCode
from jobvisor.queue.api import parse_url

from .app import registry

__all__ = ["registry"]


def _database_answers(url: str) -> bool:
    try:
        with psycopg.connect(parse_url(url)[1], connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


if not _database_answers(os.environ["JOBVISOR_DATABASE_URL"]):
    sys.exit(ExitCode.UNAVAILABLE)
