"""Writing entries: catalog_object / uncatalog_object and CMFCore's queued
indexObject / reindexObject / unindexObject (Python API only: stock
CMFPlone publishes none of them).  Writes are buffered in the
transaction's session and sent in batches (``writer.py``)."""
from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from Products.CMFCore.CatalogTool import CatalogTool as CMFCatalogTool
from Products.CMFCore.indexing import processQueue
from ZPublisher import zpublish

from plone.pgcatalog import extract
from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.ops import mirror
from plone.pgcatalog.ops import shadow
from plone.pgcatalog.pg.writer import DELETE
from plone.pgcatalog.search import cache as result_cache


class IndexingAPI:
    """catalog_object, uncatalog_object, the CMFCore indexing functions and
    the change counter."""

    security = ClassSecurityInfo()

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def catalog_object(self, obj, uid=None, idxs=None, update_metadata=1,
                       pghandler=None):
        """(Re)index ``obj`` under ``uid`` (its physical path by default)."""
        if shadow.is_shadow(self, obj):
            return
        if idxs is None:
            idxs = []
        wrapper = extract.indexable(self, obj)
        if uid is None:
            try:
                uid = obj.getPhysicalPath
            except AttributeError:
                raise CatalogError(
                    "A cataloged object must support the 'getPhysicalPath' "
                    "method if no unique id is provided when cataloging")
            uid = "/".join(uid())
        elif not isinstance(uid, str):
            raise CatalogError("The object unique id must be a string.")
        self._pgc_catalog_object(wrapper, uid, idxs, update_metadata)
        shadow.write(self, "catalog_object", obj, uid, idxs, update_metadata,
                     pghandler)

    def _pgc_catalog_object(self, obj, uid, idxs, update_metadata,
                            store=None):
        """``store``: another catalog's (an online build's, rebuild.py);
        by default the live one, mirrored into a build in progress
        (mirror.py)."""
        live = store is None
        store = self._pgc_store() if live else store
        session = store.session
        cid = store.cid

        def meta_from():
            meta, unpicklable = extract.metadata(self._catalog, obj)
            # ZCatalog keeps an unpicklable value in its metadata BTree and
            # fails when the transaction commits (the ZODB cannot pickle
            # it); here the column reads Missing.Value until then, and the
            # commit fails the same way unless a later record replaces it.
            if unpicklable:
                column, exc = unpicklable[0]
                session.set_commit_error(
                    cid, uid, exc,
                    "metadata column %r of %s cannot be stored" % (column,
                                                                   uid))
            else:
                session.set_commit_error(cid, uid, None)
            store.known.add(uid)
            return meta

        if update_metadata:
            entry = extract.entry_for(self._catalog, obj, idxs, meta_from())
        elif uid in store.known:
            entry = extract.entry_for(self._catalog, obj, idxs, None)
        else:
            # ZCatalog records metadata without update_metadata for new
            # entries only: whether this one is new is asked once for the
            # whole batch when it is written (writer.resolve_metadata)
            entry = extract.entry_for(self._catalog, obj, idxs, None,
                                      meta_from)
        store.add(uid, entry)
        if live:
            mirror.write(self, uid, entry)

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def uncatalog_object(self, uid):
        """Remove the entry ``uid`` (a path) from the catalog."""
        store = self._pgc_store()
        store.add(uid, DELETE)
        store.session.set_commit_error(store.cid, uid, None)
        store.known.discard(uid)
        mirror.write(self, uid, DELETE)
        shadow.write(self, "uncatalog_object", uid)

    @zpublish(False)
    @security.private
    def indexObject(self, object, idxs=None):
        if idxs is None:
            idxs = []
        self.reindexObject(object, idxs)

    # CMFCore's functions (private, no docstring: never published)
    unindexObject = CMFCatalogTool.unindexObject
    reindexObject = CMFCatalogTool.reindexObject
    _indexObject = CMFCatalogTool._indexObject
    _unindexObject = CMFCatalogTool._unindexObject
    _reindexObject = CMFCatalogTool._reindexObject
    _CatalogTool__url = CMFCatalogTool._CatalogTool__url
    security.declarePrivate("unindexObject", "reindexObject", "_indexObject",
                            "_unindexObject", "_reindexObject")

    def _increment_counter(self):
        """Kept for API compatibility: the counter is bumped by each
        catalog_object / uncatalog_object in PostgreSQL."""

    @zpublish(False)
    @security.private
    def getCounter(self):
        """Changes counter (transactional, in PostgreSQL; kept per
        process under the ZODB snapshot's generation)."""
        processQueue()
        store = self._pgc_store()
        result_cache.view(self, store)
        return store.change_counter() + store.session.counter_delta(
            store.cid)


InitializeClass(IndexingAPI)
