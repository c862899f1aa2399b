"""One level1 query with the hot rows' sort walk on and off by turns
(docs/benchmarks/history.md, 2026-11-28, the sort date in the hot rows).

``compiler.hot_sorted`` (schema version 21) walks the hot rows for a page
sorted by the hot sort index; with ``hot.sorts`` answering False the same
search walks the entries, as before.  This machine's speed moves by up to
2x between minutes, so the two are timed in alternating rounds in one
process: each round runs the query ``--runs`` times each way, every search
in a fresh read-only request (level1's ``Request``), result cache off, and
prints the medians.  On level1's databases (``--keep-databases``):

    PGCATALOG_DSN="host=... dbname=postgres" \\
        python3 benchmarks/hot_sorted_ab.py --scale 100000 --query FTF
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--query", default="FTF")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    os.environ["PGCATALOG_CACHE"] = "off"
    sys.path.insert(0, HERE)
    import shared
    from level1.measure import Request
    from level1.measure import _execute
    from level1.plan import Plan
    from level1.queries import make_queries

    from plone.pgcatalog.pg import hot

    base = os.environ.get("PGCATALOG_DSN", "host=127.0.0.1 dbname=postgres")
    dsn = "%s dbname=bench_l1_pgcatalog_%d_%d" % (base, args.scale, args.seed)
    db, _ = shared.start_backend("pgcatalog", dsn, 5000, [], "hot-ab-")
    queries = {q[0]: q for q in make_queries(Plan(args.scale, args.seed))}
    _qid, _label, kind, variants, _key = queries[args.query]
    walking = hot.sorts

    def median_ms():
        times = []
        for i in range(args.runs):
            with Request(db) as req:
                t0 = time.perf_counter_ns()
                _execute(req.catalog, kind, variants[i % len(variants)],
                         False)
                times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1e6

    try:
        for n in range(args.rounds):
            hot.sorts = walking
            on = median_ms()
            hot.sorts = lambda index, cid: False
            off = median_ms()
            print("round %d: hot walk %.2f ms, entries %.2f ms" % (n, on, off))
    finally:
        hot.sorts = walking
        db.close()


if __name__ == "__main__":
    main()
