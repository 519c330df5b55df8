"""The time of a statement on PostgreSQL: the server's clock, read now and
then."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Final

from . import sql as sql_postgres

# --- the time of a statement ----------------------------------------------------

# How long one reading of the database's clock is carried forward before the
# next: long enough that reading costs nothing, short enough that a server
# whose clock was stepped is followed within the minute.
CLOCK_REFRESH: Final = 60.0


class DatabaseClock:
    """The database server's time as this process reckons it, for the `now`
    parameter every statement takes (no statement that changes a row calls
    `now()`, see the SQL modules).

    It is read from the server (`CLOCK_SAMPLE`, taken to be midway through
    the round trip), when a pool opens a connection and whenever the last
    reading is older than `CLOCK_REFRESH`, and carried forward by this
    process's monotonic clock in between: times still come from the
    database's clock, to within half a round trip, and a step of this host's
    wall clock changes nothing."""

    def __init__(self) -> None:
        self._reading: tuple[dt.datetime, float] | None = None

    def due(self) -> bool:
        """Whether the server's clock should be read before the next statement."""
        reading = self._reading
        return reading is None or time.monotonic() - reading[1] > CLOCK_REFRESH

    def set(self, server: dt.datetime, before: float, after: float) -> None:
        """Record a reading: `server`'s time, read between these two
        monotonic instants."""
        self._reading = (server, (before + after) / 2)

    def read(self, cur: Any) -> None:
        """Read the server's clock on a psycopg cursor or connection."""
        before = time.monotonic()
        (server,) = cur.execute(sql_postgres.CLOCK_SAMPLE).fetchone()
        self.set(server, before, time.monotonic())

    async def read_async(self, cur: Any) -> None:
        """`read` on an async cursor or connection."""
        before = time.monotonic()
        (server,) = await (await cur.execute(sql_postgres.CLOCK_SAMPLE)).fetchone()
        self.set(server, before, time.monotonic())

    def now(self) -> dt.datetime:
        reading = self._reading
        if reading is None:
            raise RuntimeError("the database's clock was never read")
        server, at = reading
        return server + dt.timedelta(seconds=time.monotonic() - at)
