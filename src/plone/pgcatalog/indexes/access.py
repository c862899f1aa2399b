"""The data side of an index object, answered from PostgreSQL.

ZCatalog's index objects hold their BTrees; ours hold configuration only,
but callers still use the data API: ``_index`` (plone.app.uuid's
``UID._index.get(uuid)``, the Keywords vocabulary's ``iter(Subject._index)``),
``uniqueValues``, ``numObjects``, ``indexSize``, ``getEntryForObject``,
``_apply_index`` / ``query_index``, ``documentToKeyMap`` and ``clear``.

None of it is published (``portal_catalog/Indexes/<name>/<method>``): these
are Python API.  Permissions for restricted code: reading takes "Search
ZCatalog" (as the tool's uniqueValuesFor and getIndexDataForRID), writing
"Manage ZCatalogIndex Entries".  Stock index classes leave most of these
undeclared (a stock DateIndex's ``clear`` answers Anonymous over the web).
"""
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_indexes
from AccessControl.Permissions import search_zcatalog
from AccessControl.SecurityInfo import ClassSecurityInfo
from BTrees.IIBTree import IISet
from BTrees.IIBTree import IITreeSet
from ComputedAttribute import ComputedAttribute
from Products.ZCatalog.query import IndexQuery
from ZPublisher import zpublish

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.common import find_tool
from plone.pgcatalog.indexes.common import jsonb
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.pg.store import rid_key
from plone.pgcatalog.search import cache as result_cache


def _store(index):
    return find_tool(index)._pgc_store()


class IndexMapping:
    """Read-only mapping value -> rid(s), like an index's forward BTree."""

    def __init__(self, index):
        self.index = index

    def _rids_for(self, value):
        index = self.index
        if index.pgc_multi:
            expr, wanted = index.pgc_key_sql(), jsonb([value])
            condition = or_(q("{} @> {}::jsonb", expr, wanted),
                            lists.holding_sql(expr, q("l.value @> {}::jsonb",
                                                      wanted)))
        else:
            condition = index.pgc_eq_sql([value])
        tool = find_tool(index)
        store = tool._pgc_store()
        try:
            hash(value)
        except TypeError:
            return store.index_rids(condition)
        # kept per process under the index's change counters (a UID's rid:
        # plone.app.uuid asks it on every page view)
        result_cache.view(tool, store)
        return store.forward_rids(index, value,
                                  lambda: store.index_rids(condition))

    def get(self, key, default=None):
        if key is None and self.index.pgc_unique:
            # a UUIDIndex never holds None in its forward index (asked on
            # page views for an object without a UID)
            return default
        try:
            rids = self._rids_for(key)
        except TypeError:
            return default
        if not rids:
            return default
        if self.index.pgc_unique or (
                len(rids) == 1 and not self.index.pgc_forward_sets):
            return rids[0]
        return IITreeSet(rids)

    def __getitem__(self, key):
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key):
        return self.get(key) is not None

    has_key = __contains__

    def keys(self, *args):
        return [key for key, _ in self.index._pgc_unique_values()]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.index._pgc_unique_values())

    def items(self):
        return [(key, self[key]) for key in self.keys()]

    def values(self):
        return [self[key] for key in self.keys()]


class DocumentKeyMap:
    """``documentToKeyMap()``: rid -> stored sort key, fetched on demand."""

    def __init__(self, index):
        self.index = index

    def __getitem__(self, rid):
        value = self.index.getEntryForObject(rid, None)
        if value is None:
            raise KeyError(rid)
        return value

    def get(self, rid, default=None):
        try:
            return self[rid]
        except KeyError:
            return default


class IndexData:
    """Data API of index objects, delegated to the catalog tool."""

    security = ClassSecurityInfo()

    # computed on the acquisition wrapper, so the mapping finds the tool
    _index = ComputedAttribute(lambda self: IndexMapping(self), 1)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def clear(self):
        """Drop this index's values from the catalog (the objects stay
        catalogued; a reindex fills the index again, as in ZCatalog)."""
        try:
            store = _store(self)
        except CatalogError:
            return  # not attached yet (construction): nothing stored
        store.clear_index(self)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def index_object(self, documentId, obj, threshold=None):
        # Indexing goes through the catalog tool (catalog_object), which
        # writes all of an entry's values at once.
        return 0

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def unindex_object(self, documentId):
        return None

    def _pgc_unique_values(self):
        """Sorted ``[(value, documents)]`` (cached per process while the
        catalog is unchanged: vocabularies ask for them on every form)."""
        if self.pgc_storage != "idx":
            return []
        tool = find_tool(self)
        store = tool._pgc_store()
        result_cache.view(tool, store)
        return store.stamped(
            ("unique", self.getId(), self.meta_type,
             tuple(getattr(self, "getIndexSourceNames", tuple)())),
            lambda: self._pgc_compute_unique_values(store),
            names=(self.getId(),))

    def _pgc_compute_unique_values(self, store):
        values = [(codec.decode(v), n) for v, n in store.value_counts(self)]
        try:
            values.sort(key=lambda item: item[0])
        except TypeError:
            values.sort(key=lambda item: repr(item[0]))
        return tuple(values)

    @zpublish(False)
    @security.protected(search_zcatalog)
    def uniqueValues(self, name=None, withLengths=0):
        if name is None:
            name = self.getId()
        elif name != self.getId():
            return
        for key, count in self._pgc_unique_values():
            yield (key, count) if withLengths else key

    @zpublish(False)
    @security.protected(search_zcatalog)
    def numObjects(self):
        # ZCTextIndex: its distinct words; the others: documents
        if self.pgc_storage == "text":
            return _store(self).unique_words(self)
        return _store(self).index_count(self)

    @zpublish(False)
    @security.protected(search_zcatalog)
    def indexSize(self):
        if self.pgc_storage != "idx":
            # ZCTextIndex: the documents it indexes
            return _store(self).index_count(self)
        return len(self._pgc_unique_values())

    def __len__(self):
        return self.indexSize()

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getEntryForObject(self, documentId, default=None):
        rid = rid_key(documentId)
        value = None if rid is None else _store(self).index_value(self, rid)
        if value is None:
            return default
        return self.pgc_decode(value)

    @zpublish(False)
    @security.protected(search_zcatalog)
    def documentToKeyMap(self):
        return DocumentKeyMap(self)

    @zpublish(False)
    @security.protected(search_zcatalog)
    def keyForDocument(self, id):
        return self.documentToKeyMap()[id]

    @zpublish(False)
    @security.protected(search_zcatalog)
    def query_index(self, record, resultset=None):
        store = _store(self)
        qc = QueryContext(find_tool(self)._catalog, text_queries=lambda st: (
            tuple(store.execute(st).fetchone())))
        condition = self.pgc_where(record, qc)
        if condition is NO_MATCH:
            return IISet()
        if condition is None:
            condition = TRUE
        return IISet(store.index_rids(condition))

    def _apply_index(self, request, resultset=None):
        iq = IndexQuery(request, self.getId(),
                        getattr(self, "query_options", ()),
                        getattr(self, "operators", ("or", "and")),
                        getattr(self, "useOperator", "or"))
        if iq.keys is None:
            return None
        return self.query_index(iq, resultset), (self.getId(),)


InitializeClass(IndexData)
