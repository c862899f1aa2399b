"""How long one catalog-like statement takes back to back, and after the
client was idle or busy for a few milliseconds (as between two requests).

    python benchmarks/idle_latency.py [--rows 500] [--runs 200]

A fresh database on the benchmark server (``PGCATALOG_DSN`` or the embedded
one) gets a table shaped like ``pgcatalog_entries`` at level2 (``--rows``
rows, a ~2.8 KB JSONB document each); the script then times the level2 P3
statement (count and rids of the Documents a Manager may see) with
``EXPLAIN ANALYZE`` beside it, so the server's own planning and execution
time is shown apart from the round trip.  level2 runs each query as its own
request after Python work; this shows what that does to a statement's cost
on the machine at hand.
"""
import argparse
import json
import statistics
import sys
import time

import psycopg

from shared import scratch_database

STATEMENT = (
    "SELECT count(*), array_agg(e.rid) FROM entries e WHERE e.cid = 1 AND "
    "(e.idx -> 'allowedRolesAndUsers') ?| "
    "'{Anonymous,Authenticated,Manager,user:admin}'::text[] AND "
    "(e.idx -> 'portal_type') = '\"Document\"'::jsonb")


def _document(i):
    provides = ["plone.example.interfaces.IInterface%03d" % n
                for n in range(50)]
    return json.dumps({
        "portal_type": "Document" if i else "Plone Site",
        "allowedRolesAndUsers": ["Anonymous"] if i % 10 < 7 else
        ["Manager", "Owner", "Site Administrator"],
        "review_state": "published", "Subject": ["a", "b"],
        "sortable_title": "benchmark document %04d" % i,
        "created": 1735689600 + i * 60, "modified": 1735689600 + i * 60,
        "object_provides": provides})


def _busy(ms):
    end = time.perf_counter() + ms / 1000.0
    junk = []
    while time.perf_counter() < end:
        junk.append({n: str(n) for n in range(50)})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=500)
    p.add_argument("--runs", type=int, default=200)
    args = p.parse_args(argv)

    with scratch_database("idle_latency") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE entries (rid bigint PRIMARY KEY, cid int, "
                "idx jsonb) WITH (toast_tuple_target = 8160)")
            conn.execute("ALTER TABLE entries ALTER COLUMN idx SET STORAGE "
                         "MAIN")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO entries VALUES (%s, 1, %s)",
                                [(i, _document(i))
                                 for i in range(args.rows + 1)])
            conn.execute("VACUUM ANALYZE entries")
            explain = ("EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON, "
                       "FORMAT JSON) " + STATEMENT)
            print("%d rows; median of %d runs, ms" % (args.rows, args.runs))
            print("%-22s %8s %8s %8s %10s" % ("before each statement",
                                              "wall", "plan", "execute",
                                              "SELECT 1"))
            for label, pause in (("nothing (back to back)", None),
                                 ("2 ms of Python", ("busy", 2)),
                                 ("2 ms asleep", ("sleep", 2)),
                                 ("10 ms asleep", ("sleep", 10))):
                wall, plan, execute, trivial = [], [], [], []
                for _ in range(args.runs):
                    if pause and pause[0] == "busy":
                        _busy(pause[1])
                    elif pause:
                        time.sleep(pause[1] / 1000.0)
                    t0 = time.perf_counter()
                    out = conn.execute(explain).fetchone()[0][0]
                    wall.append((time.perf_counter() - t0) * 1000)
                    plan.append(out["Planning Time"])
                    execute.append(out["Execution Time"])
                    t0 = time.perf_counter()
                    conn.execute("SELECT 1").fetchone()
                    trivial.append((time.perf_counter() - t0) * 1000)
                print("%-22s %8.3f %8.3f %8.3f %10.3f" % (
                    label, statistics.median(wall), statistics.median(plan),
                    statistics.median(execute), statistics.median(trivial)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
