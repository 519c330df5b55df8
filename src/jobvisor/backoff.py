"""The one exponential backoff every retry in jobvisor uses.

A job's retry, a worker loop's reconnect and a worker slot's restart all wait
`backoff(n, base=…, cap=…)` before try n+1: doubled per try up to `cap`, with
jitter so that many waiters that failed together do not retry together.
"""

from __future__ import annotations

import random

# 2**62 stays an exact float and far beyond any cap; a larger exponent would
# only overflow for nothing.
_MAX_DOUBLINGS = 62


def backoff(attempt: int, *, base: float, cap: float, jitter: float = 0.5) -> float:
    """Seconds to wait after failure number `attempt` (1 for the first).

    The un-jittered delay is `base * 2**(attempt - 1)`, capped at `cap`; the
    result is a uniform draw between `(1 - jitter)` of it and all of it, so
    `jitter=0` gives the exact delay and `jitter=1` full jitter.
    """
    doublings = max(0, min(attempt - 1, _MAX_DOUBLINGS))
    delay = min(cap, base * 2.0**doublings)
    return delay * (1.0 - jitter * random.random())
