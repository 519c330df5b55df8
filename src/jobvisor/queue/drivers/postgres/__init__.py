"""PostgreSQL through psycopg 3: the runners on a psycopg pool (`runner_async`
is the source, `runner` its generated sync twin), the session's settings, the
dialect, the statements (`sql`), LISTEN (`notify`) and the errors."""
