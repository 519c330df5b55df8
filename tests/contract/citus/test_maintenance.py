"""The queue's maintenance on a Citus cluster, in Citus mode: schedules (their
table, and the leader's scheduler firing them), the supervisor's services
(leader election, the lease reaper, retention, the summary) and the metrics
gauges read from the queue's summary.

The tests of the modules below run again here (`tests.support.rerun`), on the
cluster's database (conftest.py). Left out: tests that ask for no database
fixture (they run the same on every engine). The dashboard's pages are
tests/web/citus."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from tests.contract.schedules.test_queue import q  # noqa: F401  (test_queue's fixture)
from tests.support.rerun import SHARED, rerun

# What a test asks for that reaches the database.
DATABASE = frozenset({"queue", "aqueue", "cqueue", "make_queue", "url", "q"})


def on_the_cluster(found: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The tests of `found` that ask for a database."""
    return {
        name: test
        for name, test in found.items()
        if DATABASE & set(inspect.signature(test).parameters)
    }


globals().update(
    on_the_cluster(
        rerun(
            ("queue", "scheduler"),
            package="tests.contract.schedules",
            shared=SHARED | {"q"},
            own_queues=True,
        )
    )
)
globals().update(
    on_the_cluster(rerun(("maintenance",), package="tests.contract.supervisor", own_queues=True))
)
globals().update(on_the_cluster(rerun(("metrics",), package="tests.contract.ops", own_queues=True)))
