"""Planning time of the catalog's statements on the entries, with and
without a statistics object per shared expression index
(docs/benchmarks/history.md, 2026-11-27, value B-trees shared).

PostgreSQL's planner loads every statistics object of a table each time it
plans a statement on it.  This takes the statements a run sent (a
``PGCATALOG_TRACE_FILE`` trace: time, text, parameters per line), keeps the
distinct ones on ``pgcatalog_entries`` and plans each with ``EXPLAIN
(SUMMARY)`` in alternating blocks: an object on every non-partial expression
index (as before the B-trees were shared) and none (as now).  The objects it
makes are dropped at the end.

    PGCATALOG_TRACE_FILE=/tmp/trace.txt <run level1's queries once>
    python3 benchmarks/plan_cost.py --dsn "dbname=bench_l1_pgcatalog_..." \\
        /tmp/trace.txt
"""
import argparse
import ast
import statistics

import psycopg
from psycopg import sql

from plone.pgcatalog.schema import planstats


def set_objects(dsn, every):
    """An object on every non-partial expression index (``every``) or on
    none of them; the partial ones' are left as they are."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for oid, expressions in conn.execute(
                planstats._EXPRESSION_INDEXES_SQL.replace(
                    "AND i.indpred IS NOT NULL", "AND i.indpred IS NULL"),
                ()).fetchall():
            if not expressions:
                continue
            name = sql.Identifier(planstats.statistics_name(expressions))
            if every:
                conn.execute(sql.SQL(
                    "CREATE STATISTICS IF NOT EXISTS {} ON {} FROM "
                    "pgcatalog_entries").format(name, sql.SQL(", ").join(
                        sql.SQL("({})").format(sql.SQL(e))
                        for e in expressions)), ())
            else:
                conn.execute(sql.SQL("DROP STATISTICS IF EXISTS {}").format(
                    name), ())
        if every:
            conn.execute("ANALYZE pgcatalog_entries")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("trace")
    args = parser.parse_args()
    statements = {}
    with open(args.trace) as trace:
        for line in trace:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or "pgcatalog_entries" not in parts[1] or \
                    parts[1].startswith("EXPLAIN"):
                continue
            statements.setdefault(parts[1], ast.literal_eval(parts[2]))
    times = {}
    try:
        for block in range(4):
            every = block % 2 == 0
            set_objects(args.dsn, every)
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                # the catalog connections' planner settings (db.py)
                conn.execute("SET max_parallel_workers_per_gather = 0")
                conn.execute("SET random_page_cost = 1.1")
                for n, (text, params) in enumerate(statements.items()):
                    for run in range(args.runs):
                        plan = conn.execute(
                            "EXPLAIN (SUMMARY, FORMAT JSON) " + text, params,
                            prepare=False).fetchone()[0]
                        if run >= 3:
                            times.setdefault((n, every), []).append(
                                plan[0]["Planning Time"])
    finally:
        set_objects(args.dsn, False)
    before = [statistics.median(times[n, True]) for n in range(len(statements))]
    after = [statistics.median(times[n, False])
             for n in range(len(statements))]
    for n, text in enumerate(statements):
        print("%6.3f -> %6.3f ms  %s" % (before[n], after[n], text[:80]))
    print("%d statements; median planning %.3f -> %.3f ms" % (
        len(statements), statistics.median(before), statistics.median(after)))


if __name__ == "__main__":
    main()
