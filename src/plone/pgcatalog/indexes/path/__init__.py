"""ExtendedPathIndex (``path``) answered from the entry's own columns.

The value of this index is not kept in ``idx``: every entry row has
``path`` (the physical path, ``COLLATE "C"``) and ``depth`` (the number of
components); the parent's path (``''`` for a one-component path) is
computed from ``path`` (``tables.parent_sql``, under the (cid, parent)
B-tree: written ``e.parent`` below).

:meth:`PGExtendedPathIndex.pgc_where` translates one query into SQL that
returns exactly what ``ExtendedPathIndex.query_index`` returns, quirks
included (each one is named where it is handled):

* ``search()`` at level 0 with depth 0 or 1 uses the index's two "fast"
  mappings: ``e.path = $1`` (depth 0), ``e.parent = $1`` (depth 1),
  ``e.parent = ANY($1)`` (navtree) and ``e.path = ANY($1)`` (breadcrumbs).
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
  database (:mod:`.facts`).  The base schema's (cid, depth) index makes
  them probes, and serves depth-only queries such as global navigation's
  ``{"query": "/plone", "depth": 3}`` (every entry at depths 1..4).

Known difference: ``{"query": "", "navtree": 1, "depth": -2, "level": -1}``
(a depth below -1, no path components) makes ZCatalog raise TypeError only
when its ``_depth`` reaches ``navtree_start + 1 - depth``; it always raises
here.

Explicit levels other than 0 and negative levels ("any level") compare
components with array slices after a cheap ``strpos`` filter: exact, but a
scan of the catalog's rows.

The package: :mod:`.predicates` (conditions on one entry's path columns),
:mod:`.facts` (facts about the whole catalog), :mod:`.search` (ZCatalog's
``search()`` for one key) and, here, the index kind.
"""
from Products.ExtendedPathIndex.ExtendedPathIndex import ExtendedPathIndex
from Products.PluginIndexes.util import safe_callable
from zope.interface import implementer

from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import ISubtreeKind
from plone.pgcatalog.indexes.path.predicates import all_of
from plone.pgcatalog.indexes.path.predicates import any_of
from plone.pgcatalog.indexes.path.predicates import negation
from plone.pgcatalog.indexes.path.search import NotOnColumn
from plone.pgcatalog.indexes.path.search import PathSearch
from plone.pgcatalog.indexes.path.search import tree_root
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg.fragment import FALSE
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import q

#: ZCatalog sorts by documentToKeyMap(): the indexed path string
PATH = q("e.path")
#: the hot row's copy of its entry's path (schema version 13)
HOT_PATH = q("h.path")


@implementer(IHotConditionKind, ISubtreeKind)
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
        return self._where(iq, qc)

    def pgc_hot_where(self, iq, qc):
        """The search over the hot row's copy of the path (``h.path``),
        beside key conditions (:meth:`pgc_subtrees`), or None."""
        return self.pgc_subtrees(iq, qc, HOT_PATH)

    def pgc_subtrees(self, iq, qc, column=PATH):
        """The search as subtrees read from the path ``column`` alone (the
        entry's; a B-tree on it answers each from one range): hot.OnPath, whose
        ``parts`` are disjoint single ranges (a union of subtrees, a
        subtree under another left out), built when a plan reads them;
        None for other searches (a depth, a navtree, a level)."""
        if iq is None or iq.keys is None or iq.get("level", 0) != 0 or \
                iq.get("navtree", 0) or getattr(iq, "depth", -1) != -1:
            return None
        built = []

        def build():
            if not built:
                try:
                    built.append(self._trees(iq, qc, column))
                except NotOnColumn:
                    built.append(None)
            return built[0]
        return hot.OnPath(build)

    def _trees(self, iq, qc, column):
        """``[condition]`` of disjoint subtrees over ``column``, TRUE
        (every entry), or None; raises NotOnColumn."""
        operator = iq.get("operator", self.useOperator).lower()
        if operator != "or" and len(iq.keys) > 1:
            # an intersection of subtrees: as one condition
            where = self._where(iq, qc, column=column)
            if where is NO_MATCH or where is None:
                return None
            return TRUE if where is TRUE else [where]
        search = PathSearch(self, qc.cid, -1, 0, 0,
                            getattr(qc, "path_outside", None),
                            column=column)
        trees = {}
        for key in iq.keys:
            result = search.search(key, 0)
            if result.none is not FALSE:
                raise NotOnColumn(key)
            if result.where is TRUE:
                return TRUE
            if result.where is FALSE:
                continue
            trees[tree_root(key if isinstance(key, str) else key[0])] = \
                result.where
        # union(): a subtree within another adds nothing; the others are
        # disjoint
        parts = [where for root, where in sorted(trees.items())
                 if not any(root.startswith(other + "/") for other in trees)]
        return parts or None

    def _where(self, iq, qc, column=None):
        if iq.keys is None:
            return None
        level = iq.get("level", 0)
        operator = iq.get("operator", self.useOperator).lower()
        depth = getattr(iq, "depth", -1)
        navtree = iq.get("navtree", 0)
        navtree_start = iq.get("navtree_start", 0)
        search = PathSearch(self, qc.cid, depth, navtree, navtree_start,
                            getattr(qc, "path_outside", None),
                            getattr(qc, "alone", False), column=column)
        results = [search.search(k, level) for k in iq.keys]
        if operator == "or":
            # union(): a None result adds nothing
            where = any_of([all_of([negation(r.none), r.where])
                            for r in results])
        else:
            # intersection(): a None result constrains nothing; all None
            # gives None, i.e. an empty result.
            where = all_of([any_of([r.none, r.where]) for r in results]
                           + [negation(all_of([r.none for r in results]))])
        if where is FALSE:
            return NO_MATCH
        if where is TRUE:
            return TRUE
        return q("({})", where)

    def pgc_sort(self, qc):
        return (PATH,), None

    def pgc_indexes(self):
        """None of its own: the base schema's (cid, path), (cid, parent)
        and (cid, depth) indexes serve the path predicates, the depth-only
        ones (``{"query": "/plone", "depth": 3}``, global navigation) and
        the per-catalog depth facts."""
        return []
