"""The bundled example app's handlers, run in-process by `testing.drain` on
a queue whose clock the test moves: every demo job ends completed, the
flaky `resize_image` ones after the retries their payload asks for."""

from __future__ import annotations

from collections import Counter

import jobvisor
from jobvisor import JobStatus, example, testing
from tests.support.queue import Clock


def test_every_demo_job_completes_after_its_retries(url: str) -> None:
    clock = Clock()
    with jobvisor.connect(url, clock=clock) as q:
        q.migrate()
        ids = example.seed(q, emails=3, images=3, reports=0)
        rounds = []
        for _ in range(4):
            drained = testing.drain(q, registry=example.registry)
            rounds.append((len(drained.completed), len(drained.failed)))
            clock.advance(10)  # past resize_image's backoff (at most 5 s)
        jobs = [q.get(job_id) for job_id in ids]
    # Round one: the emails and the image that never fails; then one more
    # image per round, each failing `fail_times` attempts first.
    assert rounds == [(4, 2), (1, 1), (1, 0), (0, 0)]
    assert Counter(job.status for job in jobs) == {JobStatus.COMPLETED: 6}
    attempts = sorted(
        (job.payload["fail_times"], job.attempts) for job in jobs if job.job_type == "resize_image"
    )
    assert attempts == [(0, 1), (1, 2), (2, 3)]
