"""PostgreSQL's values: how its columns take and give back Python values."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import (
    Mapping,
    Sequence,
)
from typing import Any, Final

from ...model import Job
from ...plan import Dialect, SqlSet
from ..shared import _CLAIM_COLUMNS, _STATUS, OneTable, _from_iso, _left_behind, _meta_json
from . import sql as sql_postgres

# Each process reckons the database's time from its own reading of the server's
# clock (`DatabaseClock`): two readings may disagree by about half a round trip
# each, and a job one process enqueued "now" could look a few milliseconds
# ahead to another that claims right after. A PostgreSQL claim therefore takes
# jobs due up to this much ahead of its reading: a job never waits for the
# next poll for want of a millisecond, and none starts more than this early.
CLOCK_SLACK: Final = 0.05


class PostgresDialect(OneTable):
    """PostgreSQL takes Python values as they are; lists are arrays."""

    name = "postgres"
    sql: SqlSet = sql_postgres
    notifies = True
    clock_slack = CLOCK_SLACK
    bounded_claim = True
    copy_types: tuple[str, ...] = (
        *("uuid", "text", "text", "jsonb", "int4", "timestamptz", "int4"),
        *("text", "text", "timestamptz", "jsonb", "text"),
    )

    def id(self, value: uuid.UUID) -> Any:
        return value

    def time(self, value: dt.datetime | None) -> Any:
        return value

    def names(self, values: Sequence[str] | None) -> Any:
        return list(values) if values else None

    def held(self, jobs: Sequence[Job]) -> dict[str, Any]:
        return {"ids": [j.id for j in jobs], "tokens": [j.claim_token for j in jobs]}

    def token(self, job: Job) -> Any:
        return job.claim_token

    def claim_token(self, value: uuid.UUID) -> Any:
        return value

    def results(self, jobs: Sequence[Job], results: Mapping[uuid.UUID, str] | None) -> Any:
        return [results.get(j.id) for j in jobs] if results else None

    def keyed_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        names: tuple[str, ...] = ("ids", "queues", "job_types", "payloads", "priorities")
        names += ("run_ats", "max_attempts", "dedupe_keys", "correlation_ids", "created", "metas")
        names += ("concurrency_keys",)
        columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
        del columns["created"]  # the statement's own `now`
        return columns

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        return {
            "policy_types": [r[0] for r in rows],
            "policy_bases": [r[1] for r in rows],
            "policy_caps": [r[2] for r in rows],
            "policy_jitters": [r[3] for r in rows],
        }

    def id_out(self, value: Any) -> uuid.UUID:
        return value  # type: ignore[no-any-return]

    def meta(self, value: dict[str, Any] | None) -> str | None:
        return _meta_json(value)

    def add_seconds(self, when: Any, seconds: float) -> Any:
        return when + dt.timedelta(seconds=seconds)

    def job(self, row: Sequence[Any]) -> Job:
        # Positional, in Job's field order (the order every job query selects),
        # and the status by dict: keyword arguments and the enum's lookup were
        # most of a claim's client-side time (bench/queue_throughput.py).
        return Job(
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            _STATUS[row[6]],
            row[7],
            row[8],
            row[9],
            row[10] or row[0].hex,  # NULL: the job's own id (correlation.own_correlation_id)
            row[11],
            row[12],
            row[13],
            row[14],
            row[15],
            row[16],
            row[17],
            row[18],
            *(_left_behind(row, _from_iso) if len(row) > _CLAIM_COLUMNS else ()),
        )


POSTGRES: Dialect = PostgresDialect()
