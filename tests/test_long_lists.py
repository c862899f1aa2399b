"""Long keyword lists are stored once; entries hold their digest.

Every query option, sort, and data read of a KeywordIndex gives ZCatalog's
answer whether an entry holds its list in line or a digest of it, and the
two kinds of entries mix in one catalog (``lists.LONG_LIST`` is lowered
here so that some of the lists are long).  Entries written in line (before
schema version 6) are moved by ``pgc_store_long_lists`` without changing
an answer.
"""
import types
import unittest

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from Products.PluginIndexes.KeywordIndex.KeywordIndex import KeywordIndex
from Products.ZCatalog.ZCatalog import ZCatalog

from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING

NAME = "long kw"
#: with LONG_LIST at 30 bytes, d1, d2, d3 and d5 hold long lists (d1 and d5
#: the same one), d4, d6 and d7 short ones
KEYWORDS = {
    "d1": ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"],
    "d2": ["gamma", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi"],
    "d3": [3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43],
    "d4": ["alpha", "omega"],
    "d5": ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"],
    "d6": [14, 2],
    "d7": ["kappa"],
}
#: queries answered by the reference ZCatalog (string keywords)
QUERIES = (
    {NAME: "alpha"}, {NAME: ["omega", "theta"]}, {NAME: "kappa"},
    {NAME: "nothere"},
    {NAME: {"query": ["alpha", "beta"], "operator": "and"}},
    {NAME: {"query": ["gamma", "kappa"], "operator": "and"}},
    {NAME: {"query": ["b", "f"], "range": "min:max"}},
    {NAME: {"query": "m", "range": "min"}},
    {NAME: {"query": ["alpha", "kappa"], "not": "beta"}},
    {NAME: {"not": "gamma"}},
)
#: numbers (a stock KeywordIndex cannot hold them beside strings): which
#: keyword lists match
NUMBER_QUERIES = (
    ({NAME: 14}, lambda k: 14 in k),
    ({NAME: [92, 2]}, lambda k: 92 in k or 2 in k),
    ({NAME: {"query": [14, 15], "operator": "and"}},
     lambda k: 14 in k and 15 in k),
    ({NAME: {"query": 50, "range": "min"}},
     lambda k: any(type(x) is int and x >= 50 for x in k)),
    ({NAME: {"query": ["kappa"], "not": 14}},
     lambda k: "kappa" in k and 14 not in k),
)


class LongListsBase(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING
    long_list = 30

    def setUp(self):
        self.saved = lists.LONG_LIST
        lists.LONG_LIST = self.long_list
        self.portal = portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        self.catalog = portal.portal_catalog
        self.keywords = dict(KEYWORDS)
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
            self.ref.catalog_object(doc, "/".join(doc.getPhysicalPath()))
        transaction.commit()

    def tearDown(self):
        lists.LONG_LIST = self.saved
        self.catalog.delIndex(NAME)
        self.portal.manage_delObjects(["kw"])
        transaction.commit()

    def stored_forms(self):
        """oid -> the JSON type of the entry's stored value."""
        processQueue()
        rows = self.catalog._pgc_store().rows(q(
            "SELECT e.path, jsonb_typeof(e.idx -> {}) FROM "
            "pgcatalog_entries e WHERE e.cid = {} AND e.path LIKE "
            "'/plone/kw/%%'", literal(NAME), self.catalog._pgc_store().cid))
        return {path.rsplit("/", 1)[1]: kind for path, kind in rows}

    def found(self, query):
        return sorted(b.getPath().rsplit("/", 1)[1] for b in
                      self.catalog.unrestrictedSearchResults(query)
                      if b.getPath().startswith("/plone/kw/"))

    def assert_zcatalog_answers(self):
        keywords = self.keywords
        strings = [oid for oid, kws in keywords.items()
                   if all(isinstance(k, str) for k in kws)]
        for query in QUERIES:
            self.assertEqual([oid for oid in self.found(query)
                              if oid in strings], sorted(
                b.getPath().rsplit("/", 1)[1]
                for b in self.ref.searchResults(query)
                if b.getPath().rsplit("/", 1)[1] in strings), query)
        for query, matches in NUMBER_QUERIES:
            self.assertEqual(self.found(query), sorted(
                oid for oid, kws in keywords.items() if matches(kws)), query)
        stock = self.ref._catalog.getIndex(NAME)
        ours = self.catalog._catalog.getIndex(NAME)
        for oid in keywords:
            path = "/plone/kw/" + oid
            rid = self.catalog.getrid(path)
            expected = stock.getEntryForObject(self.ref.getrid(path)) \
                if oid in strings else list(set(keywords[oid]))
            entry = ours.getEntryForObject(rid)
            data = self.catalog.getIndexDataForRID(rid)[NAME]
            if keywords[oid] is not KEYWORDS[oid]:
                # reindexed: the stock index keeps the new keywords in an
                # OOSet's order (sorted); ours in the object's (as for a
                # new entry, either form)
                entry, data, expected = sorted(entry), sorted(data), \
                    sorted(expected)
            self.assertEqual(entry, expected, oid)
            self.assertEqual(data, expected, oid)
        counts = {}
        for oid in keywords:
            for keyword in set(keywords[oid]):
                counts[keyword] = counts.get(keyword, 0) + 1
        self.assertEqual(sorted(ours.uniqueValues(withLengths=True),
                                key=repr),
                         sorted(counts.items(), key=repr))
        for value in ("alpha", 14, "kappa"):
            found = ours._index[value]
            self.assertEqual(sorted([found] if isinstance(found, int)
                                    else found),
                             sorted(self.catalog.getrid("/plone/kw/" + oid)
                                    for oid, kws in keywords.items()
                                    if value in kws), value)
        found = [b.getPath().rsplit("/", 1)[1] for b in
                 self.catalog.unrestrictedSearchResults(
                     {NAME: ["alpha", "gamma", "kappa"], "sort_on": NAME})]
        self.assertEqual(found, sorted(
            [oid for oid, kws in keywords.items()
             if {"alpha", "gamma", "kappa"} & set(kws)],
            key=lambda oid: sorted(map(str, keywords[oid]))))


class TestLongLists(LongListsBase):

    def test_long_lists_are_stored_once(self):
        self.assertEqual(self.stored_forms(), {
            "d1": "string", "d2": "string", "d3": "string", "d4": "array",
            "d5": "string", "d6": "array", "d7": "array"})
        store = self.catalog._pgc_store()
        digests = {r[0] for r in store.rows(q(
            "SELECT e.idx ->> {} FROM pgcatalog_entries e WHERE e.cid = {} "
            "AND jsonb_typeof(e.idx -> {}) = 'string'", literal(NAME),
            store.cid, literal(NAME)))}
        self.assertEqual(len(digests), 3)   # d1 and d5 share theirs
        stored = dict(store.rows(q(
            "SELECT l.digest, l.value FROM pgcatalog_lists l WHERE "
            "l.digest = ANY({})", sorted(digests))))
        self.assertEqual(sorted(map(sorted, map(lambda v: map(str, v),
                                                stored.values()))),
                         sorted(sorted(map(str, KEYWORDS[oid]))
                                for oid in ("d1", "d2", "d3")))

    def test_answers_are_zcatalogs(self):
        self.assert_zcatalog_answers()

    def test_reindex_between_forms(self):
        doc = self.portal.kw.d4
        doc.kws = self.keywords["d4"] = KEYWORDS["d2"] + ["omega"]
        doc.reindexObject(idxs=[NAME])
        d2 = self.portal.kw.d2
        d2.kws = self.keywords["d2"] = ["kappa", "omega"]
        d2.reindexObject(idxs=[NAME])
        for obj in (doc, d2):
            self.ref.catalog_object(obj, "/".join(obj.getPhysicalPath()))
        # read in the writing transaction, then committed
        self.assertEqual(self.stored_forms()["d4"], "string")
        self.assertEqual(self.stored_forms()["d2"], "array")
        self.assert_zcatalog_answers()
        transaction.commit()
        self.assert_zcatalog_answers()

    def test_aborted_write_leaves_no_list(self):
        doc = self.portal.kw.d7
        doc.kws = ["a brand new list", "of several words", "long enough"]
        doc.reindexObject(idxs=[NAME])
        self.assertEqual(self.stored_forms()["d7"], "string")
        transaction.abort()
        store = self.catalog._pgc_store()
        self.assertEqual(store.rows(q(
            "SELECT count(*) FROM pgcatalog_lists l WHERE l.value ? {}",
            "of several words")), [(0,)])
        self.assertEqual(self.stored_forms()["d7"], "array")


class TestListsWrittenInLine(LongListsBase):
    """A catalog written before lists were stored apart."""

    long_list = 10 ** 9

    def test_store_long_lists_moves_them(self):
        self.assertEqual(set(self.stored_forms().values()), {"array"})
        self.assert_zcatalog_answers()
        lists.LONG_LIST = 30
        # this index's four, and the site's other long lists
        # (object_provides) as well
        self.assertGreaterEqual(self.catalog.pgc_store_long_lists(), 4)
        self.assertEqual(self.stored_forms(), {
            "d1": "string", "d2": "string", "d3": "string", "d4": "array",
            "d5": "string", "d6": "array", "d7": "array"})
        self.assert_zcatalog_answers()
        transaction.commit()
        self.assertEqual(self.catalog.pgc_store_long_lists(), 0)
        self.assert_zcatalog_answers()

    def test_verify_compares_values_not_forms(self):
        """Lists in line and stored apart are the same values to verify."""
        lists.LONG_LIST = 30
        for moved in (False, True):
            report = self.catalog.pgc_verify()
            flagged = [(path, detail) for kind in report.samples
                       for path, detail in report.samples[kind]
                       if path.startswith("/plone/kw")]
            self.assertEqual(flagged, [], moved)
            if not moved:
                self.assertGreaterEqual(
                    self.catalog.pgc_store_long_lists(), 4)
                transaction.commit()
