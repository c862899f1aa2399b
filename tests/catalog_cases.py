"""Test case bases shared by several test modules."""
import os
import unittest

from plone.app.testing import login
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME

from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


class ManagerWithoutCache(unittest.TestCase):
    """A Manager on the functional layer's site, the result cache off
    (each answer read from PostgreSQL)."""

    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self._cache = os.environ.get("PGCATALOG_CACHE")
        os.environ["PGCATALOG_CACHE"] = "off"
        self.addCleanup(self._restore_cache)
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog

    def _restore_cache(self):
        if self._cache is None:
            os.environ.pop("PGCATALOG_CACHE", None)
        else:
            os.environ["PGCATALOG_CACHE"] = self._cache
