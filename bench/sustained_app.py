"""The handler `bench/sustained.py` runs: a no-op that reports its claim latency.

Claim latency is `started_at - created_at` of the job as the worker claimed
it: both are stamped by PostgreSQL's `now()` (the enqueueing transaction's and
the claiming one's), so one clock measures both ends and the figure covers
the enqueue's commit, the wake-up (NOTIFY or poll) and the claim query. Each
worker buffers its latencies and sends them as packed doubles, in one
datagram per batch, to the Unix socket named by `SUSTAINED_SOCKET`, at most
50 ms after the first of a batch ran. Nothing else: the handler does no work,
so the queue's own cost is what the benchmark loads.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import socket

from jobvisor import JobContext, Registry

registry = Registry()

FLUSH_AFTER = 0.05
FLUSH_SIZE = 1000

_path = os.environ.get("SUSTAINED_SOCKET", "")
_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
_latencies = array.array("d")


def _flush() -> None:
    if not _latencies:
        return
    data = _latencies.tobytes()
    del _latencies[:]
    with contextlib.suppress(OSError):  # the benchmark has gone; the jobs still complete
        _sock.sendto(data, _path)


@registry.handler("sustained")
async def sustained(job: JobContext) -> None:
    started, created = job.job.started_at, job.job.created_at
    if started is None:  # a claimed job always has one; keep the type checker honest
        return
    _latencies.append((started - created).total_seconds())
    if len(_latencies) == 1:
        asyncio.get_running_loop().call_later(FLUSH_AFTER, _flush)
    elif len(_latencies) >= FLUSH_SIZE:
        _flush()
