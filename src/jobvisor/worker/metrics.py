"""Counters a worker gathers between two `metrics` messages to its parent.

Cheap on the hot path: one dict increment per outcome and one bisect per
handler run. The message shape is documented in `protocol`."""

from __future__ import annotations

import bisect
from typing import Any

from .protocol import DURATION_BUCKETS, MAX_MESSAGE_BYTES, OUTCOMES, encode

_Key = tuple[str, str]


class Metrics:
    """Outcome counts and handler-duration histograms by (queue, job_type)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str], int] = {}
        self._durations: dict[_Key, list[float]] = {}  # bucket counts..., then the sum

    def count(self, queue: str, job_type: str, outcome: str, n: int = 1) -> None:
        assert outcome in OUTCOMES, outcome
        key = (queue, job_type, outcome)
        self._counts[key] = self._counts.get(key, 0) + n

    def observe(self, queue: str, job_type: str, seconds: float) -> None:
        row = self._durations.get((queue, job_type))
        if row is None:
            row = self._durations[(queue, job_type)] = [0.0] * (len(DURATION_BUCKETS) + 2)
        row[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def take(self) -> list[dict[str, Any]]:
        """The messages that report everything since the last call (none when
        nothing happened), each small enough for one atomic pipe write."""
        counts = [[q, t, o, n] for (q, t, o), n in self._counts.items()]
        durations = [
            [q, t, [int(c) for c in row[:-1]], round(row[-1], 6)]
            for (q, t), row in self._durations.items()
        ]
        self._counts = {}
        self._durations = {}
        rows = [("counts", row) for row in counts] + [("durations", row) for row in durations]
        messages: list[dict[str, Any]] = []
        message: dict[str, Any] = {}
        size = 0
        for field, row in rows:
            row_size = len(encode({"r": row}))
            if not message or size + row_size > MAX_MESSAGE_BYTES:
                message = {"t": "metrics", "counts": [], "durations": []}
                messages.append(message)
                size = len(encode(message))
            message[field].append(row)
            size += row_size
        return messages
