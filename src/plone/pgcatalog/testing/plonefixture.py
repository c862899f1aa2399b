"""plone.app.testing's ``PloneFixture`` on plone.pgcatalog: the patches
``pgcatalog-testrunner`` installs (``plone.pgcatalog.testing.runner`` says
what they do).

A module of its own because it needs plone.app.testing (the ``test`` or
``testrunner`` extra), which a site's install does not bring: the runner
imports it only to run tests, so its ``--help`` works everywhere.
"""
import os

from Acquisition import aq_base
from plone.app.testing import applyProfile
from plone.app.testing.interfaces import PLONE_SITE_ID
from plone.app.testing.layers import PloneFixture
from plone.testing import zodb
from zope.component.hooks import getSite
from zope.component.hooks import setHooks
from zope.component.hooks import setSite
from zope.configuration import xmlconfig

import plone.pgcatalog
from plone.pgcatalog.pg import db
from plone.pgcatalog.testing import layers
from plone.pgcatalog.testing import pgserver
from plone.pgcatalog.tool import PGCatalogTool

PROFILE = "plone.pgcatalog:default"

_live_databases = []


def _current_dsn():
    return os.environ.get("PGCATALOG_DSN")


def _snapshot():
    """(dsn, rows) of the catalog database in use, or None without one."""
    dsn = _current_dsn()
    if not dsn or dsn not in _live_databases:
        return None
    return dsn, layers.snapshot()


def _restore(state):
    if state is None:
        return
    dsn, rows = state
    if dsn != _current_dsn() or dsn not in _live_databases:
        return  # its database is gone already: nothing to put back
    layers.restore(rows)


def _patched_stack(orig):
    def stackDemoStorage(db=None, name=None):
        new = orig(db, name)
        state = _snapshot()
        if state is not None:
            close = new.close

            def close_and_restore(*args, **kw):
                try:
                    return close(*args, **kw)
                finally:
                    if new.__dict__.pop("_pgcatalog_state", None) is not None:
                        _restore(state)

            new._pgcatalog_state = state
            new.close = close_and_restore
        return new
    stackDemoStorage.__doc__ = orig.__doc__
    stackDemoStorage._pgcatalog_original = orig
    return stackDemoStorage


def _database_up(layer):
    database = layers.PGDatabaseLayer()
    database.setUp()
    _live_databases.append(database.dsn)
    layer._pgcatalog_database = database


def _database_down(layer):
    database = layer.__dict__.pop("_pgcatalog_database", None)
    if database is None:
        return
    if database.dsn in _live_databases:
        _live_databases.remove(database.dsn)
    database.tearDown()


def install_patches():
    """Make PloneFixture (and every layer on it) use plone.pgcatalog.

    Idempotent. Called by ``main``; call it yourself (before layers are set
    up) to get the same behaviour under another test runner.
    """
    if PloneFixture.__dict__.get("_pgcatalog_patched"):
        return
    PloneFixture._pgcatalog_patched = True

    zodb.stackDemoStorage = _patched_stack(zodb.stackDemoStorage)

    orig_setUp = PloneFixture.setUp
    orig_tearDown = PloneFixture.tearDown
    orig_setUpZCML = PloneFixture.setUpZCML
    orig_setUpDefaultContent = PloneFixture.setUpDefaultContent

    def setUp(self):
        # The database first: the fixture's own stacked DemoStorage then
        # snapshots the (empty) catalog and empties it again when popped.
        _database_up(self)
        try:
            orig_setUp(self)
        except BaseException:
            _database_down(self)
            raise

    def tearDown(self):
        try:
            orig_tearDown(self)
        finally:
            _database_down(self)

    def setUpZCML(self):
        orig_setUpZCML(self)
        xmlconfig.file("configure.zcml", plone.pgcatalog,
                       context=self["configurationContext"])

    def setUpDefaultContent(self, app):
        orig_setUpDefaultContent(self, app)
        portal = app[PLONE_SITE_ID]
        setHooks()
        site = getSite()
        setSite(portal)
        try:
            applyProfile(portal, PROFILE)
        finally:
            setSite(site)
        if not isinstance(aq_base(portal["portal_catalog"]), PGCatalogTool):
            raise RuntimeError("%s did not install plone.pgcatalog" % PROFILE)

    PloneFixture.setUp = setUp
    PloneFixture.tearDown = tearDown
    PloneFixture.setUpZCML = setUpZCML
    PloneFixture.setUpDefaultContent = setUpDefaultContent


def drop_leftovers():
    """Drop the databases of layers never torn down (an interrupted
    run)."""
    for dsn in list(_live_databases):
        try:
            db.close_pools()
            pgserver.drop_database(dsn)
        except Exception:  # pragma: no cover - best effort at exit
            pass
