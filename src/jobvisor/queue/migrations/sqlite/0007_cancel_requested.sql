-- A running job asked to stop: when it was asked. Whatever settles the job
-- next (its worker's completion, failure or cancel, a reap, a crash requeue)
-- ends it `cancelled` instead, keeping the request's text in last_error.
ALTER TABLE jobvisor_jobs ADD COLUMN cancel_requested_at REAL;
