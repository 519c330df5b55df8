-- Where the bounded claims of each claim filter left off, newest last: a
-- bounded claim starts past the newest mark of its filter (at its bound's
-- priority) when that is ahead of its own bound, so a fleet of claimers does
-- not read again, each for itself, the jobs the others claimed meanwhile. Only
-- a hint (ops.ClaimBounds): a lost mark costs a longer scan, never a job.
-- Rows are only inserted and deleted (the one 256 claims older goes with each
-- new one), so the newest are read first and never behind dead versions.
CREATE TABLE IF NOT EXISTS jobvisor_claim_marks (
    seq      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    filter   text        NOT NULL,
    priority integer     NOT NULL,
    run_at   timestamptz NOT NULL,
    id       uuid        NOT NULL
);
CREATE INDEX IF NOT EXISTS jobvisor_claim_marks_filter_idx
    ON jobvisor_claim_marks (filter, seq DESC);
