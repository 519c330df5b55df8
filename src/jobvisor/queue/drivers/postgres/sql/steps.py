"""PostgreSQL's statements of durable steps, sleeps, signals and events
(`ops.steps`). The SQLite driver's `StepSql` defines the same names, each
statement a literal with a one-line comment. Every write a worker makes for
its job is fenced by the job's claim token: a statement that finds the job
no longer held by that claim changes nothing."""

from __future__ import annotations

from typing import Final, LiteralString

from .intake import NOTIFY_CHANNEL


class StepSql:
    """PostgreSQL's step statements (psycopg's named parameters)."""

    STEP_LIST: Final[LiteralString] = (
        # A job's step log, in order.
        "SELECT seq, name, status, result, error, signal, wake_at, started_at, finished_at"
        " FROM jobvisor_steps WHERE job_id = %(id)s ORDER BY seq"
    )

    STEP_SAVE: Final[LiteralString] = (
        # Record a step's end (completed with its result, or failed with its
        # error) if the claim is still held: the job's row is locked for share,
        # so a reap or a renewal that is changing the claim is waited for and
        # then seen. Returns the row count: 0 when the lease was lost.
        "INSERT INTO jobvisor_steps (job_id, seq, name, status, result, error, started_at,"
        " finished_at)"
        " SELECT id, %(seq)s, %(name)s, %(status)s, %(result)s::jsonb, %(error)s,"
        "   %(started)s::timestamptz, %(now)s::timestamptz"
        " FROM jobvisor_jobs WHERE id = %(id)s AND claim_token = %(token)s"
        "   AND status = 'running' FOR SHARE"
        " ON CONFLICT (job_id, seq) DO UPDATE SET status = excluded.status,"
        " result = excluded.result, error = excluded.error, finished_at = excluded.finished_at"
    )

    STEP_TX_DURABLE: Final[LiteralString] = (
        # A transactional step's commit waits for its WAL flush, even on a
        # worker's connection (whose own commits do not): the application's
        # writes commit in it. (PostgreSQL only: SQLite's transaction is on a
        # connection of its own, with the queue's settings.)
        "SET LOCAL synchronous_commit TO on"
    )

    STEP_JOB_LOCK: Final[LiteralString] = (
        # Lock a held job for a wait (its signals and parking follow in the
        # same transaction); no row when the lease was lost.
        "SELECT 1 FROM jobvisor_jobs WHERE id = %(id)s AND claim_token = %(token)s"
        " AND status = 'running' FOR UPDATE"
    )

    SIGNAL_TAKE: Final[LiteralString] = (
        # Deliver the oldest signal of this name not yet delivered; its payload.
        "UPDATE jobvisor_signals SET taken_at = %(now)s::timestamptz"
        " WHERE id = (SELECT id FROM jobvisor_signals WHERE job_id = %(id)s"
        "   AND name = %(signal)s AND taken_at IS NULL ORDER BY id LIMIT 1)"
        " RETURNING payload"
    )

    STEP_WAIT: Final[LiteralString] = (
        # A sleep or a wait begins (or goes on): its deadline is fixed at the
        # first attempt that reached it. Returns the deadline and whether it passed.
        "INSERT INTO jobvisor_steps (job_id, seq, name, status, signal, wake_at, started_at)"
        " VALUES (%(id)s, %(seq)s, %(name)s, 'waiting', %(signal)s,"
        "   coalesce(%(until)s::timestamptz,"
        "     %(now)s::timestamptz + %(timeout)s::float8 * interval '1 second'),"
        "   %(now)s::timestamptz)"
        " ON CONFLICT (job_id, seq) DO UPDATE SET status = 'waiting'"
        " RETURNING wake_at, coalesce(wake_at <= %(now)s::timestamptz, false)"
    )

    JOB_PARK: Final[LiteralString] = (
        # A held job waits for its step's deadline (or a signal) without a
        # worker: not running, its attempt given back, due at the deadline
        # (far ahead without one); cancelled instead when a cancel was requested.
        "UPDATE jobvisor_jobs AS j SET"
        " status = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'"
        "   WHEN j.waiting_on > 0 THEN 'waiting' ELSE 'pending' END,"
        " finished_at = CASE WHEN j.cancel_requested_at IS NOT NULL"
        "   THEN %(now)s::timestamptz END, attempts = j.attempts - 1,"
        " run_at = coalesce((SELECT s.wake_at FROM jobvisor_steps AS s"
        "   WHERE s.job_id = j.id AND s.seq = %(seq)s),"
        "   %(now)s::timestamptz + %(forever)s::float8 * interval '1 second'),"
        " claim_token = NULL, lease_expires_at = NULL"
        " WHERE j.id = %(id)s AND j.claim_token = %(token)s AND j.status = 'running'"
        " RETURNING j.status"
    )

    SIGNAL_JOB_LOCK: Final[LiteralString] = (
        # Lock the job a signal goes to (so that a wait starting meanwhile
        # sees the signal or is woken by it); its status.
        "SELECT status FROM jobvisor_jobs WHERE id = %(id)s FOR UPDATE"
    )

    SIGNAL_INSERT: Final[LiteralString] = (
        # Keep a signal until a wait of its name takes it.
        "INSERT INTO jobvisor_signals (job_id, name, payload, sent_at)"
        " VALUES (%(id)s, %(signal)s, %(payload)s::jsonb, %(now)s::timestamptz)"
    )

    SIGNAL_WAKE: Final[LiteralString] = (
        # A job parked in a wait for this signal is due now, and its queue's
        # workers are woken as an enqueue wakes them.
        "UPDATE jobvisor_jobs AS j SET run_at = %(now)s::timestamptz"
        " WHERE j.id = %(id)s AND j.status IN ('pending', 'retryable', 'waiting')"
        "   AND j.run_at > %(now)s::timestamptz AND EXISTS (SELECT 1 FROM jobvisor_steps AS s"
        "     WHERE s.job_id = j.id AND s.status = 'waiting' AND s.signal = %(signal)s)"
        " RETURNING pg_notify('" + NOTIFY_CHANNEL + "', j.queue)"
    )

    SIGNAL_LIST: Final[LiteralString] = (
        # A job's signals, oldest first (names and times, no payload).
        "SELECT name, sent_at, taken_at FROM jobvisor_signals WHERE job_id = %(id)s ORDER BY id"
    )

    EVENT_SET: Final[LiteralString] = (
        # Publish a held job's value under a key (the latest wins); 0 rows
        # when the lease was lost.
        "INSERT INTO jobvisor_events (job_id, key, value, updated_at)"
        " SELECT id, %(key)s, %(value)s::jsonb, %(now)s::timestamptz"
        " FROM jobvisor_jobs WHERE id = %(id)s AND claim_token = %(token)s"
        "   AND status = 'running' FOR SHARE"
        " ON CONFLICT (job_id, key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at"
    )

    EVENT_GET: Final[LiteralString] = (
        # A job's status and its value of a key (set: whether it has one).
        "SELECT j.status, e.value, e.key IS NOT NULL FROM jobvisor_jobs AS j"
        " LEFT JOIN jobvisor_events AS e ON e.job_id = j.id AND e.key = %(key)s"
        " WHERE j.id = %(id)s"
    )

    EVENT_LIST: Final[LiteralString] = (
        # A job's events: each key, its value and when it was last set.
        "SELECT key, value, updated_at FROM jobvisor_events WHERE job_id = %(id)s ORDER BY key"
    )
