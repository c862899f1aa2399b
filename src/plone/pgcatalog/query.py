"""The query compiler: a ZCatalog query dict -> one SQL statement.

It follows ``Products.ZCatalog.Catalog.Catalog.searchResults/search`` step
by step (sort index resolution, make_query, one IndexQuery per index, the
b_start/b_size/sort_limit contract) but, instead of intersecting sets in
Python, it asks each index kind for a SQL fragment and lets PostgreSQL plan
the whole query.  It only combines fragments; what a query option means is
the index kind's business (see indexes/base.py).
"""
from Products.ZCatalog.query import IndexQuery

from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes.base import NO_MATCH
from plone.pgcatalog.indexes.base import QueryContext


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
    return reverse + [False] * (len(sort_indexes) - len(reverse))


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
    """``[(index name, query names)]`` in index order, cached per catalog
    configuration (rebuilt when indexes change)."""
    cached = catalog._v_query_names
    indexes = catalog._indexes
    key = tuple(indexes.keys())
    if cached is None or cached[0] != key:
        names = []
        for name in key:
            index = indexes[name]
            qnames = (index.getIndexQueryNames()
                      if hasattr(index, "getIndexQueryNames") else (name,))
            names.append((name, tuple(qnames)))
        cached = catalog._v_query_names = (key, names)
    return cached[1]


class Plan:
    """A compiled search: the SQL and what to do with its answer."""

    __slots__ = ("empty", "sql", "params", "limited", "b_start", "b_size",
                 "scored", "python_sort", "sort_specs", "reverse")

    def __init__(self):
        self.empty = False
        self.sql = None
        self.params = None
        self.limited = False
        self.b_start = 0
        self.b_size = None
        self.scored = False
        self.python_sort = None
        self.sort_specs = None
        self.reverse = None


def compile_search(catalog, cid, query):
    """Compile a merged query dict (after the tool's security additions)."""
    plan = Plan()
    sort_indexes = sort_indexes_for(catalog, query)
    sort_limit = get_sort_attr("limit", query)
    reverse = reverse_for(query, sort_indexes) if sort_indexes else None

    query = make_query(catalog, query)
    qc = QueryContext(catalog)
    fragments = []
    participated = False
    for name, names in query_names(catalog):
        if not any(n in query for n in names):
            continue
        index = catalog.getIndex(name)
        iq = IndexQuery(query, index.getId(),
                        getattr(index, "query_options", ()),
                        getattr(index, "operators", ("or", "and")),
                        getattr(index, "useOperator", "or"))
        if iq.keys is None:
            continue
        fragment = index.pgc_where(iq, qc)
        if fragment is None:
            continue
        participated = True
        if fragment is NO_MATCH:
            plan.empty = True
            return plan
        fragments.append(fragment)
    if not participated:
        plan.empty = True
        return plan

    # b_start / b_size / sort_limit, as Catalog._sort_limit_arguments.
    b_start = int(query.get("b_start", 0))
    b_size = query.get("b_size", None)
    if b_size is not None:
        b_size = int(b_size)
    if b_size is None and sort_limit:
        b_size = sort_limit
    plan.b_start, plan.b_size = b_start, b_size

    where = ["e.cid = %s"] + fragments
    params_where = [cid] + qc.params
    if sort_indexes:
        if any(getattr(i, "pgc_python_sort", False) for i in sort_indexes):
            return _python_sort_plan(plan, sort_indexes, reverse, where,
                                     params_where)
        order, order_params = [], []
        for index, rev in zip(sort_indexes, reverse):
            sqc = QueryContext(catalog)
            exprs, present = index.pgc_sort(sqc)
            if present and present != "TRUE":
                where.append(present)
            direction = " DESC" if rev else ""
            for expr in _split_exprs(exprs):
                order.append(expr + direction)
            order_params.extend(sqc.params)
        order.append("e.rid")
        _ordered_sql(plan, " AND ".join(where), params_where,
                     ", ".join(order), order_params)
    elif qc.rank_exprs:
        plan.scored = True
        _scored_sql(plan, " AND ".join(where), params_where, qc)
    else:
        _ordered_sql(plan, " AND ".join(where), params_where, "e.rid", [])
    return plan


def _ordered_sql(plan, where_sql, params_where, order_sql, order_params):
    if plan.b_size is not None:
        plan.limited = True
        plan.sql = (
            "SELECT (SELECT count(*) FROM pgcatalog_entries e WHERE %s), "
            "ARRAY(SELECT e.rid FROM pgcatalog_entries e WHERE %s "
            "ORDER BY %s LIMIT %%s OFFSET %%s)" % (
                where_sql, where_sql, order_sql))
        plan.params = (params_where + params_where + order_params
                       + [plan.b_size, plan.b_start])
    else:
        plan.sql = (
            "SELECT count(*), array_agg(e.rid ORDER BY %s) "
            "FROM pgcatalog_entries e WHERE %s" % (order_sql, where_sql))
        plan.params = order_params + params_where


def _scored_sql(plan, where_sql, params_where, qc):
    """Text queries without sort_on: ordered by relevance (rank computed
    once per matching entry)."""
    rank = " + ".join("COALESCE(%s, 0)" % r for r in qc.rank_exprs)
    inner = ("SELECT e.rid, (%s)::float8 AS score FROM pgcatalog_entries e "
             "WHERE %s" % (rank, where_sql))
    rank_params = list(qc.rank_params)
    if plan.b_size is not None:
        plan.limited = True
        plan.sql = (
            "SELECT (SELECT count(*) FROM pgcatalog_entries e WHERE %s), "
            "array_agg(s.rid ORDER BY s.score DESC, s.rid), "
            "array_agg(s.score ORDER BY s.score DESC, s.rid), "
            "(SELECT max(x.score) FROM (%s) x) FROM "
            "(SELECT * FROM (%s) t ORDER BY t.score DESC, t.rid "
            "LIMIT %%s OFFSET %%s) s" % (where_sql, inner, inner))
        plan.params = (params_where + rank_params + params_where
                       + rank_params + params_where
                       + [plan.b_size, plan.b_start])
    else:
        plan.sql = (
            "SELECT count(*), array_agg(s.rid ORDER BY s.score DESC, s.rid), "
            "array_agg(s.score ORDER BY s.score DESC, s.rid), max(s.score) "
            "FROM (%s) s" % inner)
        plan.params = rank_params + params_where


def _split_exprs(exprs):
    if isinstance(exprs, (list, tuple)):
        return list(exprs)
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


def _python_sort_plan(plan, sort_indexes, reverse, where, params_where):
    """Sorting needs Python (GopipIndex): fetch rid, path and the SQL sort
    keys of every match, sort in Python afterwards."""
    plan.python_sort = sort_indexes
    plan.reverse = reverse
    keys = []
    key_params = []
    for index in sort_indexes:
        if getattr(index, "pgc_python_sort", False):
            keys.append("NULL")
            continue
        sqc = QueryContext(None)
        exprs, present = index.pgc_sort(sqc)
        keys.append(_split_exprs(exprs)[0])
        key_params.extend(sqc.params)
        if present and present != "TRUE":
            where.append(present)
    plan.sql = (
        "SELECT e.rid, e.path%s FROM pgcatalog_entries e WHERE %s "
        "ORDER BY e.rid" % (
            "".join(", " + k for k in keys), " AND ".join(where)))
    plan.params = key_params + params_where
    return plan
