-- Durable steps, sleeps and signals (see the PostgreSQL migration and
-- docs/design.md, "Durable steps"). Ids are UUID text, times epoch seconds.
CREATE TABLE IF NOT EXISTS jobvisor_steps (
    job_id      TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    result      TEXT,
    error       TEXT,
    signal      TEXT,
    wake_at     REAL,
    started_at  REAL    NOT NULL,
    finished_at REAL,
    PRIMARY KEY (job_id, seq),
    CHECK (status IN ('completed', 'failed', 'waiting')),
    CHECK (seq >= 0 AND name <> '')
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS jobvisor_signals (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    payload  TEXT,
    sent_at  REAL    NOT NULL,
    taken_at REAL,
    CHECK (name <> '')
);
CREATE INDEX IF NOT EXISTS jobvisor_signals_job_idx ON jobvisor_signals (job_id, name, id);

CREATE TABLE IF NOT EXISTS jobvisor_events (
    job_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (job_id, key),
    CHECK (key <> '')
) WITHOUT ROWID;

-- jobvisor's connections do not enforce foreign keys (a pragma per
-- connection), so a job's rows go with it through this trigger instead:
-- whichever statement deletes a job.
CREATE TRIGGER IF NOT EXISTS jobvisor_jobs_steps_delete
    AFTER DELETE ON jobvisor_jobs
    FOR EACH ROW
BEGIN
    DELETE FROM jobvisor_steps WHERE job_id = OLD.id;
    DELETE FROM jobvisor_signals WHERE job_id = OLD.id;
    DELETE FROM jobvisor_events WHERE job_id = OLD.id;
END;
