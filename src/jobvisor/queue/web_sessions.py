"""The dashboard's logged-in sessions, kept in the database so that every
process serving the dashboard (each supervisor's, `jobvisor web`) sees a
login and a logout alike: a signed cookie names its session, and the
session acts only while its row is here.

The caller passes a digest of the session id, never the id: the table holds
nothing a reader of the database could present as a cookie."""

from __future__ import annotations

from . import validate
from .ops import Ctx
from .plan import Plan, Steps, Stmt

MAX_SESSION_BYTES = 128  # a hex SHA-256 takes 64


def _digest(session: str) -> str:
    return validate.text("session", session, max_bytes=MAX_SESSION_BYTES)


def web_session_start(ctx: Ctx, session: str, *, ttl: float) -> Plan[None]:
    """Record a login: session `session` may act for `ttl` seconds, or until
    `web_session_end`. Sessions past their expiry are deleted on the way."""
    params = {
        "id": _digest(session),
        "ttl": validate.seconds("ttl", ttl, positive=True, high=validate.MAX_DELAY),
        "now": ctx.now(),
    }
    sql = ctx.dialect.sql

    def steps() -> Steps[None]:
        yield Stmt(sql.WEB_SESSION_PRUNE, {"now": params["now"]})
        yield Stmt(sql.WEB_SESSION_START, params)

    return Plan(steps())


def web_session_alive(ctx: Ctx, session: str) -> Plan[bool]:
    """Whether session `session` may act: started, not ended, not expired."""
    params = {"id": _digest(session), "now": ctx.now()}
    sql = ctx.dialect.sql.WEB_SESSION_ALIVE

    def steps() -> Steps[bool]:
        return (yield Stmt(sql, params, fetch="one")) is not None

    return Plan(steps(), write=False, transaction=False)


def web_session_end(ctx: Ctx, session: str) -> Plan[None]:
    """Record a logout: session `session` acts no more, in any process."""
    params = {"id": _digest(session)}
    sql = ctx.dialect.sql.WEB_SESSION_END

    def steps() -> Steps[None]:
        yield Stmt(sql, params)

    return Plan(steps(), transaction=False)
