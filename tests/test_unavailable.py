"""PostgreSQL still away after Zope's retries: the visitor gets a 503 with
``Retry-After`` (unavailable.py), as a page for browsers and as JSON for
the API, never Plone's error page and its 500; a catalog snapshot ahead of
the objects' through every retry is a 503 too (patches.py).

The catalog's search raises ``DatabaseUnavailable`` here as it does when
its connection cannot be had (tests/test_http_restart.py stops a real
server under HTTP load).
"""
import json
import unittest

import transaction
from Acquisition import aq_base
from plone.app.testing import SITE_OWNER_NAME
from plone.app.testing import SITE_OWNER_PASSWORD
from plone.testing.zope import Browser

from plone.pgcatalog.errors import CatalogReadConflictError
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.testing import PGCATALOG_RESTAPI_FUNCTIONAL_TESTING


class TestUnavailable(unittest.TestCase):
    layer = PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        transaction.commit()
        self.tool_class = type(aq_base(self.portal.portal_catalog))

        def unreachable(*args, **kw):
            raise DatabaseUnavailable(
                "plone.pgcatalog could not get a PostgreSQL connection "
                "(PoolTimeout)")

        self.saved = self.tool_class.searchResults
        self.tool_class.searchResults = unreachable

    def tearDown(self):
        self.tool_class.searchResults = self.saved

    def browser(self, accept):
        browser = Browser(self.layer["app"])
        browser.handleErrors = True
        browser.raiseHttpErrors = False
        browser.addHeader("Authorization", "Basic %s:%s" % (
            SITE_OWNER_NAME, SITE_OWNER_PASSWORD))
        browser.addHeader("Accept", accept)
        return browser

    def search_page(self):
        """The classic search page, answered 503 with Retry-After."""
        browser = self.browser("text/html,application/xhtml+xml")
        browser.open(self.portal.absolute_url() + "/@@search?SearchableText=x")
        self.assertEqual(browser.headers["Status"], "503 Service Unavailable")
        self.assertEqual(browser.headers["Retry-After"], "5")
        return browser

    def api_error_type(self):
        """The error type of plone.restapi's search, answered 503."""
        browser = self.browser("application/json")
        browser.open(self.portal.absolute_url() + "/@search?SearchableText=x")
        self.assertEqual(browser.headers["Status"], "503 Service Unavailable")
        answer = json.loads(browser.contents)
        return answer.get("error_type") or answer.get("type")

    def test_page(self):
        browser = self.search_page()
        self.assertEqual(browser.headers["Cache-Control"], "no-store")
        self.assertIn("Please try again shortly", browser.contents)
        # nothing of the error's own text or the server's address
        self.assertNotIn("PoolTimeout", browser.contents)
        self.assertNotIn("Traceback", browser.contents)

    def test_api(self):
        """The JSON API's error is a 503 too.  In a Zope instance (one
        component registry) this package's view answers, as the page
        does (tests/test_http_restart.py); in this test layer, whose
        plone.restapi configuration is stacked over the package's,
        plone.rest's error view answers, with the status Zope knows for
        the error (patches.py)."""
        self.assertIn(self.api_error_type(),
                      ("ServiceUnavailable", "DatabaseUnavailable"))

    def test_read_conflicts_past_the_retries(self):
        """A catalog snapshot that stayed ahead of the objects' through
        every retry (writers committing in between each time) gets the
        same 503 and Retry-After: transient, not a 500."""
        calls = []

        def ahead(*args, **kw):
            calls.append(1)
            raise CatalogReadConflictError(
                "the catalog shows commits that this transaction's "
                "objects do not")

        self.tool_class.searchResults = ahead
        browser = self.search_page()
        self.assertIn("Please try again shortly", browser.contents)
        self.assertNotIn("Traceback", browser.contents)
        # Zope's publisher retried it first (three times)
        self.assertEqual(len(calls), 4)
        del calls[:]
        # the JSON API (plone.rest's error view in this layer, see
        # test_api)
        self.assertIn(self.api_error_type(),
                      ("ServiceUnavailable", "CatalogReadConflictError"))
        self.assertEqual(len(calls), 4)

    def test_other_errors_keep_their_status(self):
        browser = self.browser("text/html")
        browser.open(self.portal.absolute_url() + "/no-such-page")
        self.assertEqual(browser.headers["Status"], "404 Not Found")
