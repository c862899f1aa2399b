"""Suggestions while a user types (portal_catalog.pgc_suggest and
``@pgcatalog-suggest``, docs/suggest.md): every typed word a prefix of a
title word, checked against the objects a user may see (hypothesis-made
titles and prefixes; the Manager, a Member and Anonymous; private and
expired content), in the search page's relevance order."""
import unittest

import transaction
from DateTime import DateTime
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog.search.suggest import MAX_WORDS
from plone.pgcatalog.search.suggest import prefix_query
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.testing import PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

WORDS = ["plone", "plum", "pluto", "zope", "zoom", "catalog", "cat",
         "and", "postgres", "post"]
HYPOTHESIS = settings(max_examples=30, deadline=None, derandomize=True,
                      database=None,
                      suppress_health_check=[HealthCheck.too_slow])


class TestPrefixQuery(unittest.TestCase):

    def test_every_word_a_prefix(self):
        self.assertEqual(prefix_query("plone con"), "plone* AND con*")
        self.assertEqual(prefix_query("  Plo  "), "Plo*")

    def test_query_syntax_typed_is_a_separator(self):
        self.assertEqual(prefix_query('"a(b)* c?d-e+f'),
                         "a* AND b* AND c* AND d* AND e* AND f*")
        self.assertEqual(prefix_query("cats and dogs OR not"),
                         'cats* AND "and" AND dogs* AND "OR" AND "not"')

    def test_no_word(self):
        for text in ("", "   ", "*", '"()"', "-", "% _ \\ '", "\x00"):
            self.assertIsNone(prefix_query(text))

    def test_bounded(self):
        self.assertEqual(prefix_query("w " * 100),
                         " AND ".join(["w*"] * MAX_WORDS))
        self.assertLessEqual(len(prefix_query("x" * 100000)), 202)
        with self.assertRaises(TypeError):
            prefix_query(["plone"])


class TestSuggest(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document", "Folder"],
                                  "simple_publication_workflow")
        self.portal.invokeFactory("Folder", "f", title="Folder")
        wf.doActionFor(self.portal["f"], "publish")
        for n in range(24):
            # titles of two to four words of the vocabulary, some twice
            words = [WORDS[(n * k + k) % len(WORDS)] for k in
                     range(1, 2 + n % 4)]
            container = self.portal["f"] if n % 2 else self.portal
            container.invokeFactory("Document", "d%d" % n,
                                    title=" ".join(words).title())
            doc = container["d%d" % n]
            if n % 3:
                wf.doActionFor(doc, "publish")
            if n % 7 == 0:
                doc.setExpirationDate(DateTime() - 1)
                doc.reindexObject()
        processQueue()

    def tearDown(self):
        logout()
        transaction.abort()

    def as_user(self, who):
        if who == "manager":
            setRoles(self.portal, TEST_USER_ID, ["Manager"])
            login(self.portal, TEST_USER_NAME)
        elif who == "member":
            setRoles(self.portal, TEST_USER_ID, ["Member"])
            login(self.portal, TEST_USER_NAME)
        else:
            logout()

    def visible_paths(self):
        """The paths of the Documents this user may list (searchResults:
        its roles and, unless it may see them, no expired entries)."""
        return {b.getPath() for b in self.catalog.searchResults(
            portal_type="Document")}

    def by_hand(self, text, path=None):
        """The paths of the visible Documents whose title has every word
        of ``text`` as a prefix of one of its words (the objects' own
        titles)."""
        typed = text.lower().split()
        found = set()
        for found_path in self.visible_paths():
            obj = self.portal.unrestrictedTraverse(found_path)
            words = obj.Title().lower().split()
            if path and not found_path.startswith(path + "/"):
                continue
            if all(any(w.startswith(t) for w in words) for t in typed):
                found.add(found_path)
        return found

    @HYPOTHESIS
    @given(typed=st.lists(st.sampled_from(
               ["p", "pl", "plu", "zo", "cat", "post", "and", "x", "Zop"]),
               min_size=1, max_size=2),
           who=st.sampled_from(["manager", "member", "anonymous"]),
           in_folder=st.booleans())
    def test_suggestions_are_the_visible_prefix_matches(self, typed, who,
                                                        in_folder):
        self.as_user(who)
        text = " ".join(typed)
        path = "/plone/f" if in_folder else None
        query = {"portal_type": "Document"}
        if path:
            query["path"] = path
        everything = self.catalog.pgc_suggest(text, limit=50, query=query)
        self.assertEqual({b.getPath() for b in everything},
                         self.by_hand(text, path))
        # the first page of the search page's order (relevance)
        page = self.catalog.pgc_suggest(text, limit=3, query=query)
        expected = self.catalog.searchResults(
            dict(query, Title=prefix_query(text)))
        self.assertEqual([b.getPath() for b in page],
                         [b.getPath() for b in expected[:3]])

    def test_private_and_expired_never_suggested_to_anonymous(self):
        self.as_user("manager")
        every = {b.getPath() for b in self.catalog.pgc_suggest(
            "p", limit=50, portal_type="Document")}
        self.as_user("anonymous")
        public = {b.getPath() for b in self.catalog.pgc_suggest(
            "p", limit=50, portal_type="Document")}
        self.assertTrue(public)
        self.assertLess(public, every)
        for path in public:
            obj = self.portal.unrestrictedTraverse(path)
            self.assertEqual(self.portal.portal_workflow.getInfoFor(
                obj, "review_state"), "published")
            self.assertGreater(obj.expires(), DateTime())

    def test_bad_arguments(self):
        for kw in ({"limit": 0}, {"limit": 51}, {"limit": "3"},
                   {"limit": True}, {"index": "portal_type"},
                   {"index": "nothing"}, {"index": ["Title"]}):
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                self.catalog.pgc_suggest("plo", **kw)
        with self.assertRaises(TypeError):
            self.catalog.pgc_suggest(None)
        # no word, or none the lexicon indexes: nothing to suggest (no
        # ParseError)
        for text in ("  * ", "%", "'", "\ud800x", "a" * 5000):
            with self.subTest(text=text):
                self.assertEqual(self.catalog.pgc_suggest(text), [])
        # odd characters: an answer, never a driver error
        for text in ("pl\x00", "p\x00l \x01", "pl%", "pl_", "pl\\"):
            with self.subTest(text=text):
                self.assertIsInstance(self.catalog.pgc_suggest(text), list)

    def test_another_text_index(self):
        self.portal.invokeFactory("Document", "desc", title="Nothing",
                                  description="Quokka habitat")
        processQueue()
        self.assertEqual([b.getId for b in self.catalog.pgc_suggest(
            "quok hab", index="Description")], ["desc"])
        self.assertEqual(self.catalog.pgc_suggest("quok"), [])


class TestSuggestOverHTTP(unittest.TestCase):
    """``GET @pgcatalog-suggest?q=...``: the user's suggestions below the
    object asked, the site's searchable types."""

    layer = PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

    def setUp(self):
        import requests
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document", "Folder"],
                                  "simple_publication_workflow")
        self.portal.invokeFactory("Folder", "s", title="Plone section")
        for n in range(6):
            container = self.portal["s"] if n % 2 else self.portal
            container.invokeFactory("Document", "p%d" % n,
                                    title="Plone page %d" % n)
            if n % 3:
                wf.doActionFor(container["p%d" % n], "publish")
        wf.doActionFor(self.portal["s"], "publish")
        processQueue()
        transaction.commit()
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        self.addCleanup(self.session.close)

    def get(self, where, auth=None, **params):
        return self.session.get(where.absolute_url() + "/@pgcatalog-suggest",
                                params=params, auth=auth)

    def test_suggestions_for_each_user(self):
        from plone.app.testing import SITE_OWNER_NAME
        from plone.app.testing import SITE_OWNER_PASSWORD
        manager = self.get(self.portal, (SITE_OWNER_NAME,
                                         SITE_OWNER_PASSWORD), q="plo pa")
        self.assertEqual(manager.status_code, 200, manager.text[:500])
        items = manager.json()["items"]
        self.assertEqual(sorted(i["title"] for i in items),
                         ["Plone page %d" % n for n in range(6)])
        first = items[0]
        self.assertEqual(set(first), {"@id", "@type", "title", "description",
                                      "review_state", "UID"})
        self.assertEqual(first["@type"], "Document")
        anonymous = self.get(self.portal, q="plo pa")
        self.assertEqual(anonymous.status_code, 200, anonymous.text[:500])
        self.assertEqual(sorted(i["title"] for i in anonymous.json()["items"]),
                         ["Plone page %d" % n for n in (1, 2, 4, 5)])
        # below the object asked; the section itself is a Folder, a
        # searchable type
        section = self.get(self.portal["s"], q="plo",
                           auth=(SITE_OWNER_NAME, SITE_OWNER_PASSWORD))
        self.assertEqual(sorted(i["title"] for i in section.json()["items"]),
                         ["Plone page 1", "Plone page 3", "Plone page 5",
                          "Plone section"])
        only = self.get(self.portal, q="plo", portal_type="Folder", limit=1)
        self.assertEqual([i["title"] for i in only.json()["items"]],
                         ["Plone section"])

    def test_bad_requests(self):
        for params in ({}, {"q": "plo", "limit": "x"},
                       {"q": "plo", "limit": "0"}, {"q": "plo", "limit": "51"},
                       {"q": "plo", "limit": "1e9"}, {"q": ["pl", "pa"]},
                       {"q": "plo", "portal_type:int": "3"}):
            with self.subTest(params=params):
                answer = self.get(self.portal, **params)
                self.assertEqual(answer.status_code, 400, answer.text[:300])
                self.assertNotIn("psycopg", answer.text)
        for text in ("%", "'", "pl\x00", "\u00e9" * 300):
            with self.subTest(text=text):
                answer = self.get(self.portal, q=text)
                self.assertEqual(answer.status_code, 200, answer.text[:300])
                self.assertIsInstance(answer.json()["items"], list)
