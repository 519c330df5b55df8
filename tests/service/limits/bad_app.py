"""An app whose handler declares a rate that means nothing: `jobvisor run` exits 78."""

from __future__ import annotations

from jobvisor.worker import JobContext, Registry

registry = Registry()


@registry.handler("t", rate="fast")
async def t(job: JobContext) -> None:
    """Never runs: the app does not import."""
