"""jobvisor in an ASGI application (FastAPI, Starlette, any framework with a
lifespan): one `AsyncQueue` opened at start-up, closed at shutdown.

    from fastapi import FastAPI, Request
    import jobvisor.asgi

    app = FastAPI(lifespan=jobvisor.asgi.lifespan(registry=registry))

    @app.post("/reports")
    async def create(request: Request) -> dict[str, Any]:
        job_id = await build_report.enqueue_async(month="2026-05")
        job = await jobvisor.asgi.queue(request).wait(job_id, timeout=10)
        return {"status": job.status, "result": job.result}

The lifespan connects to `url` (default: `JOBVISOR_DATABASE_URL`, as `jobvisor
run` reads it), binds the queue on `registry` so its tasks' `enqueue_async`
goes there, and hands the queue to the framework as lifespan state under
"jobvisor_queue" (`request.state.jobvisor_queue`; `queue(request)` reads it).
An app with a lifespan of its own enters this one inside it:

    @contextlib.asynccontextmanager
    async def app_lifespan(app):
        async with jobvisor.asgi.lifespan(registry=registry)(app) as state:
            ...                                # the app's own start-up
            yield state

The queue's pool is opened by its first call (`migrate=True` makes that call
at start-up, creating or upgrading the schema); closing it waits for the
calls in flight. Nothing here imports an ASGI framework.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from .config import Config
from .queue.api import AsyncQueue, connect_async
from .worker.registry import Registry

STATE_KEY = "jobvisor_queue"

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[dict[str, Any]]]


def lifespan(
    url: str | None = None,
    *,
    registry: Registry | None = None,
    migrate: bool = False,
    **connect_options: Any,
) -> Lifespan:
    """A lifespan (`FastAPI(lifespan=...)`, `Starlette(lifespan=...)`) that
    opens an `AsyncQueue` on `url` (default: the `JOBVISOR_DATABASE_URL`
    setting, with `JOBVISOR_PGBOUNCER` and `JOBVISOR_LISTEN_URL`) with
    `connect_options` (those of `connect_async`), binds it on
    `registry` while the app runs, and closes it at shutdown. A bad URL or
    option raises `InvalidArgument` at start-up, a bad setting `ConfigError`."""

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[dict[str, Any]]:
        target, options = url, connect_options
        if target is None:  # the settings', PgBouncer's included
            config = Config.load()
            target, options = config.database_url, {**config.connection(), **connect_options}
        aq = connect_async(target, **options)
        try:
            if migrate:
                await aq.migrate()
            with registry.bind(aq) if registry is not None else contextlib.nullcontext():
                yield {STATE_KEY: aq}
        finally:
            await aq.close()

    return run


def queue(request: Any) -> AsyncQueue:
    """The `AsyncQueue` the lifespan opened, from a request (or anything with
    the framework's `.state`): call it from a dependency taking the framework's
    `Request`. `LookupError` when the app was started without `lifespan`."""
    aq = getattr(request.state, STATE_KEY, None)
    if not isinstance(aq, AsyncQueue):
        raise LookupError(
            "no jobvisor queue in the request's state: start the app with "
            "lifespan=jobvisor.asgi.lifespan(...)"
        )
    return aq
