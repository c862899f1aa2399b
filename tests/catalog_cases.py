"""Test case bases and helpers shared by several test modules."""
import os
import unittest

from plone.app.testing import login
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg.fragment import q
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


def rows(key):
    """Every row of catalog ``key``: {path: (index document, metadata,
    {text index: tsvector})} (committed state)."""
    with db.get_pool().connection() as conn:
        found = db.run(conn, q(
            "SELECT e.path, e.idx, m.meta::jsonb, (SELECT "
            "jsonb_object_agg(t.name, t.tsv::text) FROM pgcatalog_text t "
            "WHERE t.rid = e.rid) FROM pgcatalog_entries e JOIN "
            "pgcatalog_catalogs c ON c.cid = e.cid LEFT JOIN pgcatalog_meta "
            "m ON m.rid = e.rid WHERE c.key = {}", key)).fetchall()
    # metadata as {column: stored value} (a record names its layout)
    return {path: (idx, None if meta is None else codec.meta_dict(meta),
                   text or {}) for path, idx, meta, text in found}
