"""SQLite's values: ids as text, times as epoch seconds, lists as JSON."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import (
    Mapping,
    Sequence,
)
from typing import Any

from ...model import UTC, Job
from ...plan import Dialect, SqlSet
from ..shared import _CLAIM_COLUMNS, _STATUS, OneTable, _left_behind, _meta_json
from . import sql as sql_sqlite


def _epoch(value: dt.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _from_epoch(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, UTC)


class SqliteDialect(OneTable):
    """SQLite stores ids as text, claim tokens as 32 hex digits, times as Unix
    epoch seconds, payloads and meta as JSON text, and receives lists as JSON."""

    name = "sqlite"
    sql: SqlSet = sql_sqlite
    notifies = False
    clock_slack = 0.0
    bounded_claim = False
    copy_types: tuple[str, ...] = ()

    def id(self, value: uuid.UUID) -> Any:
        return str(value)

    def time(self, value: dt.datetime | None) -> Any:
        return _epoch(value)

    def names(self, values: Sequence[str] | None) -> Any:
        return json.dumps(list(values)) if values else None

    def held(self, jobs: Sequence[Job]) -> dict[str, Any]:
        pairs = [[str(j.id), j.claim_token.hex if j.claim_token else None] for j in jobs]
        return {"pairs": json.dumps(pairs)}

    def token(self, job: Job) -> Any:
        return job.claim_token.hex if job.claim_token else None

    def claim_token(self, value: uuid.UUID) -> Any:
        return value.hex

    def results(self, jobs: Sequence[Job], results: Mapping[uuid.UUID, str] | None) -> Any:
        if not results:
            return None
        return json.dumps({str(j.id): results[j.id] for j in jobs if j.id in results})

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        return {"policies": json.dumps([list(r) for r in rows])}

    def keyed_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        return {"rows": json.dumps([[*row[:9], *row[10:]] for row in rows])}

    def id_out(self, value: Any) -> uuid.UUID:
        return uuid.UUID(value)

    def meta(self, value: dict[str, Any] | None) -> str | None:
        return _meta_json(value)

    def add_seconds(self, when: Any, seconds: float) -> Any:
        return when + seconds

    def job(self, row: Sequence[Any]) -> Job:
        job_id = uuid.UUID(row[0])
        return Job(
            job_id,
            row[1],
            row[2],
            json.loads(row[3]),
            row[4],
            dt.datetime.fromtimestamp(row[5], UTC),
            _STATUS[row[6]],
            row[7],
            row[8],
            row[9],
            row[10] or job_id.hex,  # NULL: the job's own id
            row[11],
            _from_epoch(row[12]),
            uuid.UUID(hex=row[13]) if row[13] else None,
            row[14],
            dt.datetime.fromtimestamp(row[15], UTC),
            _from_epoch(row[16]),
            _from_epoch(row[17]),
            json.loads(row[18]) if row[18] is not None else None,
            *(
                _left_behind(
                    [*row[:19], *(_json(v) for v in row[19:22]), *row[22:]], _from_epoch_at
                )
                if len(row) > _CLAIM_COLUMNS
                else ()
            ),
        )


def _json(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def _from_epoch_at(value: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, UTC)


SQLITE: Dialect = SqliteDialect()
