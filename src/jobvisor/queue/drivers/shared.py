"""What both drivers share: decoding a job row's common columns, and the
driver's text in a wrapped error."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import (
    Callable,
    Sequence,
)
from typing import Any, Final

from ..model import JobStatus
from ..plan import Steps

_STATUS = {status.value: status for status in JobStatus}


def _meta_json(value: dict[str, Any] | None) -> str | None:
    """A job's `meta` as JSON text (both engines take text for it), or None."""
    return None if value is None else json.dumps(value, separators=(",", ":"))


# A claim reads the first 19 columns; `get` and the dead-job reads add what a
# job left behind (result, progress and errors) and its unique key.
_CLAIM_COLUMNS: Final = 19


def _from_iso(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def _left_behind(row: Sequence[Any], at: Callable[[Any], dt.datetime]) -> tuple[Any, ...]:
    """(result, progress, errors, unique_key) from the columns after the
    claim's, decoded; `at` turns an error entry's time into a datetime."""
    errors = row[21] or ()
    return (
        row[19],
        row[20],
        tuple({**entry, "at": at(entry["at"])} for entry in errors),
        row[22],
    )


# --- driver errors ------------------------------------------------------------


class OneTable:
    """What a dialect of one jobs table says where Citus mode's spreads it
    (see `Dialect.bucket_count`, `keyed_id`, `route`, `distribute`)."""

    bucket_count = 0

    def keyed_id(self, job_id: uuid.UUID, key: str | None) -> uuid.UUID:
        return job_id

    def batch_ids(self, ids: list[uuid.UUID]) -> list[uuid.UUID]:
        return ids

    def route(self, steps: Steps[Any], now: Callable[[], Any]) -> Steps[Any]:
        return steps

    def distribute(self) -> Steps[None]:
        raise NotImplementedError("one table: nothing to distribute")
