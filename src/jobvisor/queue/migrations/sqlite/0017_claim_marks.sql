-- The PostgreSQL schema's claim marks (see its 0015), kept so both engines
-- have the same versions. SQLite's claims are never bounded: nothing writes
-- this table here.
CREATE TABLE IF NOT EXISTS jobvisor_claim_marks (
    seq      integer PRIMARY KEY AUTOINCREMENT,
    filter   text    NOT NULL,
    priority integer NOT NULL,
    run_at   text    NOT NULL,
    id       text    NOT NULL
);
