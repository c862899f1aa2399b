"""The slow-query log (``slow-query-ms``): slow searches are logged on
``plone.pgcatalog.slow`` with their shape (no values), time, rows and plan,
and kept in a bounded per-process buffer; EXPLAIN plans the same statement
again without running it."""
import os
import sys
import time
import unittest
from unittest import mock

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog import config
from plone.pgcatalog.errors import CatalogStatementTimeout
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.search import slowlog
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING

sys.path.insert(0, os.path.dirname(__file__))
from slow_helpers import slow_searches  # noqa: E402

ENV = "PGCATALOG_SLOW_QUERY_MS"


class TestShape(unittest.TestCase):

    def test_values_are_redacted(self):
        shape = slowlog.shape({
            "portal_type": "SecretType",
            "path": {"query": "/plone/secret-folder", "depth": 1},
            "SearchableText": "password123",
            "Subject": {"query": ["confidential", "x"], "operator": "and"},
            "allowedRolesAndUsers": ["user:bob", "Anonymous"],
            "sort_on": "modified", "sort_order": "reverse", "b_size": 20,
        })
        for secret in ("SecretType", "secret-folder", "password123",
                       "confidential", "bob", "Anonymous"):
            self.assertNotIn(secret, shape)
        self.assertEqual(shape, (
            "SearchableText=<str> Subject={operator: 'and', query: <2 items>} "
            "allowedRolesAndUsers=<2 items> b_size=20 "
            "path={depth: 1, query: <str>} portal_type=<str> "
            "sort_on='modified' sort_order='reverse'"))

    def test_long_plain_values_are_truncated(self):
        shape = slowlog.shape({"sort_on": "x" * 100})
        self.assertLess(len(shape), 60)

    def test_setting(self):
        with mock.patch.dict(os.environ):
            os.environ.pop(ENV, None)
            self.assertEqual(config.get_slow_query_ms(), 1000)
        with mock.patch.dict(os.environ, {ENV: "0"}):
            self.assertEqual(config.get_slow_query_ms(), 0)
        with mock.patch.dict(os.environ, {ENV: "-3"}):
            with self.assertRaises(ConfigurationError):
                config.get_slow_query_ms()


class TestSlowLog(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(3):
            self.portal.invokeFactory("Document", "s%d" % n,
                                      title="Doc %d" % n)
        processQueue()
        transaction.commit()
        slowlog.clear()
        self.addCleanup(slowlog.clear)

    def tearDown(self):
        transaction.abort()

    def settings(self, **env):
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        self.addCleanup(patcher.stop)
        transaction.abort()  # the next session reads them

    def entries(self):
        store = self.catalog._pgc_store()
        return slowlog.entries(store.session.dsn, store.key)

    def search(self, **query):
        return self.catalog.unrestrictedSearchResults(**query)

    def test_slow_search_is_logged_and_kept(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="100")
        with slow_searches(0.2):
            with self.assertLogs("plone.pgcatalog.slow", "WARNING") as logs:
                found = self.search(portal_type="Document", id="s1")
        self.assertEqual(len(found), 1)
        self.assertEqual(len(logs.records), 1)
        message = logs.output[0]
        self.assertIn("slow catalog search", message)
        self.assertIn("EveryMatch", message)
        self.assertIn("portal_type=<str>", message)
        self.assertIn("id=<str>", message)
        self.assertNotIn("s1", message)
        self.assertNotIn("Document", message)
        [entry] = self.entries()
        self.assertGreaterEqual(entry.ms, 200)
        self.assertEqual((entry.rows, entry.total, entry.plan),
                         (1, 1, "EveryMatch"))
        self.assertIsNone(entry.error)
        info = entry.info()
        self.assertEqual(info["plan"], "EveryMatch")
        self.assertTrue(info["explainable"])

    def test_fast_search_is_not_logged(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="5000")
        with slow_searches(0.05):
            self.assertEqual(len(self.search(portal_type="Document")), 3)
        self.assertEqual(self.entries(), [])

    def test_off(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="0")
        with slow_searches(0.2):
            self.assertEqual(len(self.search(portal_type="Document")), 3)
        self.assertEqual(self.entries(), [])

    def test_page_plan_and_rows(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="100")
        with slow_searches(0.2):
            found = self.search(portal_type="Document", sort_on="id",
                                b_start=0, b_size=2)
            self.assertEqual([b.getId for b in found[:2]], ["s0", "s1"])
        [entry] = self.entries()
        self.assertEqual((entry.plan, entry.rows), ("Page", 2))
        self.assertIn("b_size=2", entry.shape)
        self.assertIn("sort_on='id'", entry.shape)

    def test_timed_out_search_is_kept(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="50",
                      PGCATALOG_STATEMENT_TIMEOUT_MS="150")
        with slow_searches(2):
            with self.assertRaises(CatalogStatementTimeout):
                len(self.search(portal_type="Document"))
        [entry] = self.entries()
        self.assertEqual(entry.error, "timeout")
        self.assertIsNone(entry.rows)
        # the transaction goes on
        self.assertEqual(len(self.search(portal_type="Document")), 3)

    def test_explain_plans_without_running(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="100")
        with slow_searches(0.5):
            self.assertEqual(len(self.search(portal_type="Document")), 3)
        [entry] = self.entries()
        store = self.catalog._pgc_store()
        started = time.perf_counter()
        plan = slowlog.explain(store, entry)
        self.assertLess(time.perf_counter() - started, 0.4)
        self.assertIn("pg_sleep", plan)
        self.assertIn("pgcatalog_entries", plan)
        self.assertNotIn("actual time", plan)

    def test_buffer_is_bounded(self):
        self.settings(PGCATALOG_SLOW_QUERY_MS="1")
        store = self.catalog._pgc_store()
        for n in range(slowlog.SIZE + 20):
            slowlog.record(store, {"id": "x"}, None, 5.0)
        entries = self.entries()
        self.assertEqual(len(entries), slowlog.SIZE)
        self.assertEqual(entries[0].id - entries[-1].id, slowlog.SIZE - 1)

    def test_entries_are_per_catalog(self):
        store = self.catalog._pgc_store()
        slowlog.record(store, {"id": "x"}, None, 5.0)
        self.assertEqual(len(self.entries()), 1)
        self.assertEqual(slowlog.entries(store.session.dsn, "other"), [])
