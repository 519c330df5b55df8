"""SQLite's statements of batches (`queue.batches`), under the names of the
PostgreSQL driver's `BatchSql`; the counting and firing live in migration
0015's trigger."""

from __future__ import annotations

from typing import Final, LiteralString

_TERMINAL: Final[LiteralString] = "('completed', 'dead', 'cancelled')"


class BatchSql:
    BATCH_INSERT: Final[LiteralString] = (
        # A new, open batch.
        "INSERT INTO jobvisor_batches (id, meta, created_at) VALUES (:id, :meta, :now)"
    )
    BATCH_CALLBACK_INSERT: Final[LiteralString] = (
        # One callback of a batch, ready to be inserted as a job when it finishes.
        "INSERT INTO jobvisor_batch_callbacks (batch_id, kind, job_id, queue, job_type,"
        " payload, priority, max_attempts, correlation_id)"
        " VALUES (:batch_id, :kind, :job_id, :queue, :job_type,"
        " :payload, :priority, :max_attempts, :correlation_id)"
    )
    BATCH_GROW: Final[LiteralString] = (
        # Count `count` new members into a batch not yet finished.
        "UPDATE jobvisor_batches SET total = total + :count, unfinished = unfinished + :count"
        " WHERE id = :id AND finished_at IS NULL RETURNING id"
    )
    BATCH_ATTACH: Final[LiteralString] = (
        # Make the jobs just inserted members: their batch id, also in their meta.
        "UPDATE jobvisor_jobs SET batch_id = :batch_id,"
        " meta = json_set(coalesce(meta, '{}'), '$.batch', :batch_id)"
        " WHERE id IN (SELECT value FROM json_each(:ids))"
    )
    BATCH_CLOSE: Final[LiteralString] = (
        # Close a batch: no member of it is still to come from its opener.
        "UPDATE jobvisor_batches SET closed = 1, closed_at = :now WHERE id = :id AND NOT closed"
    )
    BATCH_FIRE: Final[tuple[LiteralString, ...]] = (
        # Finish a closed batch with no unfinished member: its callbacks, then
        # the guarded update that marks it finished (a row when it fired).
        "INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, max_attempts,"
        " correlation_id, created_at, batch_id)"
        " SELECT c.job_id, c.queue, c.job_type, c.payload, c.priority, :now, c.max_attempts,"
        " c.correlation_id, :now, c.batch_id"
        " FROM jobvisor_batch_callbacks c JOIN jobvisor_batches b ON b.id = c.batch_id"
        " WHERE b.id = :id AND b.closed AND b.unfinished = 0 AND b.finished_at IS NULL"
        " AND (c.kind = 'finish' OR (c.kind = 'success') = (b.failed = 0))",
        "UPDATE jobvisor_batches SET finished_at = :now"
        " WHERE id = :id AND closed AND unfinished = 0 AND finished_at IS NULL RETURNING id",
    )
    BATCH_LOCK: Final[LiteralString] = (
        # A closed batch not yet finished (the whole file is locked already).
        "SELECT id FROM jobvisor_batches WHERE id = :id AND closed AND finished_at IS NULL"
    )
    BATCH_RECOUNT: Final[LiteralString] = (
        # Set a batch's counts from its members as they are (the safety net).
        "UPDATE jobvisor_batches SET"
        " unfinished = (SELECT count(*) FROM jobvisor_jobs j WHERE j.batch_id = :id"
        "   AND j.status NOT IN " + _TERMINAL + "),"
        " failed = (SELECT count(*) FROM jobvisor_jobs j WHERE j.batch_id = :id"
        "   AND j.status IN ('dead', 'cancelled'))"
        " WHERE id = :id AND finished_at IS NULL"
    )
    BATCH_STALLED: Final[LiteralString] = (
        # Closed batches not finished although no member is still to finish.
        "SELECT b.id FROM jobvisor_batches b WHERE b.closed AND b.finished_at IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM jobvisor_jobs j WHERE j.batch_id = b.id"
        "   AND j.status NOT IN " + _TERMINAL + ")"
        " ORDER BY b.closed_at LIMIT :limit"
    )
    BATCH_GET: Final[LiteralString] = (
        # One batch's row.
        "SELECT id, meta, closed, total, unfinished, failed, created_at, closed_at, finished_at"
        " FROM jobvisor_batches WHERE id = :id"
    )
    BATCH_MEMBER_COUNTS: Final[LiteralString] = (
        # A batch's members (not its callbacks) by status.
        "SELECT j.status, count(*) FROM jobvisor_jobs j WHERE j.batch_id = :id"
        " AND NOT EXISTS (SELECT 1 FROM jobvisor_batch_callbacks c"
        "   WHERE c.batch_id = :id AND c.job_id = j.id)"
        " GROUP BY j.status"
    )
    BATCH_CALLBACKS_ENQUEUED: Final[LiteralString] = (
        # The callbacks of a batch that were enqueued, by kind.
        "SELECT c.kind, c.job_id FROM jobvisor_batch_callbacks c"
        " JOIN jobvisor_jobs j ON j.id = c.job_id WHERE c.batch_id = :id ORDER BY c.kind"
    )
    BATCH_RESULTS_PAGE: Final[LiteralString] = (
        # A page of a batch's members, in id order after `after`.
        "SELECT j.id, j.queue, j.job_type, j.payload, j.priority, j.run_at, j.status,"
        " j.attempts, j.max_attempts, j.last_error, j.correlation_id, j.dedupe_key,"
        " j.lease_expires_at, j.claim_token, j.worker_id, j.created_at, j.started_at,"
        " j.finished_at, j.meta, j.result, j.progress, j.errors, j.unique_key"
        " FROM jobvisor_jobs j WHERE j.batch_id = :id"
        " AND (:after IS NULL OR j.id > :after)"
        " AND NOT EXISTS (SELECT 1 FROM jobvisor_batch_callbacks c"
        "   WHERE c.batch_id = :id AND c.job_id = j.id)"
        " ORDER BY j.id LIMIT :limit"
    )
    _EXPIRED: Final[LiteralString] = (
        " b.finished_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobvisor_jobs j"
        "  WHERE j.batch_id = b.id AND NOT coalesce("
        "   (j.status = 'completed' AND j.finished_at < :now - :completed)"
        "   OR (j.status = 'dead' AND j.finished_at < :now - :dead)"
        "   OR (j.status = 'cancelled' AND j.finished_at < :now - :cancelled), 0))"
    )
    BATCH_EXPIRED: Final[LiteralString] = (
        # Finished batches every job of which (members and callbacks) is past
        # its status's retention (a NULL age keeps that status).
        "SELECT b.id FROM jobvisor_batches b WHERE" + _EXPIRED + " LIMIT :limit"
    )
    BATCH_DELETE: Final[LiteralString] = (
        # Delete a batch row if it is still past retention.
        "DELETE FROM jobvisor_batches WHERE id IN (SELECT b.id FROM jobvisor_batches b"
        " WHERE b.id = :id AND" + _EXPIRED + ") RETURNING id"
    )
    BATCH_DELETE_JOBS: Final[LiteralString] = (
        # The jobs (members and callbacks) of a deleted batch.
        "DELETE FROM jobvisor_jobs WHERE batch_id = :id"
    )
    BATCH_DELETE_CALLBACKS: Final[LiteralString] = (
        # The callback rows of a deleted batch.
        "DELETE FROM jobvisor_batch_callbacks WHERE batch_id = :id"
    )
