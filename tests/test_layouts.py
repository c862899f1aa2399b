"""Metadata layouts (layouts.py): records stored as arrays naming their
layout, column names stored once per layout."""
import transaction
from Missing import MV
from Products.CMFCore.indexing import processQueue
from statements import statements
from catalog_cases import ManagerWithoutCache

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.pg.fragment import q


class TestLayouts(ManagerWithoutCache):

    def setUp(self):
        super().setUp()
        self.portal.invokeFactory("Document", "lay", title="Lay")
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()
        if "extra_column" in self.catalog._catalog.names:
            self.catalog.delColumn("extra_column")
        self.portal.manage_delObjects(["lay"])
        transaction.commit()

    def stored(self):
        rid = self.catalog.getrid("/plone/lay")
        return self.catalog._pgc_store().value(q(
            "SELECT meta::text FROM pgcatalog_meta WHERE rid = {}", rid))

    def layouts(self):
        return dict(self.catalog._pgc_store().rows(q(
            "SELECT digest, names FROM pgcatalog_meta_layouts")))

    def test_record_names_its_layout(self):
        text = self.stored()
        names = tuple(self.catalog._catalog.names)
        digest = codec.layout_digest(names)
        self.assertTrue(text.startswith('["%s",' % digest), text[:40])
        self.assertNotIn('"Title"', text)
        self.assertEqual(tuple(self.layouts()[digest]), names)
        brain = self.catalog(getId="lay")[0]
        self.assertEqual(brain.Title, "Lay")
        self.assertEqual(self.catalog.getMetadataForRID(brain.getRID())[
            "Title"], "Lay")

    def test_a_new_column_reads_missing_until_reindexed(self):
        old = self.stored()
        self.catalog.addColumn("extra_column")
        transaction.commit()
        self.assertEqual(self.stored(), old)
        brain = self.catalog(getId="lay")[0]
        self.assertIs(brain.extra_column, MV)
        self.assertEqual(brain.Title, "Lay")
        self.portal.lay.extra_column = "here"
        self.portal.lay.reindexObject()
        processQueue()
        transaction.commit()
        self.assertNotEqual(self.stored(), old)
        brain = self.catalog(getId="lay")[0]
        self.assertEqual(brain.extra_column, "here")
        self.assertEqual(brain.Title, "Lay")
        found = self.layouts()
        self.assertEqual(tuple(found[codec.layout_digest(tuple(
            self.catalog._catalog.names))]), tuple(
                self.catalog._catalog.names))
        self.assertIn(old[2:2 + codec.LAYOUT_CHARS], found)

    def test_a_layout_this_process_never_wrote(self):
        names = tuple(self.catalog._catalog.names)
        digest = codec._DIGESTS.pop(names)
        del codec._LAYOUTS[digest]
        # (as in a fresh process: no brain of that layout read either)
        for key in [k for k in codec._PROJECTIONS if k[0] == digest]:
            del codec._PROJECTIONS[key]
        try:
            brain, sent = statements(self.catalog, lambda: self.catalog(
                getId="lay")[0].Title)
            self.assertEqual(brain, "Lay")
            self.assertTrue(any("pgcatalog_meta_layouts" in text
                                for text in sent))
            self.assertEqual(codec.layout_names(digest), names)
        finally:
            codec.layout_digest(names)

    def test_records_written_before_layouts_read_alike(self):
        rid = self.catalog.getrid("/plone/lay")
        self.catalog._pgc_store().write(q(
            "UPDATE pgcatalog_meta SET meta = {}::json WHERE rid = {}",
            '{"Title": "Old form", "getId": "lay"}', rid))
        brain = self.catalog(getId="lay")[0]
        self.assertEqual(brain.Title, "Old form")
        self.assertIs(brain.Description, MV)
        self.assertEqual(self.catalog.getMetadataForRID(rid)["Title"],
                         "Old form")
