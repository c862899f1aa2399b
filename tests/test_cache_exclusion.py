"""Cached answers that stay after writes their query cannot see
(search/exclusion.py, the touched entries' log of changes.py)."""
import os
import tempfile
import unittest

import transaction
from DateTime import DateTime
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from statements import statements
from ZODB import DB
from ZODB.FileStorage import FileStorage

from plone.pgcatalog import changes
from plone.pgcatalog.changes import ChangeCounters
from plone.pgcatalog.changes import Changes
from plone.pgcatalog.changes import facts
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.search.exclusion import cannot_match
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


class TestJudge(unittest.TestCase):
    """Which digests a query's judge says it cannot match (the catalog of
    a Plone site: its index kinds)."""

    layer = PGCATALOG_FUNCTIONAL_TESTING

    def judge(self, **query):
        return cannot_match(self.layer["portal"].portal_catalog._catalog,
                            query)

    def test_values(self):
        doc = facts({"portal_type": "Document", "Subject": ["a", "b"],
                     "review_state": "private"}, "/plone/doc")
        self.assertTrue(self.judge(portal_type="Event")(doc))
        self.assertFalse(self.judge(portal_type="Document")(doc))
        self.assertFalse(self.judge(portal_type=["Event", "Document"])(doc))
        self.assertTrue(self.judge(Subject="c")(doc))
        self.assertFalse(self.judge(Subject=["c", "b"])(doc))
        self.assertTrue(self.judge(Subject={"query": ["a", "c"],
                                            "operator": "and"})(doc))
        self.assertFalse(self.judge(Subject={"query": ["a", "b"],
                                             "operator": "and"})(doc))
        # a FieldIndex has no "operator" option: its values are "or"
        self.assertFalse(self.judge(portal_type={
            "query": ["Document", "Event"], "operator": "and"})(doc))
        self.assertTrue(self.judge(portal_type={
            "query": ["Page", "Event"], "operator": "and"})(doc))
        # one condition that cannot match is enough
        self.assertTrue(self.judge(portal_type="Document",
                                   review_state="published")(doc))

    def test_conditions_not_judged(self):
        # conditions left out (the query judged by others, or not at all)
        doc = facts({"portal_type": "Document", "Subject": ["a"]}, "/p/d")
        for condition in (
                dict(Subject={"query": "c", "range": "min"}),
                dict(Subject=""),
                dict(Subject=[]),
                dict(Subject=None),
                dict(getObjSize=1),
                dict(Subject={"query": "c", "operator": "xor"}),
                dict(created={"query": DateTime(), "range": "min"}),
                dict(effectiveRange=DateTime()),
                dict(is_folderish=True)):
            self.assertIsNone(self.judge(**condition), condition)
            self.assertTrue(self.judge(portal_type="Event", **condition)(
                doc), condition)
        # a condition that may depend on the catalog as a whole, or on
        # every entry's text: the query is not judged
        for condition in (
                dict(Subject={"not": "x"}),
                dict(Subject={"query": "a", "not": "x"}),
                dict(created={"not": DateTime()}),
                dict(Subject="a", Subject_operator="and"),
                dict(SearchableText="word"),
                dict(path="/plone/folder"),
                dict(path={"query": "/plone/f", "depth": 2}),
                dict(path={"query": "/", "depth": 1}),
                dict(path={"query": "plone/folder", "depth": 1}),
                dict(path={"query": "/plone//folder", "depth": 1}),
                dict(path={"query": "/plone/f", "navtree": True,
                           "depth": 1}),
                dict(path={"query": "/plone/f", "level": -1, "depth": 1}),
                dict(getObjPositionInParent=1)):
            self.assertIsNone(
                self.judge(portal_type="Event", **condition), condition)

    def test_paths(self):
        doc = facts({}, "/plone/folder-1/doc")

        def children(path):
            return self.judge(path={"query": path, "depth": 1})

        self.assertTrue(children("/plone/folder-2")(doc))
        self.assertTrue(children("/plone/folder")(doc))
        self.assertFalse(children("/plone/folder-1")(doc))
        self.assertFalse(children("/plone/folder-1/")(doc))
        self.assertFalse(children("/plone/folder-1/doc")(doc))
        self.assertFalse(children("/plone")(doc))
        self.assertTrue(children(["/plone/a", "/plone/b"])(doc))
        self.assertFalse(children(["/plone/a", "/plone/folder-1"])(doc))
        self.assertTrue(self.judge(path={"query": "/plone/folder-2",
                                         "depth": 0})(doc))
        # other depths may depend on the catalog as a whole
        for depth in (-1, 2, True, "1"):
            self.assertIsNone(self.judge(path={"query": "/plone/folder-2",
                                               "depth": depth}))
        self.assertIsNone(self.judge(path="/plone/folder-2"))

    def test_long_lists_by_digest(self):
        from plone.pgcatalog.pg import lists
        provided = ["iface.%d.IThing" % n for n in range(30)]
        ref = lists.stored_list(provided)
        self.assertIsInstance(ref, lists.ListRef)
        judge = self.judge(object_provides="iface.3.IThing")
        # as written (the list itself) and as read back (its digest,
        # known to this process)
        self.assertFalse(judge(facts({"object_provides": ref}, "/p")))
        self.assertFalse(judge(facts({"object_provides": str(ref)}, "/p")))
        self.assertTrue(self.judge(object_provides="iface.IEvent")(
            facts({"object_provides": str(ref)}, "/p")))
        # a digest this process never made may hold anything
        self.assertFalse(self.judge(object_provides="iface.IEvent")(
            facts({"object_provides": "0" * 32}, "/p")))


class TestTouchedLog(unittest.TestCase):
    """The touched entries' log of the change counters."""

    def test_untouched_by(self):
        counters = ChangeCounters("t")
        since = counters.tseq
        changed = Changes()
        changed.rows = True
        changed._touch(None, facts({"portal_type": "Document"}, "/p/d"))
        counters.bump(changed)
        event = lambda f: not (f & (1 << changes.fact_bit(  # noqa: E731
            "portal_type", "Document")))
        anything = lambda f: False  # noqa: E731
        self.assertTrue(counters.untouched_by(since, lambda f: True))
        self.assertFalse(counters.untouched_by(since, event))
        self.assertFalse(counters.untouched_by(since, anything))
        # read at the new sequence: nothing touched since
        self.assertTrue(counters.untouched_by(counters.tseq, anything))
        # a reader older than the answer, or no sequence
        self.assertFalse(counters.untouched_by(counters.tseq + 1,
                                               lambda f: True))
        self.assertFalse(counters.untouched_by(None, lambda f: True))

    def test_not_described(self):
        counters = ChangeCounters("t")
        since = counters.tseq
        # names changed, nothing logged: not described
        changed = Changes()
        changed.names = {"Title"}
        counters.bump(changed)
        self.assertFalse(counters.untouched_by(since, lambda f: True))
        # too many entries in one transaction
        since = counters.tseq
        changed = Changes()
        changed.rows = True
        for _n in range(changes.TOUCHED_SIZE + 1):
            changed._touch(None, 0)
        self.assertTrue(changed.opaque)
        counters.bump(changed)
        self.assertFalse(counters.untouched_by(since, lambda f: True))
        self.assertTrue(counters.untouched_by(counters.tseq,
                                              lambda f: False))

    def test_entries_written(self):
        from plone.pgcatalog.pg.writer import Upsert

        def upsert(idx):
            return Upsert(True, dict(idx), [], "{}", {}, [])

        changed = Changes()
        changed.entry(None, False, upsert({"portal_type": "Document"}),
                      path="/p/new")
        changed.entry((7, {"portal_type": "News Item"}, "{}", []), False,
                      None, path="/p/gone")
        changed.entry((8, {"review_state": "private"}, "{}", []), False,
                      upsert({"review_state": "published"}), path="/p/d")
        # an unchanged reindex touches nothing
        changed.entry((9, {"review_state": "private"}, "{}", []), False,
                      upsert({"review_state": "private"}), path="/p/e")
        self.assertEqual(changed.touched, [
            (None, facts({"portal_type": "Document"}, "/p/new")),
            (facts({"portal_type": "News Item"}, "/p/gone"), None),
            (facts({"review_state": "private"}, "/p/d"),
             facts({"review_state": "published"}, "/p/d"))])
        self.assertFalse(changed.opaque)
        # without a path, or past the bound: not described
        alone = Changes()
        alone.entry(None, False, upsert({}))
        self.assertTrue(alone.opaque)
        many = Changes()
        for n in range(changes.TOUCHED_SIZE + 1):
            many.entry(None, False, upsert({}), path="/p/%d" % n)
        self.assertEqual((many.opaque, many.touched), (True, []))

    def test_bounded(self):
        counters = ChangeCounters("t")
        first = counters.tseq
        for _n in range(changes.TOUCHED_SIZE + 1):
            changed = Changes()
            changed.rows = True
            changed._touch(None, 0)
            counters.bump(changed)
        self.assertEqual(len(counters.tlog), changes.TOUCHED_SIZE)
        self.assertFalse(counters.untouched_by(first, lambda f: True))
        self.assertTrue(counters.untouched_by(first + 1, lambda f: True))

    def test_concurrent_logs_merge(self):
        """Two transactions touch entries concurrently: the merged log
        holds both, the second renumbered after the first."""
        with tempfile.TemporaryDirectory() as tmp:
            db = DB(FileStorage(os.path.join(tmp, "Data.fs")))
            try:
                tm1, tm2 = (transaction.TransactionManager()
                            for _ in range(2))
                c1, c2 = db.open(tm1), db.open(tm2)
                c1.root()["c"] = ChangeCounters("t")
                tm1.commit()
                c2.sync()
                a, b = c1.root()["c"], c2.root()["c"]
                first, second = Changes(), Changes()
                first.rows = second.rows = True
                first._touch(None, 1)
                second._touch(2, 4)
                a.bump(first)
                b.bump(second)
                tm1.commit()
                tm2.commit()        # resolved, no ConflictError
                merged = db.open().root()["c"]
                self.assertEqual(merged.tseq, 2)
                self.assertEqual(merged.tfloor, 0)
                self.assertEqual(list(merged.tlog),
                                 [(1, None, 1), (2, 2, 4)])
                # a reader of the first commit judges the second's entry
                self.assertFalse(merged.untouched_by(
                    1, lambda f: f != 4))
                self.assertTrue(merged.untouched_by(1, lambda f: True))
            finally:
                db.close()


class TestKeptAfterWrites(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for folder in ("fa", "fb"):
            self.portal.invokeFactory("Folder", folder)
            for n in range(3):
                self.portal[folder].invokeFactory(
                    "Document", "d%d" % n, title="Doc %d" % n,
                    subject=["tag%d" % n])
        self.portal.invokeFactory("News Item", "news", title="News")
        processQueue()
        transaction.commit()
        result_cache.forget()

    def tearDown(self):
        transaction.abort()

    def ids(self, **query):
        """``(sorted ids found, statements sent)``."""
        found, sent = statements(self.catalog, lambda: sorted(
            b.getId for b in self.catalog.unrestrictedSearchResults(
                **query)))
        transaction.abort()
        return found, sent

    def commit(self, func):
        func()
        processQueue()
        transaction.commit()

    def filled(self, **query):
        """Ask ``query`` until the cache holds its answer: a fill is
        refused while a transaction elsewhere on the server finishes as
        the snapshot is taken (consistency.refusal, "writer")."""
        for _ in range(20):
            self.ids(**query)
            if not self.ids(**query)[1]:
                return
        self.fail("the answer of %r was never filled" % (query,))

    def test_writes_elsewhere_keep_answers(self):
        news = dict(portal_type="News Item")
        listing = dict(path={"query": "/plone/fa", "depth": 1},
                       sort_on="getObjPositionInParent")
        tagged = dict(Subject="tag1", portal_type="Document")
        for query in (news, listing, tagged):
            self.filled(**query)
        self.assertEqual(self.ids(**news), (["news"], []))
        # a document in another folder, without tags, then changed
        self.commit(lambda: self.portal.fb.invokeFactory(
            "Document", "new", title="New"))

        def edit():
            self.portal.fb.new.setTitle("Newer")
            self.portal.fb.new.reindexObject()

        self.commit(edit)
        for query, expected in ((news, ["news"]),
                                (listing, ["d0", "d1", "d2"]),
                                (tagged, ["d1", "d1"])):
            self.assertEqual(self.ids(**query), (expected, []), query)
        # a write the query can see: read again
        self.commit(lambda: self.portal.fa.manage_delObjects(["d2"]))
        found, sent = self.ids(**listing)
        self.assertEqual((found, len(sent)), (["d0", "d1"], 1))
        self.assertEqual(self.ids(**news), (["news"], []))

        def tag():
            self.portal.fb.new.setSubject(["tag1"])
            self.portal.fb.new.reindexObject()

        self.commit(tag)        # the entry comes into the answer
        found, sent = self.ids(**tagged)
        self.assertEqual((found, len(sent)), (["d1", "d1", "new"], 1))

        def untag():
            self.portal.fa.d1.setSubject([])
            self.portal.fa.d1.reindexObject()

        self.commit(untag)      # an entry leaves it
        found, sent = self.ids(**tagged)
        self.assertEqual((found, len(sent)), (["d1", "new"], 1))
        self.commit(lambda: self.portal.invokeFactory(
            "News Item", "news2"))
        found, sent = self.ids(**news)
        self.assertEqual((found, len(sent)), (["news", "news2"], 1))

    def test_text_answers_go_with_any_write(self):
        query = dict(SearchableText="Doc", portal_type="Document")
        self.assertEqual(len(self.ids(**query)[0]), 6)
        self.assertEqual(self.ids(**query)[1], [])
        # a news item cannot match, but it changes Okapi's statistics
        self.commit(lambda: self.portal.invokeFactory(
            "News Item", "other", title="Other"))
        found, sent = self.ids(**query)
        self.assertEqual((len(found), len(sent) > 0), (6, True))

    def test_scores_and_order_as_read_again(self):
        # an answer kept after writes equals the one read again
        listing = dict(path={"query": "/plone/fa", "depth": 1},
                       sort_on="sortable_title", sort_order="reverse")
        kept = self.ids(**listing)[0]
        self.commit(lambda: self.portal.fb.invokeFactory(
            "Document", "zz", title="Zz"))
        found, sent = self.ids(**listing)
        self.assertEqual((found, sent), (kept, []))
        result_cache.forget()
        self.assertEqual(self.ids(**listing)[0], kept)
