"""Indexes and metadata columns: the ZCatalog API that defines them, and
their PostgreSQL indexes (``ddl.py``)."""
import uuid
from functools import partial

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from AccessControl.Permissions import manage_zcatalog_indexes
from AccessControl.Permissions import search_zcatalog
from Products.PluginIndexes.interfaces import IPluggableIndex
from zExceptions import BadRequest
from ZPublisher import zpublish

from plone.pgcatalog.catalog import check_index_name
from plone.pgcatalog.indexes import convert_index
from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.ops import shadow
from plone.pgcatalog.pg import upkeep
from plone.pgcatalog.schema import ddl


class IndexesAPI:
    """indexes, schema, addIndex / delIndex / clearIndex, addColumn /
    delColumn, uniqueValuesFor and the PostgreSQL index upkeep."""

    security = ClassSecurityInfo()

    @zpublish(False)
    @security.protected(search_zcatalog)
    def indexes(self):
        """Names of the indexes."""
        return list(self._catalog._indexes.keys())

    @zpublish(False)
    @security.protected(search_zcatalog)
    def schema(self):
        """Names of the metadata columns."""
        return list(self._catalog.schema.keys())

    # stock ZCatalog: index_objects "Search ZCatalog" (unwrapped indexes),
    # getIndexObjects "Manage ZCatalogIndex Entries"; here both hand out
    # wrapped index objects, so both take the managers' permission.
    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def index_objects(self):
        return [self._catalog.getIndex(n) for n in self._catalog._indexes]

    getIndexObjects = index_objects
    security.declareProtected(manage_zcatalog_indexes, "getIndexObjects")

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def availableIndexes(self):
        return self._catalog.indexes

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def addIndex(self, name, type, extra=None):
        """Add an index of ZCatalog type ``type`` (a meta_type or an index
        object); a type plone.pgcatalog cannot serve fails here, loudly."""
        check_index_name(name)
        if IPluggableIndex.providedBy(type):
            index = convert_index(type)
        else:
            klass = kind_for(type)
            index = klass(name, extra=extra, caller=self)
        self._catalog.addIndex(name, index)
        self._pgc_create_ddl(index)
        shadow.write(self, "addIndex", name, type, extra)

    def _pgc_create_ddl(self, index):
        store = self._pgc_store()
        ddl.create(store.session, store.cid, index)
        self._pgc_hot_guard()

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_recreate_catalog(self):
        """Give this catalog new, empty PostgreSQL rows after its old ones
        were lost (CatalogMissing), then rebuild it from the ZODB (in this
        transaction).  For a Manager, from Python (``bin/zconsole`` or a
        debug session)."""
        self._pgc_key = uuid.uuid4().hex
        self.__dict__.pop("_pgc_created", None)
        # the old rows' counts of commits: the new rows' start again (the
        # next write makes them from the new change stamp, cache.py)
        self.__dict__.pop("_pgc_generation", None)
        self.__dict__.pop("_pgc_changes", None)
        self._p_changed = True
        self._pgc_mark_created()
        for index in self.index_objects():
            self._pgc_create_ddl(index)
        self.clearFindAndRebuild()

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def pgc_sync_indexes(self):
        """Make this catalog's PostgreSQL indexes what its indexes want:
        create the missing ones, drop the others (after the commit), and
        register the hot indexes ``hot-indexes`` and ``hot-set-exclude``
        name (hot.py; their rows computed again).  Run it after a change
        of those settings.  Once the transaction committed, the key sets'
        counts are folded, the hot tables vacuumed and the catalog tables
        analyzed (the hot rows and their sets may all have changed).
        Returns ``(created, dropped)`` PostgreSQL index names."""
        store = self._pgc_store()
        found = ddl.sync(store.session, store.cid, self.index_objects())
        self._pgc_hot_guard()
        store.session.on_commit(partial(_settle, store.session.dsn))
        return found

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def delIndex(self, name):
        """Remove an index and its values."""
        index = self._catalog.getIndex(name)
        store = self._pgc_store()
        store.clear_index(index)
        ddl.remove(store.session, store.cid, name)
        self._pgc_hot_guard()
        self._catalog.delIndex(name)
        shadow.write(self, "delIndex", name)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def clearIndex(self, name):
        self._catalog.getIndex(name).clear()

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def addColumn(self, name, default_value=None, threshold=10000):
        """Add a metadata column (entries get it at their next reindex, as
        in ZCatalog; until then brains show Missing.Value)."""
        self._catalog.addColumn(name, default_value, threshold)
        self._catalog._p_changed = True
        shadow.write(self, "addColumn", name, default_value)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def delColumn(self, name, threshold=10000):
        """Remove a metadata column."""
        self._catalog.delColumn(name, threshold)
        self._catalog._p_changed = True
        shadow.write(self, "delColumn", name)

    # The ZMI's index and column forms: not published here (this tool has
    # no Indexes or Metadata tab; stock publishes them to Managers, guarded
    # by plone.protect's ZODB write check).  Add forms of index products
    # still call manage_addIndex from Python.
    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_addIndex(self, name, type, extra=None, REQUEST=None,
                        RESPONSE=None, URL1=None):
        self.addIndex(name, type, extra)
        if REQUEST and RESPONSE:
            RESPONSE.redirect(URL1 + "/manage_main")

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_delIndex(self, ids=None, REQUEST=None, RESPONSE=None,
                        URL1=None):
        if not ids:
            raise BadRequest("No items specified")
        if isinstance(ids, str):
            ids = (ids,)
        for name in ids:
            self.delIndex(name)
        if REQUEST and RESPONSE:
            RESPONSE.redirect(URL1 + "/manage_main")

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_addColumn(self, name, REQUEST=None, RESPONSE=None, URL1=None):
        self.addColumn(name)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_delColumn(self, names, REQUEST=None, RESPONSE=None,
                         URL1=None):
        if isinstance(names, str):
            names = (names,)
        for name in names:
            self.delColumn(name)

    @zpublish(False)
    @security.protected(search_zcatalog)
    def uniqueValuesFor(self, name):
        """Unique values of index ``name``."""
        return tuple(self._catalog.getIndex(name).uniqueValues())


def _settle(dsn):
    """After hot rows were computed again: their sets' counts folded (one
    +1 / -1 row each otherwise), the hot tables vacuumed (every row of
    them rewritten), the planner's statistics read again."""
    upkeep.fold_hot_counts(dsn)
    upkeep.vacuum_hot(dsn)
    upkeep.analyze(dsn)


InitializeClass(IndexesAPI)
