"""Result sequences: ZTUtils' LazyMap, with brains loaded in batches.

The search statement returns record ids only.  Brains are made on first
access: the metadata of a window of rids (growing as iteration goes on) is
read in one statement, so rendering a page of brains costs one round trip
and ``len(results)`` costs none."""
from Missing import MV
from ZTUtils.Lazy import LazyCat
from ZTUtils.Lazy import LazyMap

from plone.pgcatalog import codec


FIRST_WINDOW = 32
MAX_WINDOW = 1024

_META_SQL = (
    "SELECT e.rid, e.path, m.meta FROM pgcatalog_entries e "
    "LEFT JOIN pgcatalog_meta m ON m.rid = e.rid WHERE e.rid = ANY(%s)")


def load_metadata(tool, rids):
    """``{rid: (path, meta dict or None)}`` for ``rids`` (one statement);
    also fills the transaction's rid -> path cache."""
    rows = tool._pgc_query(_META_SQL, (list(rids),))
    paths = tool._pgc_path_cache()
    known = tool._pgc_known_paths()
    found = {}
    for rid, path, meta in rows:
        paths[rid] = path
        if meta is not None:
            known.add(path)
        found[rid] = (path, meta)
    return found


def make_brain(tool, klass, names, rid, meta, score=1, norm=1):
    decode = codec.decode
    if meta:
        get = meta.get
        values = []
        for name in names:
            value = get(name, MV)
            if value is not MV and type(value) in (dict, list):
                value = decode(value)
            values.append(value)
    else:
        values = [MV] * len(names)
    values.append(rid)
    values.append(score)
    values.append(norm)
    return klass(tuple(values)).__of__(tool)


class BrainFactory:
    """The ``LazyMap`` function: rid -> brain, loading windows of rids."""

    def __init__(self, tool, rids, scores=None):
        self.tool = tool
        self.rids = rids
        self.scores = scores
        self.klass = tool._catalog.brain_class()
        self.names = self.klass._pgc_names
        self.loaded = {}
        self.positions = None
        self.window = FIRST_WINDOW

    def _load_around(self, rid):
        if self.positions is None:
            self.positions = {r: i for i, r in enumerate(self.rids)}
        start = self.positions.get(rid, 0)
        wanted = [r for r in self.rids[start:start + self.window]
                  if r not in self.loaded]
        if rid not in wanted:
            wanted.insert(0, rid)
        self.window = min(self.window * 2, MAX_WINDOW)
        found = load_metadata(self.tool, wanted)
        for r in wanted:
            self.loaded[r] = found.get(r)

    def __call__(self, rid):
        if rid not in self.loaded:
            self._load_around(rid)
        entry = self.loaded.get(rid)
        meta = entry[1] if entry else None
        if self.scores is not None:
            score, norm = self.scores.get(rid, (1, 1))
            return make_brain(self.tool, self.klass, self.names, rid, meta,
                              score, norm)
        return make_brain(self.tool, self.klass, self.names, rid, meta)


class PGLazyMap(LazyMap):
    """LazyMap of brains (a LazyMap subclass: adapters registered for
    LazyMap apply)."""


def empty_result(actual_result_count=0):
    return LazyCat([], 0, actual_result_count)


def make_results(tool, rids, actual_result_count, scores=None):
    if not rids and not actual_result_count:
        return LazyCat([])
    factory = BrainFactory(tool, rids, scores)
    return PGLazyMap(factory, rids, len(rids),
                     actual_result_count=actual_result_count)
