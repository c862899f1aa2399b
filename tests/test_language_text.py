"""Language-aware text indexes (docs/language-text.md): a text index
switched over finds stems and folded accents in each object's own language
only, ranks the title above the description above the body, keeps its rows
with every write, and is ZCTextIndex-exact until its reindex completes and
again once switched back."""
import io
import unittest

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from plone.app.textfield.value import RichTextValue
from Products.CMFCore.indexing import processQueue
from Products.ZCTextIndex.ParseTree import AtomNode
from Products.ZCTextIndex.ParseTree import NotNode
from Products.ZCTextIndex.ParseTree import OrNode
from Products.ZCTextIndex.ParseTree import ParseError
from Products.ZCTextIndex.ParseTree import PhraseNode
from Products.ZCTextIndex.ParseTree import QueryError
from Products.ZCTextIndex.QueryParser import QueryParser

from plone.pgcatalog.cli.rebuild import run
from plone.pgcatalog.indexes.text import language
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.testing import PGCATALOG_MULTILINGUAL_INTEGRATION_TESTING


class FakeLexicon:
    """The parts of a lexicon the query parser calls: words split on
    blanks, lower case."""

    def parseTerms(self, text):
        return text.lower().split()

    def isGlob(self, word):
        return "*" in word or "?" in word


def parse(text):
    return QueryParser(FakeLexicon()).parseQuery(text)


class TestLanguageSettings(unittest.TestCase):

    def test_language_codes(self):
        self.assertEqual(language.language_code("de-at"), "de")
        self.assertEqual(language.language_code("pt_BR"), "pt")
        self.assertEqual(language.language_code(" EN "), "en")
        self.assertEqual(language.language_code(None), "")

    def test_configurations_the_server_has(self):
        chosen, default = language.choose_configs(
            {"english", "german", "simple"}, ["en", "de-ch", "xx", "fr"],
            "en")
        self.assertEqual(chosen, {"en": "pgcatalog_english",
                                  "de": "pgcatalog_german"})
        self.assertEqual(default, "pgcatalog_english")
        self.assertEqual(language.choose_configs({"simple"}, [], "fr"),
                         ({}, "pgcatalog_simple"))

    def test_an_object_in_another_language_gets_the_default(self):
        settings = language.LanguageText(
            {"en": "pgcatalog_english", "de": "pgcatalog_german"},
            "pgcatalog_simple")
        self.assertEqual(settings.config_of("de-AT"), "pgcatalog_german")
        self.assertEqual(settings.config_of("it"), "pgcatalog_simple")
        self.assertEqual(settings.config_of(""), "pgcatalog_simple")
        self.assertEqual(settings.configs(), [
            "pgcatalog_english", "pgcatalog_german", "pgcatalog_simple"])
        self.assertEqual(settings.configs_for(["de", "it"]),
                         ["pgcatalog_german", "pgcatalog_simple"])
        self.assertFalse(settings.ready)
        self.assertTrue(settings.completed().ready)

    def test_queries_as_zctextindex_reads_them(self):
        config = literal("pgcatalog_english")
        text = language.query_sql(parse('run AND NOT "fast shoes" OR '
                                        'walk*'), config).text
        self.assertIn("plainto_tsquery", text)
        self.assertIn("phraseto_tsquery", text)
        self.assertIn("!!", text)
        self.assertIn("to_tsquery", text)
        # a NUL another lexicon's splitter could leave in: never sent
        found = language.query_sql(PhraseNode(["a\x00b", "c"]), config)
        self.assertNotIn("\x00", "".join(map(str, found.params)))
        # NOT alone, or in an OR: ZCTextIndex's QueryError (its parser
        # makes no such tree)
        for bad in (NotNode(AtomNode("run")),
                    OrNode([AtomNode("run"), NotNode(AtomNode("walk"))])):
            with self.assertRaises(QueryError):
                language.query_sql(bad, config)


class TestLanguageText(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        self.add("en1", "en", "Running shoes", "For the runner",
                 "The runners were running fast on solar roads")
        self.add("en2", "en", "Solar power", "Energy",
                 "Panels of all kinds")
        self.add("en3", "en", "Gardens", "Plants",
                 "Solar lamps light the garden at night")
        self.add("de1", "de", "Häuser am See", "Die schönen Häuser",
                 "Wir wohnen in einem Haus; running ist englisch")
        self.add("fr1", "fr", "Le café", "Des cafés",
                 "Les cafés étaient élégants")
        self.add("none", "", "Neutral page", "", "Houses and cafés")

    def add(self, id, lang, title, description, text):
        self.portal.invokeFactory("Document", id, title=title,
                                  description=description)
        doc = self.portal[id]
        doc.language = lang
        self.set_text(doc, text)

    def set_text(self, doc, text):
        doc.text = RichTextValue("<p>%s</p>" % text, "text/html",
                                 "text/x-html-safe")
        doc.reindexObject()

    def ids(self, **query):
        return sorted(b.getId for b in self.catalog(**query))

    def mode_shown(self):
        """What the ZMI's Indexes tab says of SearchableText."""
        return {i["name"]: i["language"] for i in
                self.catalog.pgc_index_report()}["SearchableText"]

    def switch(self):
        settings = self.catalog.pgc_language_text(
            "SearchableText", languages=["en", "de", "fr"], default="en")
        self.catalog.reindexIndex("SearchableText")
        return settings

    def test_exact_until_reindexed_then_by_language(self):
        self.assertEqual(self.ids(SearchableText="run"), [])
        settings = self.catalog.pgc_language_text(
            "SearchableText", languages=["en", "de", "fr"], default="en")
        self.assertEqual(settings["languages"], {
            "en": "pgcatalog_english", "de": "pgcatalog_german",
            "fr": "pgcatalog_french"})
        self.assertEqual(settings["default"], "pgcatalog_english")
        self.assertFalse(settings["ready"])
        # not complete: still ZCTextIndex-exact
        self.assertEqual(self.ids(SearchableText="run"), [])
        self.assertEqual(self.mode_shown(), "pending")
        self.catalog.reindexIndex("SearchableText")
        self.assertEqual(self.mode_shown(), "ready")
        status = self.catalog.pgc_language_status("SearchableText")
        self.assertTrue(status["ready"])
        self.assertEqual(status["mode"], "language")
        self.assertEqual(status["rows"], status["entries"])
        self.assertTrue(status["folding"])
        self.assertEqual(self.ids(SearchableText="run"), ["en1"])

    def test_stems_in_the_objects_language_only(self):
        self.switch()
        # English stems: runners, running -> run; the German page's
        # "running" is a German word there (not stemmed to run)
        self.assertEqual(self.ids(SearchableText="runs"), ["en1"])
        # German stems and folded accents: Häuser, Haus -> haus
        self.assertEqual(self.ids(SearchableText="haus"), ["de1"])
        self.assertEqual(self.ids(SearchableText="Häusern"), ["de1"])
        # French: cafés, café -> caf; the neutral page is English (the
        # default) and its "cafés" is found by the English rules
        self.assertEqual(self.ids(SearchableText="cafe"), ["fr1", "none"])
        self.assertEqual(self.ids(SearchableText="cafe", Language="fr"),
                         ["fr1"])
        self.assertEqual(self.ids(SearchableText="haus", Language="en"), [])
        # English "houses" -> hous: not the German Häuser
        self.assertEqual(self.ids(SearchableText="house"), ["none"])

    def test_query_syntax(self):
        self.switch()
        self.assertEqual(self.ids(SearchableText="solar AND NOT garden"),
                         ["en1", "en2"])
        self.assertEqual(self.ids(SearchableText="panel OR plant"),
                         ["en2", "en3"])
        self.assertEqual(self.ids(SearchableText='"running fast"'), ["en1"])
        self.assertEqual(self.ids(SearchableText='"fast running"'), [])
        self.assertEqual(self.ids(SearchableText="sol*"),
                         ["en1", "en2", "en3"])
        self.assertEqual(self.ids(SearchableText="élégant"), ["fr1"])

    def test_title_above_description_above_body(self):
        self.switch()
        # solar: en2's title, en1's and en3's body (en3 the shorter body)
        brains = self.catalog(SearchableText="solar")
        found = [b.getId for b in brains]
        self.assertEqual(found[0], "en2")
        # the scores are the ranks, the first normalised to 100
        self.assertIsInstance(brains[0].data_record_score_, float)
        self.assertGreater(brains[0].data_record_score_,
                           brains[2].data_record_score_)
        self.assertEqual(brains[0].data_record_normalized_score_, 100)
        self.assertEqual(sorted(found), ["en1", "en2", "en3"])
        # sorted by an index: that order, not relevance
        found = [b.getId for b in self.catalog(SearchableText="solar",
                                               sort_on="id")]
        self.assertEqual(found, ["en1", "en2", "en3"])

    def test_beside_other_conditions_and_sorts(self):
        self.switch()
        for sort_on, order in (("sortable_title", ["en3", "en1", "en2"]),
                               ("modified", ["en1", "en2", "en3"])):
            self.assertEqual([b.getId for b in self.catalog(
                SearchableText="solar", sort_on=sort_on)], order)
            self.assertEqual([b.getId for b in self.catalog(
                SearchableText="solar", portal_type="Document",
                sort_on=sort_on, b_size=2, b_start=0)][:2], order[:2])
        self.assertEqual(len(self.catalog(SearchableText="solar",
                                          portal_type="Document")), 3)
        # the index's own query_index (ZCatalog's index API)
        index = self.catalog._catalog.getIndex("SearchableText")
        rids = index._apply_index({"SearchableText": "runs"})[0]
        self.assertEqual([self.catalog.getpath(rid).rsplit("/", 1)[1]
                          for rid in rids], ["en1"])

    def test_writes_keep_the_rows(self):
        self.switch()
        self.add("en4", "en", "Cycling", "", "She cycles daily")
        self.assertEqual(self.ids(SearchableText="cycle"), ["en4"])
        doc = self.portal["en4"]
        self.set_text(doc, "swimming")
        self.assertEqual(self.ids(SearchableText="swim"), ["en4"])
        # an object's language changed: parsed again in its new language
        doc.language = "de"
        doc.reindexObject()
        self.assertEqual(self.ids(SearchableText="swim"), [])
        self.portal.manage_delObjects(["en4"])
        self.assertEqual(self.ids(SearchableText="cycle"), [])

    def test_verify_finds_a_missing_language_row_and_repairs_it(self):
        self.switch()
        self.assertTrue(self.catalog.pgc_verify().clean)
        store = self.catalog._pgc_store()
        store.write(q("DELETE FROM {} l USING {} WHERE l.rid = e.rid AND "
                      "e.path = {}", schema.LANGTEXT_TABLE,
                      schema.FROM_ENTRIES, "/plone/en2"))
        self.assertEqual(self.ids(SearchableText="power"), [])
        report = self.catalog.pgc_verify(repair=True)
        self.assertEqual([s[0] for s in report.samples["stale_value"]],
                         ["/plone/en2"])
        self.assertEqual(self.ids(SearchableText="power"), ["en2"])
        self.assertTrue(self.catalog.pgc_verify().clean)

    def test_back_to_exact(self):
        self.switch()
        self.catalog.pgc_exact_text("SearchableText")
        self.assertEqual(self.ids(SearchableText="run"), [])
        self.assertEqual(self.ids(SearchableText="running"), ["de1", "en1"])
        self.assertEqual(self.catalog.pgc_language_status("SearchableText"),
                         {"mode": "exact"})

    def test_errors_as_zctextindex(self):
        self.switch()
        for bad in ("NOT run", "AND", "run OR -walk", "-run"):
            with self.assertRaises((ParseError, QueryError)) as found:
                self.catalog(SearchableText=bad)
            self.catalog.pgc_exact_text("SearchableText")
            with self.assertRaises(type(found.exception)):
                self.catalog(SearchableText=bad)
            self.switch()

    def outcome(self, text):
        try:
            return self.ids(SearchableText=text)
        except Exception as exc:
            return type(exc)

    def test_an_empty_query_as_the_exact_search(self):
        texts = ("", " ", [], [""])
        exact = [self.outcome(text) for text in texts]
        self.switch()
        self.assertEqual([self.outcome(text) for text in texts], exact)

    def test_hostile_text_is_only_text(self):
        self.switch()
        for text in ("'", "\\", "run:*", "a & b | !c", "x <-> y", "\x00",
                     "'; DROP TABLE x; --", "é" * 3000, "((("):
            try:
                self.catalog(SearchableText=text)
            except (ParseError, QueryError):
                pass
        self.assertEqual(self.ids(SearchableText="run"), ["en1"])

    def test_suggestions_and_facets_by_language(self):
        self.switch()
        # a typed prefix finds the words it begins as written ("runni":
        # the English and the German "running"), and the stems it begins
        # ("runners" -> runner*: the English "runners", in English)
        self.assertEqual(sorted(b.getId for b in self.catalog.pgc_suggest(
            "runni", index="SearchableText")), ["de1", "en1"])
        self.assertEqual([b.getId for b in self.catalog.pgc_suggest(
            "runners", index="SearchableText", Language="en")], ["en1"])
        found = self.catalog.pgc_facets({"SearchableText": "solar"},
                                        facets=["portal_type"])
        self.assertEqual(found["portal_type"]["values"], [
            ("Document", 3)])

    def test_not_a_text_index(self):
        with self.assertRaises(ValueError):
            self.catalog.pgc_language_text("portal_type")


class TestLanguageTextOnline(unittest.TestCase):
    """Switched over by ``pgcatalog-rebuild --language-text`` (an online
    reindex, committed in batches, resumable), with the result cache on:
    searches are exact until its end, by language after, exact again
    after ``--exact-text``."""
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.app = self.layer["app"]
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        for n in range(7):
            self.portal.invokeFactory(
                "Document", "d%d" % n, title="Running %d" % n,
                description="Häuser" if n % 2 else "cafés")
            self.portal["d%d" % n].language = "de" if n % 2 else "fr"
            self.portal["d%d" % n].reindexObject()
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()

    def command(self, *argv):
        out = io.StringIO()
        status = run(self.app, ["--site", "plone", "--grace", "0"]
                     + list(argv), out=out)
        transaction.begin()
        return status, out.getvalue()

    def ids(self, **query):
        transaction.begin()
        return sorted(b.getId for b in self.portal.portal_catalog(**query))

    def test_online_switch_and_back(self):
        self.assertEqual(self.ids(SearchableText="haus"), [])
        # cached, then still exact while the reindex is under way
        self.assertEqual(self.ids(SearchableText="haus"), [])
        code, out = self.command("--language-text", "SearchableText",
                                 "--languages", "de,fr",
                                 "--default-language", "fr", "--batch", "3",
                                 "--max-batches", "1")
        self.assertEqual(code, 0)
        self.assertIn("stopped; go on with --resume", out)
        self.assertIn('"pgcatalog_german"', out)
        self.assertEqual(self.ids(SearchableText="haus"), [])
        code, out = self.command("--resume")
        self.assertEqual(code, 0)
        self.assertEqual(self.ids(SearchableText="haus"),
                         ["d1", "d3", "d5"])
        self.assertEqual(self.ids(SearchableText="cafe"),
                         ["d0", "d2", "d4", "d6"])
        # German stems for German pages only
        self.assertEqual(self.ids(SearchableText="haus", Language="fr"), [])
        code, out = self.command("--exact-text", "SearchableText")
        self.assertEqual(code, 0)
        self.assertEqual(self.ids(SearchableText="haus"), [])
        self.assertEqual(self.ids(SearchableText="hauser"),
                         ["d1", "d3", "d5"])

    def test_not_a_text_index(self):
        code, _out = self.command("--language-text", "portal_type")
        self.assertEqual(code, 1)

    def test_not_during_an_online_build(self):
        code, _out = self.command("--batch", "2", "--max-batches", "1")
        self.assertEqual(code, 0)
        code, _out = self.command("--language-text", "SearchableText")
        self.assertEqual(code, 1)
        self.assertIsNone(self.portal.portal_catalog._catalog.getIndex(
            "SearchableText").pgc_language)
        self.assertEqual(self.command("--cancel")[0], 0)


class TestMultilingualSite(unittest.TestCase):
    """A plone.app.multilingual site (English, German, French): a page and
    its translations, each found by its own language's stems and accents
    only; the site's languages are the index's by default."""
    layer = PGCATALOG_MULTILINGUAL_INTEGRATION_TESTING

    def setUp(self):
        from plone.app.multilingual.interfaces import ITranslationManager
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        texts = {"en": ("Houses", "The houses were running"),
                 "de": ("Häuser", "Die Häuser mit Gärten, running"),
                 "fr": ("Maisons", "Les maisons étaient élégantes")}
        for code, (title, text) in texts.items():
            folder = self.portal[code]
            folder.invokeFactory("Document", "page", title=title)
            folder["page"].text = RichTextValue(
                "<p>%s</p>" % text, "text/html", "text/x-html-safe")
            folder["page"].reindexObject()
        manager = ITranslationManager(self.portal["en"]["page"])
        for code in ("de", "fr"):
            manager.register_translation(code, self.portal[code]["page"])
        processQueue()
        settings = self.catalog.pgc_language_text("SearchableText")
        self.assertEqual(settings["languages"], {
            "en": "pgcatalog_english", "de": "pgcatalog_german",
            "fr": "pgcatalog_french"})
        self.assertEqual(settings["default"], "pgcatalog_english")
        self.catalog.reindexIndex("SearchableText")

    def paths(self, **query):
        return sorted(b.getPath().split("/", 2)[2]
                      for b in self.catalog(portal_type="Document", **query))

    def test_each_page_in_its_own_language(self):
        self.assertEqual(self.paths(Language="de"), ["de/page"])
        self.assertEqual(self.paths(SearchableText="house"), ["en/page"])
        self.assertEqual(self.paths(SearchableText="Haus"), ["de/page"])
        self.assertEqual(self.paths(SearchableText="Garten"), ["de/page"])
        self.assertEqual(self.paths(SearchableText="maison"), ["fr/page"])
        self.assertEqual(self.paths(SearchableText="elegant"), ["fr/page"])
        # the English rules find the English page only: the German page's
        # "running" is a German word
        self.assertEqual(self.paths(SearchableText="run"), ["en/page"])
        # the query's language (as a language-filtered search asks)
        self.assertEqual(self.paths(SearchableText="haus", Language="de"),
                         ["de/page"])
        self.assertEqual(self.paths(SearchableText="haus", Language="fr"),
                         [])

    def test_zctextindex_exact_again(self):
        self.catalog.pgc_exact_text("SearchableText")
        self.assertEqual(self.paths(SearchableText="house"), [])
        self.assertEqual(self.paths(SearchableText="houses"), ["en/page"])
