"""The handler `bench/latency.py` times: it writes, to the pipe named by
`LATENCY_FD`, the wall-clock time it started."""

from __future__ import annotations

import os
import time

from jobvisor import JobContext, Registry

registry = Registry()
_fd = int(os.environ.get("LATENCY_FD", "-1"))


@registry.handler("latency")
async def latency(job: JobContext) -> None:
    os.write(_fd, f"{time.time():.6f}\n".encode())
