"""One event per line, whoever logs it: jobvisor's own events with their
fields, and the libraries' warnings (psycopg's pool, asyncio) in the same
format, so a JSON log stays one JSON object per line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from jobvisor.log import get_logger, setup_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    loggers = [logging.getLogger(), logging.getLogger("jobvisor")]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, handlers, level, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


def test_json_lines_for_jobvisor_events_and_library_warnings() -> None:
    stream = io.StringIO()
    setup_logging("json", "info", stream)
    get_logger("worker").info("job.completed", job_id="j1", attempt=2)
    logging.getLogger("psycopg.pool").warning("rolling back returned connection: %s", "<conn>")
    logging.getLogger("psycopg.pool").info("a library's chatter, below warning")
    try:
        raise ValueError("two\nlines")
    except ValueError:
        logging.getLogger("asyncio").exception("Task exception was never retrieved")

    lines = stream.getvalue().splitlines()
    events = [json.loads(line) for line in lines]  # every line is one JSON object
    assert len(events) == 3
    assert events[0]["logger"] == "worker" and events[0]["event"] == "job.completed"
    assert events[0]["job_id"] == "j1" and events[0]["attempt"] == 2
    assert events[1] == {
        "ts": events[1]["ts"],
        "level": "warning",
        "logger": "psycopg.pool",
        "event": "rolling back returned connection: <conn>",
    }
    assert events[2]["logger"] == "asyncio" and events[2]["level"] == "error"
    assert "ValueError: two\nlines" in events[2]["exception"]


def test_text_lines_name_the_library_logger() -> None:
    stream = io.StringIO()
    setup_logging("text", "debug", stream)
    logging.getLogger("psycopg.pool").warning("error connecting in 'pool-1'")
    logging.getLogger("psycopg.pool").debug("not shown: libraries log from warning up")
    (line,) = stream.getvalue().splitlines()
    assert "warning" in line and "psycopg.pool" in line and "error connecting" in line
