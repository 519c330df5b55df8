"""The one exponential backoff every retry in jobvisor uses.

A job's retry, a worker loop's reconnect and a worker slot's restart all wait
`backoff(n, base=…, cap=…)` before try n+1: doubled per try up to `cap`, with
jitter so that many waiters that failed together do not retry together.
"""

from __future__ import annotations

import random
import uuid

# 2**62 stays an exact float and far beyond any cap; a larger exponent would
# only overflow for nothing.
_MAX_DOUBLINGS = 62


# A retry's draw steps by this much (65536 / golden ratio) per attempt, so one
# job's successive draws land far apart in [0, 1).
_DRAW_STEP = 40503


def backoff(
    attempt: int, *, base: float, cap: float, jitter: float = 0.5, draw: float | None = None
) -> float:
    """Seconds to wait after failure number `attempt` (1 for the first).

    The un-jittered delay is `base * 2**(attempt - 1)`, capped at `cap`; the
    result lies between `(1 - jitter)` of it and all of it, so `jitter=0`
    gives the exact delay and `jitter=1` full jitter. Where in that range is
    `draw` (0 to 1: 0 is the whole delay), a random one when None.
    """
    doublings = max(0, min(attempt - 1, _MAX_DOUBLINGS))
    delay = min(cap, base * 2.0**doublings)
    return delay * (1.0 - jitter * (random.random() if draw is None else draw))


def retry_draw(job_id: uuid.UUID, attempt: int) -> float:
    """A job's jitter draw after failed attempt `attempt`, in [0, 1): fixed
    by the job and the attempt, so the same failure always waits the same,
    and spread over jobs by the random low bits of their ids.

    The reaper's statements compute the very same number in SQL (the low 16
    bits of the id, plus `attempt` steps of 40503, modulo 65536): a retry
    needs no volatile function inside an UPDATE."""
    return ((job_id.int & 0xFFFF) + attempt * _DRAW_STEP) % 65536 / 65536
