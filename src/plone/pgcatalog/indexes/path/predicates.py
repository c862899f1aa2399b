"""Conditions on one entry's path columns, as Fragments over alias ``e``.

The path index folds its conditions while it builds them (a part that is
always true or never true disappears), so these helpers keep
:data:`~plone.pgcatalog.pg.fragment.TRUE` and
:data:`~plone.pgcatalog.pg.fragment.FALSE` as the constants they are and
compare them by identity.

Values are parameters.  A query path may hold what PostgreSQL text cannot
(NUL, lone surrogates: ``{"path": "/a/\x00"}``); no stored path does, so
such a value is equal to none and its ranges are those of the nearest
storable bounds (:func:`text_cmp`), as a component no entry has.  Integers
are cast (``$n::int``): depths and levels
are compared with the ``integer`` columns and used in array subscripts and
``generate_series``, and psycopg would otherwise send a small Python int
as ``int2``.  Searches run as unnamed statements, so PostgreSQL plans
them with the actual values, as if they were literals (prepared only on a
small catalog where that measured faster, search/preparing.py).
"""
from plone.pgcatalog.indexes.common import needs_tag
from plone.pgcatalog.indexes.common import text_bound
from plone.pgcatalog.pg.fragment import FALSE
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q

#: the entry's path column
PATH = q("e.path")

#: the components of the entry's path, as ExtendedPathIndex splits it
COMPS = q("array_remove(string_to_array(e.path, '/'), '')")

#: |depth|, |level|, navtree_start beyond this are taken as this
INT_BOUND = 2 ** 29

#: PostgreSQL's largest int: "no upper bound" for a depth
MAXINT = q("2147483647")


def integer(value):
    """A depth or level: depths and levels beyond any path mean the same
    as :data:`INT_BOUND` (and sums of two stay within PostgreSQL's int)."""
    return q("{}::int", max(-INT_BOUND, min(INT_BOUND, int(value))))


# -- folding combinators ------------------------------------------------------
def any_of(parts):
    """OR, folded: TRUE if a part is TRUE, FALSE parts left out."""
    parts = [p for p in parts if p is not FALSE]
    if any(p is TRUE for p in parts):
        return TRUE
    return or_(*parts)


def all_of(parts):
    """AND, folded: FALSE if a part is FALSE, TRUE parts left out."""
    parts = [p for p in parts if p is not TRUE]
    if any(p is FALSE for p in parts):
        return FALSE
    return and_(*parts)


def negation(cond):
    """NOT, folded.  Plain ``NOT`` (not :func:`~plone.pgcatalog.pg.fragment.
    not_`'s ``IS NOT TRUE``): what is negated here is never NULL (NOT NULL
    columns, EXISTS, the entry's own catalog's depths)."""
    if cond is TRUE:
        return FALSE
    if cond is FALSE:
        return TRUE
    return q("NOT {}", cond)


# -- the entry's position -----------------------------------------------------
def _joined(comps):
    return "/" + "/".join(comps)


def text_cmp(column, op, value):
    """``column op value`` (``=``, ``<``, ``<=``, ``>=``, ``>``) where the
    column never holds NUL nor lone surrogates and ``value`` may: equal to
    none of them, compared by the nearest storable bound (a stored string
    is never equal to such a value, so ``<`` is ``<=`` and ``>`` is
    ``>=``)."""
    if not needs_tag(value):
        return q("{} %s {}" % op, column, value)
    if op == "=":
        return FALSE
    found_op, bound = text_bound(value, ">=" if op in (">", ">=")
                                 else "<=")
    return q("{} %s {}" % found_op, column, bound)


def text_in(column, values):
    """``column = ANY(values)``, leaving out the values no stored string
    can equal."""
    values = [v for v in values if not needs_tag(v)]
    if not values:
        return FALSE
    return q("{} = ANY({}::text[])", column, values)


def in_tree(comps, ranged=False, column=PATH):
    """The entry is the object at ``comps`` or below it (the object and
    its descendants): ``path = X OR X/ <= path < X0`` (``'0'`` is the code
    point after ``'/'``; ``path`` is ``COLLATE "C"``).

    ``ranged``: written as the one range ``X <= path < X0`` (which also
    holds ``X-1``, ``X.b``, ...) and that test, for a search of the path
    alone: PostgreSQL reads the range from the (cid, path) index, and with
    the depth and rid it carries, from the index alone.  Beside other
    conditions the first form is kept: its two ranges make PostgreSQL read
    the rows in their table's order (a bitmap scan), where for one range it
    prefers to walk the index and visit them at random (a subtree with a
    type: 35-42 ms against 20-24 at 100,000 entries).

    ``column``: the path column (the hot row's copy, ``h.path``)."""
    x = _joined(comps)
    if needs_tag(x):
        return FALSE  # no stored path is at or below it
    if ranged:
        return q("({} >= {} AND {} < {} AND ({} = {} OR {} >= {}))",
                 column, x, column, x + "0", column, x, column, x + "/")
    return q("({} = {} OR ({} >= {} AND {} < {}))",
             column, x, column, x + "/", column, x + "0")


def outside_tree(comps):
    """The entry is neither the object at ``comps`` nor below it."""
    x = _joined(comps)
    return any_of([text_cmp(PATH, "<", x),
                   all_of([text_cmp(PATH, ">", x),
                           text_cmp(PATH, "<", x + "/")]),
                   text_cmp(PATH, ">=", x + "0")])


def contains_after_first(comps):
    """``comps`` follow each other somewhere after the entry's first
    component (a necessary condition for a match at a level >= 1)."""
    x = _joined(comps) + "/"
    if needs_tag(x):
        return FALSE
    return q("strpos(substr(e.path || '/', 2), {}) > 0", x)


def slice_eq(level, comps, comps_sql=COMPS):
    """The components (``comps_sql``) at ``level ..`` equal ``comps``;
    ``level`` is an int or a Fragment (an SQL expression)."""
    if any(needs_tag(c) for c in comps):
        return FALSE
    if isinstance(level, int):
        lo, hi = integer(level + 1), integer(level + len(comps))
    else:
        lo = q("{} + 1", level)
        hi = q("{} + {}", level, integer(len(comps)))
    return q("({})[{}:{}] = {}::text[]", comps_sql, lo, hi, list(comps))


def depth_in(lo, hi):
    """``e.depth BETWEEN lo AND hi``."""
    return q("e.depth BETWEEN {} AND {}", integer(lo), integer(hi))


def depth_between(lo, hi, fact, open_low=False):
    """``depth BETWEEN lo AND hi`` if ``fact()`` (a condition) holds, else
    no limit.

    Written as bounds (computed once by PostgreSQL) rather than an OR, so
    that the (cid, depth) index can still be combined with the path ones.
    ``open_low``: the pathset holds nothing shallower than ``lo`` anyway,
    so only the upper bound depends on the fact."""
    if open_low:
        low = integer(lo)
    else:
        low = q("(CASE WHEN {} THEN {} ELSE 0 END)", fact(), integer(lo))
    high = q("(CASE WHEN {} THEN {} ELSE {} END)", fact(), integer(hi),
             MAXINT)
    return q("e.depth BETWEEN {} AND {}", low, high)
