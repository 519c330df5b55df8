"""An ASGI application's lifespan opens its queue from the settings as
`jobvisor run` does, JOBVISOR_PGBOUNCER and JOBVISOR_LISTEN_URL included
(the service's own queues are exercised by test_burndown.py)."""

from __future__ import annotations

from typing import Any

import pytest

from jobvisor.asgi import STATE_KEY, lifespan
from jobvisor.config import Config
from tests.support.aio import run_async

BOUNCED = "postgresql://app@bouncer.internal:6432/app"
DIRECT = "postgresql://app@db.internal:5432/app"


async def _listens_in_lifespan() -> bool:
    async with lifespan()(None) as state:
        queue: Any = state[STATE_KEY]
        return bool(queue.listens)


@pytest.mark.parametrize(("listen_url", "listens"), [("", False), (DIRECT, True)])
def test_the_lifespan_reads_the_pgbouncer_settings(
    monkeypatch: pytest.MonkeyPatch, listen_url: str, listens: bool
) -> None:
    monkeypatch.setenv("JOBVISOR_DATABASE_URL", BOUNCED)
    monkeypatch.setenv("JOBVISOR_PGBOUNCER", "1")
    monkeypatch.setenv("JOBVISOR_LISTEN_URL", listen_url)
    assert Config.load().connection() == {
        "pgbouncer": True,
        "listen_url": listen_url or None,
        "citus": False,
    }
    assert run_async(_listens_in_lifespan) is listens
