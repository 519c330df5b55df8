-- The dashboard's logged-in sessions, one row each. A session's cookie acts
-- only while its row is here, so a logout (which deletes the row) ends it in
-- every process that serves the dashboard. The id is the SHA-256 of the
-- cookie's session id, never the id itself; rows past their expiry are
-- deleted at the next login. Times are Unix epoch seconds.
CREATE TABLE IF NOT EXISTS jobvisor_web_sessions (
    id         TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
