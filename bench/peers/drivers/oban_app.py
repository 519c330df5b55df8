"""oban's worker module (imported by `oban start` through the job's worker name)."""

from __future__ import annotations

from common import record_start
from oban import worker


@worker(queue="default")
class Noop:
    async def process(self, job):  # type: ignore[no-untyped-def]
        record_start(int(job.args.get("n", 0)))
