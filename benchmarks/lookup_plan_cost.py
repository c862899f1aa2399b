"""Cost of planning a UID lookup: the same lookup transaction (BEGIN, the
search statement, ROLLBACK; one round trip for the first two) run
alternately as an unnamed statement (planned every time) and as a prepared
one (PostgreSQL keeps a generic plan after five runs), on a level1 catalog.

    python3 benchmarks/lookup_plan_cost.py "host=... dbname=bench_l1_pgcatalog_10000_20250101"

The statement is the one plone.pgcatalog sends for ``UID=...`` (catalog id
1, spelled out, as ``compiler.unique_lookup`` makes it)."""
import sys
import time

import psycopg

STATEMENT = (
    'SELECT count(*), array_agg(e.rid) FROM "pgcatalog_entries" e WHERE '
    "(e.cid = 1 AND ((CASE WHEN jsonb_typeof((e.idx -> 'UID')) = 'string' "
    "THEN NULL ELSE (e.idx -> 'UID') END) IS NULL AND left(((e.idx ->> "
    "'UID') COLLATE \"C\"), 400) = %s))")


def main(dsn, rounds=600):
    conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0)
    conn.execute("SET max_parallel_workers_per_gather = 0", prepare=False)
    conn.execute("SET random_page_cost = 1.1", prepare=False)
    uids = [r[0] for r in conn.execute(
        "SELECT idx->>'UID' FROM pgcatalog_entries WHERE cid = 1 LIMIT 50",
        prepare=False).fetchall()]

    def lookup(prepare, uid):
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ",
                         prepare=False)
            cur = conn.execute(STATEMENT, (uid,), prepare=prepare,
                               binary=True)
        row = cur.fetchone()
        conn.execute("ROLLBACK", prepare=False)
        assert row[0] == 1, row

    spent = {True: 0.0, False: 0.0}
    for i in range(20):
        lookup(True, uids[i % len(uids)])
        lookup(False, uids[i % len(uids)])
    for i in range(rounds):
        for prepare in (True, False):
            started = time.perf_counter()
            lookup(prepare, uids[i % len(uids)])
            spent[prepare] += time.perf_counter() - started
    plans = conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE %s", ("%array_agg(e.rid)%",),
        prepare=False).fetchall()
    print("planned each time: %.3f ms per lookup transaction" % (
        spent[False] / rounds * 1000))
    print("prepared:          %.3f ms per lookup transaction "
          "(generic plans, custom plans: %s)" % (
              spent[True] / rounds * 1000, plans))


if __name__ == "__main__":
    main(sys.argv[1])
