"""The queue's contract suite, through PgBouncer in transaction pooling.

Every test of the contract modules that works on the `queue`-style fixtures
only (and on `url` for its own reads) runs again here, the fixtures opening
their queues with `pgbouncer=True` on this test's database behind PgBouncer
(`tests/contract/pgbouncer/conftest.py` overrides them). A test that opens a queue of
its own, or needs a particular engine, stays in its module (`tests.support.rerun`)."""

from __future__ import annotations

from tests.support.rerun import rerun

# The contract modules whose tests run again here.
CONTRACT = (
    "admin", "async", "cancel", "claim", "enqueue", "limits", "outcomes", "pause", "results",
    "unique", "wait",
)  # fmt: skip

globals().update(rerun(CONTRACT))
