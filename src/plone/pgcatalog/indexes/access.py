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


def _tool(index):
    from plone.pgcatalog.indexes.base import find_tool
    return find_tool(index)


class IndexMapping:
    """Read-only mapping value -> rid(s), like an index's forward BTree."""

    def __init__(self, index):
        self.index = index

    def _rids_for(self, value):
        index = self.index
        tool = _tool(index)
        from plone.pgcatalog.fragment import q
        from plone.pgcatalog.indexes.common import jsonb
        if index.pgc_multi:
            cond = q("{} @> {}::jsonb", index.pgc_key_sql(), jsonb([value]))
        else:
            cond = index.pgc_eq_sql([value])
        # the catalog id as a literal: a prepared statement's generic plan
        # can then use the catalog's own (partial) index
        from plone.pgcatalog.fragment import literal
        statement = q("SELECT e.rid FROM pgcatalog_entries e WHERE e.cid = "
                      "{} AND {} ORDER BY e.rid",
                      literal(int(tool._pgc_cid())), cond)
        rows = tool._pgc_query(statement.text, statement.params)
        return [r[0] for r in rows]

    def get(self, key, default=None):
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
            tool = _tool(self)
        except Exception:
            return  # not attached yet (construction): nothing stored
        tool._pgc_clear_index(self)

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
        stamped = getattr(_tool(self), "_pgc_stamped", None)
        if stamped is None:     # a minimal tool (index kinds' own tests)
            return self._pgc_compute_unique_values()
        return stamped(
            ("unique", self.getId(), self.meta_type,
             tuple(getattr(self, "getIndexSourceNames", tuple)())),
            self._pgc_compute_unique_values)

    def _pgc_compute_unique_values(self):
        tool = _tool(self)
        key = self._pgc_key_literal
        if self.pgc_multi:
            sql = ("SELECT v, count(*) FROM pgcatalog_entries e, "
                   "jsonb_array_elements(CASE WHEN jsonb_typeof(e.idx -> %s)"
                   " = 'array' THEN e.idx -> %s END) AS v "
                   "WHERE e.cid = %%s GROUP BY v" % (key, key))
        else:
            sql = ("SELECT e.idx -> %s AS v, count(*) FROM pgcatalog_entries e"
                   " WHERE e.cid = %%s AND e.idx ? %s GROUP BY 1" % (key, key))
        rows = tool._pgc_query(sql, (tool._pgc_cid(),))
        from plone.pgcatalog import codec
        values = [(codec.decode(v), n) for v, n in rows]
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
        tool = _tool(self)
        if self.pgc_storage == "text":
            return tool._pgc_query(
                "SELECT count(*) FROM pgcatalog_text t JOIN pgcatalog_entries"
                " e ON e.rid = t.rid WHERE e.cid = %s AND t.name = %s",
                (tool._pgc_cid(), self.getId()))[0][0]
        if self.pgc_storage == "path":
            return len(tool)
        if self.pgc_storage != "idx":
            return 0
        return tool._pgc_query(
            "SELECT count(*) FROM pgcatalog_entries e WHERE e.cid = %%s AND "
            "e.idx ? %s" % self._pgc_key_literal, (tool._pgc_cid(),))[0][0]

    @zpublish(False)
    @security.protected(search_zcatalog)
    def indexSize(self):
        if self.pgc_storage != "idx":
            return self.numObjects()
        return len(self._pgc_unique_values())

    def __len__(self):
        return self.indexSize()

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getEntryForObject(self, documentId, default=None):
        tool = _tool(self)
        value = tool._pgc_index_value(self, documentId)
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
        tool = _tool(self)
        return IISet(tool._pgc_index_rids(self, record))

    def _apply_index(self, request, resultset=None):
        iq = IndexQuery(request, self.getId(),
                        getattr(self, "query_options", ()),
                        getattr(self, "operators", ("or", "and")),
                        getattr(self, "useOperator", "or"))
        if iq.keys is None:
            return None
        return self.query_index(iq, resultset), (self.getId(),)


InitializeClass(IndexData)
