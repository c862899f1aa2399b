"""The contract every index kind fulfils.

Each ZCatalog index type is served by one class in this package.  The class
*subclasses the original PluginIndexes class* (FieldIndex, KeywordIndex, ...)
so that code adapting by class (plone.restapi's query parsers, GenericSetup's
node adapters) keeps working, but it holds configuration only: the data lives
in PostgreSQL.

The small interface, mixed in by :class:`PGIndex`:

``pgc_storage``
    Where the value lives: ``"idx"`` (a key of the entry's JSONB ``idx``
    column, named like the index), ``"text"`` (a row of ``pgcatalog_text``),
    ``"path"`` (the entry's own ``path``/``depth`` columns) or
    ``"none"`` (nothing stored, e.g. the Gopip sort-only index).

``pgc_extract(obj)``
    The value to store for ``obj`` (an IIndexableObject wrapper), already in
    its stored (JSON-ready) form, or :data:`MISSING` when ZCatalog would not
    index the object in this index.

``pgc_where(iq, qc)``
    Turn one parsed query (a ``Products.ZCatalog.query.IndexQuery``) into a
    boolean :class:`~plone.pgcatalog.pg.fragment.Fragment` over the entry
    alias ``e``: values become parameters of the fragment, the index name
    a literal (:meth:`PGIndex.pgc_key_sql`).  Returns the fragment, or
    :data:`NO_MATCH` when the query can match nothing (ZCatalog's short
    circuit), or ``None`` when the index does not take part (ZCatalog:
    ``keys is None``).

``pgc_sort(qc)``
    ``(keys, present)``: a tuple of Fragments to ORDER BY (the compiler
    orders by each, in the sort's direction) and a condition that is true
    when the entry has a value (entries without one are dropped from
    sorted results, as in ZCatalog; None: every entry has one).  Raise
    CatalogError when the index cannot sort.

``pgc_decode(value)``
    Turn a stored value back into what ZCatalog's index would hand out
    (``uniqueValues``, ``getEntryForObject``).

``pgc_indexes()``
    The PostgreSQL indexes the kind wants (``IndexSpec``: B-trees partial
    on one catalog's rows, shared GIN); the tool creates them at
    ``addIndex`` and drops them at ``delIndex``.

The contract is written down as the interface
:class:`~plone.pgcatalog.indexes.interfaces.IIndexKind`; what only some
kinds can do (hot keys, subtrees, Python sorting, words and their scores)
are the capability interfaces beside it, which a kind declares with
``@implementer`` (checked when the kind is registered:
``indexes.kind_for``).

None of these is for the web or for restricted code: :func:`seal` makes
every ``pgc_*`` method of every kind private and unpublishable, every other
method plone.pgcatalog defines on an index object unpublishable (the data
API's permissions are declared in ``access.py``), and so the stock classes'
methods working on their own BTrees (:data:`STOCK_DATA_METHODS`).
"""
from types import FunctionType

from zope.interface import implementer
from ZPublisher import zpublish
from ZPublisher import zpublish_mark
from ZPublisher import zpublish_wrap

from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes.access import IndexData
from plone.pgcatalog.indexes.common import jsonb
from plone.pgcatalog.indexes.common import key_sql
from plone.pgcatalog.indexes.common import text_sql
from plone.pgcatalog.indexes.interfaces import IIndexKind
from plone.pgcatalog.pg.fragment import q

#: Data methods of the stock index classes: they read or write the stock
#: index's BTrees (ours has none: the data is in PostgreSQL) or its request
#: cache.  Stock publishes several by their docstrings (a stock DateIndex
#: answers Anonymous's ``histogram`` and ``insertForwardIndexEntry``); on
#: ours none is published.
STOCK_DATA_METHODS = (
    "getCounter", "getRequestCache", "getRequestCacheKey",
    "hasUniqueValuesFor", "histogram", "insertEntry",
    "insertForwardIndexEntry", "items", "query", "referencedObjects",
    "removeForwardIndexEntry", "search", "unindex_objectKeywords",
)


def _ours(klass):
    return klass.__module__.startswith("plone.pgcatalog.")


def seal(cls):
    """Nothing plone.pgcatalog defines on an index object is published
    (``portal_catalog/Indexes/<name>/<method>``): its methods, wherever in
    ``cls``'s bases they come from, are marked ``zpublish(False)``, and the
    ``pgc_*`` contract is private for restricted code as well.  The stock
    data methods ``cls`` inherits are wrapped unpublished (same signature,
    same behaviour for Python callers, same permission declarations: those
    go by name).  Other methods of the stock index classes (configuration
    getters, ZMI pages) keep their stock declarations."""
    for klass in cls.__mro__:
        if not _ours(klass):
            continue
        for name, value in list(vars(klass).items()):
            if name.startswith("_") or not isinstance(value, FunctionType):
                continue
            zpublish(False)(value)
            if name.startswith("pgc_"):
                setattr(cls, name + "__roles__", ())
    for name in STOCK_DATA_METHODS:
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or _ours(owner):
            continue
        method = vars(owner)[name]
        if isinstance(method, FunctionType) and \
                zpublish_mark(method) is not False:
            setattr(cls, name, zpublish_wrap(method, conditional=False,
                                             publish=False))


@implementer(IIndexKind)
class PGIndex(IndexData):
    """Mixin giving an index class the plone.pgcatalog contract
    (:class:`~plone.pgcatalog.indexes.interfaces.IIndexKind`)."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        seal(cls)

    pgc_storage = "idx"
    pgc_sortable = True
    pgc_multi = False  # stored value is a JSON array of values
    #: a long list is stored once, the entry holds its digest (lists.py)
    pgc_long_lists = False
    #: ``_index[value]`` is always a set of rids (KeywordIndex), not an int
    #: for a single document (UnIndex)
    pgc_forward_sets = False
    pgc_unique = False  # one document per value (UUIDIndex)
    #: ZCatalog may sort an unlimited result by walking this index's values
    #: (one value per document: UnIndex kinds); see sorting.UnlimitedSort
    pgc_walkable_sort = False
    #: hot.py's record on the index object (an IHotKind registered for a
    #: catalog): its code in the hot keys by catalog id, and whether its
    #: keys are in the key sets (True) or the free keys' rows (False); None
    #: while it has no hot keys anywhere
    _pgc_hot_codes = None
    _pgc_hot_sets = None

    # -- helpers shared by kinds -------------------------------------------
    def pgc_key_sql(self, alias="e"):
        """``(e.idx -> 'name')`` (``alias`` None: the bare column, as index
        definitions spell it)."""
        return key_sql(self.getId(), alias)

    def pgc_text_sql(self, alias="e"):
        """``((e.idx ->> 'name') COLLATE "C")``."""
        return text_sql(self.getId(), alias)

    def pgc_present_sql(self):
        """The entry has a value for this index.  Said of the indexed
        expression (``idx -> name``, which ANALYZE keeps statistics for
        through its expression index) rather than ``idx ? name`` (the
        whole document: too wide for statistics, so estimated at 1 %,
        which kept the planner from index-ordered top-N plans)."""
        return q("({} IS NOT NULL)", self.pgc_key_sql())

    # -- contract -----------------------------------------------------------
    def pgc_extract(self, obj):  # pragma: no cover - abstract
        raise NotImplementedError

    def pgc_where(self, iq, qc):  # pragma: no cover - abstract
        raise NotImplementedError

    def pgc_sort(self, qc):
        if not self.pgc_sortable:
            raise CatalogError(
                "The index chosen for sort_on is not capable of being used "
                "as a sort index: %r" % self.getId())
        return (self.pgc_key_sql(),), self.pgc_present_sql()

    def pgc_decode(self, value):
        return value

    def pgc_eq_sql(self, values, alias="e"):
        """The entry ``alias`` has one of ``values`` (Python values) as its
        value: JSON equality (kinds with a B-tree say it the B-tree's
        way)."""
        return q("{} = ANY({}::jsonb[])", self.pgc_key_sql(alias),
                 [jsonb(v) for v in values])

    def pgc_indexes(self):
        """The PostgreSQL indexes this index wants
        (:class:`plone.pgcatalog.schema.tables.IndexSpec`)."""
        return []


seal(PGIndex)
