"""What one catalog read transaction costs in round trips, apart from the
catalog: a one-row aggregate in autocommit, inside BEGIN (pipelined) +
COMMIT, and with RelStorage's way of sharing its snapshot (psycopg2 exports
it, psycopg imports it).  ``python benchmarks/snapshot_cost.py`` (embedded
PostgreSQL unless PGCATALOG_DSN is set); medians and p95 (nearest rank) in
ms.
"""
import time

import psycopg
import psycopg2
from psycopg import sql

from shared import scratch_database
from shared import stats


def main(n=300, pause=0.002):
    with scratch_database("snapshot_cost") as dsn:
        measure(dsn, n, pause)


def measure(dsn, n, pause):
    conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0)
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    conn.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 500) g")
    storage = psycopg2.connect(dsn)
    storage.set_session(isolation_level="REPEATABLE READ", readonly=True)
    cur2 = storage.cursor()
    query = "SELECT count(*) FROM t WHERE v = %s"

    def run(name, fn):
        times = []
        for _ in range(n):
            time.sleep(pause)
            started = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - started)
        ms = stats(times)
        print("%-44s median %.3f  p95 %.3f" % (
            name, ms["median_ms"], ms["p95_ms"]))

    def autocommit():
        conn.execute(query, ("x",)).fetchone()

    def repeatable_read(snapshot=None):
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ",
                         prepare=False)
            if snapshot:
                conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                    sql.Literal(snapshot)), prepare=False)
            cur = conn.execute(query, ("x",))
        cur.fetchone()
        conn.execute("COMMIT", prepare=False)

    def export():
        cur2.execute("SELECT 1")    # RelStorage's poll starts its snapshot
        cur2.execute("SELECT pg_export_snapshot()")
        return cur2.fetchone()[0]

    def shared():
        repeatable_read(export())
        storage.rollback()

    def export_only():
        export()
        storage.rollback()

    run("autocommit query", autocommit)
    run("REPEATABLE READ, BEGIN pipelined, COMMIT", repeatable_read)
    run("... with RelStorage's exported snapshot", shared)
    run("export alone (psycopg2, with its poll)", export_only)
    kept = export()     # valid while the exporting transaction is open
    run("import alone (one kept snapshot)", lambda: repeatable_read(kept))
    storage.rollback()
    storage.close()
    conn.close()


if __name__ == "__main__":
    main()
