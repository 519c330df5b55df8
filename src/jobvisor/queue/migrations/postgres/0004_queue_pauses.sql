-- The paused queues: no claim takes a job of a queue listed here. The claim
-- reads the whole table once per statement, so it stays tiny (one row per
-- paused queue) and costs nothing while it is empty.
CREATE TABLE IF NOT EXISTS jobvisor_queue_pauses (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL,
    CONSTRAINT jobvisor_queue_pauses_queue_check CHECK (queue <> '')
);
