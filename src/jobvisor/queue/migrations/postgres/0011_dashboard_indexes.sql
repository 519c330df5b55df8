-- The dashboard's reads at (next to) no cost to the queue's writes. Every
-- status change writes a new row version, never HOT (the status is in
-- partial indexes' predicates), so a full index costs an entry per version:
-- - jobvisor_jobs_status_idx goes. A status's page walks the index its
--   status already has: finished jobs by finish time (finished_idx), running
--   jobs by lease (lease_idx), waiting jobs in claim order (claim_idx).
-- - jobvisor_jobs_correlation_idx stays as it is (correlation_id IS NOT
--   NULL), but a job's correlation id is stored only when the caller or its
--   context gave one; a job without one reads its own id (32 hex digits) as
--   its correlation id, so the index holds the given ids only.
-- - jobvisor_jobs_due_idx stays: it is written once per enqueue or retry,
--   never by a claim or a completion.
-- Dropping takes an ACCESS EXCLUSIVE lock for an instant; on a busy table
-- drop it first with DROP INDEX CONCURRENTLY (docs/operations.md).
SET LOCAL lock_timeout = '5s';
DROP INDEX IF EXISTS jobvisor_jobs_status_idx;
