"""``ExtendedPathIndex.search()`` as a condition on the entry ``e``.

One :class:`PathSearch` per query: it knows the query's options (depth,
navtree, navtree_start), the index (its own physical path and
``multi_valued``) and the catalog's facts, and turns each query key into a
:class:`Result`.  The module docstring of :mod:`plone.pgcatalog.indexes.path`
names the quirks of ZCatalog's answers kept here.
"""
from plone.pgcatalog.indexes.common import needs_tag
from plone.pgcatalog.indexes.path.facts import CatalogFacts
from plone.pgcatalog.indexes.path.predicates import COMPS
from plone.pgcatalog.indexes.path.predicates import PATH
from plone.pgcatalog.indexes.path.predicates import _joined
from plone.pgcatalog.indexes.path.predicates import all_of
from plone.pgcatalog.indexes.path.predicates import any_of
from plone.pgcatalog.indexes.path.predicates import contains_after_first
from plone.pgcatalog.indexes.path.predicates import depth_between
from plone.pgcatalog.indexes.path.predicates import depth_in
from plone.pgcatalog.indexes.path.predicates import in_tree
from plone.pgcatalog.indexes.path.predicates import integer
from plone.pgcatalog.indexes.path.predicates import negation
from plone.pgcatalog.indexes.path.predicates import outside_tree
from plone.pgcatalog.indexes.path.predicates import slice_eq
from plone.pgcatalog.indexes.path.predicates import text_cmp
from plone.pgcatalog.indexes.path.predicates import text_in
from plone.pgcatalog.pg.fragment import FALSE
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: the entry's parent path, as its (cid, parent) B-tree computes it
PARENT = q(schema.parent_sql("e.path"))
#: the level of a negative-level search (``generate_series`` ``g``) and
#: the entry's components computed once for all levels (``cc``)
LEVEL = q("g.l")
LEVEL_COMPS = q("cc.c")


def _comps(path):
    return [c for c in path.split("/") if c]


def tree_root(path):
    """The path of the object a subtree query names, normalised (its
    components joined by single slashes): ``/a/b`` for ``a//b/``."""
    return _joined(_comps(path))


class Result:
    """What one ``search()`` call returns: a set of entries (``where``) or
    ``None`` (BTrees treat ``None`` as "no constraint" in union and
    intersection).  ``none`` is the condition under which it is ``None``."""

    def __init__(self, where, none=FALSE):
        self.where = where
        self.none = none


class NotOnColumn(Exception):
    """The search needs more of the entry than its path column (a
    component test, a depth, a parent; an entry lying outside the site):
    it has no form over the hot row's copy of the path."""


class PathSearch:
    """``search()`` for the keys of one path query.

    ``column``: written over that path column alone (the hot row's copy,
    ``h.path``), as single ranges (the site's entries all lying below it,
    asked as for a search alone), or :class:`NotOnColumn` raised."""

    def __init__(self, index, cid, depth, navtree, navtree_start,
                 outside=None, alone=False, column=None):
        self.column = column
        if column is not None:
            alone = True
        self.index = index
        #: the search's only condition (sorted by nothing or by this
        #: index): its subtrees are single ranges, and the catalog is asked
        #: whether an entry lies outside the site (``outside(path)``; None:
        #: taken as yes)
        self.alone = alone
        self.outside = outside
        self._outside = {}
        self.depth = depth
        self.navtree = navtree
        self.ns = navtree_start
        self.facts = CatalogFacts(cid)

    def search(self, key, default_level):
        if isinstance(key, str):
            level, path = default_level, key
        else:
            level, path = int(key[1]), key[0]
        if self.column is not None and (level != 0 or self.navtree
                                        or self.depth != -1):
            raise NotOnColumn(key)
        if level < 0:
            # ZCatalog: multiunion(search(path, l) for l in 0.._depth)
            if not isinstance(path, str):
                # whose search() takes a path that is not a string as a
                # (path, level) pair again, whatever the level it is given
                # (a number raises TypeError there): the same search at
                # every level
                int(path[1])
                return self.search(path, default_level)
            first = self.search_level(path, 0)
            # multiunion() fails on a level whose search() gives None: at
            # level 0 (known here), or, for a navtree search with a depth
            # below -1 and no components, at the levels from
            # navtree_start + 1 - depth on, which exist in any catalog but
            # a very shallow one (see the package docstring).
            if first.none is TRUE or (
                    self.navtree and self.depth < -1 and not _comps(path)):
                raise TypeError("'NoneType' object is not iterable")
            rest = self.search_any_level(path)
            return Result(any_of([all_of([negation(first.none),
                                          first.where]), rest]))
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
                return Result(FALSE)
            if ns >= 1:
                fact = self.facts.has_depth_ge(ns + 1)

        if level == 0 and depth in (0, 1):
            return Result(self.fast(path, comps, depth, fact))

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
            return Result(TRUE)

        def matches(i):
            """pathset after comps[0..i]: comps at levels level..level+i."""
            target = comps[:i + 1]
            if not anchored:
                # level >= 1: a cheap string test first
                return all_of([contains_after_first(target),
                               slice_eq(level, target)])
            if self.column is not None:
                inside = in_tree(prefix + target, ranged=True,
                                 column=self.column)
            else:
                inside = in_tree(prefix + target, ranged=self.alone)
            if not prefix or not self.anything_outside(prefix):
                return inside
            if self.column is not None:
                raise NotOnColumn(prefix)
            return any_of([inside, all_of([outside_tree(prefix),
                                           slice_eq(level, target)])])

        parts = []
        if navtree and depth > 0:
            lo, hi = min(ns, level), max(ns, level)
            parts.append(depth_in(lo + 1, hi + 1))
        if navtree:
            for i in range(k):
                if i + level >= ns:
                    # intersection(pathset, _index[None].get(i + level)):
                    # the whole pathset when nobody ends at that level
                    end = i + level + 1
                    parts.append(all_of([matches(i), depth_between(
                        end, end, lambda: self.facts.has_depth(end))]))
        if depth >= 0:
            start = k - 1
            if navtree:
                start = max(start, ns - level)
            lo, hi = start + level + 1, start + level + depth + 1
            if k:
                # as above, for each level in lo..hi
                parts.append(all_of([matches(k - 1), depth_between(
                    lo, hi, lambda: self.facts.all_depths(lo, hi),
                    open_low=start == k - 1)]))
            else:
                parts.append(depth_in(lo, hi))
        if navtree or depth >= 0:
            if navtree and depth < 0 and not parts:
                return Result(FALSE, none=fact)
            return Result(all_of([fact, any_of(parts)]))
        if not k:
            return Result(FALSE, none=TRUE)
        return Result(matches(k - 1))

    def anything_outside(self, comps):
        """Whether an entry may lie outside the tree at ``comps`` (the
        index's own path): only such an entry can match the components
        after it without being below it.  Asked of the catalog once per
        search and path (a site's entries all lie below it: the condition
        is then one range of the (cid, path) index).  Beside other
        conditions, not asked: they are read from the entries anyway."""
        if self.outside is None or not self.alone:
            return True
        path = "/" + "/".join(comps)
        if needs_tag(path):
            return True  # nothing is at or below it
        found = self._outside.get(path)
        if found is None:
            found = self._outside[path] = bool(self.outside(path))
        return found

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
                return text_in(PARENT, parents)
            # breadcrumbs: the objects along the path; an object above
            # navtree_start depends on _depth >= navtree_start.
            sure = ["/" + "/".join(h) for h in heads
                    if self.ns < 1 or len(h) - 1 >= self.ns]
            unsure = ["/" + "/".join(h) for h in heads
                      if not (self.ns < 1 or len(h) - 1 >= self.ns)]
            return any_of([text_in(PATH, sure),
                           all_of([text_in(PATH, unsure), fact])])
        if not path.startswith("/"):
            path = "/" + path
        if depth == 0 and not multi:
            return text_cmp(PATH, "=", path)
        # _index_parents keys are normalised: "/" or "/a/b"
        if path != "/" + "/".join(comps):
            return FALSE
        return text_cmp(PARENT, "=", path if comps else "")

    def search_any_level(self, path):
        """The levels 1.._depth of a negative-level search (level 0 is
        :meth:`search_level`'s).  What does not depend on the level is
        taken out; the rest is one correlated EXISTS over the levels
        (``g.l``), with the entry's components computed once (``cc.c``)."""
        comps = _comps(path)
        k = len(comps)
        depth, navtree, ns = self.depth, self.navtree, self.ns
        facts = self.facts
        if navtree and depth == -1:
            depth = 1
        if not comps and depth == -1:
            return TRUE
        contains = TRUE
        if comps:
            # Any match below has all comps (navtree: the first one) at a
            # level >= 1: "/c1/c2/" inside the path, after its first
            # component.  Enough on its own for a plain depth -1 search.
            contains = contains_after_first(
                comps if not navtree else comps[:1])
            if not navtree and depth == -1:
                return contains
        init = FALSE
        if navtree and depth > 0:
            # The entries ending at levels min(ns, l)..max(ns, l), over the
            # levels l that pass the navtree_start test (lmin.._depth).
            lmin = max(1, ns - k + 1 - depth)
            init = all_of([facts.has_depth_ge(max(ns, lmin) + 1),
                           q("e.depth > {}", integer(min(ns, lmin)))])

        def matches(i):
            return slice_eq(LEVEL, comps[:i + 1], LEVEL_COMPS)

        parts = []
        if navtree:
            for i in range(k):
                end = q("{} + {}", LEVEL, integer(i + 1))
                parts.append(all_of([
                    q("{} + {} >= {}", LEVEL, integer(i), integer(ns)),
                    matches(i),
                    any_of([q("e.depth = {}", end),
                            negation(facts.catalog_has_depth(end))])]))
        if depth >= 0:
            if navtree:
                start = q("GREATEST({}, {} - {})", integer(k - 1),
                          integer(ns), LEVEL)
            else:
                start = integer(k - 1)
            lo = q("({} + {})", start, LEVEL)
            hi = q("({} + {} + {})", start, LEVEL, integer(depth))
            within = q("e.depth - 1 BETWEEN {} AND {}", lo, hi)
            if k:
                # (past the catalog's depth every level is a gap: the
                # series stops there, whatever the query's depth)
                gap = q("EXISTS (SELECT 1 FROM generate_series({}, "
                        "LEAST({}, {} + 1)) AS s(v) WHERE NOT {})", lo, hi,
                        facts.catalog_depth(),
                        facts.catalog_has_depth(q("s.v + 1")))
                parts.append(all_of([matches(k - 1), any_of([within, gap])]))
            else:
                parts.append(within)
        if navtree or depth >= 0:
            body = any_of(parts)
        else:
            body = matches(k - 1) if k else FALSE
        if navtree and body is not FALSE:
            # navtree_start > min(pathlength + depth, _depth): empty
            body = all_of([q("{} <= LEAST({} + {}, {})", integer(ns), LEVEL,
                             integer(k - 1 + depth), facts.catalog_depth()),
                           body])
        if body is FALSE:
            return init
        per_level = q("EXISTS (SELECT 1 FROM (SELECT {} AS c) AS cc, "
                      "generate_series(1, {}) AS g(l) WHERE {})",
                      COMPS, facts.catalog_depth(), body)
        return any_of([init, all_of([contains, per_level])])
