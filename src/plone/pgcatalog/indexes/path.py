"""ExtendedPathIndex (``path``) answered from the entry's own columns.

The value of this index is not kept in ``idx``: every entry row has
``path`` (the physical path, ``COLLATE "C"``), ``parent`` (the parent's path,
``''`` for a one-component path) and ``depth`` (the number of components).

:meth:`PGExtendedPathIndex.pgc_where` translates one query into SQL that
returns exactly what ``ExtendedPathIndex.query_index`` returns, quirks
included (each one is named where it is handled):

* ``search()`` at level 0 with depth 0 or 1 uses the index's two "fast"
  mappings: ``e.path = %s`` (depth 0), ``e.parent = %s`` (depth 1),
  ``e.parent = ANY(%s)`` (navtree) and ``e.path = ANY(%s)`` (breadcrumbs).
  These take the query string literally: a trailing slash matches nothing.
* Otherwise, at level 0, the leading components that equal the catalog's own
  physical path (``/plone/portal_catalog/path``) are *not checked*: ZCatalog
  assumes every entry lives below the site.  Entries below the site are
  matched with range predicates on ``path`` (``p = X OR X/ <= p < X0``,
  ``'0'`` being the code point after ``'/'``); the (normally empty) rest of
  the catalog gets an exact component comparison.  Never ``LIKE``.
* Some answers depend on the catalog as a whole: ZCatalog's ``_depth``
  (the deepest level indexed) and whether any entry ends at a given level
  (when none does, ``intersection(pathset, None)`` keeps the whole
  ``pathset``).  Those facts are sub-selects that PostgreSQL evaluates once
  per statement (lazily, only when a row needs them): for the catalog
  ``qc.cid`` when the query compiler sets it, else for every catalog of the
  database.  The (cid, depth) index of :meth:`pgc_ddl` makes them probes,
  and serves depth-only queries such as global navigation's
  ``{"query": "/plone", "depth": 3}`` (every entry at depths 1..4).

Known difference: ``{"query": "", "navtree": 1, "depth": -2, "level": -1}``
(a depth below -1, no path components) makes ZCatalog raise TypeError only
when its ``_depth`` reaches ``navtree_start + 1 - depth``; it always raises
here.

Explicit levels other than 0 and negative levels ("any level") compare
components with array slices after a cheap ``strpos`` filter: exact, but a
scan of the catalog's rows.
"""
import re

from Products.ExtendedPathIndex.ExtendedPathIndex import ExtendedPathIndex
from Products.PluginIndexes.util import safe_callable

from plone.pgcatalog import schema
from plone.pgcatalog.indexes.base import MISSING
from plone.pgcatalog.indexes.base import NO_MATCH
from plone.pgcatalog.indexes.base import PGIndex


TRUE = "TRUE"
FALSE = "FALSE"

#: the components of the entry's path, as ExtendedPathIndex splits it
COMPS = "array_remove(string_to_array(e.path, '/'), '')"

_TOKEN = re.compile("\x00([0-9]+)\x00")
_CID = "\x01cid\x01"
_MAXINT = "2147483647"


#: |depth|, |level|, navtree_start beyond this are taken as this
_INT_BOUND = 2 ** 29


def _or(parts):
    parts = [p for p in parts if p != FALSE]
    if TRUE in parts:
        return TRUE
    if not parts:
        return FALSE
    if len(parts) == 1:
        return parts[0]
    return "(" + " OR ".join(parts) + ")"


def _and(parts):
    parts = [p for p in parts if p != TRUE]
    if FALSE in parts:
        return FALSE
    if not parts:
        return TRUE
    if len(parts) == 1:
        return parts[0]
    return "(" + " AND ".join(parts) + ")"


def _not(cond):
    if cond == TRUE:
        return FALSE
    if cond == FALSE:
        return TRUE
    return f"NOT {cond}"


def _comps(path):
    return [c for c in path.split("/") if c]


class _Result:
    """What one ``search()`` call returns: a set of entries (``where``) or
    ``None`` (BTrees treat ``None`` as "no constraint" in union and
    intersection).  ``none`` is the condition under which it is ``None``."""

    def __init__(self, where, none=FALSE):
        self.where = where
        self.none = none


class _Compiler:
    """Compiles one path query; values are collected and bound in textual
    order at the end (so fragments can be assembled in any order)."""

    def __init__(self, index, qc, depth, navtree, navtree_start):
        self.index = index
        self.depth = depth
        self.navtree = navtree
        self.ns = navtree_start
        self.cid_value = getattr(qc, "cid", None)
        self.values = []

    # -- parameters ----------------------------------------------------------
    def p(self, value, cast=None):
        self.values.append(value)
        token = "\x00%d\x00" % (len(self.values) - 1)
        return f"{token}::{cast}" if cast else token

    def i(self, value):
        # depths and levels beyond any path mean the same as these (and
        # sums of two stay within PostgreSQL's int)
        value = max(-_INT_BOUND, min(_INT_BOUND, int(value)))
        return self.p(value, "int")

    def bind(self, text, qc):
        return _TOKEN.sub(
            lambda m: qc.param(self.values[int(m.group(1))]), text)

    # -- facts about the whole catalog ---------------------------------------
    # ``cond`` uses alias ``d`` over the entries and _CID for the catalog id.
    # With ``qc.cid`` the fact is an uncorrelated sub-select (PostgreSQL
    # evaluates it once, lazily); without, it is evaluated once for every
    # catalog and the entry's ``cid`` is looked up in the answer.
    def fact(self, cond):
        if self.cid_value is not None:
            return cond.replace(_CID, self.i(self.cid_value))
        return (f"e.cid = ANY(ARRAY(SELECT c.cid FROM {schema.CATALOGS} c "
                f"WHERE {cond.replace(_CID, 'c.cid')}))")

    def has_depth_ge(self, depth):
        """Some entry has at least ``depth`` components (ZCatalog's
        ``_depth >= depth - 1``)."""
        return self.fact(f"EXISTS (SELECT 1 FROM {schema.ENTRIES} d WHERE "
                         f"d.cid = {_CID} AND d.depth >= {self.i(depth)})")

    def has_depth(self, depth):
        """Some entry has exactly ``depth`` components, i.e. ZCatalog's
        ``_index[None][depth - 1]`` exists."""
        return self.fact(f"EXISTS (SELECT 1 FROM {schema.ENTRIES} d WHERE "
                         f"d.cid = {_CID} AND d.depth = {self.i(depth)})")

    def all_depths(self, lo, hi):
        """Every depth in ``lo..hi`` is held by some entry."""
        return self.fact(
            f"NOT EXISTS (SELECT 1 FROM generate_series({self.i(lo)}, "
            f"{self.i(hi)}) AS s(v) WHERE NOT EXISTS (SELECT 1 FROM "
            f"{schema.ENTRIES} d WHERE d.cid = {_CID} AND d.depth = s.v))")

    def _max_depth(self, cid):
        return (f"(SELECT max(d.depth) FROM {schema.ENTRIES} d "
                f"WHERE d.cid = {cid})")

    def _depths(self, cid):
        return (f"ARRAY(SELECT s.v FROM generate_series(0, "
                f"{self._max_depth(cid)}) AS s(v) WHERE EXISTS (SELECT 1 "
                f"FROM {schema.ENTRIES} d WHERE d.cid = {cid} "
                f"AND d.depth = s.v))")

    def catalog_depth(self):
        """ZCatalog's ``_depth`` (deepest level) as an SQL expression."""
        if self.cid_value is not None:
            return f"({self._max_depth(self.i(self.cid_value))} - 1)"
        per_catalog = (f"(SELECT jsonb_object_agg(c.cid::text, "
                       f"{self._max_depth('c.cid')}) "
                       f"FROM {schema.CATALOGS} c)")
        return f"(({per_catalog} ->> e.cid::text)::int - 1)"

    def catalog_has_depth(self, depth_sql):
        """``depth_sql`` (an SQL expression) is held by some entry."""
        if self.cid_value is not None:
            depths = self._depths(self.i(self.cid_value))
            return f"({depth_sql}) = ANY({depths})"
        per_catalog = (f"(SELECT jsonb_object_agg(c.cid::text, "
                       f"to_jsonb({self._depths('c.cid')})) "
                       f"FROM {schema.CATALOGS} c)")
        return (f"({per_catalog} -> e.cid::text) @> "
                f"to_jsonb(({depth_sql})::int)")

    # -- predicates on the entry ---------------------------------------------
    def depth_between(self, lo, hi, fact, open_low=False):
        """``depth BETWEEN lo AND hi`` if ``fact()`` holds, else no limit.

        Written as bounds (computed once by PostgreSQL) rather than an OR,
        so that the (cid, depth) index can still be combined with the path
        ones.  ``open_low``: the pathset holds nothing shallower than
        ``lo`` anyway, so only the upper bound depends on the fact."""
        if open_low:
            low = self.i(lo)
        else:
            low = f"(CASE WHEN {fact()} THEN {self.i(lo)} ELSE 0 END)"
        high = f"(CASE WHEN {fact()} THEN {self.i(hi)} ELSE {_MAXINT} END)"
        return f"e.depth BETWEEN {low} AND {high}"

    def in_tree(self, comps):
        """The entry is the object at ``comps`` or below it (the object and
        its descendants): ``path = X OR X/ <= path < X0``."""
        x = "/" + "/".join(comps)
        return (f"(e.path = {self.p(x)} OR (e.path >= {self.p(x + '/')} "
                f"AND e.path < {self.p(x + '0')}))")

    def outside_tree(self, comps):
        x = "/" + "/".join(comps)
        return (f"(e.path < {self.p(x)} OR (e.path > {self.p(x)} AND "
                f"e.path < {self.p(x + '/')}) OR e.path >= {self.p(x + '0')})")

    def contains_after_first(self, comps):
        """``comps`` follow each other somewhere after the entry's first
        component (a necessary condition for a match at a level >= 1)."""
        needle = "/" + "/".join(comps) + "/"
        return f"strpos(substr(e.path || '/', 2), {self.p(needle)}) > 0"

    def slice_eq(self, level, comps, level_sql=None, comps_sql=COMPS):
        """The entry's components at ``level ..`` equal ``comps``."""
        if level_sql is None:
            lo, hi = self.i(level + 1), self.i(level + len(comps))
        else:
            lo = f"{level_sql} + 1"
            hi = f"{level_sql} + {self.i(len(comps))}"
        return f"({comps_sql})[{lo}:{hi}] = {self.p(list(comps), 'text[]')}"

    # -- search() ------------------------------------------------------------
    def search(self, key, default_level):
        if isinstance(key, str):
            level, path = default_level, key
        else:
            level, path = int(key[1]), key[0]
        if level < 0:
            # ZCatalog: multiunion(search(path, l) for l in 0.._depth)
            first = self.search_level(path, 0)
            # multiunion() fails on a level whose search() gives None: at
            # level 0 (known here), or, for a navtree search with a depth
            # below -1 and no components, at the levels from
            # navtree_start + 1 - depth on, which exist in any catalog but
            # a very shallow one (see the module docstring).
            if first.none == TRUE or (
                    self.navtree and self.depth < -1 and not _comps(path)):
                raise TypeError("'NoneType' object is not iterable")
            rest = self.search_any_level(path)
            return _Result(_or([_and([_not(first.none), first.where]),
                                rest]))
        return self.search_level(path, level)

    def search_level(self, path, level):
        """``ExtendedPathIndex.search`` for one level >= 0."""
        comps = _comps(path)
        depth, navtree, ns = self.depth, self.navtree, self.ns
        if navtree and depth == -1:
            depth = 1
        k = len(comps)
        fact = TRUE
        if navtree:
            # navtree_start > min(pathlength + depth, _depth): empty
            if ns > level + k - 1 + depth:
                return _Result(FALSE)
            if ns >= 1:
                fact = self.has_depth_ge(ns + 1)

        if level == 0 and depth in (0, 1):
            return _Result(self.fast(path, comps, depth, fact))

        prefix = []
        anchored = level == 0
        if anchored:
            # The components shared with the index's own physical path are
            # skipped: "an assumption about all indexed values having the
            # same common base path".
            indexpath = [c for c in self.index.getPhysicalPath() if c]
            for i in range(min(len(indexpath), k)):
                if indexpath[i] != comps[i]:
                    break
                level += 1
            prefix, comps = comps[:level], comps[level:]
            k = len(comps)

        if not comps and depth == -1:
            return _Result(TRUE)

        def matches(i):
            """pathset after comps[0..i]: comps at levels level..level+i."""
            target = comps[:i + 1]
            if not anchored:
                # level >= 1: a cheap string test first
                return _and([self.contains_after_first(target),
                             self.slice_eq(level, target)])
            inside = self.in_tree(prefix + target)
            if not prefix:
                return inside
            return _or([inside, _and([self.outside_tree(prefix),
                                      self.slice_eq(level, target)])])

        parts = []
        if navtree and depth > 0:
            lo, hi = min(ns, level), max(ns, level)
            parts.append(f"e.depth BETWEEN {self.i(lo + 1)} AND "
                         f"{self.i(hi + 1)}")
        if navtree:
            for i in range(k):
                if i + level >= ns:
                    # intersection(pathset, _index[None].get(i + level)):
                    # the whole pathset when nobody ends at that level
                    end = i + level + 1
                    parts.append(_and([matches(i), self.depth_between(
                        end, end, lambda: self.has_depth(end))]))
        if depth >= 0:
            start = k - 1
            if navtree:
                start = max(start, ns - level)
            lo, hi = start + level + 1, start + level + depth + 1
            if k:
                # as above, for each level in lo..hi
                parts.append(_and([matches(k - 1), self.depth_between(
                    lo, hi, lambda: self.all_depths(lo, hi),
                    open_low=start == k - 1)]))
            else:
                parts.append(f"e.depth BETWEEN {self.i(lo)} AND "
                             f"{self.i(hi)}")
        if navtree or depth >= 0:
            if navtree and depth < 0 and not parts:
                return _Result(FALSE, none=fact)
            return _Result(_and([fact, _or(parts)]))
        if not k:
            return _Result(FALSE, none=TRUE)
        return _Result(matches(k - 1))

    def fast(self, path, comps, depth, fact):
        """Level 0, depth 0 or 1: ``_index_items`` / ``_index_parents``."""
        multi = self.index.multi_valued
        if self.navtree:
            # (below -len(comps) every comps[:i] is [] again: stop there)
            stop = max(self.ns, -len(comps) - 1) - 1
            heads = [comps[:i] for i in range(len(comps), stop, -1)]
            if depth == 1 and not multi:
                # siblings along the path: children of each ancestor
                parents = ["/".join([""] + h) for h in heads]
                if not parents:
                    return FALSE
                return f"e.parent = ANY({self.p(parents, 'text[]')})"
            # breadcrumbs: the objects along the path; an object above
            # navtree_start depends on _depth >= navtree_start.
            sure = ["/" + "/".join(h) for h in heads
                    if self.ns < 1 or len(h) - 1 >= self.ns]
            unsure = ["/" + "/".join(h) for h in heads
                      if not (self.ns < 1 or len(h) - 1 >= self.ns)]
            parts = []
            if sure:
                parts.append(f"e.path = ANY({self.p(sure, 'text[]')})")
            if unsure:
                parts.append(_and([
                    f"e.path = ANY({self.p(unsure, 'text[]')})", fact]))
            return _or(parts)
        if not path.startswith("/"):
            path = "/" + path
        if depth == 0 and not multi:
            return f"e.path = {self.p(path)}"
        # _index_parents keys are normalised: "/" or "/a/b"
        if path != "/" + "/".join(comps):
            return FALSE
        return f"e.parent = {self.p(path if comps else '')}"

    def search_any_level(self, path):
        """The levels 1.._depth of a negative-level search (level 0 is
        :meth:`search_level`'s).  What does not depend on the level is
        taken out; the rest is one correlated EXISTS over the levels
        (``g.l``), with the entry's components computed once (``cc.c``)."""
        comps = _comps(path)
        k = len(comps)
        depth, navtree, ns = self.depth, self.navtree, self.ns
        if navtree and depth == -1:
            depth = 1
        if not comps and depth == -1:
            return TRUE
        contains = TRUE
        if comps:
            # Any match below has all comps (navtree: the first one) at a
            # level >= 1: "/c1/c2/" inside the path, after its first
            # component.  Enough on its own for a plain depth -1 search.
            contains = self.contains_after_first(
                comps if not navtree else comps[:1])
            if not navtree and depth == -1:
                return contains
        init = FALSE
        if navtree and depth > 0:
            # The entries ending at levels min(ns, l)..max(ns, l), over the
            # levels l that pass the navtree_start test (lmin.._depth).
            lmin = max(1, ns - k + 1 - depth)
            init = _and([self.has_depth_ge(max(ns, lmin) + 1),
                         f"e.depth > {self.i(min(ns, lmin))}"])
        lvl = "g.l"

        def matches(i):
            return self.slice_eq(None, comps[:i + 1], level_sql=lvl,
                                 comps_sql="cc.c")

        parts = []
        if navtree:
            for i in range(k):
                end = f"{lvl} + {self.i(i + 1)}"
                parts.append(_and([
                    f"{lvl} + {self.i(i)} >= {self.i(ns)}", matches(i),
                    _or([f"e.depth = {end}",
                         _not(self.catalog_has_depth(end))])]))
        if depth >= 0:
            if navtree:
                start = f"GREATEST({self.i(k - 1)}, {self.i(ns)} - {lvl})"
            else:
                start = self.i(k - 1)
            lo = f"({start} + {lvl})"
            hi = f"({start} + {lvl} + {self.i(depth)})"
            within = f"e.depth - 1 BETWEEN {lo} AND {hi}"
            if k:
                gap = (f"EXISTS (SELECT 1 FROM generate_series({lo}, {hi}) "
                       f"AS s(v) WHERE NOT "
                       f"{self.catalog_has_depth('s.v + 1')})")
                parts.append(_and([matches(k - 1), _or([within, gap])]))
            else:
                parts.append(within)
        if navtree or depth >= 0:
            body = _or(parts)
        else:
            body = matches(k - 1) if k else FALSE
        if navtree and body != FALSE:
            # navtree_start > min(pathlength + depth, _depth): empty
            body = _and([f"{self.i(ns)} <= LEAST({lvl} + "
                         f"{self.i(k - 1 + depth)}, {self.catalog_depth()})",
                         body])
        if body == FALSE:
            return init
        per_level = (f"EXISTS (SELECT 1 FROM (SELECT {COMPS} AS c) AS cc, "
                     f"generate_series(1, {self.catalog_depth()}) AS g(l) "
                     f"WHERE {body})")
        return _or([init, _and([contains, per_level])])


class PGExtendedPathIndex(PGIndex, ExtendedPathIndex):
    """``ExtendedPathIndex`` whose data are the entries' path columns.

    Holds configuration only (``indexed_attrs``, ``multi_valued``): the
    BTrees of the original class are never created, because ``clear()``
    (called by its constructor) is the data-side one of
    :class:`~plone.pgcatalog.indexes.access.IndexData`.
    """

    pgc_storage = "path"

    def pgc_extract(self, obj):
        """The path ``ExtendedPathIndex.index_object`` would index."""
        attrs = self.indexed_attrs
        name = attrs[0] if attrs is not None else self.id
        path = getattr(obj, name, None)
        if path is not None:
            if safe_callable(path):
                path = path()
            if not isinstance(path, (str, tuple)):
                raise TypeError(
                    "path value must be string or tuple "
                    "of strings: (%r, %s)" % (name, repr(path)))
        else:
            try:
                path = obj.getPhysicalPath()
            except AttributeError:
                return MISSING
        if isinstance(path, (list, tuple)):
            path = "/" + "/".join(path[1:])
        return path

    def pgc_where(self, iq, qc):
        if iq.keys is None:
            return None
        level = iq.get("level", 0)
        operator = iq.get("operator", self.useOperator).lower()
        depth = getattr(iq, "depth", -1)
        navtree = iq.get("navtree", 0)
        navtree_start = iq.get("navtree_start", 0)
        compiler = _Compiler(self, qc, depth, navtree, navtree_start)
        results = [compiler.search(k, level) for k in iq.keys]
        if operator == "or":
            # union(): a None result adds nothing
            where = _or([_and([_not(r.none), r.where]) for r in results])
        else:
            # intersection(): a None result constrains nothing; all None
            # gives None, i.e. an empty result.
            where = _and([_or([r.none, r.where]) for r in results]
                         + [_not(_and([r.none for r in results]))])
        if where == FALSE:
            return NO_MATCH
        if where == TRUE:
            return TRUE
        return "(%s)" % compiler.bind(where, qc)

    def pgc_sort(self, qc):
        # ZCatalog sorts by documentToKeyMap(): the indexed path string.
        return "e.path", "TRUE"

    def pgc_indexes(self):
        """None of its own: the base schema's (cid, path), (cid, parent)
        and (cid, depth) indexes serve the path predicates, the depth-only
        ones (``{"query": "/plone", "depth": 3}``, global navigation) and
        the per-catalog depth facts."""
        return []
