"""Statements timed side by side, in alternating rounds
(docs/benchmarks/history.md, 2026-11-28, the three queries probed at their
floors).

This machine's speed moves by up to 2x between minutes, so two ways of
answering one question are only compared within the same minutes: each
round runs every statement once, in turn, on one connection (warm, the
catalog's own session settings: no parallel workers), and the medians and
minima over the rounds are printed.  A statement is one SQL file (a
``PGCATALOG_TRACE_FILE`` line's text with its values written in, or a
variant written by hand); ``--same`` checks first that every file gives the
rows of the first.

    python3 benchmarks/sql_ab.py --dsn "dbname=bench_l1_pgcatalog_..." \\
        --rounds 41 --same now.sql variant.sql
"""
import argparse
import os
import statistics
import time

import psycopg


#: the settings a catalog connection runs with (db._configure's defaults)
SESSION = ("SET max_parallel_workers_per_gather = 0",)


def load(path):
    with open(path) as source:
        text = source.read().strip()
    return text[:-1] if text.endswith(";") else text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--same", action="store_true",
                        help="check that every statement gives the first "
                             "one's rows")
    parser.add_argument("--set", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="a setting of the session (repeatable)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    statements = [(os.path.basename(path), load(path))
                  for path in args.files]
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        for command in SESSION:
            conn.execute(command)
        for item in args.set:
            name, _, value = item.partition("=")
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        first = None
        for name, text in statements:
            rows = conn.execute(text).fetchall()  # warms the pages too
            if args.same:
                if first is None:
                    first = rows
                elif rows != first:
                    raise SystemExit("%s: rows differ from %s's"
                                     % (name, statements[0][0]))
        times = {name: [] for name, _ in statements}
        for _ in range(args.rounds):
            for name, text in statements:
                started = time.perf_counter()
                conn.execute(text).fetchall()
                times[name].append((time.perf_counter() - started) * 1000)
    width = max(len(name) for name in times)
    for name, values in times.items():
        print("%-*s  median %8.3f ms  min %8.3f ms  (%d rounds)" % (
            width, name, statistics.median(values), min(values),
            len(values)))


if __name__ == "__main__":
    main()
