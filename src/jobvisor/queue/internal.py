"""The operations only jobvisor's own service and dashboard call.

An application's `Queue` and `AsyncQueue` offer what an application calls
(enqueue, claim and settle, wait, cancel, pause, limits, schedules, dead jobs,
transactions). The supervisor, the worker and the dashboard need more: leader
election, the schedules' and limits' sync with their declarations, the
fleet's heartbeats, and the dashboard's paged reads. Those are here, bound to
a queue's runner the same way (`service_ops(q)`, `dashboard_ops(q)`), so that they
stay out of the public classes, their docs and their completion, while the
service calls them as cheaply: a bound object holds two references, and each
method runs one plan, as the queue's own do. Nothing here is a public API;
it changes with the service.
"""

from __future__ import annotations

import contextlib
from typing import Any, overload

from . import batches, browse, fleet, ops, twins, web_sessions, workflows
from .api import AsyncQueue, Queue
from .bound import AsyncBound, SyncBound, bind_async, bind_sync
from .plan import AsyncRunner, SyncRunner


class ServiceOps(SyncBound):
    """What the supervisor and the worker do beside an application's calls."""

    def __init__(self, runner: SyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    renew_held = bind_sync(ops.renew_held)
    prune_key_buckets = bind_sync(ops.prune_key_buckets)
    limits_sync = bind_sync(ops.limits_sync)
    leader_attempt_elect = bind_sync(ops.leader_attempt_elect)
    leader_resign = bind_sync(ops.leader_resign)
    schedule_sync = bind_sync(ops.schedule_sync)
    schedule_next_ticks = bind_sync(ops.schedule_next_ticks)
    schedule_fire = bind_sync(ops.schedule_fire)
    supervisor_heartbeat = bind_sync(fleet.supervisor_heartbeat)
    supervisor_prune = bind_sync(fleet.supervisor_prune)
    running_by_worker = bind_sync(fleet.running_by_worker)
    batch_sweep = bind_sync(batches.batch_sweep)
    batch_cleanup = bind_sync(batches.batch_cleanup)
    workflow_states = bind_sync(workflows.workflow_states)
    enqueue_workflow_once = bind_sync(workflows.enqueue_workflow_once)
    step_log = bind_sync(ops.step_log)
    step_save = bind_sync(ops.step_save)
    step_wait = bind_sync(ops.step_wait)
    event_set = bind_sync(ops.event_set)

    def heard_bucket(self, bucket: int) -> None:
        """A new job's notice named its bucket (Citus mode): the next claim
        tries it first (`ops.hints.BucketHints`)."""
        self._ctx.bucket_hints.heard(bucket)

    def step_transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction of the queue's (a thread handler's transactional step)."""
        return self._runner.transaction()


class AsyncServiceOps(AsyncBound):
    """`ServiceOps` of an `AsyncQueue`."""

    def __init__(self, runner: AsyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    renew_held = bind_async(ops.renew_held)
    prune_key_buckets = bind_async(ops.prune_key_buckets)
    limits_sync = bind_async(ops.limits_sync)
    leader_attempt_elect = bind_async(ops.leader_attempt_elect)
    leader_resign = bind_async(ops.leader_resign)
    schedule_sync = bind_async(ops.schedule_sync)
    schedule_next_ticks = bind_async(ops.schedule_next_ticks)
    schedule_fire = bind_async(ops.schedule_fire)
    supervisor_heartbeat = bind_async(fleet.supervisor_heartbeat)
    supervisor_prune = bind_async(fleet.supervisor_prune)
    running_by_worker = bind_async(fleet.running_by_worker)
    batch_sweep = bind_async(batches.batch_sweep)
    batch_cleanup = bind_async(batches.batch_cleanup)
    workflow_states = bind_async(workflows.workflow_states)
    enqueue_workflow_once = bind_async(workflows.enqueue_workflow_once)
    step_log = bind_async(ops.step_log)
    step_save = bind_async(ops.step_save)
    step_wait = bind_async(ops.step_wait)
    event_set = bind_async(ops.event_set)

    def heard_bucket(self, bucket: int) -> None:
        """A new job's notice named its bucket (Citus mode): the next claim
        tries it first (`ops.hints.BucketHints`)."""
        self._ctx.bucket_hints.heard(bucket)

    def step_transaction(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """A transaction on a connection of the queue's pool (a transactional step's)."""
        return self._runner.transaction()

    def threads(self) -> ServiceOps:
        """These operations for code in a thread, on a blocking runner of the
        same database (see `twins`)."""
        return ServiceOps(twins.sync_twin(self._runner), self._ctx)


class DashboardOps(SyncBound):
    """The dashboard's reads: pages of jobs and workflows, the queues'
    states, the throughput and the fleet."""

    def __init__(self, runner: SyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    job_page = bind_sync(browse.job_page)
    queue_states = bind_sync(browse.queue_states)
    throughput = bind_sync(browse.throughput)
    supervisors = bind_sync(fleet.supervisors)
    supervisor_forget = bind_sync(fleet.supervisor_forget)
    web_session_start = bind_sync(web_sessions.web_session_start)
    web_session_alive = bind_sync(web_sessions.web_session_alive)
    web_session_end = bind_sync(web_sessions.web_session_end)
    workflow_page = bind_sync(workflows.workflow_page)
    workflow_of_job = bind_sync(workflows.workflow_of_job)
    step_history = bind_sync(ops.step_history)


class AsyncDashboardOps(AsyncBound):
    """`DashboardOps` of an `AsyncQueue`."""

    def __init__(self, runner: AsyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    job_page = bind_async(browse.job_page)
    queue_states = bind_async(browse.queue_states)
    throughput = bind_async(browse.throughput)
    supervisors = bind_async(fleet.supervisors)
    supervisor_forget = bind_async(fleet.supervisor_forget)
    web_session_start = bind_async(web_sessions.web_session_start)
    web_session_alive = bind_async(web_sessions.web_session_alive)
    web_session_end = bind_async(web_sessions.web_session_end)
    workflow_page = bind_async(workflows.workflow_page)
    workflow_of_job = bind_async(workflows.workflow_of_job)
    step_history = bind_async(ops.step_history)


@overload
def service_ops(queue: Queue) -> ServiceOps: ...
@overload
def service_ops(queue: AsyncQueue) -> AsyncServiceOps: ...
def service_ops(queue: Queue | AsyncQueue) -> ServiceOps | AsyncServiceOps:
    """The service's operations on `queue`'s runner."""
    if isinstance(queue, AsyncQueue):
        return AsyncServiceOps(queue._runner, queue._ctx)
    return ServiceOps(queue._runner, queue._ctx)


@overload
def dashboard_ops(queue: Queue) -> DashboardOps: ...
@overload
def dashboard_ops(queue: AsyncQueue) -> AsyncDashboardOps: ...
def dashboard_ops(queue: Queue | AsyncQueue) -> DashboardOps | AsyncDashboardOps:
    """The dashboard's reads on `queue`'s runner."""
    if isinstance(queue, AsyncQueue):
        return AsyncDashboardOps(queue._runner, queue._ctx)
    return DashboardOps(queue._runner, queue._ctx)
