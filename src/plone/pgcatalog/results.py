"""Result sequences: ZTUtils' LazyMap, with brains loaded in batches.

The search statement returns record ids only.  Brains are made on first
access: the metadata of a window of rids (growing as iteration goes on) is
read in one statement, so rendering a page of brains costs one round trip
and ``len(results)`` costs none."""
import orjson
from Missing import MV
from ZTUtils.Lazy import LazyCat
from ZTUtils.Lazy import LazyMap
from ZTUtils.Lazy import _marker



FIRST_WINDOW = 32
MAX_WINDOW = 1024

def load_metadata(tool, rids):
    """``{rid: (path, meta JSON text or None)}`` for ``rids`` (one
    statement; meta as JSON text: parsed only for the brains actually
    made, a window is fetched ahead of the page being read)."""
    return tool._pgc_store().metadata_window(rids)


def make_brain(tool, klass, names, rid, meta, score=1, norm=1):
    if meta:
        get = meta.get
        values = [get(name, MV) for name in names]
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
        raw = entry[1] if entry else None
        meta = orjson.loads(raw) if raw else None
        if self.scores is not None:
            score, norm = self.scores.get(rid, (1, 1))
            return make_brain(self.tool, self.klass, self.names, rid, meta,
                              score, norm)
        return make_brain(self.tool, self.klass, self.names, rid, meta)


class PGLazyMap(LazyMap):
    """LazyMap of brains (a LazyMap subclass: adapters registered for
    LazyMap apply).

    A page (``b_size`` / ``sort_limit``) is fetched without its total:
    ``actual_result_count`` runs the count statement the first time it is
    read (a listing that shows no total never pays for counting every
    match)."""

    _pgc_count = None

    def __init__(self, func, seq, length=None, actual_result_count=None,
                 count=None):
        super().__init__(func, seq, length, actual_result_count)
        if count is not None and actual_result_count is None:
            self._pgc_count = count
            self._rlen = _marker

    @property
    def actual_result_count(self):
        if self._rlen is _marker:
            count, self._pgc_count = self._pgc_count, None
            self._rlen = count() if count is not None else len(self)
        return self._rlen

    @actual_result_count.setter
    def actual_result_count(self, value):
        self._rlen = value


def empty_result(actual_result_count=0):
    return LazyCat([], 0, actual_result_count)


def slice_results(results, b_start, b_size):
    """``results[b_start:b_start + b_size]`` with Python's slice semantics
    (negative and huge bounds included), as ZCatalog's ``_limit_sequence``
    slices an answer; ``actual_result_count`` stays the whole answer's."""
    count = results.actual_result_count
    picked = range(len(results))[b_start:b_start + b_size]
    if not picked:
        return LazyCat([], 0, count)
    return LazyMap(results.__getitem__, list(picked), len(picked),
                   actual_result_count=count)


def make_results(tool, rids, actual_result_count, scores=None, count=None):
    """Brains of ``rids``; ``count()``, when given instead of
    ``actual_result_count``, counts the total on first use."""
    if not rids and not actual_result_count and count is None:
        return LazyCat([])
    factory = BrainFactory(tool, rids, scores)
    return PGLazyMap(factory, rids, len(rids),
                     actual_result_count=actual_result_count, count=count)


class RelevanceOrder:
    """The rids of a text search, put in relevance order on first use.

    Until an item is read (``len()`` needs none), no score is computed."""

    def __init__(self, tool, rids, statement):
        self.tool = tool
        self.rids = rids
        #: rids -> the scoring statement (a Fragment)
        self.statement = statement
        self.ordered = None
        self.scores = None

    def order(self):
        if self.ordered is None:
            row = self.tool._pgc_store().execute(
                self.statement(list(self.rids)), prepare=False,
                binary=True).fetchone()
            pairs = list(zip(row[1] or [], row[0] or []))
            # relevance descending, equal scores newest rid first (as
            # ZCatalog's byValue)
            pairs.sort(reverse=True)
            top = pairs[0][0] if pairs else 0
            self.scores = {
                rid: (score, int(100.0 * score / top) if top else 1)
                for score, rid in pairs}
            self.ordered = [rid for _, rid in pairs]
        return self.ordered

    def __getitem__(self, index):
        return self.order()[index]

    def __len__(self):
        return len(self.rids)

    def __iter__(self):
        return iter(self.order())


class RelevanceBrainFactory(BrainFactory):
    """Brains of a relevance-ordered result (scores from the ordering)."""

    def __init__(self, tool, order):
        super().__init__(tool, order, scores={})
        self.order = order

    def __call__(self, rid):
        if not self.scores:
            self.order.order()
            self.scores = self.order.scores
        return super().__call__(rid)


def make_relevance_results(tool, rids, actual_result_count, statement):
    if not rids:
        return LazyCat([]) if not actual_result_count else \
            PGLazyMap(lambda rid: None, [], 0, actual_result_count)
    order = RelevanceOrder(tool, rids, statement)
    return PGLazyMap(RelevanceBrainFactory(tool, order), order, len(rids),
                     actual_result_count=actual_result_count)
