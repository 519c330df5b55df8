"""How one execution of a job ended: the vocabulary the worker, its metrics,
its spans and its logs share."""

from __future__ import annotations

import enum


class Outcome(enum.StrEnum):
    """How one execution of a job ended, as the metrics, the spans and the
    logs name it."""

    COMPLETED = "completed"
    FAILED = "failed"  # will be retried
    DEAD = "dead"  # failed on its last attempt
    RELEASED = "released"  # given back on a stop, attempt not counted
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"  # its lease was lost: the result was dropped
