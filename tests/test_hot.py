"""The hot keys (hot.py): counts and every-match answers read from the
narrow hot rows give the answers the entries give, through every write.

Each answer read from the hot rows is compared with the same query
answered from ``pgcatalog_entries`` (the index's ``_pgc_hot_codes`` taken
away for the comparison, the result cache off), and the hot rows are
checked against their definition (``pgcatalog_hot_keys`` of each entry's
values) after every kind of write.
"""
import os
import types
import unittest
import unittest.mock

import transaction
from DateTime import DateTime
from Products.CMFCore.indexing import processQueue
from statements import search_part
from catalog_cases import ManagerWithoutCache
from statements import statements
from ZODB.POSException import ConflictError

from plone.pgcatalog.changes import ChangeCounters
from plone.pgcatalog.changes import Changes
from plone.pgcatalog.indexes.text import postings
from plone.pgcatalog.indexes.text import scoring
from plone.pgcatalog.ops import postings as kept_postings
from plone.pgcatalog.ops import verifystore
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg import textstats
from plone.pgcatalog.pg import upkeep
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.search import compiler
from plone.pgcatalog.search import lazy
from plone.pgcatalog.search import plans
from plone.pgcatalog.search import relevance

HOT_NAMES = ("portal_type", "review_state", "allowedRolesAndUsers",
             "Subject", "effectiveRange", "is_default_page")
#: the hot sort index (schema version 21)
SORT_NAME = "modified"
NOW = DateTime()
LONG = "x" * (hot.MAX_CHARS + 1)

QUERIES = (
    {"portal_type": "Document"},
    {"portal_type": ["Document", "Folder"]},
    {"portal_type": "Nothing such"},
    {"portal_type": "Document", "review_state": "private"},
    {"portal_type": "Document", "review_state": "published"},
    {"portal_type": "Document", "allowedRolesAndUsers": ["Anonymous"]},
    {"portal_type": "Document", "review_state": "published",
     "allowedRolesAndUsers": ["Anonymous", "Manager"]},
    {"allowedRolesAndUsers": {"query": ["Manager", "Editor"],
                              "operator": "and"}},
    {"allowedRolesAndUsers": {"query": ["Owner", "Anonymous"],
                              "operator": "or"}},
    {"review_state": ["private", "published"]},
    {"Subject": "tag"},
    {"Subject": {"query": ["tag", "other"], "operator": "and"}},
    {"portal_type": "Document", "Subject": ["other", "nothing"]},
    {"review_state": "private", "b_size": 2},
    {"portal_type": "Document", "review_state": "private", "b_size": 3,
     "b_start": 1},
    # Plone's security filters: roles and effectiveRange (DateRangeIndex
    # bounds in the hot row), a BooleanIndex's key
    {"portal_type": "Document", "allowedRolesAndUsers": ["Anonymous"],
     "effectiveRange": NOW},
    {"review_state": ["private", "published"], "effectiveRange": NOW},
    {"portal_type": "Document", "effectiveRange": NOW + 30},
    {"portal_type": "Document", "effectiveRange": DateTime("1990/01/01")},
    {"portal_type": "Document", "effectiveRange": None},
    {"portal_type": "Document", "is_default_page": False},
    {"portal_type": "Document", "is_default_page": True},
    {"portal_type": ["Document", "Folder"], "is_default_page": [0, 1]},
    {"portal_type": "Document", "effectiveRange": NOW, "b_size": 2},
    # subtrees beside key conditions: the hot rows' copy of the path
    {"portal_type": "Document", "path": "/plone/hot"},
    {"portal_type": "Document", "path": "/plone/hot/"},
    {"portal_type": "Document", "path": "/plone/ho"},
    {"review_state": "private", "path": "/plone/hot/d1"},
    {"portal_type": ["Document", "Folder"],
     "path": ["/plone/hot/d1", "/plone/hot/d2", "/plone/nothing"]},
    {"portal_type": "Document", "path": {"query": "/plone/hot",
                                         "depth": -1}},
    {"portal_type": "Document", "path": ["/plone/hot/d3", "/plone/hot",
                                         "/plone/hot/d3"]},
    {"portal_type": "Document",
     "path": {"query": ["/plone/hot", "/plone/hot/d2"], "operator": "and"}},
    {"portal_type": "Document", "review_state": "published",
     "allowedRolesAndUsers": ["Anonymous"], "effectiveRange": NOW,
     "path": "/plone/hot"},
    {"Subject": "tag", "path": "/plone/hot"},
    {"portal_type": "Document", "path": "/plone/hot", "b_size": 2},
    # the site root's path (plone.restapi adds it): every entry meets it
    {"portal_type": "Document", "path": "/plone"},
    {"portal_type": "Document", "effectiveRange": NOW, "path": "/plone"},
)
#: pages sorted by ``modified`` that walk the hot rows (schema version 21)
SORTED = (
    {"portal_type": "Document", "sort_on": "modified", "b_size": 3},
    {"portal_type": "Document", "sort_on": "modified",
     "sort_order": "descending", "b_size": 2, "b_start": 1},
    {"portal_type": ["Document", "Folder"], "review_state": "private",
     "sort_on": "modified", "sort_order": "reverse", "b_size": 10},
    {"portal_type": "Document", "SearchableText": "D1 OR D3 OR D4",
     "sort_on": "modified", "b_size": 2},
    {"portal_type": "Document", "SearchableText": "D1 OR D3 OR D4",
     "sort_on": "modified", "sort_order": "descending", "b_size": 2,
     "b_start": 2},
    {"allowedRolesAndUsers": ["Anonymous"], "effectiveRange": NOW,
     "sort_on": "modified", "sort_order": "descending", "b_size": 4},
    {"portal_type": "Nothing such", "sort_on": "modified", "b_size": 2},
    {"review_state": "private", "Title": "D2 OR D4",
     "SearchableText": "D*", "sort_on": "modified", "b_size": 5},
    # the site root's path (plone.restapi adds it): every entry meets it
    {"portal_type": "Document", "path": "/plone", "sort_on": "modified",
     "sort_order": "descending", "b_size": 3},
)
#: pages sorted by ``modified`` the hot rows do not walk
SORTED_COLD = (
    # a free key (Subject is out of the key sets); a condition of the
    # entries; two sort indexes; every match
    {"portal_type": "Document", "Subject": "tag", "sort_on": "modified",
     "b_size": 2},
    {"portal_type": "Document", "id": "d1", "sort_on": "modified",
     "b_size": 2},
    {"portal_type": "Document", "sort_on": ["modified", "id"],
     "b_size": 2},
    {"portal_type": "Document", "sort_on": "modified"},
    # a subtree beside the keys
    {"portal_type": "Document", "path": "/plone/hot", "sort_on": "modified",
     "b_size": 2},
)
#: queries the hot rows do not answer (they read the entries)
COLD = (
    {"portal_type": {"query": "Document", "not": "Folder"}},
    {"portal_type": {"query": ["A", "Z"], "range": "min:max"}},
    {"portal_type": LONG},
    {"portal_type": "Document", "path": {"query": "/plone/hot",
                                         "depth": 1}},
    {"portal_type": "Document", "path": {"query": "hot", "level": 1}},
    {"portal_type": "Document", "path": {"query": "/plone/hot",
                                         "navtree": True}},
    {"portal_type": "Document", "path": "/plone/hot",
     "sort_on": "sortable_title"},
    {"portal_type": "Document", "sort_on": "sortable_title"},
    {"portal_type": 7},
    # the range alone: entries without a key have no hot row
    {"effectiveRange": NOW},
)


def kept_count(query):
    """Whether an unbatched ``query`` of QUERIES is counted from the key
    sets' kept counts (Subject is left out of the sets; effectiveRange
    alone has no key)."""
    subtree = query.get("path", "/plone") != "/plone"
    return "Subject" not in query and not subtree and \
        set(query) - {"b_size", "b_start", "path"} != {"effectiveRange"}


class TestHotKeys(ManagerWithoutCache):

    def setUp(self):
        super().setUp()
        portal = self.portal
        portal.invokeFactory("Folder", "hot")
        for n in range(6):
            portal.hot.invokeFactory(
                "Document", "d%d" % n, title="D%d" % n,
                subject=("tag", "other") if n % 2 else ("tag",))
        wf = portal.portal_workflow
        wf.setChainForPortalTypes(["Document"],
                                  "simple_publication_workflow")
        for n in range(6):
            wf.notifyCreated(portal.hot["d%d" % n])
            portal.hot["d%d" % n].reindexObject()
        for n in (1, 3):
            wf.doActionFor(portal.hot["d%d" % n], "publish")
        # effective in ten days; expired; open-ended
        portal.hot.d0.setEffectiveDate(NOW + 10)
        portal.hot.d0.reindexObject()
        portal.hot.d3.setExpirationDate(NOW - 10)
        portal.hot.d3.reindexObject()
        transaction.commit()

    def tearDown(self):
        transaction.abort()
        self.portal.manage_delObjects(["hot"])
        transaction.commit()

    # -- helpers ----------------------------------------------------------
    @property
    def store(self):
        """The catalog's store in the current transaction."""
        return self.catalog._pgc_store()

    def index(self, name):
        return self.catalog._catalog.getIndex(name)

    def answer(self, query):
        processQueue()
        found = self.catalog.unrestrictedSearchResults(dict(query))
        return [b.getRID() for b in found], len(found), \
            getattr(found, "actual_result_count", len(found))

    def cold_answer(self, query):
        """The answer read from the entries (no index hot)."""
        saved = {}
        for name in HOT_NAMES + (SORT_NAME,):
            index = self.index(name)
            saved[name] = index.__dict__.get("_pgc_hot_codes")
            index._pgc_hot_codes = {}
        try:
            return self.answer(query)
        finally:
            for name, value in saved.items():
                index = self.index(name)
                if value is None:
                    del index._pgc_hot_codes
                else:
                    index._pgc_hot_codes = value

    def reads_hot(self, query):
        _answer, sent = statements(self.catalog, lambda: self.answer(query),
                                   riders=True)
        return any("pgcatalog_hot" in search_part(text) for text in sent)

    def mismatches(self):
        """Entries whose hot row is not what their values say."""
        processQueue()
        return self.store.rows(q(
            "SELECT coalesce(e.rid, h.rid) FROM (SELECT * FROM "
            "pgcatalog_entries WHERE cid = {}) e FULL JOIN (SELECT * FROM "
            "pgcatalog_hot WHERE cid = {}) h ON h.rid = e.rid WHERE "
            "nullif(pgcatalog_hot_keys(e.cid, e.idx), '{{}}') IS DISTINCT "
            "FROM h.keys OR (h.rid IS NOT NULL AND (SELECT (b.lo, b.hi, "
            "b.rng) FROM pgcatalog_hot_bounds(e.cid, e.idx) b) IS DISTINCT "
            "FROM (h.lo, h.hi, h.rng)) OR (h.rid IS NOT NULL AND h.path IS "
            "DISTINCT FROM e.path) OR (h.rid IS NOT NULL AND h.srt IS "
            "DISTINCT FROM pgcatalog_hot_sort(e.cid, e.idx)) OR (h.rid IS "
            "NOT NULL AND (SELECT "
            "s.keys FROM pgcatalog_hot_sets s WHERE s.sid = h.sid AND s.cid "
            "= h.cid) IS DISTINCT FROM pgcatalog_hot_set_keys(h.cid, "
            "h.keys))", self.store.cid, self.store.cid)) + [
                ("free",) + tuple(row) for row in self.store.rows(q(
                    "SELECT h.rid FROM pgcatalog_hot h WHERE h.cid = {} AND "
                    "(SELECT s.keys FROM pgcatalog_hot_free_sets s WHERE "
                    "s.kid = h.kid AND s.cid = h.cid) IS DISTINCT FROM nullif("
                    "pgcatalog_hot_free_keys(h.cid, h.keys), '{{}}')",
                    self.store.cid))] + [
                ("counts",) + row for row in
                verifystore.hot_count_mismatches(self.store, 10)]

    def assert_same_answers(self, queries=QUERIES):
        for query in queries:
            if "b_size" not in query:
                # (a batch's total is counted only when the page is full)
                self.assertTrue(self.reads_hot(query), query)
            self.assertEqual(self.answer(query), self.cold_answer(query),
                             query)
        self.assertEqual(self.mismatches(), [])

    def walks_hot(self, query):
        """Whether ``query``'s page is walked in the hot rows' sort
        B-tree."""
        _answer, sent = statements(self.catalog, lambda: self.answer(query))
        return any("h.srt" in search_part(text) for text in sent)

    # -- tests ------------------------------------------------------------
    def test_pages_sorted_by_modified_walk_the_hot_rows(self):
        # (a small site's pages walk the entries: this one walks the hot
        # rows whatever their number)
        self.assertFalse(self.walks_hot(SORTED[0]))
        patcher = unittest.mock.patch.object(compiler, "HOT_SORTED_ROWS", 0)
        patcher.start()
        self.addCleanup(patcher.stop)
        # distinct dates, and ties (same minute: rid order decides, the
        # sort's direction), as ZCatalog sorts them
        folder = self.portal.hot
        for n, days in ((0, 3), (1, 1), (2, 3), (4, 5)):
            folder["d%d" % n].setModificationDate(NOW - days)
            folder["d%d" % n].reindexObject(idxs=["modified"])
        transaction.commit()
        for query in SORTED:
            self.assertTrue(self.walks_hot(query), query)
            self.assertEqual(self.answer(query), self.cold_answer(query),
                             query)
        for query in SORTED_COLD:
            self.assertFalse(self.walks_hot(query), query)
        rids, _n, total = self.answer(SORTED[0])
        self.assertEqual(total, 6)
        self.assertEqual(rids, [self.catalog.getrid("/plone/hot/d%d" % n)
                                for n in (4, 0, 2)])
        # the rows follow a change of the date, in the transaction
        folder.d4.setModificationDate(NOW + 1)
        folder.d4.reindexObject(idxs=["modified"])
        self.assertEqual(self.answer(SORTED[0])[0][:2], [
            self.catalog.getrid("/plone/hot/d%d" % n) for n in (0, 2)])
        for query in SORTED:
            self.assertEqual(self.answer(query), self.cold_answer(query),
                             query)
        self.assertEqual(self.mismatches(), [])
        # an index object that has not registered its sort value (a
        # catalog before version 21) is sorted by the entries
        index = self.index(SORT_NAME)
        index._pgc_hot_codes = {}
        self.assertFalse(self.walks_hot(SORTED[0]))

    def test_installed_catalog_keeps_the_default_hot_indexes(self):
        cid = self.store.cid
        for name in HOT_NAMES:
            self.assertTrue(hot.ready(self.index(name), cid), name)
        self.assertFalse(hot.ready(self.index("Description"), cid))
        names = self.store.rows(q(
            "SELECT name, multi, kind, code FROM pgcatalog_hot_names WHERE "
            "cid = {} ORDER BY name", cid))
        self.assertEqual([row[:3] for row in names], [
            ("Subject", True, "keys"), ("allowedRolesAndUsers", True, "keys"),
            ("effectiveRange", False, "range"),
            ("is_default_page", False, "bool"), ("modified", False, "sort"),
            ("portal_type", False, "keys"), ("review_state", False, "keys")])
        # each its own short code, the one its index object knows
        codes = [row[3] for row in names]
        self.assertEqual(sorted(codes), ["1", "2", "3", "4", "5", "6", "7"])
        for name, _multi, _kind, code in names:
            self.assertEqual(hot.code(self.index(name), cid), code)
        # effectiveRange's bounds as integers (an open end: the bound)
        lo, hi, rng = self.store.rows(q(
            "SELECT lo, hi, rng FROM pgcatalog_hot WHERE rid = {}",
            self.catalog.getrid("/plone/hot/d3")))[0]
        self.assertIsNone(rng)
        self.assertLess(hi, self.index("effectiveRange")._convertDateTime(
            NOW))
        self.assertEqual(self.store.rows(q(
            "SELECT hi FROM pgcatalog_hot WHERE rid = {}",
            self.catalog.getrid("/plone/hot/d1")))[0][0], 2 ** 63 - 1)

    def test_range_values_of_another_shape(self):
        # not what DateRangeIndex stores (written behind its back): kept as
        # they are and compared as the entry's own condition compares them
        cid = self.store.cid
        for path, value in (("/plone/hot/d4", '["x", 5.5]'),
                            ("/plone/hot/d5", "[1.5, null]"),
                            ("/plone/hot/d2", "[null, true]")):
            self.store.write(q(
                "UPDATE pgcatalog_entries SET idx = jsonb_set(idx, "
                "'{{effectiveRange}}', {}::jsonb) WHERE cid = {} AND "
                "path = {}", value, cid, path))
            self.assertIsNotNone(self.store.value(q(
                "SELECT rng FROM pgcatalog_hot WHERE rid = {}",
                self.catalog.getrid(path))))
        self.assert_same_answers()
        transaction.abort()
        keys = self.store.value(q(
            "SELECT keys FROM pgcatalog_hot WHERE rid = {}",
            self.catalog.getrid("/plone/hot/d1")))
        self.assertIn(hot.key(hot.code(self.index("portal_type"), cid),
                              "Document"), keys)
        self.assertFalse([k for k in keys if k.startswith("portal_type")])
        self.assertEqual(self.mismatches(), [])

    def test_answers_equal_the_entries_answers(self):
        self.assert_same_answers()

    def reads_free(self, query):
        _answer, sent = statements(self.catalog, lambda: self.answer(query),
                                   riders=True)
        return any("h.kid = ANY(" in search_part(text) for text in sent)

    def test_free_keys_answered_from_their_sets(self):
        """Schema version 18: the keys outside the key sets (Subject's)
        are sets of their own, which the hot row names (``kid``); a query
        whose hot conditions are all on them reads the rows of the
        matching sets (the ``(kid, rid)`` B-tree), any other the keys or
        the key sets; an index object registered before (no record of the
        free keys' sets) reads the keys.  Same answers every way."""
        cid = self.store.cid
        subject = self.index("Subject")
        self.assertEqual(hot.kept_in(subject, cid), "free")
        self.assertEqual(hot.kept_in(self.index("portal_type"), cid), "sets")
        rows = dict(self.store.rows(q(
            "SELECT e.path, s.keys FROM pgcatalog_hot h JOIN "
            "pgcatalog_hot_free_sets s ON s.kid = h.kid JOIN "
            "pgcatalog_entries e "
            "ON e.rid = h.rid WHERE h.cid = {} AND e.path LIKE "
            "'/plone/hot/%%'", cid)))
        code = hot.code(subject, cid)
        self.assertEqual(rows["/plone/hot/d1"], [hot.key(code, "other"),
                                                 hot.key(code, "tag")])
        self.assertEqual(rows["/plone/hot/d0"], [hot.key(code, "tag")])
        free = ({"Subject": "tag"},
                {"Subject": {"query": ["tag", "other"], "operator": "and"}},
                {"Subject": ["other", "nothing"]},
                {"Subject": "nothing"},
                {"Subject": "tag", "b_size": 2})
        for query in free:
            self.assertTrue(self.reads_free(query), query)
        for query in ({"portal_type": "Document", "Subject": "tag"},
                      {"Subject": "tag", "path": "/plone/hot"},
                      {"Subject": "tag", "effectiveRange": NOW}):
            self.assertFalse(self.reads_free(query), query)
        self.assert_same_answers(free)
        # registered before version 18: the hot rows answer
        subject._pgc_hot_sets = {}
        self.assertIsNone(hot.kept_in(subject, cid))
        for query in free:
            self.assertFalse(self.reads_free(query), query)
        self.assert_same_answers(free)
        # pgc_sync_indexes (upgrade 1005 -> 1006) records them, without
        # computing the rows again
        _answer, sent = statements(
            self.catalog, lambda: hot.register(
                self.store.session, cid, subject))
        self.assertEqual(hot.kept_in(subject, cid), "free")
        self.assertFalse([t for t in sent if "INSERT" in t], sent)
        # written with the entries: a tag added, a tag removed, no tag left,
        # an entry gone
        doc = self.portal.hot
        doc.d1.setSubject(("other",))
        doc.d1.reindexObject()
        doc.d2.setSubject(("tag", "new"))
        doc.d2.reindexObject()
        doc.d0.setSubject(())
        doc.d0.reindexObject()
        doc.manage_delObjects(["d4"])
        self.assertEqual(self.mismatches(), [])
        self.assert_same_answers(free + ({"Subject": "new"},))
        transaction.commit()
        self.assertEqual(self.mismatches(), [])
        self.assertIsNone(self.store.value(q(
            "SELECT kid FROM pgcatalog_hot WHERE rid = {}",
            self.catalog.getrid("/plone/hot/d0"))))
        self.assertEqual(self.answer({"portal_type": "Document",
                                      "review_state": "published"})[1], 2)

    def reads_sets(self, query):
        """Whether ``query`` reads the rows of the matching key sets (not
        those of the free keys' sets, version 18: ``h.kid``)."""
        _answer, sent = statements(self.catalog, lambda: self.answer(query))
        return any("pgcatalog_hot_sets" in text and "h.sid" in text
                   for text in sent)

    def test_key_sets_answer_what_the_keys_answer(self):
        # every index but Subject is in the key sets (hot-set-exclude's
        # default): their queries count the rows of the matching sets
        cid = self.store.cid
        for name in HOT_NAMES:
            self.assertEqual(hot.in_sets(self.index(name), cid),
                             name not in ("Subject", "effectiveRange"), name)
        for query in QUERIES:
            with self.subTest(query=query):
                sets = not any(name in query for name in ("Subject",)) \
                    and set(query) - {"b_size"} != {"effectiveRange"}
                if "b_size" not in query:
                    self.assertEqual(self.reads_sets(query), sets)
                self.assertEqual(self.answer(query), self.cold_answer(query))
        self.assertEqual(self.mismatches(), [])
        # the key sets hold no Subject key; 6 documents and a folder share
        # few; the free keys' sets (version 18) hold Subject's alone
        subject = hot.code(self.index("Subject"), cid)
        named = "SELECT s.keys FROM %s s WHERE s.cid = {} AND EXISTS " \
            "(SELECT 1 FROM pgcatalog_hot h WHERE h.%s = s.%s)"
        rows = self.store.rows(q(named % ("pgcatalog_hot_sets", "sid",
                                          "sid"), cid))
        self.assertTrue(rows)
        for (keys,) in rows:
            self.assertFalse([k for k in keys
                              if k.startswith(subject + hot.SEP)], keys)
            self.assertEqual(keys, sorted(keys))
        self.assertLess(len(rows), 7)
        free = self.store.rows(q(named % ("pgcatalog_hot_free_sets", "kid",
                                          "kid"), cid))
        self.assertEqual(sorted(keys for (keys,) in free), [
            [hot.key(subject, "other"), hot.key(subject, "tag")],
            [hot.key(subject, "tag")]])

    def test_a_set_changed_behind_the_catalogs_back_is_found(self):
        cid = self.store.cid
        processQueue()
        self.store.session.execute_write(cid, q(
            "UPDATE pgcatalog_hot h SET sid = (SELECT max(s.sid) FROM "
            "pgcatalog_hot_sets s WHERE s.cid = h.cid AND s.sid <> h.sid) "
            "WHERE h.rid = (SELECT min(rid) FROM pgcatalog_hot WHERE cid = "
            "{})", cid))
        self.assertEqual(len(self.mismatches()), 1)
        hot.refill(self.store.session, cid)
        self.assertEqual(self.mismatches(), [])

    def test_sync_gives_unmarked_index_objects_their_sets(self):
        # the sets are filled, the index objects do not know it yet and
        # read the keys (always right); pgc_sync_indexes marks them,
        # without writing the rows
        cid = self.store.cid
        for name in HOT_NAMES:
            self.index(name).__dict__.pop("_pgc_hot_sets", None)
        query = {"portal_type": "Document", "review_state": "published"}
        self.assertFalse(self.reads_sets(query))
        self.assertEqual(self.answer(query), self.cold_answer(query))
        _done, sent = statements(self.catalog,
                                 self.catalog.pgc_sync_indexes)
        # (the rows are written again by hot._recompute only)
        self.assertFalse([t for t in sent
                          if "pgcatalog_hot_keys(e.cid, e.idx) AS keys" in t],
                         sent)
        self.assertTrue(hot.in_sets(self.index("portal_type"), cid))
        self.assertFalse(hot.in_sets(self.index("Subject"), cid))
        self.assertTrue(self.reads_sets(query))
        self.assert_same_answers()
        transaction.abort()

    def test_a_new_set_made_by_two_transactions(self):
        # sets are inserted once: a transaction whose snapshot does not
        # see the set another one committed meanwhile cannot insert it and
        # fails with a serialization failure (a ConflictError, retried
        # from a snapshot that sees the set); one that sees it reads it
        import psycopg

        from plone.pgcatalog.pg import dberrors
        cid = self.store.cid
        keys = [hot.key(hot.code(self.index("portal_type"), cid),
                        "A type no entry has %s" % id(self))]
        dsn = self.store.session.dsn
        with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
            for conn in (first, second):
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                conn.execute("SELECT 1")    # the snapshot is taken
            made = first.execute("SELECT pgcatalog_hot_set(%s, %s)",
                                 (cid, keys)).fetchone()[0]
            first.commit()
            with self.assertRaises(psycopg.errors.SerializationFailure) \
                    as caught:
                second.execute("SELECT pgcatalog_hot_set(%s, %s)",
                               (cid, keys))
            self.assertIsInstance(dberrors.translate_error(caught.exception),
                                  ConflictError)
            second.rollback()
            second.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            self.assertEqual(second.execute(
                "SELECT pgcatalog_hot_set(%s, %s)", (cid, keys)).fetchone()[0],
                made)
            second.rollback()

    def reads_counts(self, query):
        _answer, sent = statements(self.catalog, lambda: self.answer(query))
        return any("pgcatalog_hot_counts" in text for text in sent)

    def counts(self):
        """``{(sid, cls): n}`` as the catalog's count rows add up."""
        return {(sid, cls): n for sid, cls, n in self.store.rows(q(
            "SELECT sid, cls, sum(n)::bigint FROM pgcatalog_hot_counts "
            "WHERE cid = {} GROUP BY 1, 2", self.store.cid)) if n}

    def test_counts_by_set_and_range_class(self):
        # a count whose key conditions are in the sets adds the sets'
        # counts; with effectiveRange, the open ranges' counts less those
        # starting later, and the other ranges one by one.  (Answers read
        # lazily, with a head of 2: a small site's are read whole.)
        self.addCleanup(setattr, lazy, "WHOLE", lazy.WHOLE)
        self.addCleanup(setattr, lazy, "WHOLE_COUNTED", lazy.WHOLE_COUNTED)
        self.addCleanup(setattr, lazy, "HEAD", lazy.HEAD)
        lazy.WHOLE, lazy.WHOLE_COUNTED, lazy.HEAD = -1, -1, 2
        for query in QUERIES:
            with self.subTest(query=query):
                counted = kept_count(query)
                if "b_size" not in query:
                    self.assertEqual(self.reads_counts(query), counted)
                self.assertEqual(self.answer(query), self.cold_answer(query))
        # the same counts reading every rid at once (a kept count of at
        # most WHOLE_COUNTED: the statement's other branch)
        lazy.WHOLE = lazy.WHOLE_COUNTED = 1000
        for query in QUERIES:
            with self.subTest(query=query, whole=True):
                counted = kept_count(query)
                if "b_size" not in query:
                    self.assertEqual(self.reads_counts(query), counted)
                self.assertEqual(self.answer(query), self.cold_answer(query))
        lazy.WHOLE = lazy.WHOLE_COUNTED = -1
        # d0 starts in ten days, d3 ended ten days ago: each range class
        processQueue()
        cls = dict(self.store.rows(q(
            "SELECT rid, pgcatalog_hot_class(lo, hi, rng) FROM pgcatalog_hot "
            "WHERE cid = {}", self.store.cid)))
        rid = self.catalog.getrid
        self.assertEqual(cls[rid("/plone/hot/d0")], 1)
        self.assertEqual(cls[rid("/plone/hot/d3")], 2)
        self.assertEqual(self.answer({"portal_type": "Document",
                                      "effectiveRange": NOW})[1], 4)
        self.assertEqual(self.answer({"portal_type": "Document",
                                      "effectiveRange": NOW - 20})[1], 5)
        self.assertEqual(self.answer({"portal_type": "Document",
                                      "effectiveRange": NOW + 20})[1], 5)
        self.assertEqual(self.mismatches(), [])

    def test_counts_through_writes_savepoints_and_folds(self):
        portal, wf = self.portal, self.portal.portal_workflow
        folded = self.counts()
        sp = transaction.savepoint()
        wf.doActionFor(portal.hot.d0, "publish")
        portal.hot.d4.setExpirationDate(NOW + 5)   # open -> closed range
        portal.hot.d4.reindexObject()
        portal.hot.invokeFactory("Document", "new")
        portal.hot.manage_delObjects(["d5"])
        self.assert_same_answers()
        sp.rollback()
        processQueue()
        self.assertEqual(self.counts(), folded)
        wf.doActionFor(portal.hot.d2, "publish")
        portal.hot.manage_delObjects(["d5"])
        self.assert_same_answers()
        transaction.commit()
        # folded: one row per set and class, the same sums
        before = self.counts()
        rows = self.store.value(q("SELECT count(*) FROM pgcatalog_hot_counts "
                                  "WHERE cid = {}", self.store.cid))
        transaction.abort()
        upkeep.fold_hot_counts(self.store.session.dsn)
        self.assertEqual(self.counts(), before)
        self.assertEqual(self.store.value(q(
            "SELECT count(*) FROM pgcatalog_hot_counts WHERE cid = {}",
            self.store.cid)), len(before))
        self.assertLessEqual(len(before), rows)
        self.assert_same_answers()

    def test_a_fold_leaves_a_writer_in_flight_its_rows(self):
        # a fold deletes and sums the rows its snapshot sees; a writer's
        # uncommitted rows stay, and add up once it commits
        import psycopg
        processQueue()
        transaction.commit()
        rid = self.catalog.getrid("/plone/hot/d2")
        dsn = self.store.session.dsn
        transaction.abort()
        before = self.counts()
        transaction.abort()
        with psycopg.connect(dsn, autocommit=True) as writer:
            writer.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            writer.execute(
                "UPDATE pgcatalog_entries SET idx = jsonb_set(idx, "
                "'{review_state}', '\"pending\"') WHERE rid = %s", (rid,))
            upkeep.fold_hot_counts(dsn)
            writer.execute("COMMIT")
        upkeep.fold_hot_counts(dsn)
        after = self.counts()
        self.assertNotEqual(after, before)
        self.assertEqual(sum(after.values()), sum(before.values()))
        self.assertEqual(verifystore.hot_count_mismatches(self.store, 10), [])
        self.assertEqual(self.answer({"review_state": "pending"})[1], 1)
        transaction.abort()

    def test_counts_of_a_dropped_catalog_go_at_the_next_fold(self):
        processQueue()
        transaction.commit()
        dsn = self.store.session.dsn
        other = self.store.value(q(
            "INSERT INTO pgcatalog_catalogs (key) VALUES ({}) RETURNING cid",
            "dropped %s" % id(self)))
        sid = self.store.value(q("SELECT pgcatalog_hot_set({}, {})", other,
                                 ["1" + hot.SEP + "x"]))
        self.store.write(q(
            "INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first) "
            "VALUES ({}, {}, 0, 1, 1), ({}, {}, 0, 1, 2)", other, sid, other,
            sid))
        transaction.commit()
        self.store.write(q("DELETE FROM pgcatalog_catalogs WHERE cid = {}",
                           other))
        transaction.commit()
        upkeep.fold_hot_counts(dsn)
        self.assertEqual(self.store.value(q(
            "SELECT count(*) FROM pgcatalog_hot_counts WHERE sid = {}", sid)),
            0)
        transaction.abort()

    def test_verify_finds_and_repairs_wrong_counts(self):
        processQueue()
        cid = self.store.cid
        sid = self.store.value(q(
            "SELECT h.sid FROM pgcatalog_hot h WHERE h.rid = {}",
            self.catalog.getrid("/plone/hot/d1")))
        self.store.session.execute_write(cid, q(
            "INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first) "
            "VALUES ({}, {}, 1, 5, 1)", cid, sid))
        wrong = verifystore.hot_count_mismatches(self.store, 10)
        self.assertEqual([row[:2] for row in wrong], [(sid, 1)])
        self.assertEqual(wrong[0][2], wrong[0][3] + 5)
        hot.recount(self.store.session, cid)
        self.assertEqual(verifystore.hot_count_mismatches(self.store, 10), [])
        self.assert_same_answers()
        transaction.abort()

    def test_hot_set_exclude_setting(self):
        # the setting decides at registration; the index objects and the
        # hot names change together, and the rows are filled again
        cid = self.store.cid
        self.addCleanup(os.environ.pop, "PGCATALOG_HOT_SET_EXCLUDE", None)
        os.environ["PGCATALOG_HOT_SET_EXCLUDE"] = "review_state"
        for name in HOT_NAMES:
            hot.sync(self.store.session, cid, self.index(name))
        self.assertTrue(hot.in_sets(self.index("Subject"), cid))
        self.assertFalse(hot.in_sets(self.index("review_state"), cid))
        self.assertTrue(self.reads_sets({"Subject": "tag"}))
        self.assertFalse(self.reads_sets({"review_state": "private"}))
        self.assertTrue(self.reads_free({"review_state": "private"}))
        self.assertFalse(self.reads_free({"Subject": "tag"}))
        self.assert_same_answers()
        del os.environ["PGCATALOG_HOT_SET_EXCLUDE"]
        for name in HOT_NAMES:
            hot.sync(self.store.session, cid, self.index(name))
        self.assertFalse(hot.in_sets(self.index("Subject"), cid))
        self.assertTrue(self.reads_sets({"review_state": "private"}))
        self.assert_same_answers()
        transaction.abort()

    def test_a_batch_counts_from_the_hot_rows(self):
        query = {"review_state": "private", "b_size": 1}
        found, sent = statements(self.catalog, lambda: (
            self.catalog.unrestrictedSearchResults(dict(query))
            .actual_result_count), riders=True)
        self.assertEqual(found, 4)
        self.assertIn("pgcatalog_hot", sent[-1])

    def test_other_queries_read_the_entries(self):
        for query in COLD:
            self.assertFalse(self.reads_hot(query), query)
            self.assertEqual(self.answer(query), self.cold_answer(query),
                             query)

    def test_writes_keep_the_hot_rows(self):
        portal, wf = self.portal, self.portal.portal_workflow
        docs = portal.hot
        # a state change, a new entry, a removal, a rename
        wf.doActionFor(docs.d0, "publish")
        docs.invokeFactory("Document", "new")
        docs.manage_delObjects(["d5"])
        transaction.savepoint()
        docs.manage_renameObject("d4", "renamed")
        self.assert_same_answers()
        transaction.commit()
        self.assert_same_answers()
        # local roles: allowedRolesAndUsers changes
        docs.d2.manage_setLocalRoles("someone", ["Reader"])
        docs.d2.reindexObjectSecurity()
        self.assert_same_answers(QUERIES + (
            {"allowedRolesAndUsers": "user:someone"},))
        self.assertEqual(self.answer(
            {"allowedRolesAndUsers": "user:someone"})[1], 1)
        transaction.commit()

    def test_savepoint_rollback_and_abort(self):
        wf = self.portal.portal_workflow
        before = self.answer({"review_state": "published"})
        sp = transaction.savepoint()
        wf.doActionFor(self.portal.hot.d2, "publish")
        processQueue()
        self.assertEqual(self.answer({"review_state": "published"})[1],
                         before[1] + 1)
        sp.rollback()
        self.assertEqual(self.answer({"review_state": "published"}), before)
        wf.doActionFor(self.portal.hot.d5, "publish")
        processQueue()
        transaction.abort()
        self.assertEqual(self.answer({"review_state": "published"}), before)
        self.assertEqual(self.mismatches(), [])

    def test_values_without_keys(self):
        # a long string and a non-string have no key: queries for them read
        # the entries, and the entry's other keys stay
        doc = self.portal.hot.d0
        doc.review_state_override = LONG
        self.catalog.addIndex("hot_long", "FieldIndex",
                              extra=types.SimpleNamespace(
                                  indexed_attrs="review_state_override"))
        transaction.commit()
        try:
            self.assertFalse(hot.ready(self.index("hot_long"),
                                       self.store.cid))
            self.assertEqual(self.mismatches(), [])
        finally:
            self.catalog.delIndex("hot_long")
            transaction.commit()

    def test_del_and_add_index(self):
        cid = self.store.cid
        epoch = self.catalog._pgc_changes.hot_epoch
        prefix = hot.key(hot.code(self.index("review_state"), cid), "")
        had = q("SELECT count(*) FROM pgcatalog_hot WHERE cid = {} AND "
                "EXISTS (SELECT 1 FROM unnest(keys) k WHERE starts_with("
                "k, {}))", cid, prefix)
        self.assertEqual(self.store.rows(had), [(6,)])
        self.catalog.delIndex("review_state")
        # registering makes the transaction conflict with writers
        self.assertEqual(self.catalog._pgc_changes.hot_epoch, epoch + 1)
        self.assertEqual(self.store.rows(had), [(0,)])
        self.assertEqual(self.mismatches(), [])
        self.catalog.addIndex("review_state", "FieldIndex")
        self.catalog.reindexIndex("review_state", None)
        self.assertTrue(hot.ready(self.index("review_state"), cid))
        self.assert_same_answers()
        transaction.commit()
        self.assert_same_answers()

    def test_index_of_another_kind_under_a_hot_name(self):
        # a KeywordIndex named review_state: the keys are its list's
        self.catalog.delIndex("review_state")
        self.catalog.addIndex("review_state", "KeywordIndex")
        self.catalog.reindexIndex("review_state", None)
        self.assertEqual(self.store.rows(q(
            "SELECT multi FROM pgcatalog_hot_names WHERE cid = {} AND "
            "name = 'review_state'", self.store.cid)), [(True,)])
        self.assert_same_answers()
        transaction.abort()

    def test_setting_names_the_hot_indexes(self):
        os.environ["PGCATALOG_HOT_INDEXES"] = "portal_type, Subject"
        try:
            self.assertEqual(hot.names(), {"portal_type", "Subject"})
            self.catalog.pgc_sync_indexes()
            cid = self.store.cid
            self.assertTrue(hot.ready(self.index("Subject"), cid))
            self.assertFalse(hot.ready(self.index("review_state"), cid))
            self.assertTrue(self.reads_hot({"Subject": "x"}))
            self.assertFalse(self.reads_hot({"review_state": "private"}))
            self.assert_same_answers([{"portal_type": "Document"},
                                      {"Subject": "nothing"}])
        finally:
            del os.environ["PGCATALOG_HOT_INDEXES"]
            transaction.abort()
        os.environ["PGCATALOG_HOT_INDEXES"] = ""
        try:
            self.assertEqual(hot.names(), frozenset())
        finally:
            del os.environ["PGCATALOG_HOT_INDEXES"]

    def test_a_sync_of_several_hot_names_computes_the_rows_once(self):
        # one hot index added, several taken off: the hot rows (every
        # entry's, each computation a statement over the whole catalog)
        # are computed again once, after every name changed
        os.environ["PGCATALOG_HOT_INDEXES"] = "portal_type Subject Creator"
        try:
            _, sent = statements(self.catalog, self.catalog.pgc_sync_indexes)
            refills = [text for text in sent
                       if "pgcatalog_hot_bounds(e.cid, e.idx)" in text]
            self.assertEqual(len(refills), 1)
            cid = self.store.cid
            self.assertTrue(hot.ready(self.index("Creator"), cid))
            self.assertFalse(hot.ready(self.index("review_state"), cid))
            self.assertTrue(self.reads_hot({"Creator": "test_user_1_"}))
            self.assertFalse(self.reads_hot({"review_state": "private"}))
            self.assert_same_answers([{"Creator": "test_user_1_"},
                                      {"portal_type": "Document"},
                                      {"Subject": "tag"}])
        finally:
            del os.environ["PGCATALOG_HOT_INDEXES"]
            transaction.abort()

    def test_long_keyword_lists(self):
        # an entry holding a long list's digest: its keys are the list's
        saved = lists.LONG_LIST
        lists.LONG_LIST = 10
        try:
            doc = self.portal.hot.d2
            doc.manage_setLocalRoles("user-with-a-long-name", ["Reader"])
            doc.reindexObjectSecurity()
            processQueue()
            kind = self.store.rows(q(
                "SELECT jsonb_typeof(idx -> 'allowedRolesAndUsers') FROM "
                "pgcatalog_entries WHERE rid = {}",
                self.catalog.getrid("/plone/hot/d2")))
            self.assertEqual(kind, [("string",)])
            self.assert_same_answers(QUERIES + (
                {"allowedRolesAndUsers": "user:user-with-a-long-name"},))
            self.assertEqual(self.answer(
                {"allowedRolesAndUsers": "user:user-with-a-long-name"})[1],
                1)
        finally:
            lists.LONG_LIST = saved
            transaction.abort()

    def test_sync_gives_a_catalog_without_hot_keys_its_hot_keys(self):
        # no hot names, no rows, its index objects unmarked: answered from
        # the entries meanwhile; pgc_sync_indexes registers them
        cid = self.store.cid
        self.store.session.execute_write(cid, q(
            "DELETE FROM pgcatalog_hot_names WHERE cid = {}", cid))
        self.store.session.execute_write(cid, q(
            "DELETE FROM pgcatalog_hot WHERE cid = {}", cid))
        for name in HOT_NAMES:
            del self.index(name)._pgc_hot_codes
        self.assertFalse(self.reads_hot({"portal_type": "Document"}))
        self.assertEqual(self.answer({"portal_type": "Document"})[1], 6)
        self.catalog.pgc_sync_indexes()
        for name in HOT_NAMES:
            self.assertTrue(hot.ready(self.index(name), cid), name)
        self.assert_same_answers()
        self.assertEqual(self.answer({"portal_type": "Document"})[1], 6)
        transaction.commit()
        # the writes were counted: the result cache's generation still
        # matches the catalog's change stamp (cache.py)
        self.assertTrue(self.store.snapshot_complete(
            result_cache.generation(self.catalog)))


class TestHotRegistrationConflicts(unittest.TestCase):
    """A transaction registering hot keys and a concurrent catalog writer
    never both commit (whichever is second is retried)."""

    @staticmethod
    def changes(names=()):
        found = Changes()
        found.rows = True
        found.names = set(names)
        return found

    def states(self):
        counters = ChangeCounters("t")
        counters.bump(self.changes())
        old = counters.__getstate__()
        writer = ChangeCounters("t")
        writer.__setstate__(dict(old))
        writer.bump(self.changes({"portal_type"}))
        registering = ChangeCounters("t")
        registering.__setstate__(dict(old))
        registering.bump_hot()
        return counters, old, writer.__getstate__(), \
            registering.__getstate__()

    def test_either_order_conflicts(self):
        counters, old, writer, registering = self.states()
        with self.assertRaises(ConflictError):
            counters._p_resolveConflict(old, writer, registering)
        with self.assertRaises(ConflictError):
            counters._p_resolveConflict(old, registering, writer)

    def test_writers_alone_still_merge(self):
        counters, old, writer, _registering = self.states()
        merged = counters._p_resolveConflict(old, writer, writer)
        self.assertEqual(merged["rows"], old["rows"] + 2)



class TestTextRows(ManagerWithoutCache):
    """A text search with no other condition is matched and scored from
    the text rows alone (relevance.TextRelevance): the same answer, scores and
    relevance order as through the entries."""

    def setUp(self):
        super().setUp()
        portal = self.portal
        portal.invokeFactory("Folder", "texts", title="apple")
        words = ["apple banana", "apple apple cherry", "banana cherry",
                 "apple", "cherry cherry apple banana", "durian"]
        for n, text in enumerate(words):
            portal.texts.invokeFactory("Document", "t%d" % n, title=text,
                                       description=text + " " + text)
        transaction.commit()

    def answer(self, query):
        found = self.catalog.unrestrictedSearchResults(dict(query))
        return [(b.getPath(), b.data_record_score_) for b in found]

    def test_key_sets_assumed_and_checked_in_the_search(self):
        # after an edit the key sets' ids a text search reads beside its
        # hot conditions go with the search (checked in its snapshot), not
        # in a round trip before it; a search that assumed sets its
        # snapshot does not hold is read again
        query = {"SearchableText": "apple",
                 "portal_type": ["Document", "News Item"]}

        def sets(text):
            return text.startswith('SELECT ARRAY(SELECT s.sid FROM '
                                   '"pgcatalog_hot_sets"')

        found, sent = statements(self.catalog, lambda: self.answer(query),
                                 riders=True)
        self.assertEqual(len(found), 4)
        self.assertTrue(any(sets(text) for text in sent))
        transaction.abort()
        self.portal.texts.invokeFactory("Document", "t9", title="apple")
        transaction.commit()
        found, sent = statements(self.catalog, lambda: self.answer(query))
        self.assertEqual(len(found), 5)
        self.assertFalse(any(sets(text) for text in sent))
        transaction.abort()
        # a new combination of keys (the first News Item): a key set of
        # its own, which the search finds in its snapshot
        self.portal.texts.invokeFactory("News Item", "t10", title="apple")
        transaction.commit()
        found, sent = statements(self.catalog, lambda: self.answer(query))
        self.assertIn("/plone/texts/t10", [path for path, _s in found])
        self.assertEqual(len(found), 6)
        transaction.abort()
        self.assertEqual(self.answer(query), found)

    def test_a_globs_words_assumed_and_checked_in_the_search(self):
        # after an edit of a text the words a glob stands for go with the
        # search (checked in its snapshot), not in a round trip before
        # it; a search that assumed other words than its snapshot holds is
        # read again
        query = {"SearchableText": "ban*"}

        def words(text):
            return text.startswith("SELECT array_agg(d.word ORDER BY")

        found, sent = statements(self.catalog, lambda: self.answer(query),
                                 riders=True)
        self.assertEqual(len(found), 3)
        self.assertTrue(any(words(text) for text in sent))
        transaction.abort()
        self.portal.texts.t5.setTitle("durian banana")
        self.portal.texts.t5.reindexObject()
        transaction.commit()
        found, sent = statements(self.catalog, lambda: self.answer(query))
        self.assertEqual(len(found), 4)
        self.assertFalse(any(words(text) for text in sent))
        transaction.abort()
        # a new word of the prefix
        self.portal.texts.invokeFactory("Document", "t11", title="bandana")
        transaction.commit()
        found, sent = statements(self.catalog, lambda: self.answer(query))
        self.assertIn("/plone/texts/t11", [path for path, _s in found])
        self.assertEqual(len(found), 5)
        transaction.abort()
        self.assertEqual(self.answer(query), found)

    def test_a_page_by_relevance_comes_with_its_brains(self):
        # a page of a search by relevance reads its brains' metadata with
        # the matches: rendering it sends nothing more (every match: the
        # first window is read when a brain is, relevance.TextRelevance)
        for query in ({"SearchableText": "apple", "b_size": 2},
                      {"SearchableText": "apple", "b_size": 2, "b_start": 2},
                      {"SearchableText": "apple", "path": "/plone",
                       "b_size": 3},
                      {"SearchableText": "apple cherry", "b_size": 3,
                       "portal_type": "Document"}):
            def render():
                found = self.catalog.unrestrictedSearchResults(dict(query))
                return [(b.getPath(), b.Title, b.data_record_score_)
                        for b in found[:3]]
            transaction.abort()     # a new transaction: nothing known
            found, sent = statements(self.catalog, render)
            # (the text statistics may be read first, once per snapshot)
            reads = [t for t in sent if "pgcatalog_meta" in t]
            self.assertEqual(len(reads), 1, (query, sent))
            self.assertIs(reads[0], sent[-1], (query, sent))
            self.assertIn("array_agg", reads[0])
            self.assertTrue(found)
            for path, title, _score in found:
                self.assertEqual(
                    title, self.portal.unrestrictedTraverse(path).Title())

    def test_same_answer_and_order_without_the_entries(self):
        for text in ("apple", "banana OR cherry", "apple AND NOT durian",
                     "cher*", "nothing", '"apple banana"', "apple cherry",
                     "cherry AND banana AND apple",
                     "(apple AND banana) OR durian"):
            query = {"SearchableText": text}
            found, sent = statements(self.catalog,
                                     lambda: self.answer(query))
            # (a glob's words are read from the lexicon first)
            search = [s for s in sent if "array_agg" in s
                      and "pgcatalog_words" not in s][0]
            # (a small answer's metadata is read with it, plans.py)
            search = search_part(search)
            self.assertNotIn("pgcatalog_entries", search, text)
            # the same search beside a condition every entry meets: the
            # text rows joined to the entries (or, for a union, through the
            # entries, scored when a brain is read)
            self.assertEqual(found, self.answer(dict(query, path="/plone")),
                             text)
            if text == "banana OR cherry":
                # a union of words: read word by word
                # (postings.postings_sql)
                self.assertIn("w(lex, query, df)", search)
                continue
            self.assertIn('FROM "pgcatalog_text" e', search, text)
            # words, phrases and globs (their words, from the lexicon):
            # scored from what the scan read of the row
            # (scoring.rank_columns); a union's branch scored when it
            # matched reads more of it
            self.assertEqual("CROSS JOIN LATERAL" in search, text in (
                "(apple AND banana) OR durian",), text)
            # a word is looked up in the tsvector only when a matching
            # row may lack it (a union): else a missing count is 1 (the
            # glob "cher*" is the one word "cherry")
            self.assertEqual("THEN 1 ELSE 0 END" in search, text in (
                "(apple AND banana) OR durian",), text)
        self.assertEqual(len(self.answer({"SearchableText": "apple"})), 5)

    def full(self, query):
        found = self.catalog.unrestrictedSearchResults(dict(query))
        return [(b.getPath(), b.data_record_score_,
                 b.data_record_normalized_score_) for b in found]

    def test_a_glob_is_the_union_of_its_words(self):
        """A glob is its words, read from the lexicon (schema version 11):
        the union of those words spelled out, the same answer, order and
        scores, every match or a page, whether its words are read as
        words or in one pass; ``?`` and inner ``*`` keep to ZCTextIndex's
        pattern; a word written by the transaction itself is found."""
        texts = {"g0": "grape grapefruit", "g1": "grapes", "g2":
                 "grapevine grape apple", "g3": "grapefruit grapefruit",
                 "g4": "grappa"}
        for id_, text in texts.items():
            self.portal.texts.invokeFactory("Document", id_, title=text)
        transaction.commit()
        union = "grape OR grapefruit OR grapes OR grapevine OR grappa"
        extras = ({}, {"b_size": 2}, {"path": "/plone"},
                  {"portal_type": "Document"})
        # the union read row by row
        rowwise = unittest.mock.patch.object(postings, "POSTINGS_MIN_WORDS",
                                             100)
        with rowwise:
            rows = [self.full(dict(extra, SearchableText=union))
                    for extra in extras]
            beside = self.full({"SearchableText": "(%s) AND apple" % union})
        self.assertEqual(len(rows[0]), 5)
        self.assertEqual(len(beside), 1)
        # row by row, the glob's words read as words (10) or in one pass
        # (4, 1); and read word by word (postings.postings_sql)
        for columns in (10, 4, 1, None):
            with unittest.mock.patch.object(
                    scoring, "GLOB_WORD_COLUMNS", columns or 4), \
                    unittest.mock.patch.object(
                        postings, "POSTINGS_MIN_WORDS",
                        100 if columns else 2):
                for extra, expected in zip(extras, rows):
                    self.assertEqual(
                        self.full(dict(extra, SearchableText="grap*")),
                        expected, (columns, extra))
                    self.assertEqual(
                        self.full(dict(extra, SearchableText=union)),
                        expected, (columns, extra))
                self.assertEqual(
                    self.full({"SearchableText": "grap* AND apple"}),
                    beside)
                self.assertEqual(
                    self.full({"SearchableText": "(%s) AND apple" % union}),
                    beside)
        self.assertEqual(self.full({"SearchableText": "gra?e*"}),
                         self.full({"SearchableText": "grape OR grapefruit "
                                    "OR grapes OR grapevine"}))
        self.assertEqual(self.full({"SearchableText": "gr*s"}),
                         self.full({"SearchableText": "grapes"}))
        self.assertEqual(self.full({"SearchableText": "zzz*"}), [])
        self.assertEqual(len(self.full(
            {"SearchableText": "apple AND NOT zzz*"})), 6)
        # more words than GLOB_WORDS_MAX: the glob kept, the same matches
        textstats.forget()
        with unittest.mock.patch.object(textstats, "GLOB_WORDS_MAX", 2):
            self.assertEqual(
                sorted(p for p, _, _ in self.full({"SearchableText":
                                                   "grap*"})),
                sorted(p for p, _, _ in self.full({"SearchableText":
                                                   union})))
        textstats.forget()
        # a new word of this transaction
        self.portal.texts.invokeFactory("Document", "g5", title="grapeseed")
        found = [p for p, _, _ in self.full({"SearchableText": "grap*"})]
        self.assertIn("/plone/texts/g5", found)
        self.assertEqual(len(found), 6)
        transaction.abort()

    def test_other_conditions_keep_the_order_and_scores(self):
        """A text search beside other conditions, every match or a page:
        the text search's answer without the entries the conditions leave
        out, in the same order, with the same scores (a row's score does
        not depend on the other conditions); a page is the slice of it,
        its scores normalized by the best of every match."""
        # (row by row: a union of words is read word by word below)
        with unittest.mock.patch.object(postings, "POSTINGS_MIN_WORDS", 100):
            self._other_conditions(("apple", "apple cherry",
                                    '"apple banana"', "cher*",
                                    "banana OR cherry",
                                    "apple AND NOT durian",
                                    "(apple AND banana) OR durian"))

    def test_other_conditions_word_by_word(self):
        """The same for unions of words read word by word
        (postings.postings_sql), their matches then kept by the hot rows
        (the smaller side hashed); beside a condition on the entries, row
        by row."""
        self._other_conditions(("banana OR cherry",
                                "apple OR banana OR durian"),
                               postings=True)
        # beside the site root's path (every entry: plone.restapi's search
        # adds it), alone or with hot conditions: word by word
        for extra in ({}, {"portal_type": "Document"},
                      {"portal_type": "Document", "b_size": 2}):
            query = dict(extra, SearchableText="apple OR banana OR durian")
            expected = self.full(query)
            got, sent = statements(self.catalog, lambda: self.full(
                dict(query, path="/plone")))
            self.assertEqual(got, expected, extra)
            search = [st for st in sent if "array_agg" in st][0]
            self.assertIn("w(lex, query, df)", search, extra)
        # beside conditions on the entries (not a path) that keep enough:
        # word by word, then kept by the entries (the hot conditions first
        # kept by the hot rows): each match looked up, or among the
        # entries meeting the conditions, hashed, as the costs say
        # (relevance.entries_hashed); the same answers as row by row
        union = "apple OR banana OR durian"
        hashed = {"ENTRY_LOOKUP_US": 1e9, "ENTRY_HASHED_US": 1.0}
        # looked up: by the costs, or by a hash too big for memory
        looked_up = {"ENTRY_LOOKUP_US": 1.0, "ENTRY_HASHED_US": 1e9}
        too_big = dict(hashed, HASHED_ROWS_MAX=0)
        for extra in ({"is_folderish": False},
                      {"is_folderish": False, "portal_type": "Document"},
                      {"is_folderish": False, "b_size": 2},
                      {"path": "/plone/texts"}):
            query = dict(extra, SearchableText=union)
            with unittest.mock.patch.object(postings, "POSTINGS_MIN_WORDS",
                                            100):
                expected = self.full(query)
            self.assertTrue(expected)
            for costs in (looked_up, hashed, too_big):
                with unittest.mock.patch.object(postings, "ROW_SCORE_US",
                                                1e9), \
                        unittest.mock.patch.multiple(relevance, **costs):
                    got, sent = statements(self.catalog,
                                           lambda: self.full(query))
                self.assertEqual(got, expected, (extra, costs))
                search = [st for st in sent if "array_agg" in st][0]
                if "path" in extra:
                    # a folder: matched there, row by row
                    self.assertNotIn("w(lex, query, df)", search)
                    continue
                self.assertEqual(
                    ') tr JOIN "pgcatalog_entries" e' in search,
                    costs is not hashed, (extra, costs))
                self.assertEqual(
                    'tr.rid IN (SELECT e.rid + 0 FROM "pgcatalog_entries" e'
                    in search, costs is hashed, (extra, costs))
                self.assertEqual("h.rid + 0" in search,
                                 "portal_type" in extra, extra)
        # when matching the union at once costs less (Postings.pays):
        # row by row, the same answer
        query = {"SearchableText": "apple OR banana OR durian",
                 "portal_type": "Document", "b_size": 3}
        expected = self.full(query)
        with unittest.mock.patch.object(postings, "ROW_SCORE_US", 0.0):
            got, sent = statements(self.catalog,
                                   lambda: self.full(query))
        self.assertEqual(got, expected)
        search = [st for st in sent if "array_agg" in st][0]
        self.assertNotIn("w(lex, query, df)", search)
        self.assertIn('FROM "pgcatalog_text" tr JOIN "pgcatalog_hot" h',
                      search)

    def test_kept_postings_answer_as_the_text_rows(self):
        """A union of words, alone or beside hot conditions, is read from
        its index's kept postings (schema version 7: ``Title``'s in a new
        database, ``SearchableText``'s once named, ops/postings.py): the
        same matches, order and scores as read word by word from the text
        rows, every match and pages, after the transaction's own changes
        of texts, workflow states and entries too; it is read from them
        (emptied, nothing is found) only while the index is named."""
        store = self.catalog._pgc_store()

        def keep(*names, hint=True):
            for statement in kept_postings.keep_statements(names):
                store.write(statement)
            if hint:
                # (which indexes keep postings: a hint kept per process,
                # textstats.postings_named)
                textstats.forget()

        def everything():
            return {repr(query): self.full(query) for query in queries}

        queries = []
        for name in ("Title", "SearchableText"):
            for extra in ({}, {"portal_type": "Document"},
                          {"portal_type": "Document", "b_size": 2},
                          {"portal_type": "Document", "b_size": 2,
                           "b_start": 2},
                          {"allowedRolesAndUsers": ["Anonymous"],
                           "effectiveRange": DateTime()},
                          {"portal_type": "Document",
                           "effectiveRange": DateTime()},
                          {"allowedRolesAndUsers": ["Anonymous"],
                           "portal_type": ["Document", "Folder"]}):
                for union in ("apple OR banana OR durian",
                              "cherry OR durian", "grape OR durian",
                              # single words (postings.KeptWord): a
                              # common one, a rare one, a glob of one
                              "apple", "durian", "che*"):
                    queries.append(dict(extra, **{name: union}))

        def agree():
            # the postings as the triggers keep them, then the text rows
            # (the postings taken off), then the postings written again
            by_postings, sent = statements(self.catalog, everything)
            keep()
            by_rows = everything()
            keep("Title", "SearchableText")
            self.assertEqual(by_postings, by_rows)
            # (anonymous: the private documents kept out; a second page
            # of few matches)
            self.assertEqual([query for query, found in by_rows.items()
                              if not found and "Anonymous" not in query
                              and "b_start" not in query], [])
            # (a glob's words are read from the lexicon first)
            searches = [st for st in sent if "array_agg" in st
                        and '"pgcatalog_words"' not in st]
            self.assertEqual(len(searches), len(queries))
            for search in searches:
                self.assertIn('"pgcatalog_postings" h ',
                              search)
            return by_rows

        # (a new database keeps Title's)
        self.assertEqual(store.rows(q("SELECT name FROM {}",
                                      schema.POSTINGS_NAMES_TABLE)),
                         [("Title",)])
        keep("Title", "SearchableText")
        agree()
        # the transaction's own changes: a text, a workflow state (the
        # hot row's key set), an entry gone, an entry added
        texts = self.portal.texts
        texts.t0.setTitle("banana")
        texts.t0.setDescription("banana")
        texts.t0.reindexObject()
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document"],
                                  "simple_publication_workflow")
        wf.doActionFor(texts.t1, "publish")
        # (made private: the hot row alone changes, the text rows are
        # not written again)
        wf.doActionFor(texts.t4, "publish")
        wf.doActionFor(texts.t4, "retract")
        texts.manage_delObjects(["t3"])
        texts.invokeFactory("Document", "t9", title="durian cherry",
                            description="durian cherry")
        processQueue()
        before = agree()
        # the document published: found by anonymous
        visible = {path for query, found in before.items()
                   if "Anonymous" in query and "cherry" in query
                   for path, _s, _n in found}
        self.assertIn("/plone/texts/t1", visible)
        self.assertNotIn("/plone/texts/t4", visible)
        # read from the postings while the index is named: emptied,
        # nothing is found
        store.write(q("DELETE FROM {} WHERE name = 'SearchableText'",
                      schema.POSTINGS_TABLE))
        for query in queries:
            self.assertEqual(self.full(query),
                             [] if "SearchableText" in query
                             else before[repr(query)], query)
        # taken off while this process thinks them kept: the statement
        # asks the names table itself (the text rows read)
        keep("Title", hint=False)
        for query in queries:
            found, sent = statements(self.catalog,
                                     lambda: self.full(query))
            self.assertEqual(found, before[repr(query)], query)
            self.assertIn('"pgcatalog_postings" h ',
                          [st for st in sent if "array_agg" in st and
                           '"pgcatalog_words"' not in st][0])
        textstats.forget()
        for query in queries:
            self.assertEqual(self.full(query), before[repr(query)], query)

    def test_a_single_word_from_its_postings_when_that_pays(self):
        """A single word beside hot conditions is read from its kept
        postings (``Title``'s: kept in a new database) when the hot rows
        those conditions keep are enough for its postings
        (postings.KEPT_WORD_SHARE_MIN: the statement compares the word's
        kept frequency), else matched on its text rows among the hot
        rows.  Emptied, the postings tell which was read."""
        query = {"Title": "apple", "portal_type": "Document", "b_size": 3}
        textstats.forget()
        found, sent = statements(self.catalog, lambda: self.full(query))
        self.assertEqual(len(found), 3)
        self.assertIn('"pgcatalog_postings" h ',
                      [st for st in sent if "array_agg" in st][0])
        self.catalog._pgc_store().write(q(
            "DELETE FROM {} WHERE name = 'Title'", schema.POSTINGS_TABLE))
        self.assertEqual(self.full(query), [])
        # 5 titles hold the word (the folder's too), 6 documents are
        # kept: read from the text rows when the hot rows kept must be
        # twice its postings
        with unittest.mock.patch.object(postings, "KEPT_WORD_SHARE_MIN",
                                        2.0):
            self.assertEqual(self.full(query), found)
        with unittest.mock.patch.object(postings, "KEPT_WORD_SHARE_MIN",
                                        1.0):
            self.assertEqual(self.full(query), [])

    def test_a_page_of_a_single_word_from_its_best_postings(self):
        """A page of a single word by relevance is read from the word's
        best postings (search/wordpage.py: a few of each count, then those
        scoring at least as well as the page's last): the same rids,
        scores and normalized scores as every match scored, for pages of
        many equal scores (equal counts and lengths: newest rid first),
        beside hot conditions too; the total counted when read.  In a
        database that does not keep the postings, the text rows."""
        portal = self.portal
        wf = portal.portal_workflow
        wf.setChainForPortalTypes(["Document"],
                                  "simple_publication_workflow")
        portal.invokeFactory("Folder", "kiwis")
        for i in range(36):
            # the word counted 1-3 times in titles of 1-6 words
            count, pad = 1 + i % 3, (i // 3) % 4
            portal.kiwis.invokeFactory(
                "Document", "k%02d" % i, title=" ".join(
                    ["kiwi"] * count + ["pad%d" % j for j in range(pad)]))
            if i % 4 == 0:
                wf.doActionFor(portal.kiwis["k%02d" % i], "publish")
        processQueue()
        textstats.forget()
        for extra in ({}, {"portal_type": "Document"},
                      {"allowedRolesAndUsers": ["Anonymous"],
                       "effectiveRange": DateTime()}):
            query = dict(extra, Title="kiwi")
            every = self.full(query)
            self.assertEqual(len(every), 36 if not extra else
                             (36 if "portal_type" in extra else 9), extra)
            self.assertGreater(len(every), len({s for _p, s, _n in every}))
            for b_size in (1, 4, 10):
                for b_start in (0, 1, 3, 8, 20, 35, 40):
                    page = dict(query, b_start=b_start, b_size=b_size)
                    got, sent = statements(
                        self.catalog,
                        lambda: self.catalog.unrestrictedSearchResults(
                            dict(page)))
                    self.assertEqual(
                        [(b.getPath(), b.data_record_score_,
                          b.data_record_normalized_score_) for b in got],
                        every[b_start:b_start + b_size], page)
                    search = [st for st in sent if "array_agg" in st][0]
                    self.assertIn("WITH RECURSIVE t(tf)", search)
                    # counted when read
                    self.assertFalse([st for st in sent
                                      if st.startswith("SELECT count(*)")])
                    total, sent = statements(
                        self.catalog, lambda: got.actual_result_count)
                    self.assertEqual(total, len(every))
                    self.assertEqual(len(sent), 1, sent)
        # the postings not kept: the text rows, the same page
        store = self.catalog._pgc_store()
        page = {"Title": "kiwi", "b_start": 2, "b_size": 5}
        expected = self.full(page)
        for statement in kept_postings.keep_statements(()):
            store.write(statement)
        self.assertEqual(self.full(page), expected)
        self.assertEqual(len(expected), 5)

    def _other_conditions(self, texts, postings=False):
        # the same documents through hot conditions only (the text rows
        # joined to their hot rows), with the range too, and with a
        # condition that is not hot (joined to their entries)
        filters = [({"portal_type": "Document"}, '"pgcatalog_hot" h'),
                   ({"portal_type": "Document", "effectiveRange": DateTime(),
                     "allowedRolesAndUsers": ["Anonymous"]},
                    '"pgcatalog_hot" h'),
                   ({"portal_type": "Document", "path": "/plone/texts"},
                    '"pgcatalog_entries" e')]
        forms = set()
        for text in texts:
            alone = self.answer({"SearchableText": text})
            documents = [(p, s) for p, s in alone if "/texts/t" in p]
            for conditions, joined in filters:
                query = dict(conditions, SearchableText=text)
                found = self.answer(query)
                self.assertEqual(found, documents, query)
                whole = self.full(query)
                for b_start in range(0, len(documents) + 1, 2):
                    page = dict(query, b_start=b_start, b_size=2)
                    got, sent = statements(self.catalog,
                                           lambda: self.full(page))
                    self.assertEqual(got, whole[b_start:b_start + 2],
                                     (query, b_start))
                    search = [st for st in sent if "array_agg" in st][0]
                    if postings and "hot" in joined:
                        # the words' matches and scores, then kept by
                        # the hot rows: fewer matches than hot rows kept,
                        # the matches hashed and joined to the hot rows;
                        # else a semi-join hashing the hot rows (here:
                        # with no room for the matches' hash); beside a
                        # condition on the entries (a folder may hold
                        # few), matched row by row
                        first = ") tr JOIN " + joined + " ON h.rid + 0 " \
                            "= tr.rid" in search
                        self.assertNotEqual(
                            first, ") tr WHERE tr.rid IN (SELECT h.rid + 0 "
                            "FROM " + joined in search, query)
                        forms.add(first)
                        self.assertIn("w(lex, query, df)", search, query)
                        with unittest.mock.patch.object(
                                relevance, "HASHED_ROWS_MAX", 0):
                            semi, sent = statements(
                                self.catalog, lambda: self.full(page))
                        self.assertEqual(semi, got, (query, b_start))
                        search = [st for st in sent if "array_agg" in st][0]
                        self.assertIn(") tr WHERE tr.rid IN (SELECT "
                                      "h.rid + 0 FROM " + joined, search,
                                      query)
                        continue
                    # one text index: its text rows joined to the hot
                    # rows or the entries, each match scored once
                    self.assertIn('FROM "pgcatalog_text" tr JOIN ' + joined,
                                  search, query)
                    self.assertEqual(search.count('"pgcatalog_text" tr'),
                                     1, query)
        if postings:
            # both forms met: matches fewer and more than the hot rows
            self.assertEqual(forms, {True, False})

    def test_a_common_words_frequency_is_counted_exactly(self):
        """A word in the scoring statement's limit of documents or more
        (2,000; here 2) has its exact frequency (the sum of its kept rows,
        never a count up to the limit): the scores of every match and of a
        page are those of exact frequencies, not of the limit."""
        index = self.catalog._catalog.getIndex("SearchableText")
        queries = [{"SearchableText": "apple cherry"},
                   {"SearchableText": "apple cherry", "portal_type":
                    "Document", "b_size": 2},
                   {"SearchableText": "banana OR cherry"}]
        textstats.forget()
        exact = [self.full(query) for query in queries]
        self.assertEqual(len(exact[0]), 2)
        limit = scoring.DF_EXACT_LIMIT
        scoring.DF_EXACT_LIMIT = 2
        index.pgc_df_limit = 2
        try:
            textstats.forget()
            self.assertEqual([self.full(query) for query in queries], exact)
            # counted once, then kept (and while kept, never again)
            _found, sent = statements(self.catalog,
                                      lambda: self.full(queries[0]))
            self.assertFalse([s for s in sent if "LIMIT 2)" in s or
                              "tsv @@ %s::tsquery" in s and "count(*)" in s
                              and "array_agg" not in s], sent)
        finally:
            scoring.DF_EXACT_LIMIT = limit
            del index.pgc_df_limit
            textstats.forget()

    def test_two_text_indexes_are_scored_through_the_entries(self):
        query = {"SearchableText": "apple", "Title": "apple"}
        found = self.full(query)
        self.assertEqual(len(found), 5)
        # the scores add both indexes' (the folder's title is "apple" too)
        alone = dict(self.answer({"SearchableText": "apple"}))
        for path, score, _normalized in found:
            self.assertGreater(score, alone[path])
        for b_start in (0, 2, 4):
            page = dict(query, b_start=b_start, b_size=2)
            got, sent = statements(self.catalog, lambda: self.full(page))
            self.assertEqual(got, found[b_start:b_start + 2], b_start)
            search = [st for st in sent if "array_agg" in st][0]
            self.assertNotIn('"pgcatalog_text" tr', search)
            self.assertIn("WITH s AS MATERIALIZED", search)


class TestFirstBrains(ManagerWithoutCache):
    """An every-match answer sorted in PostgreSQL reads its first brains'
    metadata with its matches (sorting.UnlimitedSort, ``first``): a listing
    that renders its first page sends one statement; brains past the first
    window are read as before."""

    def setUp(self):
        super().setUp()
        self.portal.invokeFactory("Folder", "listing", title="Listing")
        for n in range(40):
            self.portal.listing.invokeFactory(
                "Document", "d%02d" % n, title="Doc %02d" % (39 - n))
        transaction.commit()

    def test_a_sorted_listing_renders_its_first_page_at_once(self):
        first = plans.FIRST_WITH_METADATA
        for query in (
                {"portal_type": "Document", "sort_on": "sortable_title"},
                {"portal_type": "Document", "sort_on": "modified",
                 "sort_order": "descending"},
                # few distinct values: ZCatalog walks the index (ties in
                # rid order, the statement's ``ties``)
                {"portal_type": "Document", "sort_on": "portal_type",
                 "sort_order": "descending"},
                {"path": {"query": "/plone/listing", "depth": 1},
                 "sort_on": "sortable_title"}):
            transaction.abort()     # a new transaction: nothing known
            found = self.catalog.unrestrictedSearchResults(dict(query))
            self.assertEqual(len(found), 40, query)

            def read(start, stop):
                return [(b.getPath(), b.Title) for b in found[start:stop]]

            page, sent = statements(self.catalog, lambda: read(0, first))
            self.assertEqual(sent, [], query)
            for path, title in page:
                self.assertEqual(
                    title, self.portal.unrestrictedTraverse(path).Title())
            # past the first window: read when asked for
            rest, sent = statements(self.catalog, lambda: read(first, 40))
            self.assertEqual(len(sent), 1, query)
            self.assertEqual(
                [p for p, _t in page + rest],
                [b.getPath() for b in self.catalog.unrestrictedSearchResults(
                    dict(query))], query)
