"""PostgreSQL's statements of batches (`queue.batches`); the SQLite driver's
`BatchSql` defines the same names. The counting and the firing themselves
live in migration 0015's trigger and its `jobvisor_batch_fire` function:
these statements open, grow, close and read batches, and run the safety net
and retention."""

from __future__ import annotations

from typing import Final, LiteralString

_TERMINAL: Final[LiteralString] = "('completed', 'dead', 'cancelled')"


class BatchSql:
    BATCH_INSERT: Final[LiteralString] = (
        # A new, open batch.
        "INSERT INTO jobvisor_batches (id, meta, created_at)"
        " VALUES (%(id)s, %(meta)s::jsonb, %(now)s::timestamptz)"
    )
    BATCH_CALLBACK_INSERT: Final[LiteralString] = (
        # One callback of a batch, ready to be inserted as a job when it finishes.
        "INSERT INTO jobvisor_batch_callbacks (batch_id, kind, job_id, queue, job_type,"
        " payload, priority, max_attempts, correlation_id)"
        " VALUES (%(batch_id)s, %(kind)s, %(job_id)s, %(queue)s, %(job_type)s,"
        " %(payload)s::jsonb, %(priority)s, %(max_attempts)s, %(correlation_id)s)"
    )
    BATCH_GROW: Final[LiteralString] = (
        # Count `count` new members into a batch not yet finished, taking its
        # row lock (a member finishing meanwhile waits for this transaction).
        "UPDATE jobvisor_batches SET total = total + %(count)s,"
        " unfinished = unfinished + %(count)s"
        " WHERE id = %(id)s AND finished_at IS NULL RETURNING id"
    )
    BATCH_ATTACH: Final[LiteralString] = (
        # Make the jobs just inserted members: their batch id, also in their meta.
        "UPDATE jobvisor_jobs SET batch_id = %(batch_id)s,"
        " meta = coalesce(meta, '{}'::jsonb) || jsonb_build_object('batch', %(batch_id)s::text)"
        " WHERE id = ANY(%(ids)s::uuid[])"
    )
    BATCH_CLOSE: Final[LiteralString] = (
        # Close a batch: no member of it is still to come from its opener.
        "UPDATE jobvisor_batches SET closed = true, closed_at = %(now)s::timestamptz"
        " WHERE id = %(id)s AND NOT closed"
    )
    BATCH_FIRE: Final[tuple[LiteralString, ...]] = (
        # Finish a closed batch with no unfinished member and enqueue its
        # callbacks (one guarded update, see the migration); a row when it fired.
        "SELECT 1 WHERE jobvisor_batch_fire(%(id)s, %(now)s::timestamptz)",
    )
    BATCH_LOCK: Final[LiteralString] = (
        # Lock a closed batch not yet finished, for a recount.
        "SELECT id FROM jobvisor_batches WHERE id = %(id)s AND closed"
        " AND finished_at IS NULL FOR UPDATE"
    )
    BATCH_RECOUNT: Final[LiteralString] = (
        # Set a batch's counts from its members as they are (the safety net).
        "UPDATE jobvisor_batches b SET"
        " unfinished = (SELECT count(*) FROM jobvisor_jobs j WHERE j.batch_id = b.id"
        "   AND j.status NOT IN " + _TERMINAL + "),"
        " failed = (SELECT count(*) FROM jobvisor_jobs j WHERE j.batch_id = b.id"
        "   AND j.status IN ('dead', 'cancelled'))"
        " WHERE b.id = %(id)s AND b.finished_at IS NULL"
    )
    BATCH_STALLED: Final[LiteralString] = (
        # Closed batches not finished although no member is still to finish.
        "SELECT b.id FROM jobvisor_batches b WHERE b.closed AND b.finished_at IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM jobvisor_jobs j WHERE j.batch_id = b.id"
        "   AND j.status NOT IN " + _TERMINAL + ")"
        " ORDER BY b.closed_at LIMIT %(limit)s"
    )
    BATCH_GET: Final[LiteralString] = (
        # One batch's row.
        "SELECT id, meta, closed, total, unfinished, failed, created_at, closed_at, finished_at"
        " FROM jobvisor_batches WHERE id = %(id)s"
    )
    BATCH_MEMBER_COUNTS: Final[LiteralString] = (
        # A batch's members (not its callbacks) by status.
        "SELECT j.status, count(*) FROM jobvisor_jobs j WHERE j.batch_id = %(id)s"
        " AND NOT EXISTS (SELECT 1 FROM jobvisor_batch_callbacks c"
        "   WHERE c.batch_id = %(id)s AND c.job_id = j.id)"
        " GROUP BY j.status"
    )
    BATCH_CALLBACKS_ENQUEUED: Final[LiteralString] = (
        # The callbacks of a batch that were enqueued, by kind.
        "SELECT c.kind, c.job_id FROM jobvisor_batch_callbacks c"
        " JOIN jobvisor_jobs j ON j.id = c.job_id WHERE c.batch_id = %(id)s ORDER BY c.kind"
    )
    BATCH_RESULTS_PAGE: Final[LiteralString] = (
        # A page of a batch's members, in id order after `after`.
        "SELECT j.id, j.queue, j.job_type, j.payload, j.priority, j.run_at, j.status,"
        " j.attempts, j.max_attempts, j.last_error, j.correlation_id, j.dedupe_key,"
        " j.lease_expires_at, j.claim_token, j.worker_id, j.created_at, j.started_at,"
        " j.finished_at, j.meta, j.result, j.progress, j.errors, j.unique_key"
        " FROM jobvisor_jobs j WHERE j.batch_id = %(id)s"
        " AND (%(after)s::uuid IS NULL OR j.id > %(after)s::uuid)"
        " AND NOT EXISTS (SELECT 1 FROM jobvisor_batch_callbacks c"
        "   WHERE c.batch_id = %(id)s AND c.job_id = j.id)"
        " ORDER BY j.id LIMIT %(limit)s"
    )
    _EXPIRED: Final[LiteralString] = (
        " b.finished_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobvisor_jobs j"
        "  WHERE j.batch_id = b.id AND NOT coalesce("
        "   (j.status = 'completed' AND j.finished_at"
        "     < %(now)s::timestamptz - %(completed)s::float8 * interval '1 second')"
        "   OR (j.status = 'dead' AND j.finished_at"
        "     < %(now)s::timestamptz - %(dead)s::float8 * interval '1 second')"
        "   OR (j.status = 'cancelled' AND j.finished_at"
        "     < %(now)s::timestamptz - %(cancelled)s::float8 * interval '1 second'), false))"
    )
    BATCH_EXPIRED: Final[LiteralString] = (
        # Finished batches every job of which (members and callbacks) is past
        # its status's retention (a NULL age keeps that status).
        "SELECT b.id FROM jobvisor_batches b WHERE" + _EXPIRED + " LIMIT %(limit)s"
    )
    BATCH_DELETE: Final[LiteralString] = (
        # Delete a batch row if it is still past retention (rechecked under its lock).
        "DELETE FROM jobvisor_batches b WHERE b.id = %(id)s AND" + _EXPIRED + " RETURNING b.id"
    )
    BATCH_DELETE_JOBS: Final[LiteralString] = (
        # The jobs (members and callbacks) of a deleted batch.
        "DELETE FROM jobvisor_jobs WHERE batch_id = %(id)s"
    )
    BATCH_DELETE_CALLBACKS: Final[LiteralString] = (
        # The callback rows of a deleted batch.
        "DELETE FROM jobvisor_batch_callbacks WHERE batch_id = %(id)s"
    )
