"""Rebuilding and clearing: ZMI actions and their Python API (the online
variants are rebuild.py's)."""
from urllib.parse import quote

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from AccessControl.Permissions import search_zcatalog
from OFS.Folder import Folder
from plone.protect import CheckAuthenticator
from plone.protect import PostOnly
from plone.protect import protect
from Products.CMFPlone.CatalogTool import CatalogTool as PloneCatalogTool
from zExceptions import BadRequest
from zope.i18n import translate
from ZPublisher import zpublish

from plone.pgcatalog import _
from plone.pgcatalog import logger
from plone.pgcatalog.indexes.interfaces import IIndexKind
from plone.pgcatalog.ops import shadow
from plone.pgcatalog.ops.rebuild import BuildError
from plone.pgcatalog.ops.rebuild import OnlineRebuild
from plone.pgcatalog.ops.rebuild import reindexed
from plone.pgcatalog.pg import lists


class MaintenanceAPI:
    """manage_catalogClear, clearFindAndRebuild, refreshCatalog,
    reindexIndex and the ZMI actions around them."""

    security = ClassSecurityInfo()

    # ZMI actions that write to PostgreSQL: plone.protect's automatic check
    # sees ZODB writes only, so these check its authenticator themselves
    # when published (POST only); Python callers (no REQUEST) are unchanged.
    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_catalogClear(self, REQUEST=None, RESPONSE=None, URL1=None):
        """Remove every entry of this catalog (in the current transaction:
        other readers keep seeing the old entries until it commits)."""
        store = self._pgc_store()
        # this catalog's pending writes go (another catalog's stay)
        store.session.pending.take_ops(store.cid)
        store.clear()
        shadow.write(self, "manage_catalogClear")

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def clearFindAndRebuild(self):
        """Empty the catalog, then index every contentish object (and
        plone.app.discussion comments), in one transaction."""
        result = PloneCatalogTool.clearFindAndRebuild(self)
        reindexed(self, list(self._catalog._indexes))
        return result

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_catalogRebuild(self, RESPONSE=None, URL1=None, REQUEST=None,
                              online=None):
        """Clear and rebuild the catalog (in this transaction); ``online``:
        ``rebuild`` / ``resume`` / ``cancel`` an online build instead
        (rebuild.py: batches committed one by one, during this request)."""
        if online:
            online_action(self, online)
            if RESPONSE is not None:
                RESPONSE.redirect(URL1 + "/manage_catalogStatus")
            return
        self.clearFindAndRebuild()
        if RESPONSE is not None:
            RESPONSE.redirect(URL1 + "/manage_main")

    # stock publishes refreshCatalog to Managers (its writes are ZODB
    # writes plone.protect sees); here it is Python API only
    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def refreshCatalog(self, clear=0, pghandler=None):
        """Reindex every catalogued object (clearing first if ``clear``)."""
        paths = [path for _rid, path in self._pgc_store().all_paths()]
        if clear:
            self.manage_catalogClear()
        root = self.getPhysicalRoot()
        if pghandler:
            pghandler.init("Refreshing catalog: %s" % self.absolute_url(1),
                           len(paths))
        for i, path in enumerate(paths):
            if pghandler:
                pghandler.report(i)
            obj = root.unrestrictedTraverse(path, None)
            if obj is None:
                logger.error("refreshCatalog: could not resolve %s", path)
                if not clear:
                    self.uncatalog_object(path)
                continue
            self.catalog_object(obj, path, pghandler=pghandler)
        reindexed(self, list(self._catalog._indexes))
        if pghandler:
            pghandler.finish()

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def reindexIndex(self, name, REQUEST=None, pghandler=None):
        """Recompute index(es) ``name`` for every catalogued object (and
        create the PostgreSQL indexes they want, should some be missing:
        an upgraded plone.pgcatalog may want others)."""
        names = [name] if isinstance(name, str) else list(name)
        for index_id in names:
            self._pgc_create_ddl(self._catalog.getIndex(index_id))
        root = self.getPhysicalRoot()
        paths = self._pgc_store().all_paths()
        if pghandler:
            pghandler.init("reindexing %s" % names, len(paths))
        for i, (_rid, path) in enumerate(paths, 1):
            if pghandler:
                pghandler.report(i)
            obj = root.unrestrictedTraverse(path, None)
            if obj is None:
                continue
            self.catalog_object(obj, path, idxs=names, update_metadata=0)
        reindexed(self, names)
        if pghandler:
            pghandler.finish()

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_reindexIndex(self, ids=None, REQUEST=None, RESPONSE=None,
                            URL1=None):
        """Reindex the selected indexes (the status page's form)."""
        if not ids:
            raise BadRequest("No items specified")
        self.reindexIndex(ids, REQUEST)
        if REQUEST and RESPONSE:
            # the Indexes tab, as stock
            message = translate(_("Reindexing performed."), context=REQUEST)
            RESPONSE.redirect(URL1 + "/manage_catalogIndexes?"
                              "manage_tabs_message=" + quote(message))

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_store_long_lists(self):
        """Store apart, once, the long keyword lists that entries written
        before schema version 6 hold in line (plone.pgcatalog.pg.lists), in
        this transaction; the number of entries changed.  Answers do not
        change; the entries' table shrinks after a ``VACUUM FULL`` (or
        fills its free space with later writes)."""
        names = [name for name in self.indexes()
                 if _long_lists(self._catalog.getIndex(name))]
        return lists.move_long_lists(self._pgc_store(), names)

    @zpublish(False)
    @security.private
    def maintain_zodb_cache(self):
        """Nothing to do: the catalog holds no ZODB objects."""

    # stock publishes these two to Managers (its Query Plan and Query
    # Report tabs); this tool has neither
    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def getCatalogPlan(self):
        return ""

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def getCatalogReport(self):
        return []

    # RoleManager.valid_roles is published by its docstring; stock
    # ZCatalog replaces it with an unpublished "Search ZCatalog" method
    @zpublish(False)
    @security.protected(search_zcatalog)
    def valid_roles(self):
        return Folder.valid_roles(self)


def _long_lists(index):
    """Whether ``index`` keeps long lists apart (pg/lists.py)."""
    return IIndexKind.providedBy(index) and index.pgc_long_lists


def online_action(tool, action):
    """The status page's online build buttons."""
    build = OnlineRebuild(tool)
    try:
        if action == "rebuild":
            build.start("rebuild")
        elif action == "cancel":
            build.cancel()
            build.drop(wait=False)
            return
        elif action != "resume":
            raise BadRequest("online must be rebuild, resume or cancel")
        build.run()
        build.drop(wait=False)
    except BuildError as exc:
        raise BadRequest(str(exc))


InitializeClass(MaintenanceAPI)

