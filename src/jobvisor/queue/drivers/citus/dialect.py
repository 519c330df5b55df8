"""The Citus mode's values: PostgreSQL's, plus each job's bucket.

A job's bucket is the low five bits of its id (`bucket_of`), so anything that
knows a job's id knows where it lives: a cancel, a completion or a read by id
goes to one shard with no lookup. A job with a dedupe or concurrency key
gets an id whose low bits are its key's (`keyed_id`): every job of a key
lives in one bucket, where the dedupe index sees them all. In the table, the
bucket column holds the value standing for the bucket (`jobvisor_buckets`,
one per shard), which `routing.Routing` reads once per process."""

from __future__ import annotations

import os
import uuid
import zlib
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, Final, cast

from ... import validate
from ...errors import InvalidArgument
from ...model import _uuid
from ...plan import Script, SqlSet, Steps, Stmt
from ..postgres.dialect import PostgresDialect
from . import sql as sql_citus
from .routing import Routing

BUCKETS: Final = 32
"""How many buckets (and shards) the jobs table has: fixed when `migrate`
distributes it (migrations/citus/distribute.sql)."""

_LOW: Final = BUCKETS - 1

BATCH_BUCKET_ROWS: Final = 512
"""How many jobs without a key of one bulk enqueue share a bucket."""


def bucket_of(job_id: uuid.UUID) -> int:
    """The bucket (0 to BUCKETS - 1) a job lives in."""
    return job_id.int & _LOW


def key_bucket(key: str) -> int:
    """The bucket every job of a dedupe or concurrency key lives in."""
    return zlib.crc32(key.encode("utf-8")) & _LOW


class CitusDialect(PostgresDialect):
    """PostgreSQL's values; statements that name each job's bucket."""

    # PostgreSQL's statements but those the module changes (its __getattr__).
    sql: SqlSet = cast(SqlSet, sql_citus)
    bucket_count = BUCKETS
    # The bounded claim's marks are a table of their own: a claim that wrote
    # them would write on two nodes. Each bucket's claim reads from its head.
    bounded_claim = False
    copy_types: tuple[str, ...] = (*PostgresDialect.copy_types, "int4")

    def __init__(self) -> None:
        self.values: tuple[int, ...] = ()

    def keyed_id(self, job_id: uuid.UUID, key: str | None) -> uuid.UUID:
        if key is None:
            return job_id
        return _uuid((job_id.int & ~_LOW) | key_bucket(key))

    def batch_ids(self, ids: list[uuid.UUID]) -> list[uuid.UUID]:
        """Each run of `BATCH_BUCKET_ROWS` ids in one bucket, its first id's:
        a bulk enqueue's COPY of jobs without a key writes to one shard per
        run, so a small one commits on one node (rows spread over every shard
        made each a two-phase commit over every node: 58 ms for 10 jobs on
        the test cluster against 2 ms). The buckets still spread evenly, call
        by call and run by run; the ids keep their order (the bits are the
        random ones)."""
        made = []
        for start in range(0, len(ids), BATCH_BUCKET_ROWS):
            bucket = ids[start].int & _LOW
            made += [
                _uuid((i.int & ~_LOW) | bucket) for i in ids[start : start + BATCH_BUCKET_ROWS]
            ]
        return made

    def bucket(self, job_id: uuid.UUID) -> int:
        """The bucket column's value for a job."""
        return self.values[bucket_of(job_id)]

    def route(self, steps: Steps[Any], now: Callable[[], Any]) -> Steps[Any]:
        return Routing(self, now).run(steps)

    def distribute(self) -> Steps[None]:
        (citus,) = yield Stmt(sql_citus.CITUS_EXTENSION, fetch="one")
        if not citus:
            raise InvalidArgument(
                "JOBVISOR_CITUS=on: the database has no citus extension (a Citus"
                " coordinator has it, with its worker nodes added)"
            )
        (done,) = yield Stmt(sql_citus.CITUS_DISTRIBUTED, fetch="one")
        if not done:
            folder = resources.files("jobvisor.queue").joinpath("migrations", "citus")
            yield Script(folder.joinpath("distribute.sql").read_text(encoding="utf-8"))

    def loaded(self, rows: Sequence[Sequence[Any]]) -> None:
        values = tuple(int(r[0]) for r in rows)
        if len(values) != BUCKETS:
            raise RuntimeError(
                f"jobvisor_buckets holds {len(values)} buckets, expected {BUCKETS}:"
                " run `jobvisor migrate` with JOBVISOR_CITUS=on"
            )
        self.values = values


def citus_mode(engine: str, citus: bool | None) -> bool:
    """Whether the queue runs in Citus mode: `citus`, else `JOBVISOR_CITUS`."""
    if citus is None:
        raw = os.environ.get("JOBVISOR_CITUS", "off")
        try:
            citus = validate.flag(raw)
        except ValueError:
            raise InvalidArgument(
                f"JOBVISOR_CITUS={raw!r}: expected on or off (also 1/0, true/false, yes/no)"
            ) from None
    elif not isinstance(citus, bool):
        raise InvalidArgument(f"citus={citus!r}: expected True, False or None")
    if citus and engine != "postgres":
        raise InvalidArgument("citus=True: expected a postgresql:// URL of a Citus coordinator")
    return citus
