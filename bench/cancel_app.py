"""The handler `bench/cancel.py` times: it waits until cancelled, then
writes, to the pipe named by `CANCEL_FD`, its job id and the wall-clock time
the cancel reached it."""

from __future__ import annotations

import asyncio
import os
import time

from jobvisor import JobContext, Registry

registry = Registry()
_fd = int(os.environ.get("CANCEL_FD", "-1"))


@registry.handler("wait")
async def wait(job: JobContext) -> None:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        os.write(_fd, f"{job.id} {time.time():.6f}\n".encode())
        raise
