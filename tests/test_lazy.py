"""Big every-match answers read as they are used (lazy.py).

``lazy.HEAD`` is made small (3) so that a handful of documents make a big
answer: its count and head come with the search, every rid when an item
past the head is read.  Each answer is compared with the same query read
whole from the entries (the hot indexes unmarked), and the rid set must be
the one the search found whatever the transaction does afterwards (writes,
savepoints, a refused statement, its end), as ZCatalog's is.
"""
import time

import psycopg
import transaction
from Products.CMFCore.indexing import processQueue
from statements import search_part
from statements import statements
from catalog_cases import ManagerWithoutCache
from ZTUtils.Lazy import LazyCat

from plone.pgcatalog.errors import AnswerLost
from plone.pgcatalog.errors import CatalogStatementError
from plone.pgcatalog.pg import estimates
from plone.pgcatalog.pg import upkeep
from plone.pgcatalog.pg import outside as outside_entries
from plone.pgcatalog.pg import store as store_module
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.search import lazy


def rest_read(sent):
    """Whether the statements ``sent`` read every rid of an answer (with
    ``array_agg``: a kept count's statement reads them with ``ARRAY(...)``
    only when they are few, seen by what is read afterwards; the first
    brains' metadata a statement reads after its own, with ``array_agg``
    too, is no such read)."""
    return any("array_agg" in search_part(text) for text in sent)


class LazyCase(ManagerWithoutCache):

    def setUp(self):
        super().setUp()
        self._head = lazy.HEAD
        lazy.HEAD = 3
        self.addCleanup(setattr, lazy, "HEAD", self._head)
        # every estimate is above it: read lazily
        self._whole = lazy.WHOLE
        lazy.WHOLE = -1
        self.addCleanup(setattr, lazy, "WHOLE", self._whole)
        self.addCleanup(setattr, lazy, "WHOLE_COUNTED", lazy.WHOLE_COUNTED)
        lazy.WHOLE_COUNTED = -1
        portal = self.portal
        portal.invokeFactory("Folder", "lz")
        wf = portal.portal_workflow
        wf.setChainForPortalTypes(["Document"],
                                  "simple_publication_workflow")
        for n in range(9):
            portal.lz.invokeFactory("Document", "d%d" % n, title="D%d" % n)
            wf.notifyCreated(portal.lz["d%d" % n])
            portal.lz["d%d" % n].reindexObject()
        for n in (1, 4, 7):
            wf.doActionFor(portal.lz["d%d" % n], "publish")
        transaction.commit()

    def tearDown(self):
        transaction.abort()
        self.portal.manage_delObjects(["lz"])
        transaction.commit()

    def search(self, **query):
        processQueue()
        return self.catalog.unrestrictedSearchResults(**query)

    def rids(self, results):
        return [b.getRID() for b in results]

    def whole(self, **query):
        """The rids the entries give (no hot index: read whole)."""
        saved = {}
        for name in ("portal_type", "review_state", "allowedRolesAndUsers",
                     "Subject"):
            index = self.catalog._catalog.getIndex(name)
            saved[name] = index.__dict__.pop("_pgc_hot_codes", None)
        try:
            return self.rids(self.search(**query))
        finally:
            for name, value in saved.items():
                if value is not None:
                    self.catalog._catalog.getIndex(name)._pgc_hot_codes = \
                        value


class TestLazyAnswers(LazyCase):

    def test_same_answer_as_read_whole(self):
        for query in ({"portal_type": "Document"},
                      {"review_state": "private"},
                      {"portal_type": ["Document", "Folder"]},
                      {"portal_type": "Document", "review_state": "published"},
                      {"portal_type": "Nothing such"}):
            expected = self.whole(**query)
            found = self.search(**query)
            self.assertEqual(len(found), len(expected), query)
            self.assertEqual(found.actual_result_count, len(expected))
            self.assertEqual(self.rids(found), expected, query)
            again = self.search(**query)
            self.assertEqual([b.getRID() for b in again[1:6]], expected[1:6])
            if expected:
                self.assertEqual(again[-1].getRID(), expected[-1])
                self.assertEqual(again[len(expected) - 1].getRID(),
                                 expected[-1])
            with self.assertRaises(IndexError):
                again[len(expected)]
            self.assertEqual(len(LazyCat([again, again])), 2 * len(expected))

    def test_the_head_walks_from_the_sets_first_rid(self):
        # the head is walked in rid order from the least rid the matching
        # sets ever received (their counts' bound): an entry entering a
        # set with a lower rid than its others lowers it
        dsn = self.catalog._pgc_store().session.dsn
        upkeep.fold_hot_counts(dsn)
        query = {"portal_type": "Document", "review_state": "published"}
        lz = self.portal.lz
        rid = self.catalog.getrid
        self.assertEqual(self.rids(self.search(**query)), self.whole(**query))
        self.assertEqual(self.rids(self.search(**query)), [
            rid("/plone/lz/d%d" % n) for n in (1, 4, 7)])
        self.portal.portal_workflow.doActionFor(lz.d0, "publish")
        found = self.search(**query)
        self.assertEqual(len(found), 4)
        self.assertEqual([b.getRID() for b in found[:3]], [
            rid("/plone/lz/d%d" % n) for n in (0, 1, 4)])
        transaction.commit()
        upkeep.fold_hot_counts(dsn)
        self.assertEqual(self.rids(self.search(**query)), self.whole(**query))
        self.assertEqual(self.rids(self.search(**query))[0],
                         rid("/plone/lz/d0"))

    def test_len_and_the_first_page_read_no_rest(self):
        expected = self.whole(portal_type="Document")
        self.assertEqual(len(expected), 9)
        found, sent = statements(self.catalog, lambda: self.search(
            portal_type="Document"))
        self.assertFalse(rest_read(sent), sent)
        page, sent = statements(self.catalog, lambda: (
            len(found), [b.getPath() for b in found[:3]]))
        self.assertEqual(page[0], 9)
        self.assertEqual(len(page[1]), 3)
        self.assertFalse(rest_read(sent), sent)
        rest, sent = statements(self.catalog, lambda: self.rids(found))
        self.assertTrue(rest_read(sent), sent)
        self.assertEqual(rest, expected)
        # read once
        again, sent = statements(self.catalog, lambda: self.rids(found))
        self.assertEqual(again, expected)
        self.assertFalse(rest_read(sent), sent)

    def test_items_past_the_head_are_read_a_window_at_a_time(self):
        # HEAD is 3: item 3 reads a window (as many rids as are known,
        # in rid order after the last), item 7 the next (6 more: the rest
        # of the nine); none reads every rid; a read past WINDOWS_UP_TO or
        # an iteration reads every rid at once
        expected = self.whole(portal_type="Document")
        found = self.search(portal_type="Document")
        item, sent = statements(self.catalog, lambda: found[3].getRID())
        self.assertEqual(item, expected[3])
        self.assertFalse(rest_read(sent), sent)
        self.assertEqual(len([t for t in sent if "ORDER BY" in t]), 1)
        self.assertEqual(found._seq.known(0, 9), expected[:6])
        page, sent = statements(self.catalog, lambda: [
            b.getRID() for b in found[5:8]])
        self.assertEqual(page, expected[5:8])
        self.assertFalse(rest_read(sent), sent)
        self.assertTrue(found._seq.complete)
        self.assertEqual(self.rids(found), expected)
        # a second answer: past WINDOWS_UP_TO, every rid at once
        self.addCleanup(setattr, lazy, "WINDOWS_UP_TO", lazy.WINDOWS_UP_TO)
        lazy.WINDOWS_UP_TO = 5
        found = self.search(portal_type="Document")
        item, sent = statements(self.catalog, lambda: found[6].getRID())
        self.assertEqual(item, expected[6])
        self.assertTrue(rest_read(sent), sent)
        # windows and a write: the write settles the rest first
        found = self.search(portal_type="Document")
        self.assertEqual(found[3].getRID(), expected[3])
        self.portal.lz.manage_delObjects(["d8"])
        processQueue()
        self.assertEqual(self.rids(found), expected)
        self.assertEqual(len(self.search(portal_type="Document")), 8)

    def test_every_entry_is_counted_and_walked_in_rid_order(self):
        # a search for the site root's path matches every entry of the
        # catalog: its count and its first rids, the rest read when needed
        store = self.catalog._pgc_store()
        expected = store.execute(q(
            "SELECT array_agg(e.rid ORDER BY e.rid) FROM {} WHERE e.cid = "
            "{}", schema.FROM_ENTRIES, store.cid)).fetchone()[0]
        self.assertGreater(len(expected), 9)
        found, sent = statements(self.catalog,
                                 lambda: self.search(path="/plone"))
        self.assertFalse(rest_read(sent), sent)
        self.assertTrue(any("ORDER BY e.rid LIMIT" in text for text in sent),
                        sent)
        page, sent = statements(self.catalog, lambda: (
            len(found), found.actual_result_count,
            [b.getRID() for b in found[:3]], [b.Title for b in found[:3]]))
        self.assertEqual(page[:3],
                         (len(expected), len(expected), expected[:3]))
        # the first brains' metadata came with the head
        self.assertEqual(sent, [])
        rest, sent = statements(self.catalog, lambda: self.rids(found))
        self.assertTrue(rest_read(sent), sent)
        self.assertEqual(rest, expected)
        # a folder's subtree is no such search: read whole
        found, sent = statements(self.catalog,
                                 lambda: self.search(path="/plone/lz"))
        self.assertTrue(rest_read(sent), sent)
        self.assertEqual(len(found), 10)

    def test_small_answer_is_whole_at_once(self):
        found = self.search(portal_type="Document", review_state="published")
        self.assertEqual(len(found), 3)
        paths, sent = statements(self.catalog, lambda: self.rids(found))
        self.assertFalse(rest_read(sent), sent)

    def test_answer_estimated_small_is_read_whole_in_one_scan(self):
        # a mid-size answer (above HEAD) whose hot rows are counted one by
        # one (Subject is left out of the key sets), PostgreSQL estimates
        # at no more than WHOLE matches: count and every rid in one
        # statement, so no second walk for the head and nothing left to
        # read
        for n in range(9):
            self.portal.lz["d%d" % n].setSubject(["lazy"])
            self.portal.lz["d%d" % n].reindexObject()
        transaction.commit()
        expected = self.whole(Subject="lazy")
        self.assertEqual(len(expected), 9)
        lazy.WHOLE = 1000
        dsn = self.catalog._pgc_session().dsn
        self.addCleanup(store_module._hot_rows.pop, dsn, None)
        for hot_rows, explained in ((None, True), (10.0 ** 9, True),
                                    (600.0, False)):
            # the statistics' number of hot rows: unknown or big, the
            # planner's estimate decides; well under WHOLE, no EXPLAIN
            store_module._hot_rows[dsn] = (time.monotonic(), hot_rows)
            estimates.forget()
            found, sent = statements(self.catalog, lambda: self.search(
                Subject="lazy"))
            self.assertTrue(rest_read(sent), sent)
            self.assertEqual(
                any(text.startswith("EXPLAIN") for text in sent), explained,
                (hot_rows, sent))
            self.assertEqual(len(found), 9)
            rids, sent = statements(self.catalog, lambda: self.rids(found))
            self.assertEqual(rids, expected)
            self.assertFalse(rest_read(sent), sent)
        # an estimate above WHOLE: the count and the head
        lazy.WHOLE = -1
        store_module._hot_rows[dsn] = (time.monotonic(), None)
        found, sent = statements(self.catalog, lambda: self.search(
            Subject="lazy"))
        self.assertFalse(rest_read(sent), sent)
        self.assertEqual(self.rids(found), expected)

    def test_an_estimate_is_kept_a_while(self):
        # the estimate only chooses how to read: kept by statement and
        # values for estimates.TTL seconds, the same answer without it
        for n in range(9):
            self.portal.lz["d%d" % n].setSubject(["lazy"])
            self.portal.lz["d%d" % n].reindexObject()
        transaction.commit()
        expected = self.whole(Subject="lazy")
        dsn = self.catalog._pgc_session().dsn
        self.addCleanup(store_module._hot_rows.pop, dsn, None)
        store_module._hot_rows[dsn] = (time.monotonic(), None)
        estimates.forget()

        def explained(**query):
            found, sent = statements(self.catalog,
                                     lambda: self.search(**query))
            self.assertEqual(self.rids(found), self.whole(**query))
            return sum(text.startswith("EXPLAIN") for text in sent)

        self.assertEqual(explained(Subject="lazy"), 1)
        self.assertEqual(explained(Subject="lazy"), 0)
        # other values: their own estimate
        self.assertEqual(explained(Subject="other"), 1)
        self.assertEqual(self.rids(self.search(Subject="lazy")), expected)
        # past the time it is kept: asked again
        self.addCleanup(setattr, estimates, "TTL", estimates.TTL)
        estimates.TTL = 0
        self.assertEqual(explained(Subject="lazy"), 1)

    def test_a_kept_count_chooses_whole_or_head_in_one_statement(self):
        # the key sets' counts give the number before any row is read:
        # one statement, no EXPLAIN, reads every rid when they are at most
        # WHOLE_COUNTED and the head else
        expected = self.whole(portal_type="Document")
        dsn = self.catalog._pgc_session().dsn
        self.addCleanup(store_module._hot_rows.pop, dsn, None)
        lazy.WHOLE = 1000
        for whole, read, hot_rows in (
                (1000, True, None), (9, True, None), (8, False, None),
                (-1, False, None),
                # a small site (its hot rows well under WHOLE) whose
                # answers estimated are read whole without an EXPLAIN:
                # a kept count still chooses
                (8, False, 600.0)):
            store_module._hot_rows[dsn] = (time.monotonic(), hot_rows)
            lazy.WHOLE_COUNTED = whole
            found, sent = statements(self.catalog, lambda: self.search(
                portal_type="Document"))
            self.assertEqual(len(sent), 1, sent)
            self.assertIn("pgcatalog_hot_counts", sent[0])
            self.assertEqual(len(found), 9)
            # the head (in rid order) comes with its first brains'
            # metadata, every rid (unordered) with its least rids': no
            # window is read
            titles, sent = statements(self.catalog, lambda: [
                (b.getPath(), b.Title) for b in found[:3]])
            self.assertEqual(len(sent), 0, (whole, sent))
            for path, title in titles:
                self.assertEqual(
                    title, self.portal.unrestrictedTraverse(path).Title())
            # read whole: nothing left to read; else the rest, once
            rids, sent = statements(self.catalog, lambda: self.rids(found))
            self.assertEqual(rids, expected)
            self.assertEqual(rest_read(sent), not read, (whole, sent))

    def test_the_head_is_walked_once_with_its_metadata(self):
        # the head's statement with its first brains' metadata: the walk
        # (a LIMIT of the head) runs once, not again for the metadata
        from plone.pgcatalog.search.compiler import compile_search
        processQueue()
        store = self.catalog._pgc_store()
        lazy.WHOLE = -1
        plan = compile_search(self.catalog._catalog,
                              {"portal_type": "Document"}, store)
        self.assertIsNotNone(plan.either)

        def limits(node):
            found = int(node["Node Type"] == "Limit"
                        and node.get("Actual Loops", 0) > 0)
            return found + sum(limits(n) for n in node.get("Plans", ()))

        explained = store.execute(q("EXPLAIN (ANALYZE, FORMAT JSON) {}",
                                    plan.either)).fetchone()[0]
        self.assertEqual(limits(explained[0]["Plan"]), 1)
        count, rids, meta_rids = store.execute(plan.either).fetchone()[:3]
        self.assertEqual(count, 9)
        self.assertEqual(sorted(meta_rids), sorted(rids)[:len(meta_rids)])

    def test_hot_rows_statistics_are_read_and_kept(self):
        dsn = self.catalog._pgc_session().dsn
        self.addCleanup(store_module._hot_rows.pop, dsn, None)
        store_module._hot_rows.pop(dsn, None)
        processQueue()
        store = self.catalog._pgc_store()
        rows = store.hot_rows()
        self.assertIn(dsn, store_module._hot_rows)
        self.assertTrue(rows is None or rows >= 0, rows)
        store_module._hot_rows[dsn] = (time.monotonic(), 12345.0)
        self.assertEqual(store.hot_rows(), 12345.0)
        # read again once stale
        store_module._hot_rows[dsn] = (
            time.monotonic() - store_module.HOT_ROWS_TTL - 1, 12345.0)
        self.assertNotEqual(store.hot_rows(), 12345.0)

    def test_a_loop_changing_what_it_matched_sees_the_search(self):
        # publishing every private document while reading the answer
        expected = self.whole(review_state="private")
        self.assertEqual(len(expected), 6)
        wf = self.portal.portal_workflow
        seen = []
        for brain in self.search(review_state="private"):
            seen.append(brain.getRID())
            wf.doActionFor(brain.getObject(), "publish")
            processQueue()
        self.assertEqual(seen, expected)
        self.assertEqual(len(self.search(review_state="private")), 0)
        transaction.abort()

    def test_deleting_behind_an_answer(self):
        expected = self.whole(portal_type="Document")
        found = self.search(portal_type="Document")
        self.assertEqual(found[0].getRID(), expected[0])
        self.portal.lz.manage_delObjects(["d5", "d8"])
        processQueue()
        self.assertEqual(len(self.search(portal_type="Document")), 7)
        self.assertEqual(self.rids(found), expected)
        transaction.abort()

    def test_savepoint_rolled_back_after_the_search(self):
        expected = self.whole(portal_type="Document")
        self.portal.lz.manage_delObjects(["d0"])
        processQueue()
        savepoint = transaction.savepoint()
        found = self.search(portal_type="Document")
        self.assertEqual(len(found), 8)
        savepoint.rollback()
        self.portal.lz.manage_delObjects(["d1"])
        processQueue()
        self.assertEqual(self.rids(found), expected[1:])
        transaction.abort()

    def test_read_after_the_transaction_ended(self):
        expected = self.whole(portal_type="Document")
        found = self.search(portal_type="Document")
        transaction.commit()
        # another transaction changes what it matched
        self.portal.lz.manage_delObjects(["d2"])
        processQueue()
        transaction.commit()
        self.assertEqual(self.rids(found), expected)
        self.portal.lz.invokeFactory("Document", "d2", title="D2")
        transaction.commit()

    def test_a_refused_statement_keeps_the_answer(self):
        expected = self.whole(portal_type="Document")
        found = self.search(portal_type="Document")
        store = self.catalog._pgc_store()
        with self.assertRaises(CatalogStatementError):
            store.execute(q("SELECT 1 / 0"))
        self.assertEqual(self.rids(found), expected)

    def test_lost_connection_raises_a_transient_error(self):
        found = self.search(portal_type="Document")
        session = self.catalog._pgc_session()
        pid = session.conn.info.backend_pid
        with psycopg.connect(session.dsn, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with self.assertRaises(AnswerLost) as raised:
            self.rids(found)
        self.assertIsInstance(raised.exception,
                              transaction.interfaces.TransientError)
        # the transaction goes on with a new snapshot
        self.assertEqual(len(self.search(portal_type="Document")), 9)


class TestLazyCachedAnswers(LazyCase):

    def setUp(self):
        super().setUp()
        import os
        os.environ["PGCATALOG_CACHE"] = "on"
        result_cache.forget()
        self.addCleanup(result_cache.forget)

    def test_a_cached_answer_learns_its_rest_once(self):
        expected = self.whole(portal_type="Document")
        found = self.search(portal_type="Document")
        self.assertEqual(len(found), 9)
        transaction.abort()
        # a hit: the head without a statement, the rest read once
        found, sent = statements(self.catalog, lambda: self.search(
            portal_type="Document"))
        self.assertEqual(self.rids(found[:3]), expected[:3])
        self.assertEqual(self.rids(found), expected)
        transaction.abort()
        found, sent = statements(self.catalog, lambda: self.rids(
            self.search(portal_type="Document")))
        self.assertEqual(found, expected)
        self.assertEqual(sent, [])
        transaction.abort()
        # a change: another answer
        self.portal.lz.manage_delObjects(["d3"])
        transaction.commit()
        found = self.search(portal_type="Document")
        self.assertEqual(self.rids(found),
                         [r for r in expected if r != expected[3]])
        transaction.abort()
        self.portal.lz.invokeFactory("Document", "d3", title="D3")
        transaction.commit()


class TestSubtreeAlone(LazyCase):

    def paths(self, results):
        return sorted(b.getPath() for b in results)

    def test_one_range_unless_an_entry_lies_outside_the_site(self):
        """A path search alone reads a subtree as one range of (cid, path),
        and asks with the same statement whether an entry lies outside the
        site (ZCatalog does not check the site's own components, so such an
        entry can match): when one does, the search is made again with it.
        Beside a sort, the two ranges of before, nothing asked."""
        top = "/".join(self.portal.lz.getPhysicalPath())
        expected = [top] + ["%s/d%d" % (top, n) for n in range(9)]
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=top)))
        self.assertEqual(found, expected)
        self.assertIn("e.path >= %s AND e.path < %s AND (e.path = %s OR",
                      sent[0])
        self.assertNotIn("array_remove", sent[0])
        # the question rode with the search (no statement of its own)
        self.assertFalse([s for s in sent if "LIMIT 1) IS NOT NULL" in s])
        self.assertEqual(self.paths(self.search(path=top, sort_on="getId")),
                         expected)
        # sorted by the path index itself: one range too
        found, sent = statements(self.catalog, lambda: [
            b.getPath() for b in self.search(path=top, sort_on="path")])
        self.assertEqual(found, expected)
        self.assertIn("e.path >= %s AND e.path < %s AND (e.path = %s OR",
                      sent[0])
        # an entry outside the site whose components below it match
        outside = "/elsewhere" + top[len("/plone"):] + "/d1"
        self.assertTrue(outside.startswith("/elsewhere/lz/"))
        self.catalog.catalog_object(self.portal.lz.d1, uid=outside)
        self.addCleanup(outside_entries.forget)
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=top)))
        self.assertEqual(found, sorted(expected + [outside]))
        # the search, and again with the entry outside known
        self.assertEqual(len([s for s in sent if "count(*)" in s]), 2, sent)
        self.assertIn("array_remove", sent[-1] if "count(*)" in sent[-1]
                      else [s for s in sent if "count(*)" in s][-1])
        self.assertEqual(self.paths(self.search(path=top, sort_on="getId")),
                         found)
        self.catalog.uncatalog_object(outside)
        # known for this process now: the two ranges and the check at once
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=top)))
        self.assertEqual(found, expected)
        self.assertEqual(len([s for s in sent if "count(*)" in s]), 1, sent)
        self.assertIn("array_remove", sent[0])

    def test_a_subtree_beside_a_type_reads_the_hot_rows(self):
        """Beside key conditions (a type), a subtree is read from the hot
        rows' copy of the path as one range, the key sets hashed; the
        question whether an entry lies outside the site rides with it.  When one does, the search is made again
        from the entries and finds it, as ZCatalog does."""
        top = "/".join(self.portal.lz.getPhysicalPath())
        documents = ["%s/d%d" % (top, n) for n in range(9)]
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=top, portal_type="Document")))
        self.assertEqual(found, documents)
        # one statement (then the brains' metadata), the key sets hashed
        searched = [s for s in sent if "count(*)" in s]
        self.assertEqual(len(searched), 1, sent)
        self.assertEqual(searched[0], sent[0])
        self.assertIn('FROM "pgcatalog_hot" h ', searched[0])
        self.assertIn("h.path >= %s AND h.path < %s AND (h.path = %s OR",
                      searched[0])
        self.assertIn("(h.sid IN (SELECT s.sid FROM \"pgcatalog_hot_sets\" s "
                      "WHERE", searched[0])
        self.assertIn(")) IS TRUE", searched[0])
        self.assertNotIn("pgcatalog_entries", searched[0])
        # two subtrees (one within a third, left out): a range each
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=[top + "/d1", top + "/d2", top + "/d1/x"],
                        portal_type="Document")))
        self.assertEqual(found, documents[1:3])
        searched = [s for s in sent if "count(*)" in s]
        self.assertEqual(searched[0].count("UNION ALL"), 1, searched)
        # and alone, from the (cid, path) B-tree
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=[top + "/d1", top + "/d2", top])))
        self.assertEqual(found, [top] + documents)
        searched = [s for s in sent if "count(*)" in s]
        self.assertNotIn("UNION ALL", searched[0])  # the top alone
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=[top + "/d1", top + "/d2"])))
        self.assertEqual(found, documents[1:3])
        searched = [s for s in sent if "count(*)" in s]
        self.assertEqual(searched[0].count("UNION ALL"), 1, searched)
        self.assertIn('"pgcatalog_entries" e', searched[0])
        # with the site root's path (plone.restapi adds it): the key sets'
        # counts, no path condition
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path="/plone", portal_type="Document")))
        self.assertEqual(found, documents)
        self.assertNotIn("h.path", " ".join(sent))
        self.assertIn("pgcatalog_hot_counts", " ".join(sent))
        # an entry outside the site whose components below it match
        outside = "/elsewhere" + top[len("/plone"):] + "/d1"
        self.catalog.catalog_object(self.portal.lz.d1, uid=outside)
        self.addCleanup(outside_entries.forget)
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=top, portal_type="Document")))
        self.assertEqual(found, sorted(documents + [outside]))
        searched = [s for s in sent if "count(*)" in s]
        self.assertEqual(len(searched), 2, sent)
        self.assertIn("h.path", searched[0])
        again = searched[-1]
        self.assertIn("array_remove", again)
        # (the first brains' metadata reads hot rows ``hr``: not the
        # matches)
        self.assertNotIn('FROM "pgcatalog_hot" h ', again)
        self.assertIn("FROM \"pgcatalog_entries\" e WHERE", again)
        self.catalog.uncatalog_object(outside)
        # known for this process now: the entries at once
        found, sent = statements(self.catalog, lambda: self.paths(
            self.search(path=top, portal_type="Document")))
        self.assertEqual(found, documents)
        self.assertEqual(len([s for s in sent if "count(*)" in s]), 1, sent)
        self.assertNotIn("h.path", " ".join(sent))
