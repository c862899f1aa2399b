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
  ``pathset``).  Those facts are sub-selects on the catalog that PostgreSQL
  runs once per statement when the catalog id is known (``qc.cid``), and
  per row otherwise.

Explicit levels other than 0 (and negative levels, which mean "any level")
compare components with array slices: correct, but not index assisted.
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

    # -- parameters -----------------------------------------------------------
    def p(self, value, cast=None):
        self.values.append(value)
        token = "\x00%d\x00" % (len(self.values) - 1)
        return f"{token}::{cast}" if cast else token

    def i(self, value):
        return self.p(int(value), "int")

    def bind(self, text, qc):
        return _TOKEN.sub(
            lambda m: qc.param(self.values[int(m.group(1))]), text)

    # -- facts about the whole catalog ------------------------------------------
    def cid(self):
        if self.cid_value is None:
            return "e.cid"
        return self.i(self.cid_value)

    def _any_entry(self, cond):
        return (f"EXISTS (SELECT 1 FROM {schema.ENTRIES} d "
                f"WHERE d.cid = {self.cid()} AND {cond})")

    def has_depth_ge(self, depth):
        """Some entry has at least ``depth`` components."""
        return self._any_entry(f"d.depth >= {self.i(depth)}")

    def has_depth(self, depth):
        """Some entry has exactly ``depth`` components, i.e. ZCatalog's
        ``_index[None][depth - 1]`` exists."""
        return self._any_entry(f"d.depth = {self.i(depth)}")

    def all_depths(self, lo, hi):
        """Every depth in ``lo..hi`` is held by some entry."""
        return (f"NOT EXISTS (SELECT 1 FROM generate_series({self.i(lo)}, "
                f"{self.i(hi)}) AS s(v) WHERE NOT EXISTS (SELECT 1 FROM "
                f"{schema.ENTRIES} d WHERE d.cid = {self.cid()} "
                f"AND d.depth = s.v))")

    # -- predicates on the entry ------------------------------------------------
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

    def slice_eq(self, level, comps, level_sql=None):
        """The entry's components at ``level ..`` equal ``comps``."""
        if level_sql is None:
            lo, hi = self.i(level + 1), self.i(level + len(comps))
        else:
            lo = f"{level_sql} + 1"
            hi = f"{level_sql} + {self.i(len(comps))}"
        return f"({COMPS})[{lo}:{hi}] = {self.p(list(comps), 'text[]')}"

    # -- search() ---------------------------------------------------------------
    def search(self, key, default_level):
        if isinstance(key, str):
            level, path = default_level, key
        else:
            level, path = int(key[1]), key[0]
        if level < 0:
            # ZCatalog: multiunion(search(path, l) for l in 0.._depth)
            first = self.search_level(path, 0)
            if first.none == TRUE:
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
                return self.slice_eq(level, target)
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
                    # intersection(pathset, _index[None].get(i + level))
                    end = i + level + 1
                    parts.append(_and([matches(i), _or([
                        f"e.depth = {self.i(end)}",
                        _not(self.has_depth(end))])]))
        if depth >= 0:
            start = k - 1
            if navtree:
                start = max(start, ns - level)
            lo, hi = start + level + 1, start + level + depth + 1
            within = f"e.depth BETWEEN {self.i(lo)} AND {self.i(hi)}"
            if k:
                parts.append(_and([matches(k - 1), _or([
                    within, _not(self.all_depths(lo, hi))])]))
            else:
                parts.append(within)
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
            heads = [comps[:i] for i in range(len(comps), self.ns - 1, -1)]
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
        """The levels 1.._depth of a negative-level search, as one
        correlated EXISTS over ``generate_series`` (``g.l`` is the level,
        ``c.d`` ZCatalog's ``_depth``, ``c.ds`` the depths in use)."""
        comps = _comps(path)
        k = len(comps)
        depth, navtree, ns = self.depth, self.navtree, self.ns
        if navtree and depth == -1:
            depth = 1
        if not comps and depth == -1:
            return TRUE
        lvl = "g.l"

        def has(end_sql):
            return f"({end_sql}) = ANY(c.ds)"

        def matches(i):
            return self.slice_eq(None, comps[:i + 1], level_sql=lvl)

        conds = []
        if navtree:
            conds.append(f"{self.i(ns)} <= LEAST({lvl} + "
                         f"{self.i(k - 1 + depth)}, c.d)")
        parts = []
        if navtree and depth > 0:
            conds_ns = self.i(ns)
            parts.append(f"e.depth - 1 BETWEEN LEAST({conds_ns}, {lvl}) "
                         f"AND GREATEST({self.i(ns)}, {lvl})")
        if navtree:
            for i in range(k):
                end = f"{lvl} + {self.i(i + 1)}"
                parts.append(_and([
                    f"{lvl} + {self.i(i)} >= {self.i(ns)}", matches(i),
                    _or([f"e.depth = {end}", _not(has(end))])]))
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
                       f"AS s(v) WHERE NOT {has('s.v + 1')})")
                parts.append(_and([matches(k - 1), _or([within, gap])]))
            else:
                parts.append(within)
        if navtree or depth >= 0:
            body = _or(parts)
        else:
            body = matches(k - 1) if k else FALSE
        body = _and(conds + [body])
        if body == FALSE:
            return FALSE
        cid = self.cid()
        stats = (f"(SELECT max(d.depth) - 1 AS d, array_agg(DISTINCT d.depth) "
                 f"AS ds FROM {schema.ENTRIES} d WHERE d.cid = {cid})")
        return (f"EXISTS (SELECT 1 FROM {stats} AS c, "
                f"generate_series(1, c.d) AS g(l) WHERE {body})")


class PGExtendedPathIndex(PGIndex, ExtendedPathIndex):
    """``ExtendedPathIndex`` whose data are the entries' path columns.

    Holds configuration only (``indexed_attrs``, ``multi_valued``); the
    BTrees of the original class are never created.
    """

    pgc_storage = "path"

    def clear(self):
        """Nothing to clear here: the data live in PostgreSQL."""

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
        return compiler.bind(where, qc)

    def pgc_sort(self, qc):
        # ZCatalog sorts by documentToKeyMap(): the indexed path string.
        return "e.path", "TRUE"

    def pgc_ddl(self, table):
        # The base schema's (cid, path) and (cid, parent) indexes serve it.
        return []
