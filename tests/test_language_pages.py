"""A search by language ranks by a score that adds up per word
(language.word_score_sql); the language rows' postings (schema version 9)
are kept by triggers, and words joined by AND or words and prefixes joined
by OR are read from them: the same matches, scores and order as the
language rows give."""
import unittest.mock

from catalog_cases import ManagerWithoutCache
from DateTime import DateTime
from plone.app.textfield.value import RichTextValue
from Products.CMFCore.indexing import processQueue
from statements import statements

from plone.pgcatalog.indexes.text import language
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import langpage

#: level1-like made-up words, some repeated, in titles, descriptions and
#: bodies of different lengths
FILL = ["alder", "birch", "cedar", "dogwood", "elm", "fir", "ginkgo"]


class TestLanguagePages(ManagerWithoutCache):

    def setUp(self):
        super().setUp()
        portal = self.portal
        wf = portal.portal_workflow
        wf.setChainForPortalTypes(["Document"],
                                  "simple_publication_workflow")
        portal.invokeFactory("Folder", "trees")
        self.folder = portal.trees
        for i in range(40):
            # "maple" and "oak" in titles, descriptions and bodies, 0-3
            # times each, among 0-6 other words: many equal scores
            maple, oak, pad = i % 4, (i // 4) % 3, i % 7
            title = " ".join(["maple"] * (i % 2) + FILL[:i % 3])
            description = " ".join(["oak"] * (i % 3 == 1) + FILL[:pad])
            body = " ".join(["maple"] * maple + ["oak"] * oak + FILL[:pad])
            self.add("t%02d" % i, title or "tree", description, body)
            if i % 3 == 0:
                wf.doActionFor(self.folder["t%02d" % i], "publish")
        processQueue()
        self.catalog.pgc_language_text("SearchableText", languages=["en"],
                                       default="en")
        self.catalog.reindexIndex("SearchableText")

    def add(self, id, title, description, text):
        self.folder.invokeFactory("Document", id, title=title,
                                  description=description)
        doc = self.folder[id]
        doc.text = RichTextValue("<p>%s</p>" % text, "text/html",
                                 "text/x-html-safe")
        doc.reindexObject()

    def store(self):
        return self.catalog._pgc_store()

    def postings(self):
        """{(path, word): (tf, dl)} of the kept postings, and the same
        computed from the language rows (what the triggers must write)."""
        store = self.store()
        kept = {(r[0], r[1]): (r[2], r[3]) for r in store.rows(q(
            "SELECT e.path, p.word, p.tf, p.dl FROM {} p JOIN {} ON e.rid "
            "= p.rid WHERE p.name = 'SearchableText'",
            schema.LANGPOSTINGS_TABLE, schema.FROM_ENTRIES))}
        rows = {(r[0], r[1]): (r[2], r[3]) for r in store.rows(q(
            "SELECT e.path, u.lexeme, {}, length(l.tsv) FROM {} l CROSS "
            "JOIN LATERAL unnest(l.tsv) u JOIN {} ON e.rid = l.rid WHERE "
            "l.name = 'SearchableText'",
            language.weighted_count_sql(q("u.weights")),
            schema.LANGTEXT_TABLE, schema.FROM_ENTRIES))}
        return kept, rows

    def full(self, query):
        found = self.catalog.unrestrictedSearchResults(dict(query))
        return [(b.getPath(), b.data_record_score_,
                 b.data_record_normalized_score_) for b in found]

    def test_the_triggers_keep_the_postings(self):
        kept, rows = self.postings()
        self.assertEqual(kept, rows)
        path = "/plone/trees/t05"
        # a word in the title (A, 10) and twice in the index's own text
        # (C, 2 each: Plone's SearchableText holds the title too)
        self.assertEqual(kept[(path, "mapl")][0], 14)
        # changed, deleted: the postings follow
        doc = self.folder.t05
        doc.text = RichTextValue("<p>walnut walnut</p>", "text/html",
                                 "text/x-html-safe")
        doc.reindexObject()
        self.folder.manage_delObjects(["t06"])
        processQueue()
        kept, rows = self.postings()
        self.assertEqual(kept, rows)
        # twice in the body (C, 2 each) and twice as written (D, 1 each:
        # the stem is the word)
        self.assertEqual(kept[(path, "walnut")][0], 6)
        self.assertNotIn(("/plone/trees/t06", "mapl"), kept)
        # a change of security: the key set copied onto the postings
        store = self.store()
        sids = store.rows(q(
            "SELECT DISTINCT p.sid = h.sid FROM {} p JOIN {} h ON h.rid = "
            "p.rid", schema.LANGPOSTINGS_TABLE, schema.HOT_TABLE))
        self.assertEqual(sids, [(True,)])
        self.portal.portal_workflow.doActionFor(self.folder.t05, "publish")
        processQueue()
        sids = store.rows(q(
            "SELECT DISTINCT p.sid = h.sid FROM {} p JOIN {} h ON h.rid = "
            "p.rid", schema.LANGPOSTINGS_TABLE, schema.HOT_TABLE))
        self.assertEqual(sids, [(True,)])
        # back to exact: the language rows and their postings go
        self.catalog.pgc_exact_text("SearchableText")
        self.assertEqual(self.postings(), ({}, {}))

    def test_the_score_adds_up_per_word(self):
        # one word: its share; two words: the sum of the shares
        store = self.store()
        rid = self.catalog.getrid("/plone/trees/t05")
        tf, dl = store.rows(q(
            "SELECT tf, dl FROM {} WHERE rid = {} AND word = 'mapl'",
            schema.LANGPOSTINGS_TABLE, rid))[0]
        share = (tf / 10 * 2.2 / (tf / 10 + 1.2)) / (1 + __import__(
            "math").log(dl))
        found = {p: s for p, s, _n in self.full(
            {"SearchableText": "maple"})}
        self.assertAlmostEqual(found["/plone/trees/t05"], share, places=12)
        both = {p: s for p, s, _n in self.full(
            {"SearchableText": "maple oak"})}
        oak = {p: s for p, s, _n in self.full({"SearchableText": "oak"})}
        for path, score in both.items():
            self.assertAlmostEqual(score, found[path] + oak[path],
                                   places=12)
        # a title counts more than a body: t01's maple (title and body
        # once each) above t02's (twice in the body, a text as long)
        self.assertGreater(found["/plone/trees/t01"],
                           found["/plone/trees/t02"])

    def queries(self):
        anonymous = {"allowedRolesAndUsers": ["Anonymous"],
                     "effectiveRange": DateTime()}
        found = []
        for text in ("maple", "oak", "maple oak", "maple AND oak AND cedar",
                     "mapl*", "ma*", "maple OR oak", "oak OR ced*",
                     "mapl* AND oa*", "ma* AND map*", "maple AND ced*",
                     "(maple OR oak) AND ced*"):
            for extra in ({}, {"portal_type": "Document"}, anonymous):
                found.append(dict(extra, SearchableText=text))
        return found

    def searched(self, query):
        """The answer (paths, scores, normalized scores), the total and the
        search's statements."""
        found, sent = statements(
            self.catalog,
            lambda: self.catalog.unrestrictedSearchResults(dict(query)))
        return ([(b.getPath(), b.data_record_score_,
                  b.data_record_normalized_score_) for b in found],
                found.actual_result_count, sent)

    def test_matches_and_scores_from_the_postings(self):
        """Groups joined by AND, each words and prefixes joined by OR
        (words joined by AND, a glob, Plone's ``a* AND b*``): the matches
        and scores read from the postings, every match and every
        page, alone and beside hot conditions, equal those of the
        language rows scored one by one (their postings then looked up by
        entry)."""
        ties = 0
        for query in self.queries():
            windows = [{}] + [{"b_start": b_start, "b_size": b_size}
                              for b_size in (1, 4, 10)
                              for b_start in (0, 3, 8, 39)]
            for window in windows:
                asked = dict(query, **window)
                got, total, sent = self.searched(asked)
                search = [st for st in sent if "array_agg" in st]
                self.assertEqual(len(search), 1, sent)
                self.assertIn('"pgcatalog_langpostings" h', search[0])
                self.assertNotIn("pgcatalog_langtext", search[0])
                with unittest.mock.patch.object(
                        language, "postings_of", lambda *a: None):
                    rows, rows_total, sent = self.searched(asked)
                self.assertIn("pgcatalog_langtext", [
                    st for st in sent if "array_agg" in st][0])
                self.assertEqual(got, rows, asked)
                self.assertEqual(total, rows_total, asked)
                if not window:
                    self.assertTrue(got, asked)
                    ties += len(got) - len({s for _p, s, _n in got})
        # equal scores (equal counts and lengths: newest rid first) among
        # them
        self.assertGreater(ties, 10)

    def test_a_page_of_words_from_its_best_postings(self):
        """A page of words joined by AND reads its best postings
        (search/langpage.py): whatever the seed finds (every match, a few,
        fewer than the page: then every match is read), the same page,
        scores, normalized scores and total as the language rows give."""
        anonymous = {"allowedRolesAndUsers": ["Anonymous"],
                     "effectiveRange": DateTime()}
        windows = [{"b_start": b_start, "b_size": b_size}
                   for b_size in (1, 3, 10) for b_start in (0, 2, 7)]
        checked = 0
        for seed in (1, 2, 5, langpage.SEED):
            for text in ("maple", "oak", "maple oak", "oak maple",
                         "maple AND oak AND cedar", "cedar AND fir"):
                for extra in ({}, anonymous):
                    for window in windows:
                        asked = dict(extra, SearchableText=text, **window)
                        with unittest.mock.patch.object(
                                langpage, "SEED", seed), \
                                unittest.mock.patch.object(
                                    langpage, "POSTINGS_MIN", 0):
                            got, total, sent = self.searched(asked)
                        search = [st for st in sent if "array_agg" in st]
                        self.assertEqual(len(search), 1, sent)
                        self.assertIn("th AS MATERIALIZED", search[0])
                        with unittest.mock.patch.object(
                                language, "postings_of", lambda *a: None):
                            rows, rows_total, _sent = self.searched(asked)
                        self.assertEqual(got, rows, (seed, asked))
                        self.assertEqual(total, rows_total, asked)
                        checked += len(got)
        self.assertGreater(checked, 500)
        # every match, a prefix, words of few postings: every match
        # scored
        for asked in ({"SearchableText": "maple oak"},
                      {"SearchableText": "mapl*", "b_size": 3},
                      {"SearchableText": "maple oak", "b_size": 3}):
            _got, _total, sent = self.searched(asked)
            search = [st for st in sent if "array_agg" in st]
            self.assertNotIn("th AS MATERIALIZED", search[0])

    def test_other_queries_from_the_rows(self):
        # NOT, phrases: matched on the language rows
        for text in ("maple AND NOT oak", '"maple oak"',
                     "maple OR (oak AND cedar)"):
            got, _total, sent = self.searched({"SearchableText": text,
                                               "b_size": 3})
            search = [st for st in sent if "array_agg" in st][0]
            self.assertIn("pgcatalog_langtext", search, text)
            self.assertTrue(got, text)

    def test_prefix_ranges(self):
        self.assertEqual(language.prefix_end("abc"), "abd")
        self.assertEqual(language.prefix_end("a\U0010ffff"), "b")
        self.assertEqual(language.prefix_end("\U0010ffff"), None)
        self.assertEqual(language.prefix_end("a\ud7ff"), "a\ue000")

    def test_several_languages(self):
        """Entries in two languages: each configuration's postings read
        (an entry in its own only), the same answers as the rows give."""
        self.catalog.pgc_language_text(
            "SearchableText", languages=["en", "de"], default="en")
        for i in range(0, 40, 3):
            self.folder["t%02d" % i].language = "de"
        self.catalog.reindexIndex("SearchableText")
        checked = 0
        for query in self.queries():
            for window in ({}, {"b_start": 2, "b_size": 4}):
                asked = dict(query, **window)
                got, total, sent = self.searched(asked)
                search = [st for st in sent if "array_agg" in st][0]
                self.assertNotIn("pgcatalog_langtext", search)
                self.assertIn("pgcatalog_german", search)
                with unittest.mock.patch.object(
                        language, "postings_of", lambda *a: None):
                    rows, rows_total, _sent = self.searched(asked)
                self.assertEqual(got, rows, asked)
                self.assertEqual(total, rows_total, asked)
                checked += bool(got)
        self.assertGreater(checked, 20)

    def test_many_ranges_from_the_rows(self):
        # a query of many prefixes is matched on the language rows (a
        # statement of as many ranges would take long to plan)
        text = " OR ".join(["mapl*"] + ["zz%02d*" % n for n in range(40)])
        got, _total, sent = self.searched({"SearchableText": text,
                                           "b_size": 3})
        self.assertTrue(got)
        search = [st for st in sent if "array_agg" in st][0]
        self.assertIn("pgcatalog_langtext", search)
        with unittest.mock.patch.object(language, "MAX_RANGES", 100):
            also, _total, sent = self.searched({"SearchableText": text,
                                                "b_size": 3})
        self.assertNotIn("pgcatalog_langtext", [
            st for st in sent if "array_agg" in st][0])
        self.assertEqual(also, got)

    def test_groups_of_a_query(self):
        groups = language._groups
        self.assertEqual(groups("'a'"), [(["a"], [])])
        self.assertEqual(groups("'a' & 'b'"), [(["a"], []), (["b"], [])])
        self.assertEqual(groups("'a':* | 'b'"), [(["b"], ["a"])])
        self.assertEqual(groups("( 'a':* | 'a':* ) & ( 'b' | 'c':* )"),
                         [([], ["a"]), (["b"], ["c"])])
        self.assertEqual(groups("'it''s' & 'a\\\\b'"),
                         [(["it's"], []), (["a\\b"], [])])
        # & binds tighter than |; NOT, phrases, nested groups: not groups
        for text in ("'a' | 'b' & 'c'", "( 'a' | 'b' ) & 'c' | 'd'",
                     "'a' & !'b'", "'a' <-> 'b'", "( 'a' & 'b' ) | 'c'",
                     "( 'a' | 'b' ) | 'c'", "'a' & ( 'b' & 'c' | 'd' )"):
            self.assertIsNone(groups(text), text)
