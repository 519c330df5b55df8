"""The handlers `bench/backlog.py` runs, reporting to the Unix datagram socket
named by `BACKLOG_SOCKET`:

- `backlog`: a no-op that counts its starts; each worker sends its count with
  the wall-clock time of the first and the last start it covers, as three
  packed doubles `(count, first, last)`, at most `FLUSH_AFTER` after the first;
- `probe`: sends `(-1, enqueued, started)` at once: the wall-clock time the
  benchmark took just before its `enqueue` call (from the payload) and the
  handler's first line.

The clocks are the same machine's, so the two ends compare directly.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import socket
import time

from jobvisor import JobContext, Registry

registry = Registry()

FLUSH_AFTER = 0.01

_path = os.environ.get("BACKLOG_SOCKET", "")
_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
_pending: list[float] = [0.0, 0.0, 0.0]  # count, first start, last start


def _send(values: tuple[float, float, float]) -> None:
    with contextlib.suppress(OSError):  # the benchmark has gone; the jobs still complete
        _sock.sendto(array.array("d", values).tobytes(), _path)


def _flush() -> None:
    count, first, last = _pending
    _pending[0] = 0.0
    if count:
        _send((count, first, last))


@registry.handler("backlog")
async def backlog(job: JobContext) -> None:
    now = time.time()
    if _pending[0] == 0:
        _pending[1] = now
        asyncio.get_running_loop().call_later(FLUSH_AFTER, _flush)
    _pending[0] += 1
    _pending[2] = now


@registry.handler("probe")
async def probe(job: JobContext) -> None:
    started = time.time()
    payload = job.payload if isinstance(job.payload, dict) else {}
    _send((-1.0, float(payload.get("t", 0.0)), started))
