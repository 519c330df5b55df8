"""How fast one client may guess the admin token: a small token bucket per
client address, drawn on by every failed login and every refused `Bearer`.

A client whose bucket is empty is answered 429 with `Retry-After` before its
token is even compared, so a guesser gets `BURST` tries at once and then one
every `REFILL_SECONDS`, while an admin who mistypes is not slowed at all.
Each process keeps its own buckets (the dashboard of each supervisor, or
`jobvisor web`): with several, a guesser's rate is multiplied by their
number, still a few a minute. The table is bounded: at `MAX_CLIENTS`
addresses, the full buckets (which hold nothing worth keeping) go first,
then the least recently drawn on."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Final

BURST: Final = 10  # failures a client may make at once
REFILL_SECONDS: Final = 6.0  # then one more each this often (10 a minute)
MAX_CLIENTS: Final = 10_000


@dataclasses.dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class Throttle:
    """Failures allowed per client address. `clock` is monotonic seconds."""

    def __init__(
        self,
        *,
        burst: int = BURST,
        refill_seconds: float = REFILL_SECONDS,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = float(burst)
        self._refill = refill_seconds
        self._max_clients = max_clients
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def _level(self, client: str, now: float) -> float:
        bucket = self._buckets.get(client)
        if bucket is None:
            return self._burst
        return min(self._burst, bucket.tokens + (now - bucket.at) / self._refill)

    def retry_after(self, client: str) -> int:
        """Whole seconds until `client` may try again; 0 when it may now."""
        tokens = self._level(client, self._clock())
        return 0 if tokens >= 1 else math.ceil((1 - tokens) * self._refill)

    def failed(self, client: str) -> bool:
        """Count one failure of `client`; True when it emptied the bucket
        (the moment worth a log line)."""
        now = self._clock()
        tokens = max(0.0, self._level(client, now) - 1)
        self._buckets.pop(client, None)  # re-inserted last: the most recent
        self._buckets[client] = _Bucket(tokens, now)
        if len(self._buckets) > self._max_clients:
            self._prune(now)
        return tokens < 1

    def _prune(self, now: float) -> None:
        for client in [c for c in self._buckets if self._level(c, now) >= self._burst]:
            del self._buckets[client]
        while len(self._buckets) > self._max_clients:
            del self._buckets[next(iter(self._buckets))]
