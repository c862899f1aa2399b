"""KeywordIndex: keyword lists handed out in ZCatalog's order.

A stock KeywordIndex stores a newly indexed document's keywords as
``list(set(keywords))`` (``_get_object_keywords`` makes them unique with a
set): ``getEntryForObject`` / ``getIndexDataForRID`` give them in that
order, which ours must give too (it used to give them sorted).  Sorting by
a keyword index stays what it was: by the document's keywords in sorted
order, compared element-wise.
"""
import random
import types
import unittest

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import setRoles
from Products.PluginIndexes.KeywordIndex.KeywordIndex import KeywordIndex
from Products.ZCatalog.ZCatalog import ZCatalog
from zope.i18nmessageid import MessageFactory

from plone.pgcatalog.indexes.common import dumps
from plone.pgcatalog.indexes.common import stored
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING

_ = MessageFactory("plone")

KEYWORDS = {
    "k1": ["zeta", "alpha", "Beta", "gamma", "delta", "épée", "eta",
           "theta", "iota", "kappa", "a b", "%s"],
    "k2": ["one", _("two"), "three", _("four"), "five", "six", "seven",
           "eight", "Nine", "ten"],
    "k3": ("x", "y", "z", "w", "v", "u", "t", "s", "r", "q", "x", "y"),
    "k4": ["single"],
    "k6": ["zeta", "alpha", "eta"],
    "k7": ["zeta", "alpha", "Beta"],
}
NAME = "kw order"


class TestKeywordOrder(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        self.catalog = portal.portal_catalog
        extra = types.SimpleNamespace(indexed_attrs="kws")
        self.catalog.addIndex(NAME, "KeywordIndex", extra=extra)
        ref = ZCatalog("kw_ref")
        ZCatalog.addIndex(ref, NAME, KeywordIndex(NAME, extra=extra))
        self.ref = ref.__of__(portal)
        portal.invokeFactory("Folder", "kw")
        for oid, keywords in KEYWORDS.items():
            portal.kw.invokeFactory("Document", oid)
            doc = portal.kw[oid]
            doc.kws = keywords
            doc.reindexObject()
            path = "/".join(doc.getPhysicalPath())
            self.ref.catalog_object(doc, path)
        transaction.commit()

    def tearDown(self):
        self.catalog.delIndex(NAME)
        transaction.commit()

    def test_entries_in_zcatalog_order(self):
        stock = self.ref._catalog.getIndex(NAME)
        ours = self.catalog._catalog.getIndex(NAME)
        for oid in KEYWORDS:
            path = "/plone/kw/" + oid
            ref_rid = self.ref.getrid(path)
            rid = self.catalog.getrid(path)
            expected = stock.getEntryForObject(ref_rid)
            self.assertEqual(ours.getEntryForObject(rid), expected, oid)
            self.assertEqual(self.catalog.getIndexDataForRID(rid)[NAME],
                             expected, oid)

    def test_sorting_is_by_the_sorted_keywords(self):
        strings = ["k1", "k2", "k3", "k4", "k6", "k7"]
        for reverse in (False, True):
            found = [b.getPath().rsplit("/", 1)[1] for b in
                     self.catalog.unrestrictedSearchResults(
                         {NAME: {"query": "", "range": "min"},
                          "sort_on": NAME,
                          "sort_order": "reverse" if reverse else ""})]
            self.assertEqual(found, sorted(
                strings, key=lambda oid: sorted(map(str, KEYWORDS[oid])),
                reverse=reverse))

    def test_queries_unaffected(self):
        def paths(query):
            return sorted(b.getPath() for b in
                          self.catalog.unrestrictedSearchResults(query))

        def ref_paths(query):
            return sorted(b.getPath() for b in self.ref.searchResults(query))
        for query in ({NAME: "alpha"}, {NAME: ["alpha", "two"]},
                      {NAME: {"query": ["zeta", "alpha"], "operator": "and"}},
                      {NAME: {"query": ["a", "f"], "range": "min:max"}},
                      {NAME: {"query": ["alpha", "x"], "not": "Beta"}}):
            self.assertEqual(paths(query), ref_paths(query), query)

    def test_sort_key_is_the_old_one(self):
        """The sort key of a list stored in ZCatalog's order is the key the
        same list had stored sorted (the former storage and expression)."""
        index = self.catalog._catalog.getIndex(NAME)
        (key,), _ = index.pgc_sort(None)
        old = q("(ARRAY(SELECT t.v FROM jsonb_array_elements_text(CASE "
                "WHEN jsonb_typeof({}) = 'array' THEN {} END) WITH "
                "ORDINALITY AS t(v, n) ORDER BY t.n) COLLATE \"C\")",
                q("(e.idx -> 'k')"), q("(e.idx -> 'k')"))
        rng = random.Random(11)
        alphabet = "aAbZ09 -_é€\U0001F600ß"
        lists = []
        for _ in range(200):
            kind = rng.choice(("str", "int", "float"))
            size = rng.randint(1, 9)
            if kind == "str":
                values = {"".join(rng.choice(alphabet)
                                  for _ in range(rng.randint(0, 4)))
                          for _ in range(size)}
            elif kind == "int":
                values = {rng.randint(-1000, 1000) for _ in range(size)}
            else:
                values = {rng.uniform(-50, 50) for _ in range(size)}
            found = tuple(set(values))
            lists.append((dumps({NAME: stored(list(found))}),
                          dumps({"k": stored(sorted(found))})))
        for new_doc, old_doc in lists:
            statement = q("SELECT (SELECT {} FROM (SELECT {}::jsonb) "
                          "AS e(idx)), (SELECT {} FROM (SELECT {}::jsonb) "
                          "AS e(idx))", key, new_doc, old, old_doc)
            new_key, old_key = self.catalog._pgc_store().rows(statement)[0]
            self.assertEqual(new_key, old_key, (new_doc, old_doc))
