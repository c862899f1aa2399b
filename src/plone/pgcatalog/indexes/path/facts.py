"""Facts about a whole catalog that some path answers depend on.

ZCatalog's ExtendedPathIndex consults its own ``_depth`` (the deepest level
indexed) and whether any entry ends at a given level (when none does,
``intersection(pathset, None)`` keeps the whole ``pathset``).  Here those
are sub-selects that PostgreSQL evaluates once per statement (lazily, only
when a row needs them).

With the catalog's id (``qc.cid``, set by the query compiler) a fact is an
uncorrelated sub-select on that catalog's rows, a probe of the base
schema's (cid, depth) index.  Without it, it is evaluated once for every
catalog of the database and the entry's ``cid`` is looked up in the
answer.
"""
from plone.pgcatalog.indexes.path.predicates import integer
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: the catalog id in the per-catalog sub-selects (alias ``c``)
EACH_CID = q("c.cid")


def _max_depth(cid):
    return q("(SELECT max(d.depth) FROM {} d WHERE d.cid = {})",
             schema.ENTRIES_TABLE, cid)


def _depths(cid):
    """The depths some entry of catalog ``cid`` ends at, as an array."""
    return q("ARRAY(SELECT s.v FROM generate_series(0, {}) AS s(v) "
             "WHERE EXISTS (SELECT 1 FROM {} d WHERE d.cid = {} "
             "AND d.depth = s.v))", _max_depth(cid), schema.ENTRIES_TABLE, cid)


class CatalogFacts:
    """The facts of catalog ``cid`` (None: of the entry's catalog,
    whichever it is), as conditions and expressions over the entry
    ``e``."""

    def __init__(self, cid):
        self.cid = None if cid is None else q("{}::int", int(cid))

    def _fact(self, cond):
        """``cond(cid)`` (a condition on the catalog whose id is the
        Fragment ``cid``) for the entry's catalog."""
        if self.cid is not None:
            return cond(self.cid)
        return q("e.cid = ANY(ARRAY(SELECT c.cid FROM {} c WHERE {}))",
                 schema.CATALOGS_TABLE, cond(EACH_CID))

    def has_depth_ge(self, depth):
        """Some entry has at least ``depth`` components (ZCatalog's
        ``_depth >= depth - 1``)."""
        return self._fact(lambda cid: q(
            "EXISTS (SELECT 1 FROM {} d WHERE d.cid = {} AND d.depth >= {})",
            schema.ENTRIES_TABLE, cid, integer(depth)))

    def has_depth(self, depth):
        """Some entry has exactly ``depth`` components, i.e. ZCatalog's
        ``_index[None][depth - 1]`` exists."""
        return self._fact(lambda cid: q(
            "EXISTS (SELECT 1 FROM {} d WHERE d.cid = {} AND d.depth = {})",
            schema.ENTRIES_TABLE, cid, integer(depth)))

    def all_depths(self, lo, hi):
        """Every depth in ``lo..hi`` is held by some entry.  The series
        stops one past the catalog's deepest entry (a depth below which
        nothing ends is not held): a query's huge ``depth`` costs what the
        catalog's depth does, not what the number says."""
        return self._fact(lambda cid: q(
            "NOT EXISTS (SELECT 1 FROM generate_series({}, least({}, "
            "coalesce({}, 0) + 1)) AS s(v) WHERE NOT EXISTS (SELECT 1 FROM "
            "{} d WHERE d.cid = {} AND d.depth = s.v))", integer(lo),
            integer(hi), _max_depth(cid), schema.ENTRIES_TABLE, cid))

    def catalog_depth(self):
        """ZCatalog's ``_depth`` (deepest level) as an SQL expression."""
        if self.cid is not None:
            return q("({} - 1)", _max_depth(self.cid))
        per_catalog = q("(SELECT jsonb_object_agg(c.cid::text, {}) "
                        "FROM {} c)", _max_depth(EACH_CID),
                        schema.CATALOGS_TABLE)
        return q("(({} ->> e.cid::text)::int - 1)", per_catalog)

    def catalog_has_depth(self, depth):
        """``depth`` (an SQL expression) is held by some entry."""
        if self.cid is not None:
            return q("({}) = ANY({})", depth, _depths(self.cid))
        per_catalog = q("(SELECT jsonb_object_agg(c.cid::text, "
                        "to_jsonb({})) FROM {} c)", _depths(EACH_CID),
                        schema.CATALOGS_TABLE)
        return q("({} -> e.cid::text) @> to_jsonb(({})::int)",
                 per_catalog, depth)
