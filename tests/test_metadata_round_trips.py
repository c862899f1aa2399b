"""The brains' metadata comes with the search where a caller reads it
next: the first brains of an every-match answer, every brain of a listing
sorted in Python (a folder's contents by position), and an iteration over
many brains in few statements (each statement is a round trip, which a
busy multi-threaded Zope pays in waits for the GIL too)."""
import transaction
from catalog_cases import ManagerWithoutCache
from Products.CMFCore.indexing import processQueue
from statements import statements

from plone.pgcatalog.search import results as results_module
from plone.pgcatalog.search import sorting

#: the statement of a window of brains' metadata read after a search
WINDOW = "m.meta::text FROM \"pgcatalog_entries\" e LEFT JOIN"

DOCUMENTS = 40


class TestMetadataWithTheSearch(ManagerWithoutCache):

    def setUp(self):
        super().setUp()
        self.portal.invokeFactory("Folder", "mr")
        folder = self.portal.mr
        for n in range(DOCUMENTS):
            folder.invokeFactory("Document", "d%02d" % n, title="T%02d" % n)
        # positions not in creation (rid) order
        folder.moveObjectsToTop(["d%02d" % n for n in (30, 20, 10)])
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()
        self.portal.manage_delObjects(["mr"])
        transaction.commit()

    def listing(self):
        return self.catalog.searchResults(
            path={"query": "/plone/mr", "depth": 1},
            sort_on="getObjPositionInParent")

    def expected_listing(self):
        return [self.portal.mr[i].Title()
                for i in self.portal.mr.objectIds()]

    def test_first_brains_of_every_match_with_the_search(self):
        def first_page():
            found = self.catalog.searchResults(portal_type="Document",
                                               path="/plone/mr")
            return len(found), [b.Title for b in found[:10]]
        (count, titles), sent = statements(self.catalog, first_page)
        self.assertEqual(count, DOCUMENTS)
        self.assertEqual(titles, ["T%02d" % n for n in range(10)])
        self.assertEqual(len(sent), 1, sent)
        self.assertNotIn(WINDOW, sent[0])
        # past the first window: read then
        more, sent = statements(self.catalog, lambda: [
            b.Title for b in self.catalog.searchResults(
                portal_type="Document", path="/plone/mr")[32:40]])
        self.assertEqual(more, ["T%02d" % n for n in range(32, 40)])
        self.assertEqual(len(sent), 2, sent)
        self.assertIn(WINDOW, sent[1])

    def test_a_listing_sorted_in_python_with_every_brain(self):
        titles, sent = statements(self.catalog, lambda: [
            b.Title for b in self.listing()])
        self.assertEqual(titles, self.expected_listing())
        self.assertEqual(titles[:3], ["T30", "T20", "T10"])
        self.assertEqual(len(sent), 1, sent)
        # a page of it too
        page, sent = statements(self.catalog, lambda: [
            b.Title for b in self.catalog.searchResults(
                path={"query": "/plone/mr", "depth": 1},
                sort_on="getObjPositionInParent", b_start=30, b_size=5)])
        self.assertEqual(page, self.expected_listing()[30:35])
        self.assertEqual(len(sent), 1, sent)

    def test_an_iteration_reads_the_rest_at_once(self):
        # more matches than a sorted listing brings: windows of brains
        self.patch(sorting, "SORTED_WITH_METADATA", 8)
        self.patch(results_module, "FIRST_WINDOW", 4)
        titles, sent = statements(self.catalog, lambda: [
            b.Title for b in self.listing()])
        self.assertEqual(titles, self.expected_listing())
        # the search, the first window, the rest
        self.assertEqual([WINDOW in s for s in sent], [False, True, True])
        # items one by one (no iteration): windows growing from the first
        found = self.listing()
        titles, sent = statements(self.catalog, lambda: [
            found[n].Title for n in range(len(found))])
        self.assertEqual(titles, self.expected_listing())
        # 4, 8, 16, then the last 12
        self.assertEqual(len(sent), 4, sent)
        # an iteration that stops early read its first window only
        found = self.listing()

        def first_two():
            taken = []
            for brain in found:
                taken.append(brain.Title)
                if len(taken) == 2:
                    break
            return taken
        titles, sent = statements(self.catalog, first_two)
        self.assertEqual(titles, self.expected_listing()[:2])
        self.assertEqual(len(sent), 1, sent)

    def patch(self, module, name, value):
        self.addCleanup(setattr, module, name, getattr(module, name))
        setattr(module, name, value)
