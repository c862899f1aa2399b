"""``portal_catalog``: the ZCatalog / CMFPlone catalog API on PostgreSQL.

Built on ``UniqueObject`` + ``Folder`` (the ZCTextIndex lexicons stay
sub-objects, as in ZCatalog); provides the interfaces Plone looks up.  The
API comes in parts, one mixin each (``toolapi/``): searching (CMFPlone's
security additions; ``search/run.py`` runs the compiled plan), indexing
(buffered in the transaction's session), records, indexes and columns,
rebuilding.  This module holds the class, its PostgreSQL plumbing (the
store of the current transaction) and the ZMI.

Web surface: every method states whether ZPublisher may publish it
(``zpublish``) and which permission guards it (for restricted code too), as
in stock CMFPlone or narrower: the catalog API is for Python and restricted
code, not for URLs.  The ZMI actions that write are published for POST only
and check plone.protect's authenticator, because plone.protect's automatic
CSRF check sees ZODB writes only and ours go to PostgreSQL
(``tests/test_web_surface.py`` holds the measured table).
"""
import uuid

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from Acquisition import aq_base
from BTrees.Length import Length
from OFS.Folder import Folder
from plone.base.interfaces import IPloneCatalogTool
from Products.CMFCore.interfaces import ICatalogTool
from Products.CMFCore.utils import UniqueObject
from Products.PageTemplates.PageTemplateFile import PageTemplateFile
from Products.ZCatalog.interfaces import IZCatalog
from Products.ZCatalog.ZCatalogIndexes import ZCatalogIndexes
from zope.interface import implementer
from ZPublisher import zpublish

from plone.pgcatalog import logger
from plone.pgcatalog import settings
from plone.pgcatalog.catalog import CatalogConfig
from plone.pgcatalog.changes import ChangeCounters
from plone.pgcatalog.ops import rebuild
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import standby
from plone.pgcatalog.pg.session import current_session
from plone.pgcatalog.pg.store import store_for
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.toolapi.admin import ADMIN_TABS
from plone.pgcatalog.toolapi.admin import AdminAPI
from plone.pgcatalog.toolapi.facets import FacetsAPI
from plone.pgcatalog.toolapi.indexes import IndexesAPI
from plone.pgcatalog.toolapi.indexing import IndexingAPI
from plone.pgcatalog.toolapi.language import LanguageTextAPI
from plone.pgcatalog.toolapi.maintenance import MaintenanceAPI
from plone.pgcatalog.toolapi.records import RecordsAPI
from plone.pgcatalog.toolapi.searching import SearchAPI
from plone.pgcatalog.toolapi.shadow import SHADOW_TABS
from plone.pgcatalog.toolapi.shadow import ShadowAPI
from plone.pgcatalog.toolapi.snippets import SnippetsAPI
from plone.pgcatalog.toolapi.suggest import SuggestAPI
from plone.pgcatalog.toolapi.verifying import VerifyAPI


@implementer(IPloneCatalogTool, IZCatalog, ICatalogTool)
class PGCatalogTool(SearchAPI, FacetsAPI, SuggestAPI, SnippetsAPI,
                    IndexingAPI, RecordsAPI, IndexesAPI, LanguageTextAPI,
                    MaintenanceAPI,
                    AdminAPI, ShadowAPI, VerifyAPI, UniqueObject, Folder):
    """Plone's catalog tool, with every index kept in PostgreSQL."""

    id = "portal_catalog"
    meta_type = "Plone Catalog Tool"
    title = ""
    _pgc_is_tool = True
    _pgc_key = None
    threshold = 10000
    long_query_time = 0.1
    unwrapobjects = False

    security = ClassSecurityInfo()

    _properties = (
        {"id": "title", "type": "string", "mode": "w"},
        {"id": "unwrapobjects", "type": "boolean", "mode": "w"},
    )

    # Folder's tabs without "View": stock CMFPlone has none, and it would
    # send a Member's manage_workspace to the tool's URL.
    manage_options = (
        {"action": "manage_main", "label": "Contents"},
        {"action": "manage_catalogStatus", "label": "Catalog"},
    ) + ADMIN_TABS + SHADOW_TABS + (
        {"action": "manage_catalogVerify", "label": "Verify"},
    ) + tuple(o for o in Folder.manage_options[1:] if o["label"] != "View")

    def __init__(self, id=None):
        self.id = id or "portal_catalog"
        self._catalog = CatalogConfig()
        self.Indexes = ZCatalogIndexes()
        self._pgc_key = uuid.uuid4().hex

    # -- PostgreSQL plumbing --------------------------------------------------
    def _pgc_session(self):
        session = current_session(jar=self._p_jar)
        if session.site_settings is None:
            # the site's settings (its registry's), over the process's:
            # read once per transaction
            session.use_settings(settings.site_settings())
        return session

    def _pgc_store(self):
        """This catalog's store in the current transaction (store.py)."""
        session = self._pgc_session()
        store = session.cache.get(("store", self._pgc_key))
        if store is not None and store.on_write is not None:
            return store
        store = store_for(session, self._pgc_key,
                          bool(self.__dict__.get("_pgc_created")),
                          self._pgc_changed)
        # the transaction's catalog snapshot must agree with this ZODB
        # snapshot's count of the catalog's commits (consistency.py)
        store.watch(lambda: result_cache.generation(self))
        return store

    def _pgc_changed(self):
        """This transaction writes the catalog (its first write, or one
        after its changes were counted): have them counted before the
        commit starts (``_pgc_count_changes``)."""
        base = aq_base(self)
        if base._p_jar is not None and base._p_oid is not None:
            # the commit fails (ConflictError, retried) if the tool changed
            # meanwhile: an online build registered, switched or cancelled
            # (rebuild.py); checked when the ZODB connection commits changes
            base._p_jar.readCurrent(base)
        session = self._pgc_session()
        session.count_hook(self._pgc_key, "registered")
        session.txn.addBeforeCommitHook(self._pgc_count_changes)

    def _pgc_count_changes(self):
        """Before the commit starts: count what this transaction changed in
        the catalog, where readers see it through their ZODB connection
        (cache.py, changes.py): the generation goes up by one if the
        transaction commits catalog writes (as the change stamp does), and
        the change counters by what the writes changed.  Runs again if the
        catalog is written after it (a later before-commit hook)."""
        session = self._pgc_session()
        key = self._pgc_key
        session.count_hook(key, "counted")
        store = self._pgc_store()
        try:
            changes = session.take_changes(store.cid)
        except Exception:
            if session.failed is None:
                raise
            # the writes were refused (a conflict, PostgreSQL gone): the
            # commit fails with that error in tpc_vote, where the
            # transaction's resources are aborted as for any vote
            return
        base = aq_base(self)
        if session.commits_catalog(store.cid) and \
                session.count_generation(key):
            # getattr, not __dict__: a ghost's __dict__ is empty until
            # loaded, and a new counter would rewrite the tool
            counter = getattr(base, "_pgc_generation", None)
            if counter is None:
                # starts at the catalog's change stamp: both count writing
                # commits from then on (cache.py)
                counter = self._pgc_generation = Length(store.state()[1])
            counter.change(1)
        if changes:
            counters = getattr(base, "_pgc_changes", None)
            if counters is None:
                counters = self._pgc_changes = ChangeCounters(
                    uuid.uuid4().hex)
            counters.bump(changes)

    def _pgc_hot_guard(self):
        """After index definitions were written (ddl.py): have the writes
        counted, and when this transaction registered or unregistered hot
        keys (hot.py) of a catalog others may write meanwhile, bump the
        change counters' ``hot_epoch``, so that it and any concurrent
        catalog writer do not both commit (ChangeCounters._p_resolveConflict;
        a new counters object changes the tool, which writers read as
        current).  A catalog this transaction created (an online build's)
        needs none: nobody writes it before this commit."""
        session = self._pgc_session()
        store = self._pgc_store()
        if store.cid in session.dirty:
            # index definitions written through the session (ddl.py,
            # hot.py): counted before the commit like any catalog write,
            # or the generation would lag the change stamp (cache.py)
            store.writing()
        if not session.hot_changed_shared():
            session.forget_hot_changes()
            return
        base = aq_base(self)
        counters = getattr(base, "_pgc_changes", None)
        if counters is None:
            counters = self._pgc_changes = ChangeCounters(uuid.uuid4().hex)
        counters.bump_hot()
        session.forget_hot_changes()

    def _pgc_cid(self):
        """This catalog's id in PostgreSQL (see CatalogStore.cid)."""
        return self._pgc_store().cid

    def _pgc_mark_created(self):
        """Remember (in the ZODB, with the tool's configuration) that this
        catalog's PostgreSQL rows exist: from then on their loss is an
        error.  Called where the tool is written anyway (install, copy)."""
        self._pgc_cid()
        if not self.__dict__.get("_pgc_created"):
            self._pgc_created = True

    @zpublish(False)  # OFS's copy hook
    def manage_afterClone(self, item):
        # a copied catalog is a new, empty catalog
        self._pgc_key = uuid.uuid4().hex
        self.__dict__.pop("_pgc_created", None)
        self.__dict__.pop("_pgc_generation", None)
        self.__dict__.pop("_pgc_changes", None)
        self.__dict__.pop("_pgc_build", None)  # the original's (rebuild.py)
        self.__dict__.pop("_pgc_shadow", None)   # a copy has no shadow
        super().manage_afterClone(item)
        self._pgc_mark_created()

    # -- ZMI ------------------------------------------------------------------
    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogStatus")
    manage_catalogStatus = PageTemplateFile("www/status.zpt", globals())

    @zpublish(False)  # data for manage_catalogStatus, not a page
    @security.protected(manage_zcatalog_entries)
    def pgc_status(self):
        """Facts about this catalog for the ZMI status page."""
        store = self._pgc_store()
        version, server = store.server_facts()
        counter = store.state()[0]
        indexes = []
        for name in self._catalog._indexes:
            index = self._catalog.getIndex(name)
            try:
                count = index.numObjects()
            except Exception:  # a status page must not fail on one index
                logger.exception("numObjects of %s failed", name)
                count = "?"
            indexes.append({"name": name, "meta_type": index.meta_type,
                            "count": count})
        return {"entries": len(self), "dsn": db.safe_dsn(store.session.dsn),
                "server_version": server, "schema_version": version,
                "key": self._pgc_key, "counter": counter,
                "generation": result_cache.generation(self),
                "cache": result_cache.stats(),
                "build": rebuild.OnlineRebuild(self).status(),
                "standbys": standby.status(store.session.dsn),
                "indexes": indexes}


InitializeClass(PGCatalogTool)
