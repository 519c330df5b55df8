"""The one backoff formula: doubling, cap and jitter bounds."""

from __future__ import annotations

import pytest

from jobvisor.backoff import backoff


def test_without_jitter_it_doubles_and_caps() -> None:
    assert [backoff(n, base=0.5, cap=3.0, jitter=0) for n in range(1, 6)] == [
        0.5,
        1.0,
        2.0,
        3.0,
        3.0,
    ]


@pytest.mark.parametrize("attempt", [0, 1, 2, 10, 63, 10**9])
def test_jitter_stays_within_its_share(attempt: int) -> None:
    exact = backoff(attempt, base=1.0, cap=60.0, jitter=0)
    for _ in range(200):
        delay = backoff(attempt, base=1.0, cap=60.0, jitter=0.25)
        assert 0.75 * exact <= delay <= exact
