"""SQLite's statements of durable steps, sleeps, signals and events
(`ops.steps`), under the names of the PostgreSQL driver's `StepSql`. Every
write a worker makes for its job is fenced by the job's claim token."""

from __future__ import annotations

from typing import Final, LiteralString


class StepSql:
    """SQLite's step statements (named parameters; times are epoch seconds).
    A plan runs under BEGIN IMMEDIATE, the one writer of the file, so no
    statement here needs a row lock."""

    STEP_LIST: Final[LiteralString] = (
        # A job's step log, in order.
        "SELECT seq, name, status, result, error, signal, wake_at, started_at, finished_at"
        " FROM jobvisor_steps WHERE job_id = :id ORDER BY seq"
    )

    STEP_SAVE: Final[LiteralString] = (
        # Record a step's end if the claim is still held; 0 rows when lost.
        "INSERT INTO jobvisor_steps (job_id, seq, name, status, result, error, started_at,"
        " finished_at)"
        " SELECT id, :seq, :name, :status, :result, :error, :started, :now"
        " FROM jobvisor_jobs WHERE id = :id AND claim_token = :token AND status = 'running'"
        " ON CONFLICT (job_id, seq) DO UPDATE SET status = excluded.status,"
        " result = excluded.result, error = excluded.error, finished_at = excluded.finished_at"
    )

    STEP_JOB_LOCK: Final[LiteralString] = (
        # Whether the job is still held (the plan holds the file's write lock).
        "SELECT 1 FROM jobvisor_jobs WHERE id = :id AND claim_token = :token AND status = 'running'"
    )

    SIGNAL_TAKE: Final[LiteralString] = (
        # Deliver the oldest signal of this name not yet delivered; its payload.
        "UPDATE jobvisor_signals SET taken_at = :now"
        " WHERE id = (SELECT id FROM jobvisor_signals WHERE job_id = :id"
        "   AND name = :signal AND taken_at IS NULL ORDER BY id LIMIT 1)"
        " RETURNING payload"
    )

    STEP_WAIT: Final[LiteralString] = (
        # A sleep or a wait begins (or goes on); its deadline and whether it passed.
        "INSERT INTO jobvisor_steps (job_id, seq, name, status, signal, wake_at, started_at)"
        " VALUES (:id, :seq, :name, 'waiting', :signal, coalesce(:until, :now + :timeout), :now)"
        " ON CONFLICT (job_id, seq) DO UPDATE SET status = 'waiting'"
        " RETURNING wake_at, coalesce(wake_at <= :now, 0)"
    )

    JOB_PARK: Final[LiteralString] = (
        # A held job waits for its step's deadline (or a signal) without a worker.
        "UPDATE jobvisor_jobs SET"
        " status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
        "   WHEN waiting_on > 0 THEN 'waiting' ELSE 'pending' END,"
        " finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN :now END,"
        " attempts = attempts - 1,"
        " run_at = coalesce((SELECT s.wake_at FROM jobvisor_steps AS s"
        "   WHERE s.job_id = jobvisor_jobs.id AND s.seq = :seq), :now + :forever),"
        " claim_token = NULL, lease_expires_at = NULL"
        " WHERE id = :id AND claim_token = :token AND status = 'running'"
        " RETURNING status"
    )

    SIGNAL_JOB_LOCK: Final[LiteralString] = (
        # The status of the job a signal goes to.
        "SELECT status FROM jobvisor_jobs WHERE id = :id"
    )

    SIGNAL_INSERT: Final[LiteralString] = (
        # Keep a signal until a wait of its name takes it.
        "INSERT INTO jobvisor_signals (job_id, name, payload, sent_at)"
        " VALUES (:id, :signal, :payload, :now)"
    )

    SIGNAL_WAKE: Final[LiteralString] = (
        # A job parked in a wait for this signal is due now.
        "UPDATE jobvisor_jobs SET run_at = :now"
        " WHERE id = :id AND status IN ('pending', 'retryable', 'waiting') AND run_at > :now"
        "   AND EXISTS (SELECT 1 FROM jobvisor_steps AS s WHERE s.job_id = jobvisor_jobs.id"
        "     AND s.status = 'waiting' AND s.signal = :signal)"
        " RETURNING queue"
    )

    SIGNAL_LIST: Final[LiteralString] = (
        # A job's signals, oldest first (names and times, no payload).
        "SELECT name, sent_at, taken_at FROM jobvisor_signals WHERE job_id = :id ORDER BY id"
    )

    EVENT_SET: Final[LiteralString] = (
        # Publish a held job's value under a key; 0 rows when the lease was lost.
        "INSERT INTO jobvisor_events (job_id, key, value, updated_at)"
        " SELECT id, :key, :value, :now"
        " FROM jobvisor_jobs WHERE id = :id AND claim_token = :token AND status = 'running'"
        " ON CONFLICT (job_id, key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at"
    )

    EVENT_GET: Final[LiteralString] = (
        # A job's status and its value of a key (set: whether it has one).
        "SELECT j.status, e.value, e.key IS NOT NULL FROM jobvisor_jobs AS j"
        " LEFT JOIN jobvisor_events AS e ON e.job_id = j.id AND e.key = :key"
        " WHERE j.id = :id"
    )

    EVENT_LIST: Final[LiteralString] = (
        # A job's events: each key, its value and when it was last set.
        "SELECT key, value, updated_at FROM jobvisor_events WHERE job_id = :id ORDER BY key"
    )
