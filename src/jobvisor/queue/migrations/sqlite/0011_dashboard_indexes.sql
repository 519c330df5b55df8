-- The dashboard's reads at (next to) no cost to the queue's writes: the
-- status index goes (a status's page walks the index its status already
-- has: finish, lease or claim order). A job's correlation id is stored only
-- when the caller or its context gave one (a job without one reads its own
-- id as its correlation id), so the correlation index holds those only.
DROP INDEX IF EXISTS jobvisor_jobs_status_idx;
