-- jobvisor's own metadata about a job, apart from the caller's payload: the
-- enqueuer's trace context (meta.trace, W3C headers), as JSON text. NULL when
-- there is none. SQLite has no ADD COLUMN IF NOT EXISTS; the migration record
-- runs this once.
ALTER TABLE jobvisor_jobs ADD COLUMN meta TEXT;
