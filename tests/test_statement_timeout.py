"""The statement timeout of catalog reads (``statement-timeout-ms``).

A read that runs longer ends with CatalogStatementTimeout (no psycopg
error), the Zope transaction goes on (a later query works, this
transaction's catalog writes are kept and commit); writes and the commit
run without the limit.  Slow reads are made with ``pg_sleep``: through the
store, or in a search through a test-only condition added to the compiled
query (``slow_searches``).
"""
import os
import sys
import threading
import time
import unittest
from unittest import mock

import psycopg
import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog import config
from plone.pgcatalog.errors import CatalogStatementError
from plone.pgcatalog.errors import CatalogStatementTimeout
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING

sys.path.insert(0, os.path.dirname(__file__))
from slow_helpers import slow_searches  # noqa: E402

ENV = "PGCATALOG_STATEMENT_TIMEOUT_MS"


def sleeping(seconds):
    return q("SELECT pg_sleep({})", float(seconds))


class TestSetting(unittest.TestCase):

    def test_default_is_none(self):
        with mock.patch.dict(os.environ):
            os.environ.pop(ENV, None)
            self.assertEqual(config.get_statement_timeout_ms(), 0)

    def test_values(self):
        for raw, value in (("250", 250), (" 0 ", 0), ("", 0)):
            with mock.patch.dict(os.environ, {ENV: raw}):
                self.assertEqual(config.get_statement_timeout_ms(), value)
        for raw in ("-1", "1.5", "ten", "5s"):
            with mock.patch.dict(os.environ, {ENV: raw}):
                with self.assertRaises(ConfigurationError) as raised:
                    config.get_statement_timeout_ms()
                self.assertIn("statement-timeout-ms", str(raised.exception))

    def test_site_value_wins(self):
        with mock.patch.dict(os.environ, {ENV: "250"}):
            self.assertEqual(config.get_statement_timeout_ms(
                {"statement-timeout-ms": 40}), 40)
            self.assertEqual(config.get_statement_timeout_ms(
                {"statement-timeout-ms": None}), 250)


class TestStatementTimeout(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(3):
            self.portal.invokeFactory("Document", "t%d" % n,
                                      title="Doc %d" % n)
        processQueue()
        transaction.commit()
        patcher = mock.patch.dict(os.environ, {ENV: "200"})
        patcher.start()
        self.addCleanup(patcher.stop)
        transaction.abort()  # the next session reads the setting

    def tearDown(self):
        transaction.abort()

    def store(self):
        return self.catalog._pgc_store()

    def documents(self):
        return sorted(b.getId for b in self.catalog.unrestrictedSearchResults(
            portal_type="Document"))

    def test_slow_read_raises_a_clear_error(self):
        with self.assertRaises(CatalogStatementTimeout) as raised:
            self.store().execute(sleeping(2))
        message = str(raised.exception)
        self.assertIn("200 ms", message)
        self.assertIn("statement-timeout-ms", message)
        self.assertIn("PGCATALOG_STATEMENT_TIMEOUT_MS", message)
        self.assertIsInstance(raised.exception, CatalogStatementError)
        self.assertNotIsInstance(raised.exception, psycopg.Error)
        self.assertIsNone(raised.exception.__cause__)
        # the transaction goes on
        self.assertEqual(self.documents(), ["t0", "t1", "t2"])
        transaction.commit()

    def test_slow_search_raises_and_the_next_search_works(self):
        with slow_searches(2):
            with self.assertRaises(CatalogStatementTimeout):
                len(self.catalog.unrestrictedSearchResults(
                    portal_type="Document"))
        self.assertEqual(self.documents(), ["t0", "t1", "t2"])
        # a search shorter than the limit is answered
        with slow_searches(0.01):
            self.assertEqual(len(self.catalog.unrestrictedSearchResults(
                portal_type="Document", sort_on="id")), 3)

    def test_pending_writes_are_kept(self):
        self.portal.invokeFactory("Document", "fresh", title="Fresh")
        processQueue()  # buffered, not sent yet
        self.assertTrue(self.store().session.pending)
        with slow_searches(2):
            with self.assertRaises(CatalogStatementTimeout):
                len(self.catalog.unrestrictedSearchResults(
                    portal_type="Document"))
        # the writes were sent before the read; the read alone was undone
        self.assertEqual(self.documents(), ["fresh", "t0", "t1", "t2"])
        self.portal.invokeFactory("Document", "fresher", title="Fresher")
        processQueue()
        with self.assertRaises(CatalogStatementTimeout):
            self.store().execute(sleeping(2))
        transaction.commit()
        self.assertEqual(self.documents(),
                         ["fresh", "fresher", "t0", "t1", "t2"])

    def test_writes_and_commit_are_not_limited(self):
        session = self.store().session
        self.assertEqual(session.timeout_ms, 200)
        self.portal.invokeFactory("Document", "fresh", title="Fresh")
        processQueue()
        # a statement the session runs as a write is not cut short ...
        session.execute_write(None, sleeping(0.4))
        # ... and reads after it are limited again
        with self.assertRaises(CatalogStatementTimeout):
            self.store().execute(sleeping(2))
        transaction.commit()
        self.assertIn("fresh", self.documents())

    def test_limit_is_set_on_the_transaction(self):
        self.assertEqual(self.store().value(q(
            "SELECT current_setting('statement_timeout')")), "200ms")
        transaction.abort()
        with mock.patch.dict(os.environ, {ENV: "0"}):
            # none set: the server's own (the test server's is 0)
            self.assertEqual(self.store().value(q(
                "SELECT current_setting('statement_timeout')")), "0")
            self.store().execute(sleeping(0.3))

    def test_cancelled_by_an_administrator_is_not_a_timeout(self):
        transaction.abort()
        with mock.patch.dict(os.environ, {ENV: "0"}):
            store = self.store()
            pid = store.value(q("SELECT pg_backend_pid()"))

            def cancel():
                time.sleep(0.3)
                with db.get_pool().connection() as conn:
                    conn.execute("SELECT pg_cancel_backend(%s)", [pid])

            thread = threading.Thread(target=cancel)
            thread.start()
            try:
                with self.assertRaises(CatalogStatementError) as raised:
                    store.execute(sleeping(5))
            finally:
                thread.join()
            self.assertNotIsInstance(raised.exception,
                                     CatalogStatementTimeout)
            self.assertEqual(self.documents(), ["t0", "t1", "t2"])


class TestCancelStorm(unittest.TestCase):
    """Statements cancelled at any moment (a statement timeout of 1 ms, an
    administrator's ``pg_cancel_backend`` every few milliseconds) while a
    request searches, iterates, reads metadata and writes: every failure is
    a CatalogStatementError, and once the storm is over the same
    transaction answers and commits (nothing left aborted: no
    ``InFailedSqlTransaction``)."""
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(30):
            self.portal.invokeFactory("Document", "s%d" % n,
                                      title="Storm %d" % n,
                                      subject=("a", "b%d" % (n % 3)))
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()

    def work(self, n):
        """One of the things a request does with the catalog."""
        search = self.catalog.unrestrictedSearchResults
        kind = n % 7
        if kind == 0:
            return [b.getPath() for b in search(portal_type="Document")]
        if kind == 1:
            return [b.Title for b in search(Subject="a", sort_on="id")[:5]]
        if kind == 2:
            return len(search(SearchableText="storm"))
        if kind == 3:
            return self.catalog.uniqueValuesFor("Subject")
        if kind == 4:
            doc = self.portal["s%d" % (n % 30)]
            doc.setTitle("Storm %d again" % n)
            doc.reindexObject()
            return len(search(id=doc.getId()))
        if kind == 5:
            transaction.savepoint()
            return [b.getId for b in search(path="/plone", sort_on="id",
                                            b_size=3)]
        return self.catalog.getrid("/plone/s1")

    def storm(self, stop, session):
        def cancel():
            while not stop.is_set():
                conn = session.conn
                pid = conn.info.backend_pid if conn is not None else None
                if pid:
                    with db.get_pool().connection() as admin:
                        admin.execute("SELECT pg_cancel_backend(%s)", [pid])
                time.sleep(0.002)
        return threading.Thread(target=cancel)

    def survives(self, session):
        failures = 0
        for n in range(200):
            try:
                self.work(n)
            except CatalogStatementError:
                failures += 1
        return failures

    def check_after(self):
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            portal_type="Document")), 30)
        try:
            transaction.commit()
        except CatalogStatementError:
            # a write refused in the storm fails the commit, cleanly
            transaction.abort()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            portal_type="Document")), 30)

    def test_timeouts_everywhere(self):
        session = self.catalog._pgc_store().session
        session.set_timeout(1)
        self.survives(session)
        session.set_timeout(0)
        self.check_after()

    def test_a_refused_savepoint_rolls_the_writes_back_cleanly(self):
        # a timeout or a cancel can refuse the SAVEPOINT a statement after
        # writes is sent in: no savepoint to go back to, the transaction
        # aborted with its writes; the connection stays, the commit fails
        # as a refused statement fails it (not as a lost connection)
        doc = self.portal.s1
        doc.setTitle("Refused")
        doc.reindexObject()
        processQueue()
        session = self.catalog._pgc_store().session
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            Title="Refused")), 1)
        self.assertTrue(session.wrote)
        conn = session.conn
        try:
            # what a refused SAVEPOINT leaves: an aborted transaction
            conn.execute("SELECT 1 / 0")
        except psycopg.Error as exc:
            session._contain(conn, exc, True)
        self.assertIs(session.conn, conn)
        self.assertIsInstance(session.failed, CatalogStatementError)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            portal_type="Document")), 30)
        with self.assertRaises(CatalogStatementError):
            transaction.commit()
        transaction.abort()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            Title="Refused")), 0)

    def test_cancels_from_outside(self):
        session = self.catalog._pgc_store().session
        len(self.catalog.unrestrictedSearchResults(portal_type="Document"))
        stop = threading.Event()
        thread = self.storm(stop, session)
        thread.start()
        try:
            self.survives(session)
        finally:
            stop.set()
            thread.join()
        self.check_after()
