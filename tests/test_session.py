"""The catalog's PostgreSQL transaction inside a ZODB transaction.

* A statement PostgreSQL refuses raises CatalogStatementError (never a
  driver error) and leaves the transaction usable: its earlier catalog
  writes stay and commit.
* Writes PostgreSQL refuses make the commit fail (nothing half-written)
  and the next transaction works.
* Savepoints roll back flushed writes, and only those after them.
* Reads see one snapshot per transaction.
* More transactions than connections: a retryable error, quickly.
* A lock held by another transaction is waited for briefly, then
  ConflictError.
* Commits with other resources use two-phase commit and leave no
  prepared transaction behind.
"""
import threading
import time
import unittest

import psycopg
import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import setRoles
from ZODB.POSException import ConflictError

from plone.pgcatalog import config
from plone.pgcatalog.errors import CatalogStatementError
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import parking
from plone.pgcatalog.pg import upkeep
from plone.pgcatalog.pg.writer import Upsert
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


def ids(results):
    return sorted(b.getId for b in results)


class TestSession(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog

    def tearDown(self):
        transaction.abort()

    def session(self):
        return self.catalog._pgc_session()

    def test_analyze_skips_a_table_autovacuum_holds(self):
        # ANALYZE after a large write is best effort: a table another
        # session is analyzing (autovacuum) is skipped, not waited for
        # until the lock timeout turns it into a logged error
        dsn = self.session().dsn
        with psycopg.connect(dsn) as other:
            other.execute("LOCK TABLE pgcatalog_entries IN SHARE UPDATE "
                          "EXCLUSIVE MODE")
            with self.assertNoLogs("plone.pgcatalog", level="WARNING"):
                upkeep.analyze(dsn)

    def test_analyze_records_the_entries_it_counted(self):
        dsn = self.session().dsn
        upkeep.analyze(dsn)
        with psycopg.connect(dsn) as conn:
            counted = conn.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = "
                "'pgcatalog_entries'::regclass").fetchone()[0]
        self.assertGreater(counted, 0)
        self.assertEqual(upkeep._analyses[dsn][1], counted)

    def test_bulk_writes_analyze_once_the_catalog_grew(self):
        key = "analyze-due-test"  # a state of its own, not the layer's dsn
        upkeep._analyses.pop(key, None)
        self.addCleanup(upkeep._analyses.pop, key, None)
        # below ANALYZE_AFTER_ROWS a transaction never analyzes
        self.assertFalse(
            upkeep.analyze_due(key, upkeep.ANALYZE_AFTER_ROWS - 1))
        # a process's first large transaction does
        self.assertTrue(upkeep.analyze_due(key, upkeep.ANALYZE_AFTER_ROWS))
        upkeep.analyzed(key, 10000)
        # then only once the entries written since are ANALYZE_GROWTH of
        # those counted (small transactions' entries count too)
        due = [upkeep.analyze_due(key, 500) for i in range(8)]
        self.assertEqual(due, [False, False, False, True,
                               False, False, False, True])
        self.assertEqual(upkeep.ANALYZE_GROWTH, 0.2)
        upkeep.analyzed(key, 0)
        self.assertFalse(upkeep.analyze_due(key, 150))
        self.assertTrue(upkeep.analyze_due(key, 200))

    def test_kept_counts_folded_once_enough_entries_were_written(self):
        key = "fold-due-test"  # a state of its own, not the layer's dsn
        upkeep._unfolded.pop(key, None)
        self.addCleanup(upkeep._unfolded.pop, key, None)
        self.assertEqual(upkeep.FOLD_AFTER_ROWS, 10000)
        # a bulk load's 1,000-entry transactions: every tenth folds
        due = [upkeep.fold_due(key, 1000) for i in range(20)]
        self.assertEqual(due, ([False] * 9 + [True]) * 2)
        # small transactions count too; a big one folds at once
        self.assertFalse(upkeep.fold_due(key, 1))
        self.assertTrue(upkeep.fold_due(key, 10000))
        self.assertFalse(upkeep.fold_due(key, 9999))

    def test_refused_statement_keeps_the_transaction(self):
        self.portal.invokeFactory("Document", "kept", title="Kept")
        self.assertEqual(ids(self.catalog(id="kept")), ["kept"])  # flushed
        self.assertTrue(self.session().in_pg_txn)
        for statement in ("SELECT 1/0", "SELECT 'x'::int",
                          "SELECT * FROM no_such_table"):
            with self.assertRaises(CatalogStatementError) as caught:
                self.session().execute(statement)
            self.assertNotIn("SELECT", str(caught.exception))
            self.assertIsNone(caught.exception.__cause__)
        self.assertEqual(ids(self.catalog(id="kept")), ["kept"])
        transaction.commit()
        self.assertEqual(ids(self.catalog(id="kept")), ["kept"])

    def test_refused_statement_in_a_read_only_transaction(self):
        with self.assertRaises(CatalogStatementError):
            self.session().execute("SELECT 1/0")
        self.assertTrue(len(self.catalog(path="/plone", depth=0)))

    def test_refused_writes_fail_the_commit(self):
        self.portal.invokeFactory("Document", "never", title="Never")
        session = self.session()
        cid = self.catalog._pgc_cid()
        # a tsvector PostgreSQL cannot parse: the flush is refused
        session.pending.add(cid, "/plone/broken", Upsert(
            True, {}, [], "{}", {"SearchableText": "'unterminated"}, []))
        with self.assertRaises(CatalogStatementError):
            self.catalog(id="never")
        with self.assertRaises(CatalogStatementError):
            transaction.commit()
        transaction.abort()
        self.assertEqual(ids(self.catalog(id="never")), [])
        self.assertNotIn("never", self.portal)
        self.portal.invokeFactory("Document", "later", title="Later")
        transaction.commit()
        self.assertEqual(ids(self.catalog(id="later")), ["later"])

    def test_savepoints_roll_back_flushed_writes(self):
        self.portal.invokeFactory("Document", "before", title="Before")
        self.catalog(id="before")          # flushed before the savepoint
        savepoint = transaction.savepoint()
        self.portal.invokeFactory("Document", "after", title="After")
        self.assertEqual(ids(self.catalog(id=["before", "after"])),
                         ["after", "before"])
        savepoint.rollback()
        self.assertEqual(ids(self.catalog(id=["before", "after"])),
                         ["before"])
        transaction.commit()
        self.assertEqual(ids(self.catalog(id=["before", "after"])),
                         ["before"])

    def test_one_snapshot_per_transaction(self):
        self.portal.invokeFactory("Document", "early", title="Early")
        transaction.commit()
        self.assertEqual(ids(self.catalog(id="early")), ["early"])
        cid = self.catalog._pgc_cid()
        with psycopg.connect(config.get_dsn(), autocommit=True) as other:
            other.execute("DELETE FROM pgcatalog_entries WHERE cid = %s AND "
                          "path = '/plone/early'", (cid,))
        self.assertEqual(ids(self.catalog(id="early")), ["early"])
        transaction.abort()
        # a change behind the catalog's back: the result cache cannot know
        result_cache.forget()
        self.assertEqual(ids(self.catalog(id="early")), [])

    def test_an_aborted_read_keeps_the_prepared_lookups(self):
        # a transaction that only read ends with COMMIT even when the ZODB
        # aborts it: psycopg deallocates every prepared statement of the
        # connection when it sees a ROLLBACK, and the next request would
        # plan its UID lookups again
        self.portal.invokeFactory("Document", "kept", title="Kept")
        transaction.commit()
        uid = self.portal.kept.UID()
        result_cache.forget()
        self.assertEqual(ids(self.catalog.unrestrictedSearchResults(
            UID=uid)), ["kept"])
        conn = self.session().conn
        self.assertIsNotNone(conn)
        transaction.abort()
        # the next transaction takes the same connection (its COMMIT's
        # answer read: parking.py)
        result_cache.forget()
        self.assertEqual(ids(self.catalog.unrestrictedSearchResults(
            UID=uid)), ["kept"])
        self.assertIs(self.session().conn, conn)
        names = [row[0] for row in conn.execute(
            "SELECT statement FROM pg_prepared_statements").fetchall()]
        self.assertTrue([n for n in names if "'UID'" in n], names)
        # a transaction that wrote still rolls back
        self.portal.kept.setTitle("Changed")
        self.portal.kept.reindexObject()
        found = self.catalog.unrestrictedSearchResults(UID=uid)
        self.assertEqual([b.Title for b in found], ["Changed"])
        self.assertTrue(self.session().wrote)
        transaction.abort()
        found = self.catalog.unrestrictedSearchResults(UID=uid)
        self.assertEqual([b.Title for b in found], ["Kept"])

    def test_a_pages_count_is_planned_with_its_values(self):
        # actual_result_count of a batch counts with a search's statement:
        # planned with its values each time, as the search itself, never
        # prepared (a generic plan ignores how common the values are)
        self.portal.invokeFactory("Document", "counted", title="Counted")
        transaction.commit()
        result_cache.forget()
        found = self.catalog.unrestrictedSearchResults(
            id="counted", sort_on="modified", b_start=1, b_size=1)
        self.assertEqual(found.actual_result_count, 1)
        conn = self.session().conn
        names = [row[0] for row in conn.execute(
            "SELECT statement FROM pg_prepared_statements").fetchall()]
        self.assertFalse([n for n in names if "count(*)" in n and "'id'" in n],
                         names)

    def test_two_phase_commit_leaves_nothing_prepared(self):
        if not db.two_phase(config.get_dsn()):
            self.skipTest("the server has no prepared transactions")
        self.portal.invokeFactory("Document", "twophase", title="2PC")
        transaction.commit()
        with psycopg.connect(config.get_dsn(), autocommit=True) as conn:
            self.assertEqual(conn.execute(
                "SELECT count(*) FROM pg_prepared_xacts").fetchone()[0], 0)
        self.assertEqual(ids(self.catalog(id="twophase")), ["twophase"])

    def test_a_lost_prepare_acknowledgement_is_rolled_back(self):
        """The connection dies as the server prepares: the commit fails,
        and the abort rolls back what the server prepared (on a fresh
        connection): nothing is left holding the entry's locks, the
        catalog keeps no change its objects do not have."""
        dsn = config.get_dsn()
        if not db.two_phase(dsn):
            self.skipTest("the server has no prepared transactions")
        self.portal.invokeFactory("Document", "ack", title="Before")
        transaction.commit()
        self.portal.ack.setTitle("Lost ack")
        self.portal.ack.reindexObject()
        self.catalog(id="ack")  # the writes are in PostgreSQL
        session = self.session()
        conn = session.conn
        real = conn.execute

        def execute(query, *args, **kw):
            text = query if isinstance(query, str) else \
                query.as_string(conn)
            cursor = real(query, *args, **kw)
            if text.startswith("PREPARE TRANSACTION"):
                conn.close()  # the acknowledgement never arrives
                raise psycopg.OperationalError(
                    "server closed the connection unexpectedly")
            return cursor

        conn.execute = execute
        with self.assertRaises(DatabaseUnavailable):
            transaction.commit()
        transaction.abort()
        with psycopg.connect(dsn, autocommit=True) as check:
            self.assertEqual(check.execute(
                "SELECT gid FROM pg_prepared_xacts").fetchall(), [])
        self.assertEqual([b.Title for b in self.catalog(id="ack")],
                         ["Before"])
        # and the entry takes writes again at once
        self.portal.ack.setTitle("After")
        self.portal.ack.reindexObject()
        transaction.commit()
        self.assertEqual([b.Title for b in self.catalog(id="ack")],
                         ["After"])

    def test_an_ended_storage_snapshot_is_retried(self):
        """The snapshot to import belongs to a transaction that ended (a
        server restart ends the storage's): a retryable error, not a
        statement error, and the next transaction works."""
        dsn = config.get_dsn()
        with psycopg.connect(dsn) as exporter:
            exporter.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            snapshot = exporter.execute(
                "SELECT pg_export_snapshot()").fetchone()[0]
        session = self.session()
        self.assertFalse(session.begun)
        session.snapshot_id, session.snapshot_dsn = snapshot, dsn
        with self.assertRaises(DatabaseUnavailable):
            len(self.catalog(portal_type="Document"))
        transaction.abort()
        self.assertEqual(len(self.catalog(portal_type="Folder")), 0)

    def test_in_doubt_transactions_follow_the_storage(self):
        """A prepared catalog transaction naming its storage's PostgreSQL
        transaction is committed when that committed, rolled back when it
        aborted, left while it is in progress."""
        dsn = config.get_dsn()
        if not db.two_phase(dsn):
            self.skipTest("the server has no prepared transactions")
        with psycopg.connect(dsn, autocommit=True) as conn:
            with conn.transaction():
                committed = conn.execute(
                    "SELECT pg_current_xact_id()::text").fetchone()[0]
            conn.execute("BEGIN")
            aborted = conn.execute(
                "SELECT pg_current_xact_id()::text").fetchone()[0]
            conn.execute("ROLLBACK")
            running = psycopg.connect(dsn)
            in_progress = running.execute(
                "SELECT pg_current_xact_id()::text").fetchone()[0]
            gids = {}
            for name, storage in (("c", committed), ("a", aborted),
                                  ("r", in_progress)):
                gids[name] = "pgcatalog:doubt%s:1:%s" % (name, storage)
                conn.execute("BEGIN")
                conn.execute("INSERT INTO pgcatalog_lists (digest, value) "
                             "VALUES (%s, '[]')", ("doubt-" + name,))
                conn.execute("PREPARE TRANSACTION '%s'" % gids[name])
            try:
                done = dict(db.resolve_in_doubt(dsn, older_than=0))
                self.assertEqual(done.get(gids["c"]), "COMMIT PREPARED")
                self.assertEqual(done.get(gids["a"]), "ROLLBACK PREPARED")
                self.assertNotIn(gids["r"], done)
                self.assertEqual(sorted(r[0] for r in conn.execute(
                    "SELECT digest FROM pgcatalog_lists WHERE digest LIKE "
                    "'doubt-%'").fetchall()), ["doubt-c"])
            finally:
                running.close()
                conn.execute("ROLLBACK PREPARED '%s'" % gids["r"])
                conn.execute("DELETE FROM pgcatalog_lists WHERE digest "
                             "LIKE 'doubt-%'")

    def test_a_catalog_commit_without_its_objects_is_answered_from(self):
        """An in-doubt transaction committed by the default policy holds
        catalog writes no ZODB snapshot will count: the process that
        resolved it answers from the catalog at once (no read conflict
        while the lead is judged, consistency.ahead_verdict)."""
        dsn = config.get_dsn()
        if not db.two_phase(dsn):
            self.skipTest("the server has no prepared transactions")
        self.portal.invokeFactory("Document", "lead", title="Lead")
        transaction.commit()
        cid = self.catalog._pgc_cid()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO pgcatalog_commits (cid, delta) VALUES "
                         "(%s, 0)", (cid,))
            conn.execute("PREPARE TRANSACTION 'pgcatalog:crashed:%d'" % cid)
        self.assertEqual(db.resolve_in_doubt(dsn, older_than=0),
                         [("pgcatalog:crashed:%d" % cid, "COMMIT PREPARED")])
        transaction.abort()
        self.assertEqual([b.getId for b in self.catalog(id="lead")],
                         ["lead"])

    def test_lock_waits_are_short(self):
        self.portal.invokeFactory("Document", "locked", title="Locked")
        transaction.commit()
        cid = self.catalog._pgc_cid()
        holding, release = threading.Event(), threading.Event()

        def holder():
            with psycopg.connect(config.get_dsn(), autocommit=True) as conn:
                with conn.transaction():
                    conn.execute("SELECT 1 FROM pgcatalog_entries WHERE "
                                 "cid = %s AND path = '/plone/locked' FOR "
                                 "UPDATE", (cid,))
                    holding.set()
                    release.wait(30)

        thread = threading.Thread(target=holder, daemon=True)
        thread.start()
        holding.wait(30)
        try:
            self.portal.locked.setTitle("Waiting")
            self.portal.locked.reindexObject()
            started = time.perf_counter()
            with self.assertRaises(ConflictError):
                self.catalog(id="locked")
            self.assertLess(time.perf_counter() - started, 2.0)
        finally:
            release.set()
            thread.join(30)
        transaction.abort()

    def test_a_read_only_transaction_ends_without_waiting(self):
        # a transaction that only read sends its COMMIT and leaves the
        # answer for the next one (parking.py): the server has ended the
        # transaction already (no snapshot held while the thread is idle),
        # and the next transaction takes that connection, idle
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        conn = self.session().conn
        pid = conn.info.backend_pid
        transaction.commit()
        self.assertIsNone(self.session().conn)
        self.assertGreaterEqual(parking.count(), 1)
        with db.get_pool().connection() as other:
            deadline = time.monotonic() + 5
            while True:
                state, xmin = other.execute(
                    "SELECT state, backend_xmin::text FROM pg_stat_activity "
                    "WHERE pid = %s", (pid,)).fetchone()
                if state == "idle" or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        self.assertEqual((state, xmin), ("idle", None))
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        self.assertIs(self.session().conn, conn)
        transaction.commit()

    def test_a_parked_connection_that_died_is_replaced(self):
        # the backend of a parked connection killed (or the server
        # restarted): the next transaction gets another, no error
        self.portal.invokeFactory("Document", "parked", title="Parked")
        transaction.commit()
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        pid = self.session().conn.info.backend_pid
        transaction.commit()
        with db.get_pool().connection() as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        result_cache.forget()
        self.assertEqual(ids(self.catalog.unrestrictedSearchResults(
            portal_type="Document", id="parked")), ["parked"])
        self.assertNotEqual(self.session().conn.info.backend_pid, pid)
        transaction.commit()

    def kill_backend(self):
        pid = self.session().conn.info.backend_pid
        with db.get_pool().connection() as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)

    def test_a_savepoint_the_server_refused_keeps_the_transaction(self):
        # the catalog's SAVEPOINT fails (its backend killed, a cancel):
        # the ZODB transaction goes on (a savepoint that raised would doom
        # it), reading on a new connection
        self.portal.invokeFactory("Document", "kept", title="Kept")
        transaction.commit()
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        self.kill_backend()
        savepoint = transaction.savepoint()
        result_cache.forget()
        self.assertEqual(ids(self.catalog.unrestrictedSearchResults(
            id="kept")), ["kept"])
        savepoint.rollback()
        transaction.commit()
        # writes made before it are lost with the connection: the commit
        # says so, even after a rollback to the savepoint
        self.portal.invokeFactory("Document", "lost", title="Lost")
        self.assertEqual(ids(self.catalog.unrestrictedSearchResults(
            id="lost")), ["lost"])     # (written, then read)
        self.assertTrue(self.session().wrote)
        self.kill_backend()
        savepoint = transaction.savepoint()
        savepoint.rollback()
        with self.assertRaises(DatabaseUnavailable):
            transaction.commit()
        transaction.abort()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            id="lost")), 0)

    def test_no_free_connection_fails_fast_and_retryably(self):
        pool = db.get_pool()
        transaction.abort()
        # connections whose COMMIT is on its way are free ones too
        # (parking.py): back to the pool, which is then emptied
        parking.release_all(db.checkin, db.discard)
        held = []
        old = config.get_pool_timeout
        config.get_pool_timeout = lambda: 0.3
        try:
            while True:
                try:
                    held.append(pool.getconn(timeout=0.3))
                except Exception:  # noqa: B902 - PoolTimeout: all taken
                    break
            started = time.perf_counter()
            with self.assertRaises(DatabaseUnavailable):
                self.catalog(portal_type="Document")
            self.assertLess(time.perf_counter() - started, 2.0)
        finally:
            config.get_pool_timeout = old
            for conn in held:
                pool.putconn(conn)
        transaction.abort()
        self.catalog(portal_type="Document")
