"""A ZCatalog query dict, read as ``Products.ZCatalog.Catalog`` reads it.

Merging keyword arguments, sort indexes and directions, ``make_query``'s
canonical lists, the order in which ZCatalog visits the indexes, the batch
window (``b_start`` / ``b_size`` / ``sort_limit``) and the checks
``UnIndex.query_index`` makes before it looks at values: everything the
compiler (``compiler.py``) and the search (``run.py``) need to follow
ZCatalog step by step, and no SQL.
"""
from collections.abc import Mapping

from Acquisition import aq_base
from Products.PluginIndexes.interfaces import ILimitedResultIndex
from Products.PluginIndexes.unindex import UnIndex
from ZPublisher.HTTPRequest import record

from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes.interfaces import IIndexKind


def merge_query_args(query=None, **kw):
    if not kw and isinstance(query, dict):
        return query
    merged = {}
    if isinstance(query, dict):
        merged.update(query)
    merged.update(kw)
    return merged


def get_sort_attr(attr, query):
    value = query.get("sort-%s" % attr, None)
    if value is not None:
        return value
    return query.get("sort_%s" % attr, None)


def sort_indexes_for(catalog, query):
    names = get_sort_attr("on", query)
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    indexes = []
    for name in names:
        if name not in catalog._indexes:
            raise CatalogError("Unknown sort_on index: %s" % repr(name))
        index = catalog.getIndex(name)
        if IIndexKind.providedBy(index) and not index.pgc_sortable:
            raise CatalogError(
                "The index chosen for sort_on is not capable of being used "
                "as a sort index: %s" % repr(name))
        indexes.append(index)
    return indexes


def reverse_for(query, sort_indexes):
    order = get_sort_attr("order", query)
    if order is None:
        order = [""]
    elif isinstance(order, str):
        order = [order]
    reverse = [o.lower() in ("reverse", "descending") for o in order]
    if len(reverse) == 1:
        # one direction for every sort index, as ZCatalog's sort_spec
        return reverse * len(sort_indexes)
    reverse = reverse[:len(sort_indexes)]
    if not reverse:
        # an empty sort_order list (ZCatalog crashes sorting with it):
        # ascending, the contract's default
        return [False] * len(sort_indexes)
    # ZCatalog's multisort first sorts by the whole key in the first
    # direction, then (stable) by the keys that have a direction: indexes
    # without one keep the first direction
    return reverse + [reverse[0]] * (len(sort_indexes) - len(reverse))


def make_query(catalog, query):
    """Canonicalize list values (sorted, as ZCatalog's make_query; mixed
    types raise TypeError there too).  CompositeIndex (ITransposeQuery) is
    not served, so no query transposition happens."""
    new_query = {}
    for key, value in query.items():
        if isinstance(value, (list, tuple)):
            new_query[key] = list(sorted(value))
        else:
            new_query[key] = value
    return new_query


def query_languages(query):
    """The ``Language`` values a query asks for (a language-aware text
    index stems its words in these languages only), or None: any."""
    value = query.get("Language")
    if isinstance(value, (Mapping, record)):
        value = value["query"] if "query" in value else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, str) for v in value):
        return list(value)
    return None


def query_names(catalog):
    """``[(index name, query names)]`` in the order ZCatalog's default
    plan visits the indexes (``_sorted_search_indexes``: by name, indexes
    taking a result set last), so that of two bad clauses the same one
    raises; cached per catalog configuration (rebuilt when indexes
    change)."""
    cached = catalog._v_query_names
    indexes = catalog._indexes
    key = tuple(indexes.keys())
    if cached is None or cached[0] != key:
        names = []
        for name in key:
            index = indexes[name]
            qnames = (index.getIndexQueryNames()
                      if hasattr(index, "getIndexQueryNames") else (name,))
            names.append((ILimitedResultIndex.providedBy(index), name,
                          tuple(qnames)))
        names = [(name, qnames) for _, name, qnames in sorted(names)]
        cached = catalog._v_query_names = (key, names)
    return cached[1]


#: query keys that batch an answer (Catalog._sort_limit_arguments)
BATCH_KEYS = ("b_start", "b_size", "sort_limit", "sort-limit")
#: batch arguments up to this size go to PostgreSQL's LIMIT / OFFSET
SQL_BATCH_MAX = 2 ** 62


class BatchWindow:
    """``b_start`` / ``b_size`` as ``Catalog._sort_limit_arguments`` makes
    them (``sort_limit`` stands in for a missing ``b_size``).

    ``error``: what ZCatalog raises for these arguments (``int()`` of a
    bad value, or adding and slicing with a ``sort_limit`` that is no
    integer); it raises it only when the query matched something, so the
    tool does too.  ``in_sql``: the window fits PostgreSQL's LIMIT /
    OFFSET; other windows (negative, huge) slice the whole answer in
    Python, with Python's slice semantics, as ZCatalog does.  ``batched``:
    the query asked for a batch (``b_size``), not only a ``sort_limit``:
    its caller pages through the answer and shows its total
    (plone.restapi, Plone's batches), so a page of it is counted in the
    same round trip (plans.Page)."""

    __slots__ = ("b_start", "b_size", "error", "batched")

    def __init__(self, b_start=0, b_size=None, error=None, batched=False):
        self.b_start = b_start
        self.b_size = b_size
        self.error = error
        self.batched = batched

    def sorted_bail_out(self, rlen):
        """ZCatalog's ``sortResults`` answers a batch that starts past
        the end with nothing before it slices (so before a bad
        ``sort_limit`` raises): whether it does for ``rlen`` matches."""
        b_start, b_size = self.b_start, self.b_size
        if not (b_size and b_start and b_start > rlen / 2):
            return False
        try:
            b_end = b_start + b_size
            return b_end >= rlen and b_start >= rlen
        except Exception:  # noqa: B902 - ZCatalog raises there
            return False

    @property
    def in_sql(self):
        return (self.error is None
                and 0 <= self.b_start <= SQL_BATCH_MAX
                and (self.b_size is None
                     or 0 <= self.b_size <= SQL_BATCH_MAX))


def batch_window(query):
    """The :class:`BatchWindow` of a (merged) query."""
    sort_limit = get_sort_attr("limit", query)
    b_start = 0
    b_size = None
    try:
        b_start = int(query.get("b_start", 0))
        b_size = query.get("b_size", None)
        if b_size is not None:
            b_size = int(b_size)
        if b_size is None and sort_limit:
            b_size = sort_limit
        if b_size is not None and not isinstance(b_size, int):
            # ZCatalog: ``b_start + b_size`` and the slice of the answer
            range(0)[b_start:b_start + b_size]
        if b_size is not None:
            b_size = int(b_size)  # True -> 1, as Python slices take it
    except Exception as exc:  # noqa: B902 - ZCatalog raises it, later
        return BatchWindow(b_start, b_size, error=exc)
    return BatchWindow(b_start, b_size,
                       batched=query.get("b_size") is not None)


def unbatched(query):
    """``query`` without its batching keys."""
    return {k: v for k, v in query.items() if k not in BATCH_KEYS}


SORT_KEYS = ("sort_on", "sort-on", "sort_order", "sort-order")


def unsorted(query):
    """``query`` without its sorting keys."""
    return {k: v for k, v in query.items() if k not in SORT_KEYS}


_unindex_kinds = {}


def parses_like_unindex(index):
    """The ZCatalog class this index kind serves answers queries with
    ``UnIndex.query_index`` (not BooleanIndex, which has its own)."""
    klass = type(aq_base(index))
    found = _unindex_kinds.get(klass)
    if found is None:
        found = False
        for base in klass.__mro__:
            if base.__module__.startswith("plone.pgcatalog"):
                continue
            if "query_index" in base.__dict__:
                found = base.__dict__["query_index"] is UnIndex.query_index
                break
        _unindex_kinds[klass] = found
    return found


def unindex_prechecks(iq):
    """What ``UnIndex.query_index`` does with a query before looking at
    its values, so that a bad one raises as there: hash what
    ``getRequestCacheKey`` hashes (an unhashable value raises TypeError),
    read ``range`` and ``usage`` as strings (AttributeError otherwise)."""
    not_value = iq.get("not", None)
    if not_value is not None:
        frozenset(not_value)
    for option in ("range", "usage"):
        value = iq.get(option, None)
        if value is not None:
            hash(value)
    frozenset(iq.keys)
    range_parm = iq.get("range", None)
    if range_parm:
        range_parm.find("min")
    usage = iq.get("usage", None)
    if usage:
        usage.lower().split(":")
