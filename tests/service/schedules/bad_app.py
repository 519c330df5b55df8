"""An app whose schedule is refused at registration: `jobvisor run` exits 78."""

from __future__ import annotations

from jobvisor.worker.registry import Registry

registry = Registry()
registry.schedule("broken", cron="61 * * * *", job_type="tick")
