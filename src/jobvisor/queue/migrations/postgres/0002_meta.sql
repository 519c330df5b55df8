-- jobvisor's own metadata about a job, apart from the caller's payload: the
-- enqueuer's trace context (meta.trace, W3C headers). NULL when there is none.
ALTER TABLE jobvisor_jobs ADD COLUMN IF NOT EXISTS meta jsonb;
