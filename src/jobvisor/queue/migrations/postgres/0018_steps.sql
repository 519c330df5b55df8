-- Durable steps, sleeps and signals (see docs/design.md, "Durable steps").
-- Each table belongs to one job and goes with it: a deleted job (retention,
-- a discarded dead job, a workflow's cleanup) takes its rows along.

-- A job's step log, in the order its handler asked for the steps. `name`
-- is the step's name, with `#n` for its n-th repeat; `status` is
-- `completed` (its `result` is returned from then on, without running it),
-- `failed` (its `error`; the next attempt runs it again) or `waiting` (a
-- sleep or a wait for `signal`, parked until `wake_at`, NULL: no deadline).
CREATE TABLE IF NOT EXISTS jobvisor_steps (
    job_id      uuid        NOT NULL REFERENCES jobvisor_jobs (id) ON DELETE CASCADE,
    seq         integer     NOT NULL,
    name        text        NOT NULL,
    status      text        NOT NULL,
    result      jsonb,
    error       text,
    signal      text,
    wake_at     timestamptz,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    PRIMARY KEY (job_id, seq),
    CONSTRAINT jobvisor_steps_status_check CHECK (status IN ('completed', 'failed', 'waiting')),
    CONSTRAINT jobvisor_steps_seq_check CHECK (seq >= 0 AND name <> '')
);

-- Signals sent to a job, kept until a wait of that name takes them (oldest
-- first); `taken_at` says when one was delivered.
CREATE TABLE IF NOT EXISTS jobvisor_signals (
    id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   uuid        NOT NULL REFERENCES jobvisor_jobs (id) ON DELETE CASCADE,
    name     text        NOT NULL,
    payload  jsonb,
    sent_at  timestamptz NOT NULL,
    taken_at timestamptz,
    CONSTRAINT jobvisor_signals_name_check CHECK (name <> '')
);
CREATE INDEX IF NOT EXISTS jobvisor_signals_job_idx ON jobvisor_signals (job_id, name, id);

-- Values a job publishes while it runs, the latest per key.
CREATE TABLE IF NOT EXISTS jobvisor_events (
    job_id     uuid        NOT NULL REFERENCES jobvisor_jobs (id) ON DELETE CASCADE,
    key        text        NOT NULL,
    value      jsonb,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, key),
    CONSTRAINT jobvisor_events_key_check CHECK (key <> '')
);
