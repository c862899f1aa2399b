"""``clearIndex`` on a ZCTextIndex empties it, as in ZCatalog.

ZCatalog's ``clearIndex(name)`` calls the index's ``clear()``, which for a
ZCTextIndex drops its Okapi index (and so every word): the objects stay
catalogued, but no word of theirs matches until they are reindexed.
"""
import unittest

from plone.app.testing import login
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME

from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING


class TestClearTextIndex(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.portal.invokeFactory("Document", "zebra", title="Zebra",
                                  description="quixotic zebras graze")
        self.portal.invokeFactory("Document", "okapi", title="Okapi",
                                  description="quixotic okapis browse")

    def search(self, word):
        return [b.getPath() for b in self.catalog(SearchableText=word)]

    def test_clear_index_forgets_the_words(self):
        index = self.catalog.Indexes["SearchableText"]
        self.assertEqual(len(self.search("quixotic")), 2)
        self.assertGreater(index.numObjects(), 0)
        self.assertGreater(index.indexSize(), 0)

        self.catalog.clearIndex("SearchableText")

        # ZCatalog: the index is empty, its old words match nothing
        self.assertEqual(self.search("quixotic"), [])
        self.assertEqual(self.search("zebras"), [])
        self.assertEqual(index.numObjects(), 0)
        self.assertEqual(index.indexSize(), 0)
        self.assertIsNone(index.getEntryForObject(
            self.catalog.getrid("/plone/zebra")))
        # the objects are still catalogued (other indexes keep their values)
        self.assertEqual(len(self.catalog(portal_type="Document",
                                          id="zebra")), 1)
        # the other text indexes keep their words
        self.assertEqual(len(self.catalog(Title="Zebra")), 1)

        # a reindex fills the index again
        self.portal.zebra.reindexObject()
        self.assertEqual(self.search("quixotic"), ["/plone/zebra"])
        self.assertEqual(index.indexSize(), 1)
