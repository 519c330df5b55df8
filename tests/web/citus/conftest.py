"""The dashboard on a Citus cluster: the cluster tests' database
(tests/contract/citus/conftest.py), its queues, and the dashboard's own, in
Citus mode; the dashboard fixtures of tests/web/conftest.py serve it."""

from __future__ import annotations

from tests.contract.citus.conftest import (  # noqa: F401
    citus_mode,
    citus_url,
    connect_options,
    url,
)
