"""Which plan a query gets, and the statements plans compose (on a real
Plone site's catalog configuration; the plans run against PostgreSQL)."""
import unittest

import transaction
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog import plans
from plone.pgcatalog.compiler import compile_search
from plone.pgcatalog.query import batch_window
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING


CASES = [
    # (query, plan class)
    ({"portal_type": "Document"}, plans.EveryMatch),
    ({"portal_type": "Document", "b_size": 10}, plans.Page),
    ({"portal_type": "Document", "sort_limit": 5}, plans.Page),
    ({"portal_type": "Document", "sort_on": "sortable_title"},
     plans.UnlimitedSort),
    ({"portal_type": "Document", "sort_on": "sortable_title",
      "b_size": 3}, plans.Page),
    ({"portal_type": "Document", "sort_on": ["sortable_title", "created"],
      "sort_order": ["descending", "ascending"]}, plans.UnlimitedSort),
    ({"SearchableText": "plone"}, plans.TextRelevance),
    ({"SearchableText": "plone", "portal_type": "Document"},
     plans.TextRelevance),
    ({"SearchableText": "plone", "b_size": 10}, plans.TextRelevance),
    ({"SearchableText": "plone", "portal_type": "Document", "b_size": 10},
     plans.TextRelevance),
    ({"SearchableText": "plo*", "portal_type": "Document", "b_size": 10},
     plans.TextRelevance),
    # a glob is its words (the lexicon's), scored as words in the scan
    # (a glob of more than textstats.GLOB_WORDS_MAX words reads more of
    # the row: scored when a brain is read, plans.Relevance)
    ({"SearchableText": "plo*", "portal_type": "Document"},
     plans.TextRelevance),
    # two text indexes: the entries
    ({"SearchableText": "plone", "Title": "plone"}, plans.Relevance),
    ({"SearchableText": "plone", "Title": "plone", "b_size": 10},
     plans.RelevancePage),
    ({"SearchableText": "plone", "sort_on": "created", "b_size": 10},
     plans.Page),
    ({"path": "/plone", "sort_on": "getObjPositionInParent"},
     plans.PythonSorted),
    ({"path": "/plone", "sort_on": "getObjPositionInParent",
      "b_size": 2}, plans.PythonSorted),
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
