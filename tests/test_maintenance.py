"""Clearing a catalog (another catalog's pending writes kept) and partial
reindexing (in batches; metadata recorded or kept)."""
import unittest

import transaction
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.tool import PGCatalogTool


class TestMaintenance(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(20):
            self.portal.invokeFactory("Document", "m%d" % n,
                                      title="Doc %d" % n,
                                      subject=("s%d" % n,))
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()

    def test_clear_keeps_another_catalogs_pending_writes(self):
        self.portal._setObject("other_catalog",
                               PGCatalogTool("other_catalog"))
        other = self.portal.other_catalog
        other.addIndex("getId", "FieldIndex")
        doc = self.portal.m1
        other.catalog_object(doc, "/plone/m1")        # buffered
        self.catalog.manage_catalogClear()
        self.assertEqual(len(self.catalog(portal_type="Document")), 0)
        self.assertEqual(
            [b.getPath() for b in other.unrestrictedSearchResults(
                getId="m1")], ["/plone/m1"])
        transaction.commit()
        self.assertEqual(len(other), 1)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            portal_type="Document")), 0)

    def round_trips(self, func):
        """How many times ``func`` talks to PostgreSQL (statements and
        pipelines sent by the transaction's session)."""
        session = self.catalog._pgc_session()
        sent = []
        original = session._send

        def counting(*args, **kw):
            sent.append(args)
            return original(*args, **kw)

        session._send = counting
        try:
            func()
            session.flush()
        finally:
            del session._send
        return len(sent)

    def test_partial_reindex_writes_in_batches(self):
        trips = self.round_trips(lambda: self.catalog.reindexIndex(
            "Subject"))
        # listing the paths, asking once which entries have metadata,
        # one pipeline of writes: not two round trips per entry
        self.assertLessEqual(trips, 5)
        self.assertEqual(
            [b.getId for b in self.catalog(Subject="s7")], ["m7"])

    def test_partial_reindex_of_a_new_entry_records_metadata(self):
        doc = self.portal.m3
        self.catalog.uncatalog_object("/plone/m3")
        transaction.commit()
        doc.title = "New title"
        self.catalog.catalog_object(doc, idxs=["Subject"],
                                    update_metadata=0)
        # only Subject is indexed (no allowedRolesAndUsers): unrestricted
        (brain,) = self.catalog.unrestrictedSearchResults(Subject="s3")
        self.assertEqual(brain.Title, "New title")   # new: recorded

    def test_partial_reindex_keeps_metadata_of_a_known_entry(self):
        doc = self.portal.m4
        doc.title = "Changed"
        self.catalog.catalog_object(doc, idxs=["Subject"],
                                    update_metadata=0)
        (brain,) = self.catalog(Subject="s4")
        self.assertEqual(brain.Title, "Doc 4")       # as ZCatalog: kept
