"""The floor under `bench/latency.py`: the same measure with no queue at all.

    .venv/bin/python bench/latency_floor.py [--samples 300] [--pg-url postgresql://…/postgres]

A bare psycopg pair does the least any PostgreSQL job queue must do to start
a job on an idle worker. One process inserts a one-column row and NOTIFYs in
the same autocommit statement (a synchronous commit, as a durable enqueue
needs). A listener process blocks on its LISTEN connection. On each
notification it runs one UPDATE of one row on a second connection with
`synchronous_commit = off` (standing for the claim) and reports when that
UPDATE returned, over a pipe. No pools, no event loop, no JSON, no indexes
but the primary key. The pauses between samples are those of
`bench/latency.py` (5 to 20 ms, so both sides are idle each time).

Prints, in milliseconds, p50/p90/p99/max of: the insert alone, the call of
the insert to the notification's arrival, and the call to the claim's return.
Runs in a database named `jobvisor_bench_floor`, dropped and created.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import sys
import time

import psycopg

from latency import fresh_database, print_summary  # bench/, this script's directory

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_floor"


def listener(url: str, write_fd: int) -> None:
    """Wait for notifications; for each, one UPDATE, then report the times."""
    out = os.fdopen(write_fd, "w", buffering=1)
    listen = psycopg.connect(url, autocommit=True)
    claim = psycopg.connect(url, autocommit=True)
    claim.execute("SET synchronous_commit = off")
    listen.execute("LISTEN floor")
    out.write("ready\n")
    gen = listen.notifies()
    for notify in gen:
        woke = time.time()
        if notify.payload == "stop":
            break
        claim.execute("UPDATE floor_claim SET n = n + 1 WHERE id = 1")
        out.write(f"{woke} {time.time()}\n")
    out.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    url = fresh_database(args.pg_url, BENCH_DB)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE floor_jobs (id bigserial PRIMARY KEY, queue text NOT NULL)")
        conn.execute("CREATE TABLE floor_claim (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute("INSERT INTO floor_claim VALUES (1, 0)")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the listener: a child that only runs `listener` and exits
        os.close(read_fd)
        try:
            listener(url, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    reader = os.fdopen(read_fd, "r")
    assert reader.readline().strip() == "ready"
    enqueue = psycopg.connect(url, autocommit=True)
    insert = "INSERT INTO floor_jobs (queue) VALUES ('default') RETURNING pg_notify('floor', queue)"
    inserts: list[float] = []
    notified: list[float] = []
    claimed: list[float] = []
    for i in range(args.samples + 5):
        time.sleep(random.uniform(0.005, 0.02))
        called = time.time()
        enqueue.execute(insert).fetchone()
        returned = time.time()
        if not select.select([reader], [], [], 10)[0]:
            sys.exit("the listener did not answer within 10 s")
        woke, done = (float(x) for x in reader.readline().split())
        if i >= 5:  # warm-up
            inserts.append((returned - called) * 1000)
            notified.append((woke - called) * 1000)
            claimed.append((done - called) * 1000)
    enqueue.execute("NOTIFY floor, 'stop'")
    os.waitpid(pid, 0)
    enqueue.close()
    print_summary("insert alone", inserts)
    print_summary("insert called -> notification", notified)
    print_summary("insert called -> claim returned", claimed)


if __name__ == "__main__":
    main()
