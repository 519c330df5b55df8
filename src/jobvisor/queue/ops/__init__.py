"""Every queue operation, written once for both engines and both faces.

Each function checks its arguments (raising `InvalidArgument` before anything
is written) and returns a `Plan`: a generator of statements that a runner
drives inside one transaction. Every change of a job's status is a single
guarded statement; nothing here reads a row and then writes it.

The operations live in a module per domain (`enqueuing`, `claiming`,
`settling`, `recovery`, `control`, `limiting`, `leadership`, `scheduling`,
`schema`; `context` and `hints` hold what they share). The modules are named
for their domain, not for an operation, so that `ops.claim` stays the
operation: this package exports every operation under its own name.
"""

from __future__ import annotations

from .claiming import (
    CLAIM_WINDOW_FACTOR,
    CLAIM_WINDOW_MIN,
    claim,
)
from .context import (
    DEFAULT_CLEANUP_BATCH,
    DEFAULT_LEASE,
    PAUSE_LOCK_TIMEOUT_MS,
    Ctx,
    queue_names,
)
from .control import (
    DEAD_LIST_DEFAULT,
    WAIT_NOTICE_POLL,
    WAIT_POLL_BASE,
    WAIT_POLL_CAP,
    Waiting,
    cancel,
    cancel_many,
    dead_count,
    dead_discard,
    dead_discard_type,
    dead_get,
    dead_list,
    dead_requeue,
    dead_requeue_type,
    get,
    pause,
    paused,
    resume,
    wait_mark,
)
from .enqueuing import (
    enqueue,
    enqueue_many,
)
from .hints import (
    FULL_CLAIM_EVERY,
    FULL_CLAIM_SLOW,
    FULL_CLAIM_SLOW_RATIO,
    FULL_CLAIM_SPACING,
    LIMITS_RECHECK,
    PLAIN_RECHECK,
    SATURATED_BATCH,
    SATURATED_SLOW_SHARE,
    ClaimBounds,
    LimitsSeen,
    Position,
)
from .leadership import (
    leader_attempt_elect,
    leader_resign,
)
from .limiting import (
    clear_limit,
    limit_from_row,
    limit_row,
    limits,
    limits_sync,
    prune_key_buckets,
    set_limit,
)
from .recovery import (
    Retention,
    cleanup,
    oldest_xmin,
    reap_expired,
    reap_expired_by_type,
    requeue_crashed,
    summary,
)
from .scheduling import (
    schedule_fire,
    schedule_next_ticks,
    schedule_run,
    schedule_sync,
    schedules,
)
from .schema import (
    check,
    latest_version,
    migrate,
    migration_files,
    schema_version,
)
from .settling import (
    MAX_ERROR_CHARS,
    cancel_held,
    complete,
    complete_many,
    fail,
    release,
    release_many,
    renew,
    renew_held,
    renew_many,
    result_json,
    snooze,
)

__all__ = [
    "CLAIM_WINDOW_FACTOR",
    "CLAIM_WINDOW_MIN",
    "DEAD_LIST_DEFAULT",
    "DEFAULT_CLEANUP_BATCH",
    "DEFAULT_LEASE",
    "FULL_CLAIM_EVERY",
    "FULL_CLAIM_SLOW",
    "FULL_CLAIM_SLOW_RATIO",
    "FULL_CLAIM_SPACING",
    "LIMITS_RECHECK",
    "MAX_ERROR_CHARS",
    "PAUSE_LOCK_TIMEOUT_MS",
    "PLAIN_RECHECK",
    "SATURATED_BATCH",
    "SATURATED_SLOW_SHARE",
    "WAIT_NOTICE_POLL",
    "WAIT_POLL_BASE",
    "WAIT_POLL_CAP",
    "ClaimBounds",
    "Ctx",
    "LimitsSeen",
    "Position",
    "Retention",
    "Waiting",
    "cancel",
    "cancel_held",
    "cancel_many",
    "check",
    "claim",
    "cleanup",
    "clear_limit",
    "complete",
    "complete_many",
    "dead_count",
    "dead_discard",
    "dead_discard_type",
    "dead_get",
    "dead_list",
    "dead_requeue",
    "dead_requeue_type",
    "enqueue",
    "enqueue_many",
    "fail",
    "get",
    "latest_version",
    "leader_attempt_elect",
    "leader_resign",
    "limit_from_row",
    "limit_row",
    "limits",
    "limits_sync",
    "migrate",
    "migration_files",
    "oldest_xmin",
    "pause",
    "paused",
    "prune_key_buckets",
    "queue_names",
    "reap_expired",
    "reap_expired_by_type",
    "release",
    "release_many",
    "renew",
    "renew_held",
    "renew_many",
    "requeue_crashed",
    "result_json",
    "resume",
    "schedule_fire",
    "schedule_next_ticks",
    "schedule_run",
    "schedule_sync",
    "schedules",
    "schema_version",
    "set_limit",
    "snooze",
    "summary",
    "wait_mark",
]
