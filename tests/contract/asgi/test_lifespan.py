"""`jobvisor.asgi.lifespan`: the queue opened, bound and closed with the
app; the URL from the environment by default; a clear error without it."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from jobvisor import AsyncQueue, InvalidArgument, Registry, asgi
from jobvisor.settings import ConfigError

registry = Registry()


@registry.task
async def double(n: int) -> int:
    return 2 * n


def test_the_lifespan_opens_binds_and_closes_the_queue(url: str) -> None:
    async def main() -> tuple[Any, Any]:
        async with asgi.lifespan(url, registry=registry, migrate=True)(None) as state:
            aq = state[asgi.STATE_KEY]
            assert isinstance(aq, AsyncQueue)
            assert registry.bound(AsyncQueue) is aq
            job = await aq.get(await double.enqueue_async(21))
            request = types.SimpleNamespace(state=types.SimpleNamespace(**state))
            assert asgi.queue(request) is aq
        return job.payload, registry.bound(AsyncQueue)

    payload, bound_after = asyncio.run(main())
    assert payload == {"n": 21}
    assert bound_after is None


def test_the_url_comes_from_the_environment(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBVISOR_DATABASE_URL", sqlite_url)

    async def main() -> str:
        async with asgi.lifespan(migrate=True)(None) as state:
            return str(state[asgi.STATE_KEY].url)

    assert asyncio.run(main()) == sqlite_url


def test_bad_settings_stop_the_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    async def start(url: str | None) -> None:
        async with asgi.lifespan(url)(None):
            pass

    with pytest.raises(InvalidArgument, match="unknown scheme 'mysql'"):
        asyncio.run(start("mysql://db/app"))
    monkeypatch.setenv("JOBVISOR_DATABASE_URL", "nope")
    with pytest.raises(ConfigError, match="JOBVISOR_DATABASE_URL"):
        asyncio.run(start(None))


def test_queue_says_when_the_app_has_no_lifespan() -> None:
    request = types.SimpleNamespace(state=types.SimpleNamespace())
    with pytest.raises(LookupError, match=r"lifespan=jobvisor\.asgi\.lifespan"):
        asgi.queue(request)
