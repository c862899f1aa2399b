"""Snippets of text results (portal_catalog.pgc_snippets and
``@pgcatalog-snippets``, docs/snippets.md): the searched words highlighted
as the lexicon matched them, the best passages, HTML escaped, only for
what the user may open."""
import unittest

import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from Products.ZCTextIndex.Lexicon import CaseNormalizer
from Products.ZCTextIndex.Lexicon import Lexicon
from Products.ZCTextIndex.Lexicon import Splitter
from Products.ZCTextIndex.Lexicon import StopWordRemover
from Products.ZCTextIndex.ParseTree import ParseError
from Products.ZCTextIndex.QueryParser import QueryParser

from plone.pgcatalog.indexes.text.querytree import translate
from plone.pgcatalog.search.snippets import Terms
from plone.pgcatalog.search.snippets import snippet
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.testing import PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

FILLER = " ".join("filler%d" % n for n in range(60))


class TestSnippet(unittest.TestCase):
    """The passages and their highlights, with a lexicon that folds case
    and drops stop words."""

    def setUp(self):
        self.lexicon = Lexicon(Splitter(), CaseNormalizer(),
                               StopWordRemover())

    def make(self, query, text, **kw):
        node = translate(QueryParser(self.lexicon).parseQuery(query),
                         self.lexicon)
        return snippet(self.lexicon, Terms(node), [text], **kw)

    def test_words_as_the_lexicon_matches_them(self):
        self.assertEqual(self.make("quokka", "A Quokka smiles."),
                         "A <mark>Quokka</mark> smiles.")
        self.assertEqual(
            self.make("run*", "Running runs; ran. RUN"),
            "<mark>Running</mark> <mark>runs</mark>; ran. <mark>RUN</mark>")
        # a glob's pattern, a phrase's words; never the NOT part
        self.assertEqual(self.make("r?n", "run ran rain"),
                         "<mark>run</mark> <mark>ran</mark> rain")
        self.assertEqual(
            self.make('"happy quokka" AND NOT smile',
                      "happy quokka smile"),
            "<mark>happy</mark> <mark>quokka</mark> smile")

    def test_html_escaped(self):
        self.assertEqual(
            self.make("script", "<script>alert('x')</script> & more"),
            "&lt;<mark>script</mark>&gt;alert(&#x27;x&#x27;)&lt;/"
            "<mark>script</mark>&gt; &amp; more")

    def test_best_passages_in_text_order(self):
        text = ("quokka alone " + FILLER + " wombat and quokka together "
                + FILLER + " the end")
        made = self.make("quokka OR wombat", text, size=6, fragments=1)
        self.assertEqual(made, "\u2026filler59 <mark>wombat</mark> and "
                               "<mark>quokka</mark> together filler0\u2026")
        made = self.make("quokka OR wombat", text, size=6, fragments=2)
        self.assertTrue(made.startswith("<mark>quokka</mark> alone"), made)
        self.assertIn(" \u2026 filler59 <mark>wombat</mark>", made)
        self.assertTrue(made.endswith("\u2026"))

    def test_no_match_and_no_text(self):
        self.assertEqual(self.make("absent", "one two three", size=2),
                         "one two\u2026")
        self.assertEqual(self.make("absent", ""), "")
        self.assertEqual(self.make("absent", " ,;. "), "")
        # only a stop word searched: the text's beginning
        self.assertEqual(self.make("quokka", "the and of"),
                         "the and of")


class TestSnippets(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document"], "simple_publication_workflow")
        self.portal.invokeFactory(
            "Document", "open", title="Quokkas",
            description="Where " + FILLER + " the quokka lives")
        wf.doActionFor(self.portal["open"], "publish")
        self.portal.invokeFactory("Document", "closed",
                                  title="Private quokka notes")
        processQueue()

    def tearDown(self):
        logout()
        transaction.abort()

    def test_snippets_of_results(self):
        results = self.catalog.searchResults(SearchableText="quokka*",
                                             sort_on="getId")
        self.assertEqual([b.getId for b in results], ["closed", "open"])
        closed, opened = self.catalog.pgc_snippets(results, "quokka*")
        self.assertIn("<mark>quokka</mark> notes", closed)
        self.assertIn("<mark>Quokkas</mark>", opened)
        self.assertIn("the <mark>quokka</mark> lives", opened)
        # another text index, another size
        title, = self.catalog.pgc_snippets(results[:1], "notes",
                                           index="Title", size=2)
        self.assertEqual(title, "\u2026quokka <mark>notes</mark>")

    def test_what_the_user_may_not_open_has_none(self):
        results = list(self.catalog.searchResults(SearchableText="quokka",
                                                  sort_on="getId"))
        logout()
        self.assertEqual([bool(html) for html in self.catalog.pgc_snippets(
            results, "quokka")], [False, True])

    def test_bad_arguments(self):
        results = self.catalog.searchResults(SearchableText="quokka")
        for kw in ({"index": "portal_type"}, {"index": "nothing"},
                   {"size": 0}, {"size": 101}, {"fragments": 6},
                   {"fragments": True}, {"size": "3"}):
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                self.catalog.pgc_snippets(results, "quokka", **kw)
        with self.assertRaises(ValueError):
            self.catalog.pgc_snippets(list(results) * 60, "quokka")
        with self.assertRaises(ValueError):
            self.catalog.pgc_snippets(results, "quokka " * 200)
        with self.assertRaises(TypeError):
            self.catalog.pgc_snippets(results, None)
        with self.assertRaises(ParseError):
            self.catalog.pgc_snippets(results, "AND")


class TestSnippetsOverHTTP(unittest.TestCase):
    """``GET @pgcatalog-snippets?q=...&UID=...``: snippets of the results
    the user may see."""

    layer = PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

    def setUp(self):
        import requests
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document"], "simple_publication_workflow")
        self.portal.invokeFactory("Document", "open", title="Open quokka")
        wf.doActionFor(self.portal["open"], "publish")
        self.portal.invokeFactory("Document", "closed",
                                  title="Closed quokka <b>")
        processQueue()
        self.uids = [self.portal[i].UID() for i in ("open", "closed")]
        transaction.commit()
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        self.addCleanup(self.session.close)

    def get(self, auth=None, **params):
        return self.session.get(
            self.portal.absolute_url() + "/@pgcatalog-snippets",
            params=params, auth=auth)

    def test_snippets_for_each_user(self):
        from plone.app.testing import SITE_OWNER_NAME
        from plone.app.testing import SITE_OWNER_PASSWORD
        manager = self.get((SITE_OWNER_NAME, SITE_OWNER_PASSWORD),
                           q="quokka", UID=self.uids)
        self.assertEqual(manager.status_code, 200, manager.text[:500])
        items = manager.json()["items"]
        # (SearchableText: the id, the title, ...)
        self.assertEqual(items[self.uids[0]], "open Open <mark>quokka</mark>")
        self.assertIn("Closed <mark>quokka</mark> &lt;b&gt;",
                      items[self.uids[1]])
        anonymous = self.get(q="quokka", UID=self.uids)
        self.assertEqual(anonymous.status_code, 200, anonymous.text[:500])
        self.assertEqual(list(anonymous.json()["items"]), self.uids[:1])

    def test_bad_requests(self):
        for params in ({}, {"q": "quokka", "UID": ["x"] * 51},
                       {"q": "q" * 1001, "UID": self.uids},
                       {"q": "AND", "UID": self.uids},
                       {"q": "quokka", "UID": self.uids, "size": "x"},
                       {"q": "quokka", "UID": self.uids, "size": "0"},
                       {"q": "quokka", "UID": self.uids, "index": "UID"},
                       {"q": "quokka", "UID": self.uids, "fragments": "9"}):
            with self.subTest(params=params):
                answer = self.get(**params)
                self.assertEqual(answer.status_code, 400, answer.text[:300])
                self.assertNotIn("psycopg", answer.text)
