"""Search statements prepared where that measured faster (preparing.py).

Each statement text is timed unprepared and prepared in turn (the first
pairs, PostgreSQL's five plans of a prepared statement made with the
values and a process's cold first runs, not counted), and runs the faster
way; timed again after ``RETRY`` runs; only
while the catalog is small.  The way a statement runs never changes its
answer.
"""
import os
import unittest
from unittest import mock

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog import config
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.search import preparing
from plone.pgcatalog.search.compiler import compile_search
from plone.pgcatalog.search.query import batch_window
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING

TRIAL_RUNS = 2 * (preparing.TRIAL + preparing.CUSTOM_PLANS)


def timed(timing, unprepared, prepared):
    """Run ``timing``'s trial: ``unprepared`` seconds for each run it
    makes unprepared, ``prepared`` for each prepared one; the ways it
    chose, in order."""
    ways = []
    while timing.choice is None:
        way = timing.prepare()
        ways.append(way)
        timing.timed(way, prepared if way else unprepared)
        if len(ways) > 100:
            raise AssertionError("no choice after 100 runs")
    return ways


def pairs(timing, n, unprepared, prepared):
    """``n`` pairs of runs: unprepared, then prepared (``prepared`` a
    number of seconds, or a function of the pair's number)."""
    for i in range(n):
        assert not timing.prepare()
        timing.timed(False, unprepared)
        assert timing.prepare()
        timing.timed(True, prepared(i) if callable(prepared) else prepared)


class TestTiming(unittest.TestCase):

    def test_prepared_when_clearly_faster(self):
        timing = preparing.Timing()
        ways = timed(timing, 0.001, 0.0007)
        self.assertTrue(timing.choice)
        self.assertEqual(ways, [False, True] * (preparing.TRIAL
                                                + preparing.CUSTOM_PLANS))
        self.assertTrue(timing.prepare())

    def test_unprepared_when_not_clearly_faster(self):
        for prepared in (0.002, 0.001, 0.00095):
            with self.subTest(prepared=prepared):
                timing = preparing.Timing()
                self.assertEqual(len(timed(timing, 0.001, prepared)),
                                 TRIAL_RUNS)
                self.assertIs(timing.choice, False)
                self.assertFalse(timing.prepare())

    def test_the_first_prepared_runs_are_not_counted(self):
        # PostgreSQL plans them with their values: slow ones there do not
        # hide a generic plan's gain
        timing = preparing.Timing()
        pairs(timing, preparing.CUSTOM_PLANS, 0.001, 0.5)
        pairs(timing, preparing.TRIAL, 0.001, 0.0005)
        self.assertIs(timing.choice, True)

    def test_the_first_unprepared_runs_are_not_counted(self):
        # a process's first runs pay cold caches: they do not make a
        # generic plan that is no faster look faster
        timing = preparing.Timing()
        pairs(timing, preparing.CUSTOM_PLANS, 0.01, 0.001)
        pairs(timing, preparing.TRIAL, 0.001, 0.00095)
        self.assertIs(timing.choice, False)

    def test_medians_not_means(self):
        # one slow run (a page fault, another thread) changes nothing
        timing = preparing.Timing()
        pairs(timing, preparing.CUSTOM_PLANS, 0.001, 0.001)
        pairs(timing, preparing.TRIAL, 0.001,
              lambda n: 0.05 if n == 0 else 0.0005)
        self.assertIs(timing.choice, True)

    def test_a_much_slower_prepared_run_ends_the_choice(self):
        # values the generic plan does not suit: back to the values' plans
        # until the text is timed again
        timing = preparing.Timing()
        timed(timing, 0.001, 0.0005)
        timing.timed(True, 0.0029)
        self.assertIs(timing.choice, True)
        timing.timed(True, 0.0031)
        self.assertIs(timing.choice, False)
        self.assertFalse(timing.prepare())
        for _ in range(preparing.RETRY - 3):
            timing.timed(False, 0.01)
        self.assertIs(timing.choice, False)
        timing.timed(False, 0.001)
        self.assertIsNone(timing.choice)

    def test_timed_again_after_retry_runs(self):
        timing = preparing.Timing()
        timed(timing, 0.001, 0.0005)
        for _ in range(preparing.RETRY - 1):
            self.assertTrue(timing.prepare())
            timing.timed(True, 0.0005)
        self.assertTrue(timing.choice)
        timing.timed(True, 0.0005)
        self.assertIsNone(timing.choice)
        # the catalog changed: now the values' plans win
        self.assertEqual(len(timed(timing, 0.001, 0.003)), TRIAL_RUNS)
        self.assertIs(timing.choice, False)


class TestSetting(unittest.TestCase):

    def test_default_and_values(self):
        env = "PGCATALOG_PREPARED_SEARCH_ROWS"
        with mock.patch.dict(os.environ):
            os.environ.pop(env, None)
            self.assertEqual(config.get_prepared_search_rows(), 5000)
        for raw, value in (("0", 0), (" 20000", 20000)):
            with mock.patch.dict(os.environ, {env: raw}):
                self.assertEqual(config.get_prepared_search_rows(), value)
        for raw in ("-1", "many", "1.5"):
            with mock.patch.dict(os.environ, {env: raw}):
                with self.assertRaises(ConfigurationError):
                    config.get_prepared_search_rows()


class TestSearches(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        for n in range(4):
            self.portal.invokeFactory("Document", "d%d" % n,
                                      title="Plone %d" % n)
        self.portal.invokeFactory("Folder", "f", title="Plone folder")
        processQueue()
        self.catalog = self.portal.portal_catalog
        self.store = self.catalog._pgc_store()
        preparing._timings.clear()
        self.rows = mock.patch.object(preparing, "_rows", [5000])
        self.rows.start()

    def tearDown(self):
        self.rows.stop()
        preparing._timings.clear()
        transaction.abort()

    def paths(self, query):
        plan = compile_search(self.catalog._catalog, query, self.store,
                              batch_window(query))
        return plan, [b.getPath()
                      for b in plan.run(self.catalog, self.store)]

    def server_statements(self):
        conn = self.catalog._pgc_session().connection()
        return [row[0] for row in conn.execute(
            "SELECT statement FROM pg_prepared_statements").fetchall()]

    def test_a_search_is_timed_both_ways_and_answers_alike(self):
        queries = [{"portal_type": "Document", "sort_on": "id",
                    "b_size": 3},
                   {"portal_type": "Folder", "sort_on": "id", "b_size": 3}]
        expected = [["/plone/d0", "/plone/d1", "/plone/d2"], ["/plone/f"]]
        plan, _ = self.paths(queries[0])
        text = plan.statement.text
        self.assertNotIn(text, self.server_statements())
        for n in range(TRIAL_RUNS):
            # two values, one statement text: the same answers whichever
            # way (and plan) it runs
            for query, paths in zip(queries, expected):
                with self.subTest(run=n, query=query):
                    other, got = self.paths(query)
                    self.assertEqual(other.statement.text, text)
                    self.assertEqual(got, paths)
            if n == preparing.TRIAL:
                # being timed prepared: the server holds it
                head = text.split("%s")[0]
                self.assertTrue(any(s.startswith(head)
                                    for s in self.server_statements()))
        self.assertIn(preparing.choices()[text], (True, False))

    def test_a_generic_plan_answers_as_the_values_plan(self):
        conn = self.catalog._pgc_session().connection()
        queries = [{"portal_type": t, "sort_on": "sortable_title"}
                   for t in ("Document", "Folder", "News Item")]
        queries += [{"SearchableText": w, "portal_type": "Document"}
                    for w in ("plone", "folder", "nothing")]
        expected = [self.paths(query)[1] for query in queries]
        self.assertEqual([len(p) for p in expected], [4, 1, 0, 4, 0, 0])
        self.assertTrue(preparing._timings)
        for timing in preparing._timings.values():
            timing.choice, timing.bound = True, float("inf")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        try:
            for _ in range(2):
                self.assertEqual([self.paths(q)[1] for q in queries],
                                 expected)
        finally:
            conn.execute("RESET plan_cache_mode")

    def test_nothing_is_timed_on_a_big_catalog(self):
        self.rows.stop()
        for limit in (0, 1):
            with mock.patch.object(preparing, "_rows", [limit]), \
                    mock.patch.object(self.store, "hot_rows",
                                      return_value=5.0):
                for _ in range(TRIAL_RUNS):
                    self.assertEqual(
                        self.paths({"portal_type": "Folder"})[1],
                        ["/plone/f"])
                self.assertEqual(preparing.choices(), {})
        self.rows.start()
