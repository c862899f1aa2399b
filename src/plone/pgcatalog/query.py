"""The query compiler: a ZCatalog query dict -> one SQL statement.

It follows ``Products.ZCatalog.Catalog.Catalog.searchResults/search`` step
by step (sort index resolution, make_query, one IndexQuery per index, the
b_start/b_size/sort_limit contract) but, instead of intersecting sets in
Python, it asks each index kind for a SQL fragment and lets PostgreSQL plan
the whole query.  It only combines fragments; what a query option means is
the index kind's business (see indexes/base.py).
"""
import functools

from Acquisition import aq_base
from Products.PluginIndexes.interfaces import ILimitedResultIndex
from Products.PluginIndexes.interfaces import IQueryIndex
from Products.PluginIndexes.unindex import UnIndex
from Products.ZCatalog.query import IndexQuery

from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes.base import NO_MATCH
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.fragment import Fragment
from plone.pgcatalog.fragment import and_
from plone.pgcatalog.fragment import ident
from plone.pgcatalog.fragment import join
from plone.pgcatalog.fragment import q
from plone.pgcatalog import schema


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
        if not getattr(index, "pgc_sortable", True):
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
    Python, with Python's slice semantics, as ZCatalog does."""

    __slots__ = ("b_start", "b_size", "error")

    def __init__(self, b_start=0, b_size=None, error=None):
        self.b_start = b_start
        self.b_size = b_size
        self.error = error

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
    return BatchWindow(b_start, b_size)


def unbatched(query):
    """``query`` without its batching keys."""
    return {k: v for k, v in query.items() if k not in BATCH_KEYS}


SORT_KEYS = ("sort_on", "sort-on", "sort_order", "sort-order")


def unsorted(query):
    """``query`` without its sorting keys."""
    return {k: v for k, v in query.items() if k not in SORT_KEYS}


_unindex_kinds = {}


def _parses_like_unindex(index):
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


class Plan:
    """A compiled search: the SQL and what to do with its answer."""

    __slots__ = ("empty", "statement", "limited", "b_start", "b_size",
                 "scored", "python_sort", "sort_specs", "reverse",
                 "score", "count", "rid_order", "unlimited_sorted",
                 "iterate_index", "ties")

    def __init__(self):
        self.empty = False
        self.statement = None
        self.limited = False
        self.b_start = 0
        self.b_size = None
        self.scored = False
        # deferred relevance ordering: rids -> statement (see results)
        self.score = None
        # a page's total (actual_result_count), counted when first asked
        self.count = None
        self.python_sort = None
        self.sort_specs = None
        self.reverse = None
        # "asc" / "desc": the rids come unordered, Python sorts them
        self.rid_order = None
        # an unlimited sort: the first sort index, whose size decides
        # whether ZCatalog would iterate it (see _unlimited_sorted_sql), and
        # the statement giving ties in ascending rid order when it would
        self.unlimited_sorted = False
        self.iterate_index = None
        self.ties = None


def compile_search(catalog, cid, query, text_stats=None, text_df=None,
                   window=None):
    """Compile a merged query dict (after the tool's security additions).

    ``text_stats(index_id) -> (documents, words)`` gives text indexes their
    collection statistics (Okapi BM25) without counting them per query;
    ``text_df(index_id, tsquery) -> documents`` their words' document
    frequencies."""
    plan = Plan()
    sort_indexes = sort_indexes_for(catalog, query)
    # an empty sort_on list still reads sort_order (ZCatalog does)
    reverse = reverse_for(query, sort_indexes) \
        if sort_indexes is not None else None

    query = make_query(catalog, query)
    qc = QueryContext(catalog, cid, text_stats, text_df)
    conditions = [q("e.cid = {}", cid)]
    participated = False
    for name, names in query_names(catalog):
        if not any(n in query for n in names):
            continue
        index = catalog.getIndex(name)
        if IQueryIndex.providedBy(index):
            iq = IndexQuery(query, index.getId(),
                            getattr(index, "query_options", ()),
                            getattr(index, "operators", ("or", "and")),
                            getattr(index, "useOperator", "or"))
            if iq.keys is None:
                continue
            if _parses_like_unindex(index):
                unindex_prechecks(iq)
        else:
            # ZCatalog hands such an index (GopipIndex) the raw query
            # (``_apply_index``): it parses no options
            iq = None
        fragment = where_of(index, iq, qc)
        if fragment is None:
            continue
        participated = True
        if fragment is NO_MATCH:
            # nothing can match: ZCatalog stops here too (the indexes
            # come in its default order), the others are not parsed
            plan.empty = True
            return plan
        conditions.append(fragment)
    if not participated:
        plan.empty = True
        return plan

    if window is None:
        window = batch_window(query)
    if not window.in_sql:
        raise ValueError("batch arguments outside what LIMIT/OFFSET take: "
                         "the tool slices such answers (BatchWindow)")
    b_size = plan.b_size = window.b_size
    plan.b_start = window.b_start

    where = and_(*conditions)
    if sort_indexes:
        if any(getattr(i, "pgc_python_sort", False) for i in sort_indexes):
            return _python_sort_plan(plan, sort_indexes, reverse, conditions,
                                     qc)
        order, presents = [], []
        for index, rev in zip(sort_indexes, reverse):
            keys, present = sort_of(index, qc)
            if present is not None:
                presents.append(present)
            for key in keys:
                order.append(q("{} DESC", key) if rev else key)
        if b_size is None:
            _unlimited_sorted_sql(plan, where, order, presents,
                                  sort_indexes, reverse)
            return plan
        order.append(_tie_break(reverse))
        _ordered_sql(plan, and_(*conditions, *presents), join(", ", order))
    elif qc.ranks:
        plan.scored = True
        _scored_sql(plan, where, qc)
    else:
        _ordered_sql(plan, where, q("e.rid"))
    return plan


def where_of(index, iq, qc):
    """The index's condition as a Fragment (NO_MATCH, None)."""
    start = len(qc.params)
    fragment = index.pgc_where(iq, qc)
    if isinstance(fragment, str):
        # transition: a kind still writing text with qc.param()
        fragment = Fragment(fragment, qc.params[start:])
    return fragment


def sort_of(index, qc):
    """``(keys, present)`` of a sort index, as Fragments (see
    IIndexKind.pgc_sort)."""
    keys, present = index.pgc_sort(qc)
    if isinstance(keys, str):
        # transition: text (no parameters), a comma-separated list
        keys = [Fragment(k) for k in _split_exprs(keys)]
    elif isinstance(keys, Fragment):
        keys = [keys]
    if isinstance(present, str):
        present = None if present == "TRUE" else Fragment(present)
    return tuple(keys), present


def _tie_break(reverse):
    """Order of entries with equal sort keys, as ZCatalog's sortResults:
    one sort index sorts (key, rid) pairs, so ties follow the sort
    direction; several sort indexes sort stably on the keys only, so ties
    keep the result set's ascending rid order.  (ZCatalog's rids, like
    ours, grow in indexing order.)"""
    if len(reverse) == 1 and reverse[0]:
        return RID_DESC
    return RID


RID = q("e.rid")
RID_DESC = q("e.rid DESC")
ENTRIES = q("{} e", ident(schema.ENTRIES))


def _unlimited_sorted_sql(plan, where, order, presents, sort_indexes,
                          reverse):
    """Every match, sorted (no ``b_size`` / ``sort_limit``).

    ZCatalog's sortResults then picks its algorithm by the size of the
    first sort index: when the matches outnumber its distinct values
    (``rlen > len(index) * (rlen / 100 + 1)``, low-cardinality indexes,
    small sites) it walks the index's values, so (1) documents with equal
    keys stay in ascending rid order in *both* directions, and (2)
    ``actual_result_count`` still counts the matches without a sort key.
    The statement counts both (``FILTER``); the tool decides (it knows the
    index size) and runs ``ties`` for case (1) when it applies."""
    keyed = and_(*presents)

    def select(tie):
        return q("SELECT count(*), array_agg(e.rid ORDER BY {}) FILTER "
                 "(WHERE {}), count(*) FILTER (WHERE {}) FROM {} WHERE {}",
                 join(", ", order + [tie]), keyed, keyed, ENTRIES, where)

    tie = _tie_break(reverse)
    plan.statement = select(tie)
    plan.unlimited_sorted = True
    if len(sort_indexes) > 1:
        # several sort indexes: ties keep ascending rid order in both
        # algorithms; the walk's other departures (documents lacking a
        # secondary key kept) are not mirrored: the contract applies
        return
    plan.iterate_index = sort_indexes[0]
    if tie is not RID:
        plan.ties = select(RID)


def _ordered_sql(plan, where, order):
    if plan.b_size is not None:
        # A page: its rids now (a top-N the planner can take from an index);
        # the total (``actual_result_count``) only when someone asks for it
        # (results.PGLazyMap), or known at once when the page is the tail.
        plan.limited = True
        plan.statement = q(
            "SELECT ARRAY(SELECT e.rid FROM {} WHERE {} ORDER BY {} "
            "LIMIT {} OFFSET {})", ENTRIES, where, order, plan.b_size,
            plan.b_start)
        plan.count = q("SELECT count(*) FROM {} WHERE {}", ENTRIES, where)
    else:
        # (sorted answers without a page: _unlimited_sorted_sql)
        # Every match in rid order (ZCatalog's unsorted order): read in
        # whatever order the plan likes, sorted in Python afterwards (the
        # rows lie in about rid order, so the sort is a near-linear pass).
        # An ORDER BY here made PostgreSQL walk the primary key and fetch
        # the rows one by one: 205 -> 100 ms for 51,906 of 100,000 entries.
        plan.statement = q("SELECT count(*), array_agg(e.rid) FROM {} "
                           "WHERE {}", ENTRIES, where)
        plan.rid_order = "asc"


def _scored_sql(plan, where, qc):
    """Text queries without sort_on: ordered by relevance (rank computed
    once per matching entry); equal scores by descending rid, as ZCatalog's
    ``byValue`` (newest entry first)."""
    rank = join(" + ", [q("COALESCE({}, 0)", r) for r in qc.ranks])
    if plan.b_size is not None:
        inner = q("SELECT e.rid, ({})::float8 AS score FROM {} WHERE {}",
                  rank, ENTRIES, where)
        plan.limited = True
        plan.statement = q(
            "SELECT (SELECT count(*) FROM {} WHERE {}), "
            "array_agg(s.rid ORDER BY s.score DESC, s.rid DESC), "
            "array_agg(s.score ORDER BY s.score DESC, s.rid DESC), "
            "(SELECT max(x.score) FROM ({}) x) FROM "
            "(SELECT * FROM ({}) t ORDER BY t.score DESC, t.rid DESC "
            "LIMIT {} OFFSET {}) s", ENTRIES, where, inner, inner,
            plan.b_size, plan.b_start)
    else:
        # No page to cut: match now, score when a brain is first read
        # (``len()`` of a text search never pays for relevance).
        plan.statement = q("SELECT count(*), array_agg(e.rid) FROM {} "
                           "WHERE {}", ENTRIES, where)
        plan.rid_order = "desc"
        # scores computed once per row (OFFSET 0 keeps the subquery from
        # being flattened into several evaluations); ordered in Python
        # (the rank expressions only read ``e.rid``: the matched rids are
        # enough, the entries themselves are not read again)
        plan.score = functools.partial(
            q, "SELECT array_agg(s.rid), array_agg(s.score) FROM (SELECT "
            "e.rid, ({})::float8 AS score FROM unnest({}::bigint[]) AS "
            "e(rid) OFFSET 0) s", rank)


def _split_exprs(exprs):
    # a comma-separated list of expressions at top level
    parts, depth, current = [], 0, []
    for ch in exprs:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return parts


def _python_sort_plan(plan, sort_indexes, reverse, conditions, qc):
    """Sorting needs Python (GopipIndex): fetch rid, path and the SQL sort
    keys of every match as arrays (one row), sort in Python afterwards."""
    plan.python_sort = sort_indexes
    plan.reverse = reverse
    keys = []
    conditions = list(conditions)
    for index in sort_indexes:
        if getattr(index, "pgc_python_sort", False):
            continue
        exprs, present = sort_of(index, qc)
        # the rank of the entry's key in the SQL order of *all* the sort
        # expressions (strings sort by their second expression, see
        # common.sort_sql): Python sorts these integers, ties stay ties
        keys.append(q("dense_rank() OVER (ORDER BY {})", join(", ", exprs)))
        if present is not None:
            conditions.append(present)
    columns = [q(", {} AS k" + str(n), k) for n, k in enumerate(keys)]
    inner = q("SELECT e.rid, e.path{} FROM {} WHERE {}", join("", columns),
              ENTRIES, and_(*conditions))
    # arrays in any (but the same) order: put in rid order in Python
    aggs = q("".join(", array_agg(s.k%d)" % n for n in range(len(keys))))
    plan.statement = q("SELECT array_agg(s.rid), array_agg(s.path){} FROM "
                       "({}) s", aggs, inner)
    return plan
