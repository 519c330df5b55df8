-- The paused queues: no claim takes a job of a queue listed here. The claim
-- reads the whole table once per statement, so it stays tiny (one row per
-- paused queue) and costs nothing while it is empty. paused_at is Unix epoch
-- seconds.
CREATE TABLE IF NOT EXISTS jobvisor_queue_pauses (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL,
    CONSTRAINT jobvisor_queue_pauses_queue_check CHECK (queue <> '')
);
