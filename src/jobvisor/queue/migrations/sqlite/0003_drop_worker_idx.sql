-- release_worker finds a worker's jobs among the running ones through the
-- lease index (running jobs are few): one index less to write on every claim.
DROP INDEX IF EXISTS jobvisor_jobs_worker_idx;
