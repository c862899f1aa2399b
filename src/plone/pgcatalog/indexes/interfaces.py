"""The contract of an index kind, as an interface.

Each ZCatalog index type is served by one class of this package that
subclasses the stock PluginIndexes class (so code adapting by class keeps
working) and provides :class:`IIndexKind` (through
:class:`~plone.pgcatalog.indexes.base.PGIndex`, which gives the defaults).
The class holds configuration only; the values live in PostgreSQL.

SQL goes in and out as :class:`~plone.pgcatalog.fragment.Fragment` values
(text and parameters together); an entry's row is reached through an
alias (``e`` in searches, ``None`` for the bare column in an index
definition).
"""
from zope.interface import Attribute
from zope.interface import Interface


class IIndexKind(Interface):
    """What the catalog needs from an index kind."""

    pgc_storage = Attribute(
        "Where the value lives: 'idx' (a key of the entry's JSONB ``idx`` "
        "named like the index), 'text' (a row of pgcatalog_text), 'path' "
        "(the entry's path/depth columns) or 'none' (nothing stored: "
        "GopipIndex sorts by the folders' order).")
    pgc_sortable = Attribute("The index can be a sort_on index.")
    pgc_python_sort = Attribute(
        "Sorting needs Python (``pgc_positions(paths)`` gives the keys).")
    pgc_multi = Attribute("The stored value is a JSON array of values.")
    pgc_long_lists = Attribute(
        "A long stored list is kept once in pgcatalog_lists and the entry "
        "holds its digest (plone.pgcatalog.lists): the kind's conditions "
        "and reads accept both forms.")
    pgc_forward_sets = Attribute(
        "``_index[value]`` is always a set of rids (KeywordIndex), never "
        "one int for a single document (UnIndex).")
    pgc_unique = Attribute("One document per value (UUIDIndex).")
    pgc_walkable_sort = Attribute(
        "ZCatalog may sort an unlimited answer by walking this index's "
        "values (one value per document: the UnIndex kinds).")
    pgc_hot = Attribute(
        "The kind can keep its values in the hot row (plone.pgcatalog.hot) "
        "when its name is hot: FieldIndex, KeywordIndex (string keys), "
        "BooleanIndex (a boolean key), DateRangeIndex (its bounds), "
        "DateIndex (the sort value); ``pgc_hot_kind`` says which ('keys', "
        "'bool', 'range' or 'sort').")

    def pgc_extract(obj):
        """The value to store for ``obj`` (an IIndexableObject wrapper) in
        its stored (JSON-ready) form, or MISSING when ZCatalog would not
        index ``obj`` in this index."""

    def pgc_where(iq, qc):
        """One parsed query (``Products.ZCatalog.query.IndexQuery``; None
        for an index that is not an IQueryIndex) as a boolean Fragment
        over the entry alias ``e``; NO_MATCH when it can match nothing
        (ZCatalog's short circuit); None when the index takes no part
        (``keys is None``).  ``qc`` is the QueryContext (catalog, cid,
        relevance expressions, text statistics)."""

    def pgc_hot_where(iq, qc):
        """The same query as a Fragment over the hot row ``h``
        (``h.keys``, plone.pgcatalog.hot), or None when the hot row cannot
        answer it (the index has no hot keys in catalog ``qc.cid``, or the
        query names a value without a key, a range, ``not``...)."""

    def pgc_sort(qc):
        """``(keys, present)``: a tuple of Fragments to ORDER BY (in that
        order, each in the sort's direction) and a Fragment true when the
        entry has a value (None: every entry has one).  Entries without a
        value are left out of sorted answers, as in ZCatalog.  Raises
        CatalogError when the index cannot sort."""

    def pgc_decode(value):
        """A stored value as ZCatalog's index would hand it out
        (``uniqueValues``, ``getEntryForObject``)."""

    def pgc_eq_sql(values, alias="e"):
        """Fragment: the entry ``alias`` has one of ``values`` (Python
        values)."""

    def pgc_key_sql(alias="e"):
        """Fragment: ``(<alias>.idx -> 'name')`` (alias None: the bare
        column, as index definitions spell it)."""

    def pgc_indexes():
        """The PostgreSQL indexes the kind wants
        (``plone.pgcatalog.schema.IndexSpec``): created at ``addIndex``,
        dropped at ``delIndex``."""
