"""Verify and repair: every kind of divergence between
the catalog and the ZODB is planted on a real Plone site, found by the
verifier under its kind, and repaired; a clean site verifies clean."""
import unittest

from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog.ops import verify
from plone.pgcatalog.ops import verifyreport
from plone.pgcatalog.ops import verifystore
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING


class VerifyCase(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Folder", "f", title="Folder")
        for n in range(6):
            self.portal.f.invokeFactory(
                "Document", "d%d" % n, title="Doc %d" % n,
                description="about %d" % n, subject=("s%d" % n, "all"))
        self.portal.invokeFactory("News Item", "news", title="News")
        processQueue()

    def verify(self, **options):
        options.setdefault("batch", 3)  # several batches on a small site
        return verify.verify(self.catalog, **options)

    def store(self):
        return self.catalog._pgc_store()

    def write(self, template, *args):
        """Change the catalog's rows behind its back (a planted defect)."""
        store = self.store()
        store.write(q(template, *args))

    def assertFound(self, report, expected):
        """``expected``: {kind: [path, ...]} of every difference."""
        found = {k: sorted(p for p, _ in report.samples[k])
                 for k in verifyreport.KINDS if report.counts[k]}
        self.assertEqual(found, {k: sorted(v) for k, v in expected.items()})
        self.assertEqual(report.errors, 0, report.error_samples)


class TestVerify(VerifyCase):

    def test_a_fresh_site_is_clean(self):
        report = self.verify()
        self.assertTrue(report.clean, "\n".join(report.summary()))
        self.assertEqual(report.entries, len(self.catalog))
        # the site, the folder, 6 documents, the news item
        self.assertEqual(report.objects, 9)
        self.assertEqual(report.entries, 9)

    def test_clean_after_clear_and_rebuild(self):
        self.catalog.clearFindAndRebuild()
        self.assertTrue(self.verify().clean)

    def test_text_rows_of_a_batch_written_together(self):
        # the text rows of every entry a flush writes go in one statement
        # (pg/writer.text_statements): full reindexes with new words, a
        # partial reindex of one text index, entries without a
        # description any more, one uncatalogued and catalogued again, one
        # written as it was; the rows, their totals, the words'
        # frequencies and the kept postings are those of the objects
        f = self.portal.f
        # setUp's entries written first (a search sends what is pending)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            Description="about")), 6)
        for n in range(5):
            f["d%d" % n].title = "Zebra %d crossing" % n
            f["d%d" % n].reindexObject()
        # without a Description: its text row goes (a full reindex, and
        # a partial one of that index)
        f.d1.Description = None
        f.d1.reindexObject()
        f.d4.Description = None
        self.catalog.catalog_object(f.d4, idxs=["Description"])
        f.d2.title = "Zebra 2 only in the title"
        self.catalog.catalog_object(f.d2, idxs=["Title"])
        self.catalog.uncatalog_object("/plone/f/d3")
        self.catalog.catalog_object(f.d3)
        f.d5.reindexObject()
        processQueue()
        self.assertTrue(self.verify().clean, "\n".join(
            self.verify().summary()))
        found = sorted(b.getPath() for b in
                       self.catalog.unrestrictedSearchResults(
                           Title="zebra"))
        self.assertEqual(found, ["/plone/f/d%d" % n for n in range(5)])
        found = sorted(b.getPath() for b in
                       self.catalog.unrestrictedSearchResults(
                           SearchableText="crossing"))
        self.assertEqual(found, ["/plone/f/d%d" % n for n in (0, 1, 3, 4)])
        found = sorted(b.getPath() for b in
                       self.catalog.unrestrictedSearchResults(
                           Description="about"))
        self.assertEqual(found, ["/plone/f/d%d" % n for n in (0, 2, 3, 5)])

    def test_missing_entry(self):
        self.catalog.uncatalog_object("/plone/f/d1")
        report = self.verify()
        self.assertFound(report, {"missing": ["/plone/f/d1"]})
        self.assertEqual(report.counts["missing"], 1)

    def test_orphan(self):
        # the object goes, its entry stays
        self.portal.f._delObject("d2", suppress_events=True)
        self.catalog.catalog_object(self.portal.f.d3, "/plone/f/nothing")
        report = self.verify()
        self.assertFound(report, {"orphan": ["/plone/f/d2",
                                             "/plone/f/nothing"]})

    def test_an_acquired_namesake_is_no_object(self):
        # /plone/f/news acquires /plone/news: nothing lives there
        self.catalog.catalog_object(self.portal.news, "/plone/f/news")
        self.assertFound(self.verify(), {"orphan": ["/plone/f/news"]})

    def test_stale_entry_another_uid(self):
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{UID}}', "
                   "to_jsonb({}::text)) WHERE path = {}",
                   ident(schema.ENTRIES), "0" * 32, "/plone/f/d4")
        report = self.verify()
        self.assertFound(report, {"stale_entry": ["/plone/f/d4"]})
        self.assertIn("0" * 32, report.samples["stale_entry"][0][1])

    def test_stale_entry_not_contentish(self):
        self.catalog.catalog_object(self.portal.portal_workflow,
                                    "/plone/portal_workflow")
        report = self.verify()
        self.assertFound(report, {"stale_entry": ["/plone/portal_workflow"]})
        self.assertIn("not contentish", report.samples["stale_entry"][0][1])

    def test_stale_value(self):
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{Subject}}', "
                   "'[\"other\"]') WHERE path = {}", ident(schema.ENTRIES),
                   "/plone/f/d0")
        report = self.verify()
        self.assertFound(report, {"stale_value": ["/plone/f/d0"]})
        self.assertEqual(report.samples["stale_value"][0][1],
                         "indexes: Subject")

    def test_keyword_order_is_no_difference(self):
        # a KeywordIndex keeps a set's order, which differs per process
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{Subject}}', "
                   "'[\"s1\", \"all\"]') WHERE path = {}",
                   ident(schema.ENTRIES), "/plone/f/d1")
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{Subject}}', "
                   "'[\"all\", \"s2\"]') WHERE path = {}",
                   ident(schema.ENTRIES), "/plone/f/d2")
        self.assertTrue(self.verify().clean)
        # but another member is
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{Subject}}', "
                   "'[\"all\", \"s2\", \"s2\"]') WHERE path = {}",
                   ident(schema.ENTRIES), "/plone/f/d2")
        self.assertFound(self.verify(), {"stale_value": ["/plone/f/d2"]})

    def test_generated_schema_names_are_volatile(self):
        # plone.dexterity's generated schema names carry the FTI's stamp
        # as the indexing process saw it (the list is stored apart,
        # lists.py: the entry gets it in line, changed)
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{object_provides}}',"
                   " (SELECT jsonb_agg(CASE WHEN v #>> '{{}}' LIKE "
                   "'plone.dexterity.schema.generated.%%' THEN to_jsonb("
                   "'plone.dexterity.schema.generated.plone_0_Document'::text)"
                   " ELSE v END) FROM jsonb_array_elements({}) v)) WHERE "
                   "path = {}", ident(schema.ENTRIES),
                   lists.expanded_sql(q("(idx -> 'object_provides')")),
                   "/plone/f/d3")
        stored = verifystore.entries_after(self.store(), None, 100)
        self.assertIn('plone_0_Document', [e.idx for e in stored
                                           if e.path == "/plone/f/d3"][0])
        self.assertTrue(self.verify().clean)

    def test_numbers_compare_by_value(self):
        self.assertTrue(verify.same(1, 1.0))
        self.assertTrue(verify.same([1e20], [100000000000000000000]))
        self.assertFalse(verify.same(True, 1))
        self.assertFalse(verify.same(0, False))
        self.assertFalse(verify.same("1", 1))
        self.assertTrue(verify.same_value(True, [2.0, "a"], ["a", 2]))
        self.assertFalse(verify.same_value(True, ["a"], ["a", "a"]))
        self.assertFalse(verify.same_value(False, ["a", "b"], ["b", "a"]))

    def test_stale_value_absent_key(self):
        self.write("UPDATE {} SET idx = idx - 'portal_type' WHERE path = {}",
                   ident(schema.ENTRIES), "/plone/news")
        report = self.verify()
        self.assertFound(report, {"stale_value": ["/plone/news"]})
        self.assertEqual(report.samples["stale_value"][0][1],
                         "indexes: portal_type")

    def test_stale_text_value(self):
        self.write("UPDATE {} SET tsv = 'other:1'::tsvector FROM {} e "
                   "WHERE e.rid = pgcatalog_text.rid AND e.path = {} AND "
                   "pgcatalog_text.name = 'SearchableText'",
                   ident(schema.TEXT), ident(schema.ENTRIES), "/plone/f/d5")
        report = self.verify()
        self.assertFound(report, {"stale_value": ["/plone/f/d5"]})
        self.assertEqual(report.samples["stale_value"][0][1],
                         "indexes: SearchableText")

    def test_missing_text_row(self):
        self.write("DELETE FROM {} USING {} e WHERE e.rid = "
                   "pgcatalog_text.rid AND e.path = {} AND "
                   "pgcatalog_text.name = 'Title'", ident(schema.TEXT),
                   ident(schema.ENTRIES), "/plone/f")
        report = self.verify()
        self.assertFound(report, {"stale_value": ["/plone/f"]})
        self.assertEqual(report.samples["stale_value"][0][1],
                         "indexes: Title")

    def test_stale_metadata(self):
        # the Description of the record's array (its layout's digest first)
        position = list(self.catalog._catalog.names).index("Description") + 1
        self.write("UPDATE {} SET meta = jsonb_set(meta::jsonb, {}, "
                   "'\"old\"')::json FROM {} e WHERE "
                   "e.rid = pgcatalog_meta.rid AND e.path = {}",
                   ident(schema.META), [str(position)],
                   ident(schema.ENTRIES), "/plone/f/d1")
        report = self.verify()
        self.assertFound(report, {"stale_metadata": ["/plone/f/d1"]})
        self.assertEqual(report.samples["stale_metadata"][0][1],
                         "columns: Description")

    def test_stale_hot_row(self):
        # the hot rows are kept by a trigger: only a change behind the
        # catalog's back makes one differ (hot.py)
        code = hot.code(self.catalog._catalog.getIndex("portal_type"),
                        self.store().cid)
        self.write("UPDATE {} SET keys = ARRAY[{}] FROM {} e WHERE "
                   "e.rid = pgcatalog_hot.rid AND e.path = {}",
                   ident(schema.HOT), hot.key(code, "Folder"),
                   ident(schema.ENTRIES), "/plone/f/d1")
        self.write("DELETE FROM {} USING {} e WHERE e.rid = "
                   "pgcatalog_hot.rid AND e.path = {}", ident(schema.HOT),
                   ident(schema.ENTRIES), "/plone/f/d2")
        self.write("INSERT INTO {} (rid, cid, keys) VALUES (987654321, {}, "
                   "ARRAY[{}])", ident(schema.HOT), self.store().cid,
                   hot.key(code, "Document"))
        # the bounds of effectiveRange kept in the hot row
        self.write("UPDATE {} SET lo = 1, hi = 2 FROM {} e WHERE "
                   "e.rid = pgcatalog_hot.rid AND e.path = {}",
                   ident(schema.HOT), ident(schema.ENTRIES), "/plone/f/d3")
        # the copy of the entry's path (a subtree beside a type reads it)
        self.write("UPDATE {} SET path = '/plone/elsewhere' FROM {} e WHERE "
                   "e.rid = pgcatalog_hot.rid AND e.path = {}",
                   ident(schema.HOT), ident(schema.ENTRIES), "/plone/f/d4")
        documents = {"portal_type": "Document", "path": "/plone/f"}
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            portal_type="Document")), 5)  # wrong: d1, d2 gone, a ghost
        self.assertNotIn("/plone/f/d4", [  # wrong: d4 is there
            b.getPath() for b in self.catalog.unrestrictedSearchResults(
                documents)])
        report = self.verify()
        self.assertFound(report, {"stale_hot": [
            "/plone/f/d1", "/plone/f/d2", "/plone/f/d3", "/plone/f/d4",
            "rid:987654321"]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 5)
        self.assertTrue(self.verify().clean)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            portal_type="Document")), 6)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            documents)), 6)
        self.assertEqual(
            sorted(b.getPath() for b in self.catalog.unrestrictedSearchResults(
                portal_type="Document")),
            ["/plone/f/d%d" % n for n in range(6)])

    def test_stale_free_keys_set(self):
        # the hot row's free keys' set (schema version 18) is kept by the
        # same trigger: only a change behind the catalog's back makes it
        # differ
        code = hot.code(self.catalog._catalog.getIndex("Subject"),
                        self.store().cid)
        self.write("UPDATE {} SET kid = pgcatalog_hot_free_set_id(e.cid, "
                   "ARRAY[{}]) FROM {} e WHERE e.rid = pgcatalog_hot.rid AND "
                   "e.path = {}",
                   ident(schema.HOT), hot.key(code, "ghost"),
                   ident(schema.ENTRIES), "/plone/f/d1")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            Subject="ghost")), 1)  # wrong: no entry has it
        report = self.verify()
        self.assertFound(report, {"stale_hot": ["/plone/f/d1"]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 1)
        self.assertTrue(self.verify().clean)
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            Subject="ghost")), 0)

    def test_stale_sort_value(self):
        # the hot row's sort value (schema version 21), kept by the same
        # trigger: only a change behind the catalog's back makes it differ,
        # and a page sorted by modified then walks it wrong
        self.write("UPDATE {} SET srt = srt + 100000 FROM {} e WHERE "
                   "e.rid = pgcatalog_hot.rid AND e.path = {}",
                   ident(schema.HOT), ident(schema.ENTRIES), "/plone/f/d1")
        report = self.verify()
        self.assertFound(report, {"stale_hot": ["/plone/f/d1"]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 1)
        self.assertTrue(self.verify().clean)

    def test_wrong_counts_of_a_key_set(self):
        # the key sets' counts are kept by a trigger: only a change behind
        # the catalog's back makes them wrong (hot.py)
        self.write("INSERT INTO {} (cid, sid, cls, n, first) SELECT h.cid, "
                   "h.sid, pgcatalog_hot_class(h.lo, h.hi, h.rng), 3, h.rid "
                   "FROM {} h JOIN {} e ON e.rid = h.rid WHERE e.path = {}",
                   ident(schema.HOT_COUNTS), ident(schema.HOT),
                   ident(schema.ENTRIES), "/plone/f/d1")
        sid = self.store().value(q(
            "SELECT h.sid FROM {} h JOIN {} e ON e.rid = h.rid WHERE e.path "
            "= {}", ident(schema.HOT), ident(schema.ENTRIES), "/plone/f/d1"))
        report = self.verify()
        self.assertFound(report, {"stale_hot": ["set:%d" % sid]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 1)
        self.assertTrue(self.verify().clean)

    def test_wrong_counts_of_a_free_key(self):
        # the free keys' counts per set (schema version 4), kept by the
        # same trigger: a facet count of a tag adds them up
        self.write("INSERT INTO {} (cid, sid, cls, key, n) SELECT h.cid, "
                   "h.sid, pgcatalog_hot_class(h.lo, h.hi, h.rng), "
                   "'1' || chr(31) || 'nowhere', 2 FROM {} h JOIN {} e ON "
                   "e.rid = h.rid WHERE e.path = {}",
                   ident(schema.HOT_KEY_COUNTS), ident(schema.HOT),
                   ident(schema.ENTRIES), "/plone/f/d1")
        sid = self.store().value(q(
            "SELECT h.sid FROM {} h JOIN {} e ON e.rid = h.rid WHERE e.path "
            "= {}", ident(schema.HOT), ident(schema.ENTRIES), "/plone/f/d1"))
        report = self.verify()
        self.assertFound(report, {"stale_hot": ["set:%d" % sid]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 1)
        self.assertTrue(self.verify().clean)

    def test_wrong_totals_of_a_text_index(self):
        # Okapi's collection statistics are kept as totals by triggers on
        # the text rows (schema version 5): only a change behind the
        # catalog's back makes them wrong, and every score with them
        query = {"SearchableText": "about"}
        scores = [b.data_record_score_ for b in
                  self.catalog.unrestrictedSearchResults(query)]
        self.assertTrue(scores)
        self.write("INSERT INTO {} (cid, name, docs, words) VALUES ({}, "
                   "'SearchableText', 5, 1000), ({}, 'Gone', 1, 2)",
                   ident(schema.TEXT_TOTALS), self.store().cid,
                   self.store().cid)
        from plone.pgcatalog.pg import textstats
        textstats.forget()
        self.assertNotEqual(
            [b.data_record_score_ for b in
             self.catalog.unrestrictedSearchResults(query)], scores)
        report = self.verify()
        self.assertFound(report, {"stale_hot": [
            "totals:Gone", "totals:SearchableText"]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 2)
        self.assertTrue(self.verify().clean)
        self.assertEqual(
            [b.data_record_score_ for b in
             self.catalog.unrestrictedSearchResults(query)], scores)

    def test_wrong_frequency_of_a_word(self):
        # the words' document frequencies are kept by the same triggers
        # (schema version 6): a score reads them
        query = {"SearchableText": "about"}
        scores = [b.data_record_score_ for b in
                  self.catalog.unrestrictedSearchResults(query)]
        self.write("INSERT INTO {} (cid, name, word, n) VALUES ({}, "
                   "'SearchableText', 'about', 40), ({}, 'Title', 'gone', "
                   "1)", ident(schema.TEXT_DF), self.store().cid,
                   self.store().cid)
        from plone.pgcatalog.pg import textstats
        textstats.forget()
        self.assertNotEqual(
            [b.data_record_score_ for b in
             self.catalog.unrestrictedSearchResults(query)], scores)
        report = self.verify()
        self.assertFound(report, {"stale_hot": [
            "df:SearchableText:about", "df:Title:gone"]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 2)
        self.assertTrue(self.verify().clean)
        self.assertEqual(
            [b.data_record_score_ for b in
             self.catalog.unrestrictedSearchResults(query)], scores)

    def test_wrong_postings(self):
        # the postings of Title (schema version 7) are kept by triggers on
        # the text and hot rows: a posting gone, one with another key set
        # and one left over are found, and written again by a repair
        store = self.store()
        rid, word, sid = store.rows(q(
            "SELECT rid, word, sid FROM {} WHERE cid = {} AND name = "
            "'Title' ORDER BY rid, word LIMIT 1", ident(schema.POSTINGS),
            store.cid))[0]
        other = store.rows(q(
            "SELECT rid, word FROM {} WHERE cid = {} AND name = 'Title' AND "
            "rid <> {} ORDER BY rid, word LIMIT 1", ident(schema.POSTINGS),
            store.cid, rid))[0]
        self.write("DELETE FROM {} WHERE rid = {} AND word = {}",
                   ident(schema.POSTINGS), rid, word)
        self.write("UPDATE {} SET sid = {} WHERE rid = {} AND word = {}",
                   ident(schema.POSTINGS), (sid or 0) + 1000, other[0],
                   other[1])
        self.write("INSERT INTO {} (cid, name, word, rid, tf, dl) VALUES "
                   "({}, 'Title', 'zzgone', {}, 1, 1)",
                   ident(schema.POSTINGS), store.cid, rid)
        report = self.verify()
        self.assertFound(report, {"stale_hot": [
            "postings:Title:%s:%d" % (word, rid),
            "postings:Title:%s:%d" % (other[1], other[0]),
            "postings:Title:zzgone:%d" % rid]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, 3)
        self.assertTrue(self.verify().clean)

    def test_a_word_missing_from_the_lexicon(self):
        # the lexicon is kept by triggers: only a change behind the
        # catalog's back loses a word, and a glob then misses its documents
        glob = {"SearchableText": "abou*"}
        found = [b.getPath() for b in
                 self.catalog.unrestrictedSearchResults(glob)]
        self.assertTrue(found)
        words = [r[0] for r in self.store().rows(q(
            "SELECT word FROM {} WHERE starts_with(word, 'abou')",
            ident(schema.WORDS)))]
        self.write("DELETE FROM {} WHERE starts_with(word, 'abou')",
                   ident(schema.WORDS))
        from plone.pgcatalog.pg import textstats
        textstats.forget()
        self.assertEqual(list(self.catalog.unrestrictedSearchResults(glob)),
                         [])
        report = self.verify()
        self.assertFound(report, {"stale_hot": [
            "word:%s" % w for w in sorted(words)]})
        report = self.verify(repair=True)
        self.assertEqual(report.repaired, len(words))
        self.assertTrue(self.verify().clean)
        self.assertEqual([b.getPath() for b in
                          self.catalog.unrestrictedSearchResults(glob)],
                         found)

    def test_metadata_row_missing(self):
        self.write("DELETE FROM {} USING {} e WHERE e.rid = "
                   "pgcatalog_meta.rid AND e.path = {}", ident(schema.META),
                   ident(schema.ENTRIES), "/plone/f/d1")
        report = self.verify()
        self.assertFound(report, {"stale_metadata": ["/plone/f/d1"]})

    def test_object_changed_without_reindex(self):
        doc = self.portal.f.d2
        doc.title = "Renamed behind the catalog's back"
        report = self.verify()
        self.assertFound(report, {"stale_value": ["/plone/f/d2"],
                                  "stale_metadata": ["/plone/f/d2"]})
        detail = report.samples["stale_value"][0][1]
        self.assertIn("Title", detail)
        self.assertIn("sortable_title", detail)
        self.assertIn("Title", report.samples["stale_metadata"][0][1])

    def test_every_difference_streamed(self):
        seen = []
        for n in range(6):
            self.catalog.uncatalog_object("/plone/f/d%d" % n)
        report = self.verify(sample=2,
                             on_difference=lambda *a: seen.append(a))
        self.assertEqual(report.counts["missing"], 6)
        self.assertEqual(len(report.samples["missing"]), 2)
        self.assertEqual(sorted(p for _, p, _ in seen),
                         ["/plone/f/d%d" % n for n in range(6)])

    def test_bad_batch(self):
        with self.assertRaises(ValueError):
            self.verify(batch=0)
        with self.assertRaises(ValueError):
            verifystore.entries_after(self.store(), None, 0)


class TestRepair(VerifyCase):

    def plant_everything(self):
        self.catalog.uncatalog_object("/plone/f/d1")                # missing
        self.portal.f._delObject("d2", suppress_events=True)       # orphan
        self.catalog.catalog_object(self.portal.portal_workflow,
                                    "/plone/portal_workflow")      # entry
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{UID}}', "
                   "to_jsonb({}::text)) WHERE path = {}",
                   ident(schema.ENTRIES), "0" * 32, "/plone/f/d4")  # entry
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{Subject}}', "
                   "'[\"other\"]') WHERE path = {}", ident(schema.ENTRIES),
                   "/plone/f/d0")                                   # value
        self.write("UPDATE {} SET meta = (meta::jsonb || "
                   "'{{\"Description\": \"old\"}}')::json FROM {} e WHERE "
                   "e.rid = pgcatalog_meta.rid AND e.path = {}",
                   ident(schema.META), ident(schema.ENTRIES),
                   "/plone/f/d3")                                   # meta

    def test_repair_fixes_every_kind(self):
        self.plant_everything()
        report = self.verify(repair=True)
        self.assertEqual(report.counts, {
            "orphan": 1, "missing": 1, "stale_entry": 2, "stale_value": 1,
            "stale_metadata": 1, "stale_hot": 0})
        self.assertEqual((report.repaired, report.unrepaired), (6, 0))
        again = self.verify()
        self.assertTrue(again.clean, "\n".join(again.summary()))
        self.assertEqual(
            [b.getPath() for b in self.catalog.unrestrictedSearchResults(
                Subject="s0")], ["/plone/f/d0"])
        self.assertEqual(self.catalog.unrestrictedSearchResults(
            path="/plone/f/d1")[0].Title, "Doc 1")
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            path="/plone/f/d2")), 0)
        self.assertIsNone(self.catalog.getrid("/plone/portal_workflow"))
        # idempotent: a second repair has nothing to do
        third = self.verify(repair=True)
        self.assertTrue(third.clean)
        self.assertEqual(third.repaired, 0)

    def test_quick_finds_entries_but_not_values(self):
        self.plant_everything()
        report = self.verify(values=False, repair=True)
        self.assertEqual(report.counts, {
            "orphan": 1, "missing": 1, "stale_entry": 2, "stale_value": 0,
            "stale_metadata": 0, "stale_hot": 0})
        self.assertEqual(report.repaired, 4)
        report = self.verify()
        self.assertFound(report, {"stale_value": ["/plone/f/d0"],
                                  "stale_metadata": ["/plone/f/d3"]})

    def test_repairs_confirmed_in_a_fresh_look(self):
        # what the batch found is fixed by the site before the repair
        # (another transaction, as on a live site): nothing is undone
        f = self.portal.f
        d2 = f.d2
        f._delObject("d2", suppress_events=True)                   # orphan
        self.catalog.uncatalog_object("/plone/f/d1")                # missing
        self.write("UPDATE {} SET idx = jsonb_set(idx, '{{Subject}}', "
                   "'[\"other\"]') WHERE path = {}", ident(schema.ENTRIES),
                   "/plone/f/d0")                                   # value
        self.catalog.uncatalog_object("/plone/f/d3")       # stays missing
        fixed = []

        def fresh():
            if not fixed:
                f._setObject("d2", d2, suppress_events=True)
                self.catalog.catalog_object(f.d1)
                self.catalog.catalog_object(f.d0)
            fixed.append(1)

        report = self.verify(repair=True, fresh=fresh, batch=50)
        # (d1 was catalogued by the "site" before the walk reached it)
        self.assertEqual(report.counts, {
            "orphan": 1, "missing": 1, "stale_entry": 0, "stale_value": 1,
            "stale_metadata": 0, "stale_hot": 0})
        self.assertEqual(len(fixed), 2)  # once per batch with differences
        self.assertEqual(report.repaired, 1)  # d3 only
        self.assertIsNotNone(self.catalog.getrid("/plone/f/d2"))
        self.assertIsNotNone(self.catalog.getrid("/plone/f/d3"))
        self.assertTrue(self.verify().clean)

    def test_bounded_repair_says_what_remains(self):
        self.plant_everything()
        report = self.verify(repair=True, repair_limit=4)
        self.assertEqual((report.repaired, report.unrepaired), (4, 2))
        second = self.verify(repair=True, repair_limit=4)
        self.assertEqual((second.repaired, second.unrepaired), (2, 0))
        self.assertTrue(self.verify().clean)

    def test_an_object_whose_values_fail(self):
        from plone.indexer import indexer
        from plone.indexer.interfaces import IIndexer
        from zope.component import getGlobalSiteManager
        from zope.interface import Interface
        failing = []

        @indexer(Interface)
        def broken(obj):
            if getattr(obj, "id", None) in failing:
                raise RuntimeError("this indexer fails")
            return "fine"

        gsm = getGlobalSiteManager()
        gsm.registerAdapter(broken, name="broken_column",
                            provided=IIndexer)
        try:
            self.catalog.addColumn("broken_column")
            self.catalog.clearFindAndRebuild()
            processQueue()
            self.assertTrue(self.verify().clean)
            failing.append("d5")
            self.catalog.uncatalog_object("/plone/f/d5")
            self.catalog.uncatalog_object("/plone/f/d4")
            report = self.verify(repair=True)
            # d5's repair fails, is counted, the rest goes on
            self.assertEqual(report.counts["missing"], 2)
            self.assertEqual(report.errors, 1)
            self.assertIn("this indexer fails", report.error_samples[0][1])
            self.assertEqual((report.repaired, report.unrepaired), (1, 1))
            self.assertFalse(report.clean)
            self.assertIsNotNone(self.catalog.getrid("/plone/f/d4"))
            self.assertIsNone(self.catalog.getrid("/plone/f/d5"))
            # d5 catalogued again: now its values cannot be computed
            failing.remove("d5")
            self.catalog.catalog_object(self.portal.f.d5)
            failing.append("d5")
            report = self.verify()
            self.assertEqual(report.total, 0)
            self.assertEqual(report.errors, 1)
            self.assertEqual(report.error_samples[0][0], "/plone/f/d5")
        finally:
            gsm.unregisterAdapter(broken, name="broken_column",
                                  provided=IIndexer)

    def test_on_batch_runs_after_each_batch(self):
        calls = []
        self.verify(batch=4, on_batch=lambda: calls.append(1))
        # 9 entries in 3 batches, 9 objects in 3 batches
        self.assertEqual(len(calls), 6)


class TestComments(VerifyCase):

    def setUp(self):
        super().setUp()
        from plone.app.discussion.interfaces import IConversation
        from plone.app.discussion.interfaces import IDiscussionSettings
        from plone.app.testing import applyProfile
        from plone.registry.interfaces import IRegistry
        from zope.component import createObject
        from zope.component import queryUtility
        applyProfile(self.portal, "plone.app.discussion:default")
        settings = queryUtility(IRegistry).forInterface(IDiscussionSettings)
        settings.globally_enabled = True
        # the profile adds indexes and columns the entries have no values
        # for (the verifier says so: stale values and metadata)
        self.catalog.clearFindAndRebuild()
        conversation = IConversation(self.portal.f.d0)
        comment = createObject("plone.Comment")
        comment.text = "Hello from a comment"
        self.comment_id = conversation.addComment(comment)
        self.path = "/plone/f/d0/++conversation++default/%s" % \
            self.comment_id
        processQueue()

    def test_comments_verified(self):
        self.assertIsNotNone(self.catalog.getrid(self.path))
        report = self.verify()
        self.assertTrue(report.clean, "\n".join(report.summary()))
        self.assertEqual(report.objects, 10)

    def test_missing_comment_found_and_repaired(self):
        self.catalog.uncatalog_object(self.path)
        report = self.verify(repair=True)
        self.assertFound(report, {"missing": [self.path]})
        self.assertIsNotNone(self.catalog.getrid(self.path))
        self.assertTrue(self.verify().clean)


class TestSettings(unittest.TestCase):

    def test_zmi_settings(self):
        from unittest import mock

        from plone.pgcatalog import config
        from plone.pgcatalog.errors import ConfigurationError
        self.assertEqual(config.get_verify_zmi_max_entries(), 5000)
        self.assertEqual(config.get_verify_zmi_repair_limit(), 1000)
        for value in ("many", "-1", "1.5"):
            with self.subTest(value=value):
                with mock.patch.dict("os.environ", {
                        "PGCATALOG_VERIFY_ZMI_MAX_ENTRIES": value,
                        "PGCATALOG_VERIFY_ZMI_REPAIR_LIMIT": value}):
                    with self.assertRaises(ConfigurationError):
                        config.get_verify_zmi_max_entries()
                    with self.assertRaises(ConfigurationError):
                        config.get_verify_zmi_repair_limit()
        with mock.patch.dict("os.environ", {
                "PGCATALOG_VERIFY_ZMI_MAX_ENTRIES": "0"}):
            self.assertEqual(config.get_verify_zmi_max_entries(), 0)
