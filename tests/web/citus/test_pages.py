"""The dashboard's pages over HTTP on a Citus cluster, in Citus mode: the
tests of tests/web/test_pages.py run again here (`tests.support.rerun`),
with the fixtures of conftest.py. Left out: tests that ask for no database
fixture (they run the same on every engine)."""

from __future__ import annotations

import inspect

from tests.support.rerun import SHARED, rerun

DATABASE = frozenset({"queue", "url", "dashboard", "read_only"})

globals().update(
    {
        name: test
        for name, test in rerun(
            ("pages",),
            package="tests.web",
            shared=SHARED | {"dashboard", "read_only"},
            own_queues=True,
        ).items()
        if DATABASE & set(inspect.signature(test).parameters)
    }
)
