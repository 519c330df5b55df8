"""The claim's stateful heuristics and their tuning: which claims to try
(`LimitsSeen`) and where to start reading (`ClaimBounds`). Only hints for
where to look; never what decides a limit or which job is claimed."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from ..model import (
    Job,
)

# How long a claim trusts what it last saw of the limits: a claim that found
# no limited group relevant to it skips the limited claim (a transaction and
# a statement more) for this long. A limit set meanwhile is obeyed at once (the
# plain claim skips limited groups by itself); its jobs wait this long at most.
LIMITS_RECHECK = 1.0
# While limited groups are in play, a plain claim that came back short (no
# more unlimited jobs were due) is not tried again for this long: with a
# backlog of limited jobs it reads past all of them each time. An unlimited
# job enqueued meanwhile waits this long at most.
PLAIN_RECHECK = 0.05
# Claims are bounded (`ClaimBounds`) only while the full claim is slow: it took
# at least FULL_CLAIM_SLOW (below). Then a bounded claim is followed by a full
# one at least this often, and whenever it comes back short: a job behind the
# bound (released, reaped, of a resumed queue, enqueued with an older run_at
# or committed late, a retry come due) waits this long at most while the
# bounded claims find work.
FULL_CLAIM_EVERY = 1.0
# ... unless the full claim is slow: then it waits this many times its own
# last duration, so it takes at most a twentieth of the claim loop's time.
FULL_CLAIM_SPACING = 20.0
# A full claim that took at least FULL_CLAIM_SLOW seconds reads a dead head
# (the entries of claimed jobs an open transaction keeps from vacuum, which
# the bounded claim skips): the claims that follow are bounded until a full
# claim is fast again. Once bounded, a full claim counts as slow while it
# takes this many times the bounded claim that found nothing, too: a machine
# that is slow slows both alike.
FULL_CLAIM_SLOW_RATIO = 10.0
FULL_CLAIM_SLOW = 0.05
# A full claim that filled a batch of at least SATURATED_BATCH jobs (the
# claimers cannot keep up: a backlog drains) is slow from this share of
# FULL_CLAIM_SLOW on: there the dead head the claims leave behind them between
# two vacuums costs throughput long before it costs 50 ms a claim (on a
# draining backlog of 10 million, the rate fell from 39,000 to 16,000 jobs/s
# a minute after each vacuum). A full claim of a few jobs keeps strict claim
# order until it is really slow: a machine that is merely busy slows it too.
SATURATED_BATCH = 10
SATURATED_SLOW_SHARE = 0.1


class LimitsSeen:
    """What this queue's claims last saw of the limits, per claim filter:
    whether a limited group was relevant, and when that was looked at; and
    when the plain claim last came back short. Only hints for which claims
    to try; never what decides a limit."""

    __slots__ = ("_dry", "_seen", "_turn")

    def __init__(self) -> None:
        self._seen: dict[Any, tuple[bool, float]] = {}
        self._dry: dict[Any, float] = {}
        self._turn = False

    def worth_trying(self, key: Any) -> bool:
        present, at = self._seen.get(key, (True, 0.0))
        return present or time.monotonic() - at >= LIMITS_RECHECK

    def present(self, key: Any) -> bool:
        """Whether the last look found a limited group this filter concerns
        (True before any look)."""
        return self._seen.get(key, (True, 0.0))[0]

    def saw(self, key: Any, present: bool) -> None:
        self._seen[key] = (present, time.monotonic())

    def limited_first(self, key: Any) -> bool:
        """Every other claim takes limited jobs first, so a backlog of others
        filling each batch does not starve them."""
        self._turn = not self._turn
        return self._turn and self.present(key)

    def plain_worth_trying(self, key: Any) -> bool:
        """Whether to run the plain claim beside a limited one: not for
        `PLAIN_RECHECK` after it found fewer jobs than it asked for (it read
        past every limited job to learn that)."""
        return time.monotonic() - self._dry.get(key, -PLAIN_RECHECK) >= PLAIN_RECHECK

    def plain_came_back(self, key: Any, *, short: bool) -> None:
        if short:
            self._dry[key] = time.monotonic()
        else:
            self._dry.pop(key, None)

    def forget(self) -> None:
        """A limit changed through this queue: look again at the next claim
        (and start the turns again)."""
        self._seen.clear()
        self._dry.clear()
        self._turn = False


Position = tuple[int, Any, Any]
"""A job's place in claim order: (-priority, run_at, id), as a `Job` has them."""


class ClaimBounds:
    """Where this queue's claims left off in claim order, per claim filter.

    Each claimed job leaves an entry in the claim index that is dead once its
    claim commits, all of them before the first claimable job in index
    order. Vacuum removes them, but only once no snapshot may still see the
    rows: while some transaction of the server stays open, they pile up and a
    claim that starts at the head of the index reads them all (and each one's
    row in the table). A bounded claim (JOB_CLAIM_AFTER) starts its scan past
    the last job this queue claimed instead, so it reads only what other
    claimers took since. Bounded claims run only while the full claim is
    slow (FULL_CLAIM_SLOW, or a tenth of it for a full claim that filled a
    batch: SATURATED_BATCH): on a table vacuum keeps clean every claim is a
    full one, in strict claim order. Jobs that land behind the bound are the
    full claim's: it runs when there is no bound, when the bounded claim
    comes back short (for the rest), and at least every FULL_CLAIM_EVERY seconds; while it is
    slow (it reads the dead head: FULL_CLAIM_SLOW_RATIO), no sooner than
    FULL_CLAIM_SPACING times its last duration after the last one. Only a
    hint for where to look: a lost or stale bound costs a full claim, never
    a job."""

    __slots__ = ("_bounds", "_full")

    def __init__(self) -> None:
        self._bounds: dict[Any, Position] = {}
        # The last full claim: its end, its duration, whether it was slow.
        self._full: dict[Any, tuple[float, float, bool]] = {}

    def bound(self, key: Any) -> Position | None:
        """The bound for the next claim with this filter, or None when it is
        to be a full claim: always while the last full claim was fast."""
        end, took, slow = self._full.get(key, (-math.inf, 0.0, False))
        if not slow:
            return None
        if time.monotonic() - end >= max(FULL_CLAIM_EVERY, took * FULL_CLAIM_SPACING):
            return None
        return self._bounds.get(key)

    def full_after_dry(self, key: Any, took: float) -> bool:
        """Whether a bounded claim that came back short (in `took` seconds) is
        followed by a full one now: unless the last full claim was slow and
        recent."""
        end, full_took, _ = self._full.get(key, (-math.inf, 0.0, False))
        if full_took < max(FULL_CLAIM_SLOW, FULL_CLAIM_SLOW_RATIO * took):
            return True
        return time.monotonic() - end >= FULL_CLAIM_SPACING * full_took

    def claimed(
        self, key: Any, jobs: Sequence[Job], *, full: bool, took: float = 0.0, asked: int = 0
    ) -> None:
        """A claim with this filter took `jobs`: the bound moves to the last
        of them in claim order (after a full claim, even backwards: the
        bounded claims go on from where it stopped). `took` is a full
        claim's duration in seconds, `asked` its limit."""
        if full:
            saturated = len(jobs) == asked >= SATURATED_BATCH
            slow = took >= FULL_CLAIM_SLOW * (SATURATED_SLOW_SHARE if saturated else 1.0)
            self._full[key] = (time.monotonic(), took, slow)
        if not jobs:
            return
        last = max((-j.priority, j.run_at, j.id) for j in jobs)
        old = self._bounds.get(key)
        if full or old is None or last > old:
            self._bounds[key] = last

    def forget(self) -> None:
        """Jobs went back behind the bounds through this queue (released, a
        queue resumed): the next claims are full ones."""
        self._bounds.clear()
        self._full.clear()


class BucketHints:
    """Where this queue's claims on a Citus cluster take from (`drivers.citus`),
    per claim filter: the bucket its last full claim came from. A claim goes
    back there first, so a busy claimer runs one statement per claim, on one
    shard, and its completions go to that shard too; it looks across the
    shards for the bucket of the most urgent due job again when that bucket
    comes back short, and every `REFRESH` claims even when it does not, so
    no bucket waits long behind another that keeps filling."""

    REFRESH = 16

    def __init__(self) -> None:
        self._bucket: dict[Any, Any] = {}
        self._claims: dict[Any, int] = {}
        self._heard: Any = None

    def heard(self, bucket: Any) -> None:
        """A new job's notice named its bucket: the next claim tries it first."""
        self._heard = bucket

    def take_heard(self) -> Any:
        """The bucket a notice named since the last claim (None: none), once."""
        heard, self._heard = self._heard, None
        return heard

    def bucket(self, key: Any) -> Any:
        """The bucket value to try first, or None to look across the shards."""
        count = self._claims.get(key, 0) + 1
        self._claims[key] = count
        return None if count % self.REFRESH == 0 else self._bucket.get(key)

    def full(self, key: Any, bucket: Any) -> None:
        self._bucket[key] = bucket

    def short(self, key: Any) -> None:
        self._bucket.pop(key, None)
