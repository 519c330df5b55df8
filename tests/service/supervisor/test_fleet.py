"""The supervisor's fleet row: `Heartbeat.run_once` writes it with the live
workers, and while leading deletes the rows gone silent; `forget` deletes it."""

from __future__ import annotations

import jobvisor
from jobvisor import AsyncQueue
from jobvisor.queue.fleet import SupervisorBeat
from jobvisor.queue.internal import dashboard_ops, service_ops
from jobvisor.supervisor import fleet
from jobvisor.supervisor.children import Slot, WorkerProcess
from tests.support.aio import run_with
from tests.support.queue import Clock


def test_heartbeat_writes_prunes_and_forgets(aqueue: AsyncQueue) -> None:
    live = Slot(0, worker=WorkerProcess(0, "w-live", 4242, -1, 0.0), starts=3)
    empty = Slot(1)
    leading = [False]

    async def body(q: AsyncQueue) -> None:
        beat = fleet.Heartbeat(
            q, supervisor_id="s-me", leader=lambda: leading[0], slots=lambda: [live, empty]
        )
        await service_ops(q).supervisor_heartbeat(
            SupervisorBeat("s-gone", "h", 1, "0.0.9", False, [])
        )
        assert await beat.run_once() == 0  # not leading: nothing pruned
        (me,) = [r for r in await dashboard_ops(q).supervisors() if r.id == "s-me"]
        assert me.workers == ({"id": "w-live", "pid": 4242, "slot": 0, "restarts": 2},)
        assert not me.leader and me.host == beat.host
        leading[0] = True
        assert await beat.run_once() == 0  # s-gone is not silent long enough yet
        assert {r.id: r.leader for r in await dashboard_ops(q).supervisors()} == {
            "s-gone": False,
            "s-me": True,
        }
        await beat.forget()
        assert [r.id for r in await dashboard_ops(q).supervisors()] == ["s-gone"]

    run_with(aqueue, body)


def test_the_leader_prunes_a_row_silent_past_the_limit(url: str) -> None:
    with jobvisor.connect(url) as migrator:
        migrator.migrate()
    clock = Clock()
    q = jobvisor.connect_async(url, clock=clock)

    async def body(q: AsyncQueue) -> None:
        await service_ops(q).supervisor_heartbeat(
            SupervisorBeat("s-old", "h", 1, "0.0.9", False, [])
        )
        beat = fleet.Heartbeat(q, supervisor_id="s-me", leader=lambda: True, slots=list)
        clock.advance(fleet.PRUNE_AFTER + 1)
        assert await beat.run_once() == 1
        assert [r.id for r in await dashboard_ops(q).supervisors(fresh=3600)] == ["s-me"]

    run_with(q, body)
