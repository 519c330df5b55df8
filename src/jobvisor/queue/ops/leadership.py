"""Leadership: a named lease one process holds at a time (the scheduler,
maintenance)."""

from __future__ import annotations

from .. import validate
from ..plan import Plan, Steps, Stmt
from .context import Ctx

# --- leadership ---------------------------------------------------------------


def leader_attempt_elect(ctx: Ctx, name: str, holder: str, *, ttl: float) -> Plan[bool]:
    """Take or keep the leadership `name` for `ttl` seconds; True if `holder` leads."""
    ttl = validate.seconds("ttl", ttl, low=validate.MIN_LEASE, high=validate.MAX_LEASE)
    params = {"name": name, "holder": holder, "ttl": ttl, "now": ctx.now()}
    sql = ctx.dialect.sql.LEADER_ATTEMPT_ELECT

    def steps() -> Steps[bool]:
        row = yield Stmt(sql, params, fetch="one")
        return row is not None

    return Plan(steps(), transaction=False)


def leader_resign(ctx: Ctx, name: str, holder: str) -> Plan[None]:
    """Give up the leadership at once, if `holder` has it."""
    sql = ctx.dialect.sql.LEADER_RESIGN

    def steps() -> Steps[None]:
        yield Stmt(sql, {"name": name, "holder": holder})

    return Plan(steps(), transaction=False)
