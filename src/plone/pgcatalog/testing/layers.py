"""Test layers: a Plone site with plone.pgcatalog installed.

The PostgreSQL server is ``PGCATALOG_DSN`` or a private embedded one
(:mod:`plone.pgcatalog.testing.pgserver`); the fixture creates a fresh database.

Catalog state is isolated the way ZODB isolates with DemoStorage stacking:
the catalog rows are snapshotted when a layer (and each functional test)
starts and restored when it ends, so what a layer or a test commits
disappears at its teardown.  Integration tests need nothing: their
transaction is aborted, and the catalog's PostgreSQL transaction with it.
"""
import os

from plone.app.testing import PLONE_FIXTURE
from plone.app.testing import FunctionalTesting
from plone.app.testing import IntegrationTesting
from plone.app.testing import PloneSandboxLayer
from plone.app.testing import applyProfile
from plone.testing import Layer
from plone.testing.zope import WSGI_SERVER_FIXTURE

import plone.pgcatalog
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import store
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing import pgserver

#: in the order they are filled again: the hot names after the entries
#: (whose trigger then writes no hot row), then the key sets, and the hot
#: rows last (a restored set keeps its id: the identity sequence has only
#: moved past it since the snapshot)
_TABLES = (schema.CATALOGS, schema.ENTRIES, schema.META, schema.TEXT,
           schema.LANGTEXT, schema.COMMITS, schema.INDEXES, schema.HOT_NAMES, schema.HOT_SETS,
           schema.HOT_FREE_SETS, schema.HOT)
#: emptied with them, filled again by the trigger of the rows restored
_DERIVED = (schema.HOT_COUNTS, schema.HOT_KEY_COUNTS, schema.TEXT_TOTALS,
            schema.TEXT_DF, schema.POSTINGS, schema.LANGPOSTINGS)


def snapshot():
    """All catalog rows of the configured database (small test data)."""
    db.ensure_schema()
    with db.get_pool().connection() as conn:
        data = {}
        for table in _TABLES:
            data[table] = db.run(conn, q(
                "SELECT row_to_json(t)::text FROM {} t", ident(table))
            ).fetchall()
        return data


def restore(data):
    """Put the catalog rows back as ``snapshot`` found them.

    This rewinds the catalogs' change stamps, which the process-wide caches
    of catalog-wide answers take for "unchanged" when they come round again
    (a later test's commit reaching the same stamp would be served this
    test's unique values): those caches are emptied too."""
    store.forget_caches()
    with db.get_pool().connection() as conn:
        with conn.transaction():
            db.run(conn, q("TRUNCATE {} CASCADE",
                           join(", ", [ident(t) for t in
                                       _TABLES + _DERIVED])))
            for table in _TABLES:
                rows = [r[0] for r in data[table]]
                if rows:
                    db.run(conn, q(
                        "INSERT INTO {} SELECT * FROM "
                        "json_populate_recordset(NULL::{}, {}::json)",
                        ident(table), ident(table), "[" + ",".join(rows) + "]"))


class PGDatabaseLayer(Layer):
    """A fresh PostgreSQL database, set as PGCATALOG_DSN for the layer."""

    def setUp(self):
        self._old_dsn = os.environ.get("PGCATALOG_DSN")
        self.dsn = pgserver.fresh_database("pgcatalog_layer")
        os.environ["PGCATALOG_DSN"] = self.dsn
        db.ensure_schema(self.dsn)

    def tearDown(self):
        db.close_pools()
        if self._old_dsn is None:
            os.environ.pop("PGCATALOG_DSN", None)
        else:
            os.environ["PGCATALOG_DSN"] = self._old_dsn
        try:
            pgserver.drop_database(self.dsn)
        except Exception:  # pragma: no cover - best effort
            pass


PGCATALOG_DATABASE = PGDatabaseLayer()


class CatalogStateLayerMixin:
    """Snapshot catalog rows at setUp, restore them at tearDown."""

    def setUp(self):
        self._pgc_snapshot = snapshot()
        super().setUp()

    def tearDown(self):
        super().tearDown()
        restore(self._pgc_snapshot)


class PGCatalogFixture(CatalogStateLayerMixin, PloneSandboxLayer):

    defaultBases = (PGCATALOG_DATABASE, PLONE_FIXTURE)

    def setUpZope(self, app, configurationContext):
        self.loadZCML(package=plone.pgcatalog)

    def setUpPloneSite(self, portal):
        applyProfile(portal, "plone.pgcatalog:default")


PGCATALOG_FIXTURE = PGCatalogFixture()


class PGCatalogFunctionalTesting(FunctionalTesting):
    """Functional testing: each test's committed catalog rows are undone."""

    def testSetUp(self):
        self._pgc_snapshot = snapshot()
        super().testSetUp()

    def testTearDown(self):
        super().testTearDown()
        restore(self._pgc_snapshot)


class PGCatalogRestAPIFixture(CatalogStateLayerMixin, PloneSandboxLayer):
    """The site with plone.restapi installed too."""

    defaultBases = (PGCATALOG_FIXTURE,)

    def setUpZope(self, app, configurationContext):
        import plone.restapi  # the test extra's
        self.loadZCML(package=plone.restapi)

    def setUpPloneSite(self, portal):
        applyProfile(portal, "plone.restapi:default")


PGCATALOG_RESTAPI_FIXTURE = PGCatalogRestAPIFixture()


class PGCatalogMultilingualFixture(CatalogStateLayerMixin, PloneSandboxLayer):
    """The site with plone.app.multilingual: English (the default), German
    and French, a root folder per language (``/en``, ``/de``, ``/fr``)."""

    defaultBases = (PGCATALOG_FIXTURE,)

    def setUpZope(self, app, configurationContext):
        import plone.app.multilingual  # the test extra's
        self.loadZCML(package=plone.app.multilingual)

    def setUpPloneSite(self, portal):
        from plone.app.multilingual.browser.setup import SetupMultilingualSite
        from Products.CMFCore.utils import getToolByName
        languages = getToolByName(portal, "portal_languages")
        for code in ("de", "fr"):
            languages.addSupportedLanguage(code)
        applyProfile(portal, "plone.app.multilingual:default")
        SetupMultilingualSite().setupSite(portal)


PGCATALOG_MULTILINGUAL_FIXTURE = PGCatalogMultilingualFixture()

PGCATALOG_INTEGRATION_TESTING = IntegrationTesting(
    bases=(PGCATALOG_FIXTURE,), name="PGCatalog:Integration")
PGCATALOG_FUNCTIONAL_TESTING = PGCatalogFunctionalTesting(
    bases=(PGCATALOG_FIXTURE,), name="PGCatalog:Functional")
PGCATALOG_MULTILINGUAL_INTEGRATION_TESTING = IntegrationTesting(
    bases=(PGCATALOG_MULTILINGUAL_FIXTURE,), name="PGCatalog:Multilingual")
#: a real WSGI server in front of the site with plone.restapi: HTTP clients
PGCATALOG_RESTAPI_FUNCTIONAL_TESTING = PGCatalogFunctionalTesting(
    bases=(PGCATALOG_RESTAPI_FIXTURE, WSGI_SERVER_FIXTURE),
    name="PGCatalog:RestAPI")
