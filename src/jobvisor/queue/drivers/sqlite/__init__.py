"""SQLite through sqlite3: the runners on one serialised connection, the
dialect, the statements (`sql`), the polling that stands for notifications
(`notify`) and the errors."""
