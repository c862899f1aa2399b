"""The result cache (cache.py): no statement on a hit, never an answer from
before a committed write, read-your-own-writes, savepoints and aborts, keys
by value and type, bounds and the switch.  (Exactness under concurrency on
RelStorage: tests/relstorage_races.py, cache_exactness.)"""
import datetime
import decimal
import os
import unittest
from unittest import mock

import transaction
from DateTime import DateTime
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from statements import statements

from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.search.results import Answer
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.tool import PGCatalogTool


def ids(results):
    return sorted(b.getId for b in results)


class TestResultCache(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Document", "one", title="One")
        processQueue()
        transaction.commit()
        result_cache.forget()

    def tearDown(self):
        transaction.abort()

    def statements(self, func):
        return statements(self.catalog, func)

    def search(self, **query):
        return self.catalog.unrestrictedSearchResults(**query)

    def test_a_hit_runs_no_statement(self):
        first = ids(self.search(portal_type="Document"))
        transaction.abort()
        (found, sent) = self.statements(
            lambda: ids(self.search(portal_type="Document")))
        self.assertEqual(found, first)
        self.assertEqual(sent, [])
        # the brains' metadata too, once read
        brains, _ = self.statements(lambda: [
            (b.Title, b.getPath()) for b in self.search(
                portal_type="Document")])
        transaction.abort()
        again, sent = self.statements(lambda: [
            (b.Title, b.getPath()) for b in self.search(
                portal_type="Document")])
        self.assertEqual((again, sent), (brains, []))

    def test_a_committed_write_is_seen_by_the_next_transaction(self):
        self.assertEqual(ids(self.search(portal_type="Document")), ["one"])
        transaction.abort()
        self.portal.invokeFactory("Document", "two", title="Two")
        transaction.commit()
        self.assertEqual(ids(self.search(portal_type="Document")),
                         ["one", "two"])
        transaction.commit()
        self.portal.manage_delObjects(["one"])
        transaction.commit()
        self.assertEqual(ids(self.search(portal_type="Document")), ["two"])

    def test_own_writes_neither_read_nor_fill(self):
        self.assertEqual(ids(self.search(portal_type="Document")), ["one"])
        transaction.abort()
        self.portal.invokeFactory("Document", "mine", title="Mine")
        self.assertEqual(ids(self.search(portal_type="Document")),
                         ["mine", "one"])
        transaction.abort()       # the write goes, the cached answer stays
        found, sent = self.statements(
            lambda: ids(self.search(portal_type="Document")))
        self.assertEqual((found, sent), (["one"], []))

    def test_savepoint_rollback(self):
        self.portal.invokeFactory("Document", "kept", title="Kept")
        savepoint = transaction.savepoint()
        self.portal.invokeFactory("Document", "dropped", title="Dropped")
        self.assertEqual(ids(self.search(portal_type="Document")),
                         ["dropped", "kept", "one"])
        savepoint.rollback()
        self.assertEqual(ids(self.search(portal_type="Document")),
                         ["kept", "one"])
        transaction.commit()
        self.assertEqual(ids(self.search(portal_type="Document")),
                         ["kept", "one"])

    def test_another_catalog_does_not_invalidate(self):
        self.portal._setObject("other_catalog",
                               PGCatalogTool("other_catalog"))
        self.portal.other_catalog.addIndex("getId", "FieldIndex")
        transaction.commit()
        ids(self.search(portal_type="Document"))
        transaction.abort()
        self.portal.other_catalog.catalog_object(self.portal.one,
                                                 "/plone/one")
        transaction.commit()
        found, sent = self.statements(
            lambda: ids(self.search(portal_type="Document")))
        self.assertEqual((found, sent), (["one"], []))

    def test_effective_range_is_keyed_by_its_minute(self):
        setRoles(self.portal, TEST_USER_ID, ["Member"])
        self.catalog.searchResults(portal_type="Document")
        transaction.abort()
        now = DateTime()
        minute = DateTime(now.year(), now.month(), now.day(), now.hour(),
                          now.minute(), 30)
        with mock.patch("plone.pgcatalog.toolapi.searching.DateTime",
                        return_value=minute):
            self.catalog.searchResults(portal_type="Document")
            transaction.abort()
            _, sent = self.statements(lambda: len(
                self.catalog.searchResults(portal_type="Document")))
        self.assertEqual(sent, [])

    def test_dates_are_keyed_by_their_minute(self):
        # "modified in the last week", the events portlet's "ending from
        # now": a date counts as the minute the index compares
        now = DateTime()
        start = DateTime(now.year(), now.month(), now.day(), now.hour(),
                         now.minute(), 1, "UTC")
        for name in ("modified", "end"):
            first = ids(self.search(**{name: {"query": start,
                                               "range": "min"}}))
            transaction.abort()
            for later in (start + 30 / 86400.0,
                          start.asdatetime() + datetime.timedelta(
                              seconds=50)):
                found, sent = self.statements(lambda: ids(self.search(
                    **{name: {"query": later, "range": "min"}})))
                self.assertEqual((found, sent), (first, []), (name, later))
            # another minute, another key
            _, sent = self.statements(lambda: len(self.search(
                **{name: {"query": start + 61 / 86400.0,
                          "range": "min"}})))
            self.assertTrue(sent)
            transaction.abort()

    def test_values_are_keyed_by_type(self):
        key = result_cache.canonical
        self.assertNotEqual(key(1), key(True))
        self.assertNotEqual(key(1), key(1.0))
        self.assertNotEqual(key([1]), key((1,)))
        self.assertEqual(key({"b": 1, "a": 2}), key({"a": 2, "b": 1}))
        with self.assertRaises(result_cache.Unkeyable):
            key(object())
        with self.assertRaises(result_cache.Unkeyable):
            key(float("nan"))

    def test_lists_of_strings_are_keyed_as_sets(self):
        """A FieldIndex's or KeywordIndex's list of strings in another
        order, or with repeats, asks the same question (ZCatalog joins or
        intersects the values' sets): answered by the first answer."""
        self.portal.invokeFactory("Folder", "box", title="Box")
        processQueue()
        transaction.commit()
        first = ids(self.search(portal_type=["Folder", "Document"]))
        self.assertEqual(first, ["box", "one"])
        transaction.abort()
        found, sent = self.statements(lambda: ids(self.search(
            portal_type=("Document", "Folder", "Document"))))
        self.assertEqual((found, sent), (first, []))
        self.portal.box.setSubject(["red", "blue"])
        self.portal.box.reindexObject()
        processQueue()
        transaction.commit()
        tagged = ids(self.search(Subject={"query": ["red", "blue"],
                                          "operator": "and"}))
        self.assertEqual(tagged, ["box"])
        transaction.abort()
        found, sent = self.statements(lambda: ids(self.search(
            Subject={"operator": "and", "query": ("blue", "red", "red")})))
        self.assertEqual((found, sent), (tagged, []))
        key = result_cache._set_key
        self.assertEqual(key(["b", "a", "a"]), key(("a", "b")))
        self.assertNotEqual(key({"query": ["a", "b"], "operator": "and"}),
                            key({"query": ["a", "b"], "operator": "or"}))
        self.assertNotEqual(key(["a", "b"]), key(["a"]))
        # a range's ends, values of other types: as given
        self.assertIsNone(key({"query": ["a", "b"], "range": "min:max"}))
        self.assertIsNone(key(["a", 1]))
        self.assertIsNone(key([]))
        # a path (not a set of values) is keyed as given
        found, sent = self.statements(lambda: ids(self.search(
            path=["/plone/one", "/plone/box"])))
        transaction.abort()
        found, sent = self.statements(lambda: ids(self.search(
            path=["/plone/box", "/plone/one"])))
        self.assertTrue(sent)

    def test_keys_that_cannot_change_the_answer(self):
        """``sort_on`` is keyed by its names (one alone or in a list),
        ``sort_order`` by the direction it sorts in (none without
        ``sort_on``), ``Language`` is left out where it is no
        index and no language-aware text index is asked: Plone's global
        sections and plone.restapi's navigation share one answer."""
        self.assertNotIn("Language", self.catalog.indexes())
        first = ids(self.search(portal_type="Document",
                                sort_on="sortable_title"))
        transaction.abort()
        for same in ({"sort_order": "ascending"}, {"sort_order": "asc"},
                     {"Language": "en"}, {"sort_on": ["sortable_title"]},
                     {"sort_order": "ascending", "Language": "de"}):
            query = dict(portal_type="Document", sort_on="sortable_title")
            query.update(same)
            found, sent = self.statements(lambda: ids(self.search(**query)))
            self.assertEqual((found, sent), (first, []), same)
        found, sent = self.statements(lambda: ids(self.search(
            portal_type="Document", sort_on="sortable_title",
            sort_order="reverse")))
        self.assertTrue(sent)
        # without sort_on, sort_order says nothing
        transaction.abort()
        ids(self.search(portal_type="Document"))
        transaction.abort()
        found, sent = self.statements(lambda: ids(self.search(
            portal_type="Document", sort_order="reverse")))
        self.assertEqual(sent, [])
        key = result_cache.query_key
        catalog = self.catalog._catalog
        self.assertNotEqual(
            key(catalog, {"sort_on": "id", "sort_order": "descending"}),
            key(catalog, {"sort_on": "id"}))
        self.assertEqual(
            key(catalog, {"sort_on": ["id", "Title"],
                          "sort_order": ["asc", "reverse"]}),
            key(catalog, {"sort_on": ["id", "Title"],
                          "sort-order": ["", "descending"]}))
        self.assertEqual(key(catalog, {"sort_on": "id"}),
                         key(catalog, {"sort-on": ("id",)}))
        self.assertNotEqual(key(catalog, {"sort_on": ["id", "Title"]}),
                            key(catalog, {"sort_on": ["Title", "id"]}))
        self.assertNotEqual(key(catalog, {"sort_on": []}), key(catalog, {}))
        with self.assertRaises(result_cache.Unkeyable):
            key(catalog, {"sort_on": "id", "sort_order": 1})
        with self.assertRaises(result_cache.Unkeyable):
            key(catalog, {"sort_on": [None]})
        # a list the search fails to sort (as ZCatalog's make_query) is
        # never left out: the search runs, and raises
        for query, similar in (
                ({"sort_order": (0, "a")}, {}),
                ({"sort-on": "id", "sort_on": [1, "a"]}, {"sort-on": "id"}),
                ({"sort_on": "id", "sort_order": ["asc", 0]},
                 {"sort_on": "id"})):
            transaction.abort()
            self.search(**similar)
            transaction.abort()
            with self.assertRaises((TypeError, AttributeError)):
                self.search(**query)
        self.assertNotEqual(key(catalog, {"sort_order": ("a", "b")}),
                            key(catalog, {}))

    def test_unkeyable_values_bypass(self):
        stats = result_cache.stats()
        self.search(portal_type="Document", getId=decimal.Decimal("1.5"))
        self.assertEqual(result_cache.stats()["bypasses"],
                         stats["bypasses"] + 1)

    def test_bounded(self):
        cache = result_cache.ResultCache(max_bytes=10_000)
        for n in range(50):
            cache.put(("k", n), Answer(list(range(20)), 20))
        stats = cache.stats()
        self.assertLessEqual(stats["bytes"], 10_000)
        self.assertGreater(stats["evictions"], 0)
        self.assertIsNone(cache.get(("k", 0)))
        self.assertIsNotNone(cache.get(("k", 49)))

    def test_switched_off(self):
        with mock.patch.dict(os.environ, {"PGCATALOG_CACHE": "off"}):
            self.assertIsNone(result_cache.get_cache())
            self.search(portal_type="Document")
            transaction.abort()
            _, sent = self.statements(lambda: len(self.search(
                portal_type="Document")))
            self.assertTrue(sent)

    def test_a_page_of_a_batch_is_counted_in_its_round_trip(self):
        # plone.restapi and Plone's batches show the total of every page
        for n in range(4):
            self.portal.invokeFactory("Document", "p%d" % n, title="P")
        transaction.commit()
        # (the catalog's size, as PostgreSQL's statistics say, read once a
        # minute: compiler.small)
        self.catalog._pgc_store().hot_rows()
        found, sent = statements(self.catalog, lambda: self.search(
            portal_type="Document", sort_on="id",
            b_size=2).actual_result_count)
        self.assertEqual((found, len(sent)), (5, 1))
        transaction.abort()
        result_cache.forget()
        # a sort_limit alone (a portlet's few newest): counted if asked
        found, sent = statements(self.catalog, lambda: self.search(
            portal_type="Document", sort_on="id",
            sort_limit=2).actual_result_count)
        self.assertEqual((found, len(sent)), (5, 2))
        # in a bigger catalog (compiler.COUNT_RIDE_ROWS hot rows, as
        # PostgreSQL's statistics say) a count that reads the entries is
        # counted when first read; one the key sets' kept counts add (an
        # unsorted page of a type) still goes with the page
        store_class = type(self.catalog._pgc_store())
        for rows, query, sent_n in (
                (20000.0, dict(sort_on="id"), 2),
                (5000.0, dict(sort_on="id"), 1),
                (20000.0, dict(), 1)):
            transaction.abort()
            result_cache.forget()
            with mock.patch.object(store_class, "hot_rows",
                                   lambda self, rows=rows: rows):
                found, sent = statements(self.catalog, lambda: self.search(
                    portal_type="Document", b_size=2,
                    **query).actual_result_count)
            self.assertEqual((found, len(sent)), (5, sent_n),
                             (rows, query))

    def test_a_total_counted_after_own_writes_is_not_shared(self):
        # what a transaction learns later about a cached answer is shared
        # only when it has no writes of its own
        for n in range(4):
            self.portal.invokeFactory("Document", "p%d" % n, title="P")
        transaction.commit()
        # (a sort_limit: a page of a batch, b_size, is counted with it)
        query = dict(portal_type="Document", sort_on="id", sort_limit=2)
        first = self.search(**query)            # a page: total not known
        transaction.commit()
        page = self.search(**query)             # the cached answer
        self.portal.invokeFactory("Document", "p9", title="P")
        processQueue()
        self.assertEqual(page.actual_result_count, 6)   # own write counted
        transaction.abort()
        again = self.search(**query)
        self.assertEqual(again.actual_result_count, 5)
        self.assertEqual(first.actual_result_count, 5)


class TestPositionsAreLive(unittest.TestCase):
    """Answers sorted by getObjPositionInParent follow the folders' order
    as it is now, whether or not reordering wrote to the catalog (as
    GopipIndex reads the order at sort time)."""

    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Folder", "f")
        for i in range(3):
            self.portal.f.invokeFactory("Document", "d%d" % i)
        processQueue()
        transaction.commit()
        result_cache.forget()

    def tearDown(self):
        transaction.abort()

    def listing(self):
        return [b.getId for b in self.catalog.unrestrictedSearchResults(
            path={"query": "/plone/f", "depth": 1},
            sort_on="getObjPositionInParent")]

    def test_reordered_without_catalog_writes(self):
        self.assertEqual(self.listing(), ["d0", "d1", "d2"])
        transaction.abort()
        self.assertEqual(self.listing(), ["d0", "d1", "d2"])  # a hit
        transaction.abort()
        self.portal.f.moveObjectsByDelta(["d2"], -2, suppress_events=True)
        transaction.commit()
        self.assertEqual(self.listing(), ["d2", "d0", "d1"])
        transaction.abort()
        self.portal.f.moveObjectsByDelta(["d0"], 5)
        transaction.commit()
        self.assertEqual(self.listing(), ["d2", "d1", "d0"])


    def test_the_ids_read_are_the_orderings(self):
        # the default ordering's list read at once, any other ordering
        # asked, as GopipIndex asks them
        from plone.pgcatalog.indexes.gopip import _ids_in_order
        folder = self.portal.f
        folder.moveObjectsByDelta(["d2"], -1)
        self.assertEqual(list(_ids_in_order(folder)), ["d0", "d2", "d1"])
        self.assertEqual(list(_ids_in_order(folder)),
                         folder.getOrdering().idsInOrder())
        self.assertEqual(list(_ids_in_order(self.portal)),
                         self.portal.getOrdering().idsInOrder())
        folder.setOrdering("unordered")
        self.assertEqual(sorted(_ids_in_order(folder)),
                         ["d0", "d1", "d2"])
        self.assertEqual(list(_ids_in_order(folder)),
                         list(folder.getOrdering().idsInOrder()))

class TestFillsBesideOtherTransactions(unittest.TestCase):
    """Only this catalog's writers keep the cache from filling: a
    transaction prepared in another database, a long transaction of
    another application, a prepared transaction of another catalog."""
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Document", "one", title="One")
        processQueue()
        transaction.commit()
        result_cache.forget()

    def tearDown(self):
        transaction.abort()

    def test_fills_beside_foreign_transactions(self):
        import psycopg

        from plone.pgcatalog.testing import pgserver
        dsn = os.environ["PGCATALOG_DSN"]
        other = pgserver.fresh_database("pgcatalog_other")
        held = []
        try:
            # a prepared transaction in another database
            with psycopg.connect(other, autocommit=True) as conn:
                conn.execute("CREATE TABLE t (x int)")
                conn.execute("BEGIN")
                conn.execute("INSERT INTO t VALUES (1)")
                conn.execute("PREPARE TRANSACTION 'other-app-tx'")
            held.append(("prepared", other))
            # an open transaction with an id, here and there
            for where in (dsn, other):
                conn = psycopg.connect(where)
                conn.execute("SELECT pg_current_xact_id()")
                held.append(("open", conn))
            # a prepared catalog transaction of another catalog
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("BEGIN")
                conn.execute("INSERT INTO pgcatalog_lists (digest, value) "
                             "VALUES ('fills-test', '[]')")
                conn.execute(
                    "PREPARE TRANSACTION 'pgcatalog:filltest:999999'")
            held.append(("prepared-catalog", dsn))
            cache = result_cache.get_cache()
            before = cache.stats()
            ids(self.catalog.unrestrictedSearchResults(
                portal_type="Document"))
            transaction.abort()
            found, sent = statements(self.catalog, lambda: ids(
                self.catalog.unrestrictedSearchResults(
                    portal_type="Document")))
            transaction.abort()
            self.assertEqual((found, sent), (["one"], []))
            self.assertEqual(cache.stats()["hits"], before["hits"] + 1)
        finally:
            for kind, what in held:
                if kind == "open":
                    what.close()
                elif kind == "prepared":
                    with psycopg.connect(what, autocommit=True) as conn:
                        conn.execute("ROLLBACK PREPARED 'other-app-tx'")
                else:
                    with psycopg.connect(what, autocommit=True) as conn:
                        conn.execute("ROLLBACK PREPARED "
                                     "'pgcatalog:filltest:999999'")
            pgserver.drop_database(other)

    def test_no_fill_while_this_catalogs_writer_is_prepared(self):
        import psycopg
        dsn = os.environ["PGCATALOG_DSN"]
        cid = self.catalog._pgc_cid()
        transaction.abort()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO pgcatalog_lists (digest, value) VALUES "
                         "('fills-test-2', '[]')")
            conn.execute("PREPARE TRANSACTION 'pgcatalog:ourtest:%d'" % cid)
        try:
            cache = result_cache.get_cache()
            before = cache.stats()
            with mock.patch.object(result_cache, "SAY_AFTER", 1), \
                    mock.patch.object(result_cache, "SAY_EVERY", 0.0), \
                    self.assertLogs("plone.pgcatalog", "WARNING") as logs:
                for _ in range(2):
                    ids(self.catalog.unrestrictedSearchResults(
                        portal_type="Document"))
                    transaction.abort()
            after = cache.stats()
            self.assertEqual(after["hits"], before["hits"])
            self.assertEqual(after["unfilled"], before["unfilled"] + 2)
            # it says why: in the log and on the status page
            self.assertEqual(after["unfilled_writer"],
                             before["unfilled_writer"] + 2)
            self.assertIn("the result cache filled nothing",
                          "\n".join(logs.output))
            self.assertIn("writer 2", "\n".join(logs.output))
            page = self.catalog.manage_catalogStatus()
            self.assertIn("while a writer of the catalog was committing",
                          page)
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("ROLLBACK PREPARED 'pgcatalog:ourtest:%d'"
                             % cid)
