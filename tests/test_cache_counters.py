"""The result cache's change counters (changes.py): a write invalidates only
the answers it can change, and brains of a cached answer are refreshed one
by one."""
import os
import tempfile
import time
import unittest

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from statements import statements
from ZODB import DB
from ZODB.FileStorage import FileStorage

from plone.pgcatalog import changes
from plone.pgcatalog.changes import ChangeCounters
from plone.pgcatalog.changes import Changes
from plone.pgcatalog.pg import store as store_module
from plone.pgcatalog.pg import textstats
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.pg.writer import Upsert
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


def _upsert(idx, meta="{}", full=True, text=None, remove=()):
    return Upsert(full, dict(idx), list(remove), meta, dict(text or {}), [])


class TestChanges(unittest.TestCase):
    """What the writer finds a write changed (no database: the rows as
    the lock statement returns them)."""

    def test_values_compared_as_stored(self):
        old = (7, {"a": 1, "b": ["x", "y"], "c": True, "d": {"k": 1}},
               "{}", [])
        found = Changes()
        found.entry(old, False, _upsert(
            {"a": 1, "b": ["x", "y"], "c": 1, "d": {"k": 1.0}}))
        # True is not 1, 1.0 is not 1: a change in doubt is a change
        self.assertEqual(found.names, {"c", "d"})
        self.assertFalse(found.rows or found.meta or found.all)

    def test_full_reindex_drops_values_and_text(self):
        found = Changes()
        found.entry((7, {"a": 1, "gone": 2}, "{}", ["Title"]), False,
                    _upsert({"a": 1}, text={"SearchableText": "x"}))
        self.assertEqual(found.names, {"gone", "Title", "SearchableText"})

    def test_partial_reindex(self):
        found = Changes()
        found.entry((7, {"a": 1, "b": 2}, "{}", []), False,
                    _upsert({"a": 1}, full=False, remove=["b", "c"]))
        self.assertEqual(found.names, {"b"})

    def test_metadata(self):
        found = Changes()
        found.entry((7, {}, '{"Title": "a"}', []), False,
                    _upsert({}, meta='{"Title": "a"}'))
        self.assertEqual(found.meta, set())
        found.entry((8, {}, '{"Title": "a"}', []), False,
                    _upsert({}, meta='{"Title": "b"}'))
        found.entry((9, {}, '{"Title": "a"}', []), False,
                    _upsert({}, meta=None))        # metadata kept
        self.assertEqual(found.meta, {8})

    def test_entries_that_come_or_go(self):
        for old, delete_first, upsert in (
                (None, False, _upsert({})),                 # new
                ((7, {}, "{}", []), True, None),            # removed
                ((7, {}, "{}", []), True, _upsert({}))):    # a new rid
            found = Changes()
            found.entry(old, delete_first, upsert)
            self.assertTrue(found.rows)
        found = Changes()
        found.entry(None, True, None)       # nothing there, nothing written
        self.assertFalse(found)


class TestCounters(unittest.TestCase):

    def test_metadata_log(self):
        counters = ChangeCounters("t")
        seen = counters.view()[0]
        changed = Changes()
        changed.meta = {5}
        counters.bump(changed)
        view = counters.view()
        self.assertFalse(changes.meta_current(view, 5, seen))
        self.assertTrue(changes.meta_current(view, 6, seen))
        self.assertTrue(changes.meta_current(view, 5, view[0]))
        # read at a later counter than the reader's: never used
        self.assertFalse(changes.meta_current((0, 0, {}), 6, 1))
        self.assertFalse(changes.meta_current(view, 6, None))

    def test_log_bounded(self):
        counters = ChangeCounters("t")
        tag = counters.view()[0]
        for rid in range(changes.LOG_SIZE + 10):
            changed = Changes()
            changed.meta = {rid}
            counters.bump(changed)
        seq, floor, log = counters.view()
        self.assertEqual(len(log), changes.LOG_SIZE)
        self.assertEqual(floor, 10)
        # rids folded into the floor: a brain read before it is unknown
        self.assertFalse(changes.meta_current(counters.view(), 10 ** 6, tag))
        self.assertTrue(changes.meta_current(counters.view(), 10 ** 6, floor))

    def test_concurrent_bumps_add_up(self):
        """Two transactions bump the counters concurrently: both commit
        (conflict resolution) and the result counts both."""
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
                first = Changes()
                first.names, first.meta, first.rows = {"Title"}, {1}, True
                a.bump(first)
                second = Changes()
                second.names, second.meta = {"Title", "review_state"}, {2}
                b.bump(second)
                tm1.commit()
                tm2.commit()        # resolved, no ConflictError
                c3 = db.open()
                merged = c3.root()["c"]
                self.assertEqual(merged.names,
                                 {"Title": 2, "review_state": 1})
                self.assertEqual((merged.rows, merged.all, merged.seq),
                                 (1, 0, 2))
                # the later writer's rid is newer than what a reader of the
                # first commit (seq 1) read
                view = merged.view()
                self.assertTrue(changes.meta_current(view, 1, 1))
                self.assertFalse(changes.meta_current(view, 2, 1))
                c3.close()
            finally:
                db.close()


class TestInvalidation(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(3):
            self.portal.invokeFactory("Document", "d%d" % n,
                                      title="Doc %d" % n)
        self.portal.invokeFactory("News Item", "news", title="News")
        processQueue()
        transaction.commit()
        result_cache.forget()

    def tearDown(self):
        transaction.abort()

    def statements(self, func):
        return statements(self.catalog, func)

    def titles(self, **query):
        return sorted((b.getId, b.Title) for b in
                      self.catalog.unrestrictedSearchResults(**query))

    def edit(self, name, **changes):
        obj = self.portal[name]
        for key, value in changes.items():
            getattr(obj, "set" + key)(value)
        obj.reindexObject()
        transaction.commit()

    def test_an_edit_keeps_answers_it_cannot_change(self):
        by_type = dict(portal_type="Document")
        by_title = dict(Title="Doc")
        self.titles(**by_type)
        self.titles(**by_title)
        transaction.abort()
        self.edit("d1", Title="Renamed")
        found, sent = self.statements(lambda: len(
            self.catalog.unrestrictedSearchResults(**by_type)))
        self.assertEqual((found, sent), (3, []))      # still cached
        # its brains: the edited one's metadata read again, alone
        found, sent = self.statements(lambda: self.titles(**by_type))
        self.assertEqual(found, [("d0", "Doc 0"), ("d1", "Renamed"),
                                 ("d2", "Doc 2")])
        self.assertEqual(len(sent), 1)
        self.assertIn("ANY", sent[0])
        transaction.abort()
        found, sent = self.statements(lambda: self.titles(**by_type))
        self.assertEqual((len(found), sent), (3, []))  # shared again
        # an answer reading the changed index is read again
        self.assertEqual([i for i, _t in self.titles(**by_title)],
                         ["d0", "d2"])

    def windows(self, func):
        """``(func(), [rids of each metadata window read])``."""
        from plone.pgcatalog.pg.store import CatalogStore
        read = []
        original = CatalogStore.metadata_window

        def window(store, rids):
            read.append(sorted(rids))
            return original(store, rids)

        CatalogStore.metadata_window = window
        try:
            return func(), read
        finally:
            CatalogStore.metadata_window = original

    def test_an_answer_read_again_reads_only_brains_it_cannot_know(self):
        # after an edit the listing is read again; its brains' metadata
        # read before (the first 32 come with the search, the rest in a
        # window) is the process's, current unless its rid was logged as
        # changed
        for n in range(3, 43):
            self.portal.invokeFactory("Document", "d%d" % n,
                                      title="Doc %02d" % n)
        processQueue()
        transaction.commit()
        listing = dict(portal_type="Document", sort_on="sortable_title")
        first, read = self.windows(lambda: self.titles(**listing))
        self.assertEqual(len(first), 43)
        self.assertEqual(sum(len(w) for w in read), 43 - 32)
        transaction.abort()
        self.portal.invokeFactory("Document", "new", title="Zz new")
        self.edit("d40", Title="Zz renamed")
        found, read = self.windows(lambda: [
            (b.getId, b.Title) for b in
            self.catalog.unrestrictedSearchResults(**listing)])
        self.assertEqual(found[-2:], [("new", "Zz new"),
                                      ("d40", "Zz renamed")])
        self.assertEqual(sorted(found), sorted(
            [i for i in first if i[0] != "d40"]
            + [("d40", "Zz renamed"), ("new", "Zz new")]))
        # of the 12 brains after the first 32: the renamed and the new one
        uids = {b.getId: b.getRID() for b in
                self.catalog.unrestrictedSearchResults(id=["d40", "new"])}
        self.assertEqual(read, [sorted(uids.values())])
        # a statement on many rows (verify's repairs rewrite metadata so)
        # is no edit of one: every brain read again
        transaction.abort()
        store = self.catalog._pgc_store()
        store.write(q("UPDATE {} SET meta = meta WHERE rid IN (SELECT "
                      "rid FROM {} WHERE cid = {})", schema.META_TABLE,
                      schema.ENTRIES_TABLE, store.cid))
        transaction.commit()
        found, read = self.windows(lambda: [
            (b.getId, b.Title) for b in
            self.catalog.unrestrictedSearchResults(**listing)])
        self.assertEqual(len(found), 44)
        self.assertEqual(sum(len(w) for w in read), 44 - 32)

    def decoded(self, func):
        """``(func(), rids whose brain values were decoded from their
        metadata text)``."""
        from plone.pgcatalog.codec import core as codec
        from plone.pgcatalog.search import results
        decoded = []
        original = results.meta_values

        def meta_values(obj, names, lookup=None, decoded_now=False):
            if decoded_now and obj:
                decoded.append(codec.meta_dict(obj, lookup).get("getId"))
            return original(obj, names, lookup, decoded_now)

        results.meta_values = meta_values
        try:
            return func(), decoded
        finally:
            results.meta_values = original

    def test_brains_are_decoded_once_per_metadata_text(self):
        # a listing read again after an edit (its metadata with the
        # search, or in windows) decodes the new and the changed brains
        # only: the others' values are those of the same text kept in
        # the process, whichever answer read it
        for n in range(3, 43):
            self.portal.invokeFactory("Document", "d%d" % n,
                                      title="Doc %02d" % n)
        processQueue()
        transaction.commit()
        listing = dict(portal_type="Document", sort_on="sortable_title")
        other = dict(portal_type=["Document", "News Item"],
                     sort_on="getId")
        first, decoded = self.decoded(lambda: self.titles(**listing))
        self.assertEqual(len(first), 43)
        self.assertEqual(len(decoded), 43)
        transaction.abort()
        # another answer of the same brains: decoded already
        found, decoded = self.decoded(lambda: self.titles(**other))
        self.assertEqual((len(found), decoded), (44, ["news"]))
        transaction.abort()
        for _round in range(2):
            self.portal.invokeFactory("Document", "new%d" % _round,
                                      title="Zz new")
            self.edit("d%d" % (40 + _round), Title="Zz renamed")
            found, decoded = self.decoded(lambda: [
                (b.getId, b.Title) for b in
                self.catalog.unrestrictedSearchResults(**listing)])
            self.assertEqual(len(found), 44 + _round)
            self.assertIn(("d%d" % (40 + _round), "Zz renamed"), found)
            self.assertEqual(sorted(decoded),
                             ["d%d" % (40 + _round), "new%d" % _round])
            transaction.abort()

    def test_the_change_counter_is_kept_until_a_commit_moves_it(self):
        # plone.app.textfield asks getCounter on every page showing rich
        # text: read once per committed change, not per request
        before = self.catalog.getCounter()
        transaction.abort()
        found, sent = self.statements(self.catalog.getCounter)
        self.assertEqual((found, sent), (before, []))
        # an unchanged reindex moves the counter (as ZCatalog's) and so
        # the generation it is kept under
        self.portal.d1.reindexObject()
        processQueue()
        self.assertEqual(self.catalog.getCounter(), before + 1)
        transaction.commit()
        found, sent = self.statements(self.catalog.getCounter)
        self.assertEqual((found, len(sent)), (before + 1, 1))
        transaction.abort()
        found, sent = self.statements(self.catalog.getCounter)
        self.assertEqual((found, sent), (before + 1, []))
        # own writes counted, the kept value not changed by them
        self.portal.d2.reindexObject()
        self.portal.d0.reindexObject()
        self.assertEqual(self.catalog.getCounter(), before + 3)
        transaction.abort()
        self.assertEqual(self.catalog.getCounter(), before + 1)

    def test_a_uid_lookup_is_kept_until_the_entries_change(self):
        # plone.app.uuid's uuidToPhysicalPath reads the UID index's
        # forward mapping on every page view
        from plone.app.uuid.utils import uuidToPhysicalPath
        index = self.catalog._catalog.getIndex("UID")
        uid = self.portal.d1.UID()
        self.assertEqual(uuidToPhysicalPath(uid), "/plone/d1")
        transaction.abort()
        rid, sent = self.statements(lambda: index._index.get(uid))
        self.assertEqual(sent, [])
        self.assertEqual(self.catalog.getpath(rid), "/plone/d1")
        self.assertIsNone(index._index.get("no-such-uid"))
        transaction.abort()
        found, sent = self.statements(
            lambda: index._index.get("no-such-uid", 0))
        self.assertEqual((found, sent), (0, []))
        # None is never a UID (as UUIDIndex's forward index): no statement
        found, sent = self.statements(lambda: index._index.get(None, 0))
        self.assertEqual((found, sent), (0, []))
        # an edit that changes no UID keeps it
        self.edit("d1", Title="Renamed")
        found, sent = self.statements(lambda: index._index.get(uid))
        self.assertEqual((found, sent), (rid, []))
        # an entry gone: read again
        self.portal.manage_delObjects(["d1"])
        processQueue()
        transaction.commit()
        found, sent = self.statements(lambda: index._index.get(uid))
        self.assertIsNone(found)
        self.assertEqual(len(sent), 1)
        # own writes: read in the transaction
        self.portal.invokeFactory("Document", "d1", title="Again")
        processQueue()
        again = self.portal.d1.UID()
        self.assertEqual(self.catalog.getpath(index._index.get(again)),
                         "/plone/d1")
        transaction.commit()

    def test_a_change_of_a_filter_is_seen(self):
        query = dict(portal_type="Document", sort_on="sortable_title")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **query)), 3)
        transaction.abort()
        tagged = dict(Subject="tagged", portal_type="Document")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **tagged)), 0)
        transaction.abort()
        self.portal.d0.setSubject(["tagged"])
        self.portal.d0.reindexObject()
        transaction.commit()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **tagged)), 1)
        transaction.abort()
        # a type change: a filter of the cached answer
        self.portal.news.portal_type = "Document"
        self.portal.news.reindexObject()
        transaction.commit()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **query)), 4)

    def test_key_sets_found_are_kept_until_a_change_can_move_them(self):
        # a text search beside key conditions finds the matching key sets
        # with a statement of its own (pg/hot.py): their ids are kept under
        # the change counters, as answers are
        query = dict(SearchableText="Doc", portal_type="Document")

        def finding_sets(sent):
            return [s for s in sent if s.startswith("SELECT ARRAY(SELECT s.sid")]

        transaction.abort()
        result_cache.forget()
        found, sent = self.statements(lambda: len(
            self.catalog.unrestrictedSearchResults(**query)))
        self.assertEqual(found, 3)
        self.assertEqual(len(finding_sets(sent)), 1, sent)
        transaction.abort()
        result_cache.forget()
        found, sent = self.statements(lambda: len(
            self.catalog.unrestrictedSearchResults(**query)))
        self.assertEqual((found, finding_sets(sent)), (3, []))
        transaction.abort()
        # an edit of another index keeps them
        self.edit("d2", Title="Doc two")
        found, sent = self.statements(lambda: len(
            self.catalog.unrestrictedSearchResults(**query)))
        self.assertEqual((found, finding_sets(sent)), (3, []))
        transaction.abort()
        # a change of an index in the key sets (an entry may move to
        # another set, or one be made): found again, with the search (the
        # sets found last assumed, checked in its snapshot: test_hot)
        self.portal.news.portal_type = "Document"
        self.portal.news.reindexObject()
        transaction.commit()
        result_cache.forget()
        found, sent = statements(self.catalog, lambda: sorted(
            b.getId for b in self.catalog.unrestrictedSearchResults(**query)),
            riders=True)
        self.assertEqual(found, ["d0", "d1", "d2"])
        self.assertEqual(len(finding_sets(sent)), 1, sent)
        self.assertFalse(sent[0].startswith("SELECT ARRAY(SELECT s.sid"))

    def test_a_long_list_changed_is_seen(self):
        """object_provides is stored once by digest (lists.py): a new
        interface gives the entry another digest, a change the counters
        see."""
        from plone.base.interfaces import INavigationRoot
        from zope.interface import alsoProvides

        query = dict(object_provides=INavigationRoot.__identifier__,
                     portal_type="Document")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **query)), 0)
        transaction.abort()
        alsoProvides(self.portal.d1, INavigationRoot)
        self.portal.d1.reindexObject(idxs=["object_provides"])
        transaction.commit()
        self.assertEqual(
            [b.getId for b in self.catalog.unrestrictedSearchResults(
                **query)], ["d1"])

    def test_entries_that_come_and_go(self):
        query = dict(portal_type="Document")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **query)), 3)
        transaction.abort()
        self.portal.invokeFactory("Folder", "f")    # another type
        transaction.commit()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **query)), 3)
        transaction.abort()
        self.portal.manage_delObjects(["d2"])
        transaction.commit()
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **query)), 2)

    def test_savepoint_rollback_counts_the_generation_once(self):
        """A write, a savepoint, a write rolled back, a write: the commit
        counts one generation (as the change stamp), so answers are cached
        again afterwards."""
        self.portal.d0.setTitle("A")
        self.portal.d0.reindexObject()
        processQueue()
        savepoint = transaction.savepoint()
        self.portal.d1.setTitle("B")
        self.portal.d1.reindexObject()
        self.titles(portal_type="Document")       # the writes are sent
        savepoint.rollback()
        self.portal.d2.setTitle("C")
        self.portal.d2.reindexObject()
        transaction.commit()
        self.titles(portal_type="Document")
        transaction.abort()
        found, sent = self.statements(lambda: self.titles(
            portal_type="Document"))
        self.assertEqual(sent, [])
        self.assertEqual(found, [("d0", "A"), ("d1", "Doc 1"),
                                 ("d2", "C")])

    def kept(self, *queries):
        """Search ``queries`` in a transaction of their own until their
        answers are kept: a snapshot taken while another transaction
        writes (autovacuum's ANALYZE, a background index build) fills
        nothing (cache.py), and these tests are about what a later
        transaction finds kept."""
        cache = result_cache.get_cache()
        for _attempt in range(20):
            unfilled = cache.unfilled
            found = [len(self.catalog.unrestrictedSearchResults(**query))
                     for query in queries]
            transaction.abort()
            if cache.unfilled == unfilled:
                return found
            time.sleep(0.1)
        self.fail("no answer kept: a writer never ended")

    def test_a_write_in_a_later_before_commit_hook_is_counted(self):
        query = dict(Title="Doc")
        other = dict(portal_type="News Item")
        self.assertEqual(self.kept(query, other), [3, 1])
        # the first write changes no title: only the later one does
        self.portal.d0.setDescription("First")
        self.portal.d0.reindexObject()
        processQueue()

        def later():
            self.portal.d1.setTitle("Second")
            self.catalog.reindexObject(self.portal.d1)

        # the catalog's own hook is registered (first write) before this
        transaction.get().addBeforeCommitHook(later)
        transaction.commit()
        self.assertEqual(
            sorted(b.getId for b in self.catalog.unrestrictedSearchResults(
                **query)), ["d0", "d2"])
        transaction.abort()
        # counted in the ZODB, not by emptying the cache (the fallback for
        # writes later than every hook)
        found, sent = self.statements(lambda: len(
            self.catalog.unrestrictedSearchResults(**other)))
        self.assertEqual((found, sent), (1, []))

    def test_a_write_after_every_hook_empties_the_cache(self):
        other = dict(portal_type="News Item")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            **other)), 1)
        transaction.abort()
        self.portal.d0.setDescription("First")
        self.portal.d0.reindexObject()
        processQueue()
        catalog, doc = self.catalog, self.portal.d1

        class LateWriter:
            """A data manager cataloguing in its commit phase, after the
            before-commit hooks (and before the catalog's vote)."""
            transaction_manager = transaction.manager

            def sortKey(self):
                return "0-late-writer"

            def commit(self, txn):
                catalog.catalog_object(doc, "/plone/d1")

            tpc_begin = tpc_vote = tpc_finish = tpc_abort = abort = \
                lambda self, txn: None

        list(self.catalog.uniqueValuesFor("portal_type"))
        transaction.abort()
        list(self.catalog.uniqueValuesFor("portal_type"))   # kept
        self.assertTrue(store_module._stamped)
        self.portal.d0.setDescription("First")
        self.portal.d0.reindexObject()
        processQueue()
        transaction.get().join(LateWriter())
        with self.assertLogs("plone.pgcatalog", "ERROR"):
            transaction.commit()
        self.assertEqual(result_cache.stats()["entries"], 0)
        # the values kept under the same counters go too
        self.assertFalse(store_module._stamped)


class TestTextStatistics(unittest.TestCase):
    """A relevance search reads the collection statistics and every
    word's document frequency the process does not keep in one statement
    (after a commit, before the first text search of the process); a
    search of words and phrases reads them in its own statement."""

    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(6):
            self.portal.invokeFactory(
                "Document", "t%d" % n,
                title=" ".join(["alpha"] * (n + 1) + ["beta"] * (6 - n)))
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()

    def scores(self, text="alpha OR beta", forget=True):
        if forget:
            textstats.forget()
        result_cache.forget()
        try:
            found, sent = statements(self.catalog, lambda: [
                (b.getId, b.data_record_score_) for b in
                self.catalog.unrestrictedSearchResults(
                    SearchableText=text)])
        finally:
            transaction.abort()
        return found, sent

    def test_one_statement_same_scores(self):
        from unittest import mock
        found, sent = self.scores()
        first = sent[0]
        self.assertIn("pgcatalog_text_totals", first)
        # alpha and beta: their kept frequencies in one array
        self.assertEqual(first.count("pgcatalog_text_df"), 1)
        self.assertIn("WITH ORDINALITY", first)
        # + search and scores, with the brains' metadata
        self.assertEqual(len(sent), 2)
        with mock.patch("plone.pgcatalog.pg.textstats.prefetch"):
            alone, sent = self.scores()
        self.assertEqual(len(sent), 4)
        self.assertEqual(found, alone)
        self.assertEqual(len(found), 6)

    def test_words_read_them_in_the_search(self):
        # nothing kept: the search's own statement reads the totals and
        # both words' frequencies (no statement before it; the brains'
        # metadata comes with it)
        found, sent = self.scores("alpha beta")
        self.assertEqual(len(sent), 1)
        self.assertIn("pgcatalog_text_totals", sent[0])
        self.assertEqual(sent[0].count("pgcatalog_text_df"), 2)
        self.assertIn("array_agg(s.score", sent[0])
        # the same scores from the values the process keeps (a union
        # read them first): literals, no kept rows read
        self.scores("alpha OR beta")
        kept, sent = self.scores("alpha beta", forget=False)
        self.assertEqual(len(sent), 1)
        self.assertNotIn("pgcatalog_text_df", sent[0])
        self.assertNotIn("pgcatalog_text_totals", sent[0])
        self.assertEqual(found, kept)
        self.assertEqual(len(found), 6)
        # a phrase too, and a word beside a negated one
        for text in ('"alpha beta"', "alpha AND NOT gamma"):
            read, sent = self.scores(text)
            self.assertEqual(len(sent), 1, text)
            self.scores("alpha OR beta")
            again, _ = self.scores(text, forget=False)
            self.assertEqual(read, again, text)

    def words(self, text):
        """The statements of a relevance search for ``text`` (the result
        cache emptied: the kept statistics are what is looked at)."""
        result_cache.forget()
        try:
            return statements(self.catalog, lambda: [
                (b.getId, b.data_record_score_) for b in
                self.catalog.unrestrictedSearchResults(SearchableText=text)])
        finally:
            transaction.abort()

    def test_kept_statistics_follow_the_text_index_counter(self):
        from unittest import mock
        textstats.forget()
        # (a union: its statistics read before the search, and kept)
        self.words("alpha OR beta")
        # a commit that changes no text keeps them (not the process's
        # commit count: exact for other processes' commits too)
        self.catalog.catalog_object(self.portal.t0, "/plone/t0",
                                    idxs=["getId"])
        transaction.commit()
        _, sent = self.words("beta OR alpha")
        self.assertNotIn("pgcatalog_text_totals", " ".join(sent))
        self.assertNotIn("pgcatalog_text_df", " ".join(sent))
        # another process's commit changing text: this process's commit
        # count does not move, the counters do
        with mock.patch("plone.pgcatalog.pg.db.commit_generation",
                        return_value=-1):
            self.words("alpha OR beta")
            self.portal.t0.setTitle("alpha alpha alpha alpha alpha gamma")
            self.portal.t0.reindexObject()
            transaction.commit()
            kept, sent = self.words("alpha OR beta")
        self.assertIn("pgcatalog_text_totals", sent[0])
        textstats.forget()
        fresh, _ = self.words("alpha OR beta")
        self.assertEqual(kept, fresh)
