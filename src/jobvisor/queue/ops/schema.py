"""The schema: migration files, `migrate`, and the readiness and version
checks."""

from __future__ import annotations

import functools
from importlib import resources

from ..plan import Plan, Script, Steps, Stmt
from ..reports import Readiness
from .context import Ctx

# --- schema -------------------------------------------------------------------


def migration_files(engine: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration shipped for an engine, in order."""
    folder = resources.files("jobvisor.queue").joinpath("migrations", engine)
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def migrate(ctx: Ctx) -> Plan[list[int]]:
    """Apply every migration not yet recorded, under a lock, in one transaction.
    Returns the versions applied by this call (empty when already current)."""
    sql = ctx.dialect.sql

    def steps() -> Steps[list[int]]:
        yield Stmt(sql.MIGRATION_LOCK, fetch="all")
        yield Stmt(sql.MIGRATIONS_TABLE_CREATE)
        applied = {row[0] for row in (yield Stmt(sql.MIGRATIONS_APPLIED, fetch="all"))}
        done = []
        for version, name, script in migration_files(ctx.dialect.name):
            if version in applied:
                continue
            yield Script(script)
            yield Stmt(sql.MIGRATION_RECORD, {"version": version, "name": name})
            done.append(version)
        if ctx.dialect.bucket_count:
            yield from ctx.dialect.distribute()
        return done

    return Plan(steps())


@functools.cache
def latest_version(engine: str) -> int:
    """The newest migration shipped for an engine."""
    return max(version for version, _, _ in migration_files(engine))


def check(ctx: Ctx) -> Plan[Readiness]:
    """Whether the database answers and its schema is current, changing nothing.

    Raises `DatabaseUnavailable` when the database cannot be reached (at once
    when no connection was ever made), `DatabaseRefused` when the server
    refuses the connection (a wrong password, an unknown database)."""
    sql = ctx.dialect.sql
    engine = ctx.dialect.name

    def steps() -> Steps[Readiness]:
        (exists,) = yield Stmt(sql.MIGRATIONS_TABLE_EXISTS, fetch="one")
        version = 0
        if exists:
            rows = yield Stmt(sql.MIGRATIONS_APPLIED, fetch="all")
            version = max((r[0] for r in rows), default=0)
        return Readiness(
            engine=engine, schema_version=version, latest_version=latest_version(engine)
        )

    return Plan(steps(), write=False, transaction=False)


def schema_version(ctx: Ctx) -> Plan[int]:
    """The highest applied migration version (0 for an empty database).

    It takes the migration lock too: creating the record table races a
    concurrent `migrate()` on a fresh PostgreSQL database otherwise."""
    sql = ctx.dialect.sql

    def steps() -> Steps[int]:
        yield Stmt(sql.MIGRATION_LOCK, fetch="all")
        yield Stmt(sql.MIGRATIONS_TABLE_CREATE)
        rows = yield Stmt(sql.MIGRATIONS_APPLIED, fetch="all")
        return max((r[0] for r in rows), default=0)

    return Plan(steps())
