"""Which plan a query gets, and the statements plans compose (on a real
Plone site's catalog configuration; the plans run against PostgreSQL)."""
import unittest

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.pg import hot
from plone.pgcatalog.search import plans
from plone.pgcatalog.search import relevance
from plone.pgcatalog.search import sorting
from plone.pgcatalog.search.compiler import compile_search
from plone.pgcatalog.search.compiler import conditions_for
from plone.pgcatalog.search.query import batch_window
from plone.pgcatalog.search.query import make_query
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING

CASES = [
    # (query, plan class)
    ({"portal_type": "Document"}, plans.EveryMatch),
    ({"portal_type": "Document", "b_size": 10}, plans.Page),
    ({"portal_type": "Document", "sort_limit": 5}, plans.Page),
    ({"portal_type": "Document", "sort_on": "sortable_title"},
     sorting.UnlimitedSort),
    ({"portal_type": "Document", "sort_on": "sortable_title",
      "b_size": 3}, plans.Page),
    ({"portal_type": "Document", "sort_on": ["sortable_title", "created"],
      "sort_order": ["descending", "ascending"]}, sorting.UnlimitedSort),
    ({"SearchableText": "plone"}, relevance.TextRelevance),
    ({"SearchableText": "plone", "portal_type": "Document"},
     relevance.TextRelevance),
    ({"SearchableText": "plone", "b_size": 10}, relevance.TextRelevance),
    ({"SearchableText": "plone", "portal_type": "Document", "b_size": 10},
     relevance.TextRelevance),
    ({"SearchableText": "plo*", "portal_type": "Document", "b_size": 10},
     relevance.TextRelevance),
    # a glob is its words (the lexicon's), scored as words in the scan
    # (a glob of more than textstats.GLOB_WORDS_MAX words reads more of
    # the row: scored when a brain is read, relevance.Relevance)
    ({"SearchableText": "plo*", "portal_type": "Document"},
     relevance.TextRelevance),
    # two text indexes: the entries
    ({"SearchableText": "plone", "Title": "plone"}, relevance.Relevance),
    ({"SearchableText": "plone", "Title": "plone", "b_size": 10},
     relevance.RelevancePage),
    ({"SearchableText": "plone", "sort_on": "created", "b_size": 10},
     plans.Page),
    ({"path": "/plone", "sort_on": "getObjPositionInParent"},
     sorting.PythonSorted),
    ({"path": "/plone", "sort_on": "getObjPositionInParent",
      "b_size": 2}, sorting.PythonSorted),
    ({"portal_type": []}, plans.Empty),           # nothing can match
    ({"no_such_index": 1}, plans.Empty),          # no index takes part
    ({"UID": None}, plans.Empty),
]


class TestPlanChoice(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        for n in range(3):
            self.portal.invokeFactory("Document", "d%d" % n,
                                      title="Plone %d" % n)
        processQueue()
        self.catalog = self.portal.portal_catalog
        self.store = self.catalog._pgc_store()

    def tearDown(self):
        transaction.abort()

    def plan(self, query):
        return compile_search(self.catalog._catalog, query, self.store,
                              batch_window(query))

    def test_each_query_gets_its_plan(self):
        for query, kind in CASES:
            with self.subTest(query=query):
                self.assertIs(type(self.plan(query)), kind)

    def test_every_plan_runs_and_answers_as_the_tool(self):
        for query, _kind in CASES:
            with self.subTest(query=query):
                got = self.plan(query).run(self.catalog, self.store)
                expected = self.catalog.unrestrictedSearchResults(**query)
                self.assertEqual([b.getPath() for b in got],
                                 [b.getPath() for b in expected])

    def conditions(self, query):
        catalog = self.catalog._catalog
        qc = QueryContext(catalog, self.store.cid)
        return conditions_for(catalog, make_query(catalog, query), qc), qc

    def test_each_condition_is_one_value(self):
        # one Condition per index taking part: its query, its condition
        # over the entries, its form over the hot row and its text row
        conditions, qc = self.conditions({
            "SearchableText": "plone", "portal_type": "Document",
            "path": "/plone/d1"})
        by_name = {c.index.getId(): c for c in conditions}
        self.assertEqual(set(by_name),
                         {"SearchableText", "portal_type", "path"})
        text = by_name["SearchableText"]
        self.assertEqual(qc.text_rows, [text.text])
        self.assertIsNone(text.hot_form)    # no hot form: the text row's
        for name in ("portal_type", "path"):
            self.assertIsNone(by_name[name].text)
            self.assertEqual(by_name[name].iq.keys[0],
                             {"portal_type": "Document",
                              "path": "/plone/d1"}[name])
        self.assertIsInstance(by_name["path"].hot_form, hot.OnPath)
        self.assertTrue(by_name["path"].on_path)
        self.assertFalse(by_name["portal_type"].on_path)
        # nothing can match, no index takes part: no conditions
        self.assertIsNone(self.conditions({"portal_type": []})[0])
        self.assertIsNone(self.conditions({"no_such_index": 1})[0])

    def test_statements_carry_their_parameters(self):
        # every value is a parameter: a placeholder for each, in order
        query = {"portal_type": ["Document", "x'); DROP TABLE y; --"],
                 "id": "100% (sure), e.idx", "b_size": 7, "b_start": 2,
                 "sort_on": "sortable_title", "sort_order": "reverse"}
        plan = self.plan(query)
        statement = plan.statement
        self.assertEqual(statement.text.count("%s"),
                         len(statement.params))
        self.assertNotIn("DROP TABLE", statement.text)
        self.assertNotIn("100%", statement.text)
        self.assertIn(7, statement.params)
        self.assertIn(2, statement.params)
        self.assertEqual(len(plan.run(self.catalog, self.store)), 0)

    def test_only_a_unique_lookup_is_prepared(self):
        # one value of a UUIDIndex: one index lookup whatever the value,
        # prepared (PostgreSQL keeps a generic plan); anything else is
        # planned with its values (a common or a rare portal_type)
        uid = self.portal.d1.UID()
        for query, prepared in (
                ({"UID": uid}, True),
                ({"UID": [uid]}, True),
                ({"UID": {"query": uid}}, True),
                ({"UID": [uid, self.portal.d2.UID()]}, False),
                ({"UID": uid, "portal_type": "Document"}, False),
                ({"UID": {"query": uid, "not": "x"}}, False),
                ({"UID": uid, "b_size": 5}, False),
                ({"UID": uid, "sort_on": "sortable_title"}, False),
                ({"id": "d1"}, False),
                ({"portal_type": "Document"}, False)):
            with self.subTest(query=query):
                plan = self.plan(query)
                self.assertIs(getattr(plan, "prepare", False), prepared)
                self.assertEqual(
                    [b.getPath() for b in plan.run(self.catalog,
                                                   self.store)],
                    [b.getPath() for b in
                     self.catalog.unrestrictedSearchResults(**query)])

    def test_a_prepared_lookup_keeps_a_generic_plan_using_the_index(self):
        # past PostgreSQL's five custom plans, each value is answered by
        # the generic plan, which must use the catalog's partial UID index
        # (its catalog id spelled out), not read every entry
        docs = [self.portal["d%d" % n] for n in range(3)]
        for _ in range(4):
            for doc in docs:
                found = self.plan({"UID": doc.UID()}).run(self.catalog,
                                                          self.store)
                self.assertEqual([b.getObject() for b in found], [doc])
        self.assertEqual(len(self.plan({"UID": "no such uid"}).run(
            self.catalog, self.store)), 0)
        # values of other types and sizes, on the same warm connection,
        # and the transaction reads on afterwards
        for value in (7, 1.5, "x" * 500, "", "\u00e9t\u00e9"):
            with self.subTest(value=value):
                self.assertEqual(len(self.catalog.unrestrictedSearchResults(
                    UID=value)), 0)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            UID=docs[1].UID())), 1)
        plan = self.plan({"UID": docs[0].UID()})
        statement = plan.statement
        # the UID is the only parameter; the catalog id is spelled out
        self.assertEqual(statement.text.count("%s"), 1)
        self.assertEqual(list(statement.params), [docs[0].UID()])
        conn = self.catalog._pgc_session().connection()
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("SET enable_seqscan = off")
        try:
            conn.execute("PREPARE pgc_test_lookup(text) AS "
                         + statement.text.replace("%s", "$1"))
            text = "\n".join(row[0] for row in conn.execute(
                "EXPLAIN EXECUTE pgc_test_lookup('x')").fetchall())
            conn.execute("DEALLOCATE pgc_test_lookup")
        finally:
            conn.execute("RESET plan_cache_mode")
            conn.execute("RESET enable_seqscan")
        self.assertIn("Index", text)
        self.assertNotIn("Seq Scan", text)
