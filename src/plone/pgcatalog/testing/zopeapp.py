"""A real Zope application on a given ZODB database, for tests and benchmarks.

``start_zope(db)`` starts Zope the way ``Zope2.startup_wsgi()`` does for a
WSGI instance, but with the database passed in (e.g. RelStorage on
PostgreSQL) and the ZCML of a standard instance; plone.autoinclude loads the
installed add-ons.  ``Request(db)`` is one synthetic request (its own ZODB
connection, a request, a logged-in user, the site as local site).
"""
import os

import AccessControl
import App.config
import transaction
import Zope2
import Zope2.App.startup
import ZODB
from AccessControl.SecurityManagement import newSecurityManager
from AccessControl.SecurityManagement import noSecurityManager
from plone.autoinclude import loader
from Testing.makerequest import makerequest
from zope.component.hooks import setSite
from zope.configuration import xmlconfig
from zope.globalrequest import setRequest
from Zope2.App import zcml
from Zope2.App.ClassFactory import ClassFactory
from Zope2.App.schema import configure_vocabulary_registry


try:  # optional (the test and bench extras): only open_relstorage needs it
    from relstorage.adapters.postgresql import PostgreSQLAdapter
    from relstorage.options import Options
    from relstorage.storage import RelStorage
except ImportError:  # pragma: no cover - depends on install
    RelStorage = None

SITE_ZCML = """\
<configure
    xmlns="http://namespaces.zope.org/zope"
    xmlns:meta="http://namespaces.zope.org/meta"
    xmlns:five="http://namespaces.zope.org/five">
  <include package="Zope2.App" />
  <include package="Products.Five" />
  <meta:redefinePermission from="zope2.Public" to="zope.Public" />
  <five:loadProducts file="meta.zcml" />
  <five:loadProducts />
  <five:loadProductsOverrides />
  <securityPolicy component="AccessControl.security.SecurityPolicy" />
</configure>
"""

RELSTORAGE_SETTINGS = {
    "keep_history": False,
    "cache_local_mb": 10,
    "commit_lock_timeout": 30,
}


class OneDatabase:
    """The part of Zope's DBTab that ``Zope2.App.startup`` uses, for one
    database mounted at ``/``."""

    def __init__(self, db):
        self.db = db
        self.databases = {"main": db}

    def getDatabase(self, mount_path=None, name=None, is_root=0):
        return self.db

    def listMountPaths(self):
        return [("/", "main")]


def open_relstorage(dsn, cache_size, workdir, **settings):
    """A ZODB.DB on history-free RelStorage (PostgreSQL) at ``dsn``."""
    if RelStorage is None:  # pragma: no cover - depends on install
        raise RuntimeError(
            "RelStorage is not installed (pip install "
            "'pgcatalog-plone[test]' or 'pgcatalog-plone[bench]').")
    options = dict(RELSTORAGE_SETTINGS)
    options["blob_dir"] = os.path.join(workdir, "blobs")
    options.update(settings)
    options = Options(**options)
    adapter = PostgreSQLAdapter(dsn=dsn, options=options)
    storage = RelStorage(adapter, options=options)
    db = ZODB.DB(storage, cache_size=cache_size, database_name="main")
    # set after the fact, as Zope 5 does: ZODB.DB takes class_factory only
    # from ZODB 6.3 on; Plone 6.1 (Zope 5.14) has ZODB 6.2
    db.classFactory = ClassFactory
    return db


def _autoinclude_without(module_name):
    """Leave ``module_name`` out of what plone.autoinclude loads.

    Its ``plone.autoinclude.plugin`` entry point names the module: the
    loader loads that module's ZCML whatever its cache of known modules says,
    so the module is dropped from the loader's answer."""
    load_packages = loader.load_packages

    def load_packages_without(target=""):
        dists = load_packages(target)
        dists.pop(module_name, None)
        return dists

    loader.load_packages = load_packages_without


def start_zope(db, workdir, with_pgcatalog=True):
    """Start Zope on ``db`` (once per process)."""
    cfg = App.config.DefaultConfiguration()
    cfg.instancehome = cfg.clienthome = workdir
    cfg.debug_mode = False
    cfg.dbtab = OneDatabase(db)
    App.config.setConfiguration(cfg)
    AccessControl.setImplementation("C")
    AccessControl.setDefaultBehaviors(True, True, False)
    if not with_pgcatalog:
        _autoinclude_without("plone.pgcatalog")

    def load_zcml():
        zcml._context = xmlconfig.string(SITE_ZCML)
        zcml._initialized = True
        configure_vocabulary_registry()

    Zope2.App.startup.load_zcml = load_zcml
    Zope2.startup_wsgi()


class Request:
    """One synthetic request on its own ZODB connection.

    Leaving commits (``commit=True``) or aborts the transaction and closes
    the connection, which trims its cache to the configured size."""

    def __init__(self, db, site_id, user, commit=False):
        self.db = db
        self.site_id = site_id
        self.user = user
        self.commit = commit

    def __enter__(self):
        self.conn = self.db.open()
        transaction.begin()
        self.app = makerequest(self.conn.root()["Application"])
        self.request = self.app.REQUEST
        setRequest(self.request)
        self.site = self.app[self.site_id] if self.site_id else None
        if self.site is not None:
            setSite(self.site)
        acl = self.app.acl_users
        newSecurityManager(self.request, acl.getUser(self.user).__of__(acl))
        return self

    def __exit__(self, exc_type, *exc):
        try:
            if self.commit and exc_type is None:
                try:
                    transaction.commit()
                except BaseException:
                    # as the publisher does: the failed transaction ends
                    transaction.abort()
                    raise
            else:
                transaction.abort()
        finally:
            noSecurityManager()
            setSite(None)
            setRequest(None)
            self.request.close()
            self.conn.close()
        return False
