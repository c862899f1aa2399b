"""Result sequences: ZTUtils' LazyMap over an :class:`Answer`.

A plan (``plans.py``, ``relevance.py``, ``sorting.py``) produces an
:class:`Answer`: the rids in order, the total (or the statement counting
it, run when ``actual_result_count`` is first read), relevance scores (or
the statement computing them, run when a brain is first read).  Brains
are made on access: the metadata of a window of rids (growing as iteration
goes on) is read in one statement, so rendering a page of brains costs one
round trip and ``len(results)`` costs none.

An answer can be shared by transactions that see the same catalog state
(the result cache, ``cache.py``): whatever a transaction learns later (the
total, the scores, brains' metadata) is added to the shared answer only when
its PostgreSQL snapshot is complete for that state
(:meth:`plone.pgcatalog.pg.store.CatalogStore.snapshot_complete`).
"""
import bisect
import weakref
from collections.abc import Mapping

import orjson
from ZTUtils.Lazy import LazyCat
from ZTUtils.Lazy import LazyMap
from ZTUtils.Lazy import _marker

from plone.pgcatalog.changes import meta_current
from plone.pgcatalog.codec.core import meta_values
from plone.pgcatalog.search import keptmeta
from plone.pgcatalog.search import preparing
from plone.pgcatalog.search.cache import get_cache
from plone.pgcatalog.search.lazy import LazyRids

FIRST_WINDOW = 32
MAX_WINDOW = 1024
#: an iteration over the brains (a loop, ``list()``: a navigation tree of
#: every document) reads the metadata after its first window this many
#: rows at a time: it will read them all, and each statement is a round
#: trip (2,000 brains: 2 statements, where the doubling windows took 7)
ITER_WINDOW = 4096
#: no metadata entry known (or none current)
UNKNOWN = keptmeta.UNKNOWN


class Answer:
    """What a search found, independent of any transaction."""

    __slots__ = ("rids", "count", "counting", "scores", "scoring", "meta",
                 "values", "cache", "shared", "tags", "reorder", "origin",
                 "rest", "window", "tseq", "judge")

    def __init__(self, rids, count, scores=None, counting=None,
                 scoring=None):
        self.rids = rids
        #: the total (actual_result_count), or None: ``counting`` counts it
        self.count = count
        self.counting = counting
        #: rid -> (score, normalized score), or None
        self.scores = scores
        #: rids -> the statement scoring them (relevance order deferred)
        self.scoring = scoring
        #: rid -> (path, metadata JSON text or None): brains read so far;
        #: a shared answer's entries add the metadata counter they were
        #: read at (changes.py): (path, metadata, seq)
        self.meta = {}
        #: rid -> (its ``meta`` entry, the brain's column values made
        #: from it)
        self.values = {}
        #: the cache holding this answer (it counts the bytes added)
        self.cache = None
        self.shared = False
        #: orders the matches with the folders' positions of the
        #: transaction reading (sorting.PositionOrder), or None
        self.reorder = None
        #: the cached answer a reordered view shares its brains with
        self.origin = None
        #: a big every-match answer: ``rids`` is its head, ``rest`` the
        #: statement reading every rid (lazy.py); None once they are known
        self.rest = None
        #: with ``rest``: ``window(last, n)``, the statement reading the
        #: ``n`` rids after ``last`` in rid order (lazy.py), or None
        self.window = None
        #: a cached answer: the touched-entries sequence it is known
        #: current at, and the judge of entries its query cannot match
        #: (exclusion.py; None: it goes with the first change of what it
        #: reads)
        self.tseq = None
        self.judge = None

    def size(self):
        """Approximate bytes held."""
        n = 200 + 40 * len(self.rids)
        if self.reorder is not None:
            n += self.reorder.size()
        if self.scores:
            n += 120 * len(self.scores)
        return n + _meta_size(self.meta)

    def learns(self, store):
        """Whether what ``store``'s transaction reads may be added: its
        PostgreSQL snapshot holds exactly what its ZODB snapshot counts
        (the answer's key matched that snapshot's counters)."""
        if not self.shared:
            return True
        session = store.session
        if store.wrote or session.pending or session.has_writes:
            return False    # this transaction's own writes would show
        if store.counters is None:
            return False
        return store.snapshot_complete(store.cache_generation)

    def tag_meta(self, seq):
        """The metadata read so far was read at metadata counter ``seq``
        (the answer is about to be shared)."""
        self.meta = _tagged(self.meta, seq)

    def meta_entry(self, rid, view):
        """The metadata entry held for ``rid`` if it is that of the
        snapshot whose metadata counters are ``view`` (a shared answer's
        may be older: changes.meta_current), else UNKNOWN."""
        entry = self.meta.get(rid, UNKNOWN)
        if entry is UNKNOWN or not self.shared:
            return entry
        if view is None or entry is None or len(entry) < 3 or \
                not meta_current(view, rid, entry[2]):
            return UNKNOWN
        return entry

    def total(self, store):
        if self.count is None:
            # a search's count: prepared or not as the search
            # (preparing.py)
            row = preparing.execute(store, self.counting,
                                     preparing.one)
            count = None if row is None else row[0]
            if not self.learns(store):
                return count
            self.count = count
        return self.count

    def add_meta(self, store, found):
        """Keep brains' metadata read by ``store``'s transaction: the
        entries kept (tagged when the answer is shared), or None: not for
        this answer, see :meth:`learns`."""
        if not self.learns(store):
            return None
        if self.shared:
            found = _tagged(found, store.counters.seq)
        self.meta.update(found)
        if self.cache is not None:
            self.cache.grew(self.origin or self, _meta_size(found))
        return found

    def adopt_meta(self, rid, entry):
        """Keep a current entry of ``rid`` found beside the answer
        (keptmeta.py)."""
        self.meta[rid] = entry
        if self.cache is not None:
            self.cache.grew(self.origin or self, _meta_size({rid: entry}))

    def reordered(self, catalog):
        """This cached answer in the order its folders have in
        ``catalog``'s transaction (see sorting.PositionOrder): a view sharing
        its brains' metadata, or the answer itself when nothing is to be
        ordered in Python."""
        if self.reorder is None:
            return self
        rids, count = self.reorder.again(catalog)
        view = Answer(rids, count)
        view.meta, view.values = self.meta, self.values
        view.cache, view.shared, view.origin = self.cache, self.shared, self
        return view

    def relevance(self, store):
        """``(ordered rids, scores)``: relevance descending, equal scores
        newest rid first (as ZCatalog's byValue)."""
        if self.scores is not None:
            return self.rids, self.scores
        row = preparing.execute(store, self.scoring(list(self.rids)),
                                preparing.one)
        ordered, scores = by_relevance(row[0], row[1])
        if self.learns(store):
            self.rids, self.scores = ordered, scores
        return ordered, scores


class Scores(Mapping):
    """rid -> (score, normalized score) of a relevance order: the scores
    as read, each pair made when a brain asks for it (a text search with
    tens of thousands of matches shows twenty)."""

    __slots__ = ("raw", "top")

    def __init__(self, raw, top):
        #: rid -> score
        self.raw = raw
        self.top = top

    def __getitem__(self, rid):
        score = self.raw[rid]
        top = self.top
        return score, (int(100.0 * score / top) if top else 1)

    def __iter__(self):
        return iter(self.raw)

    def __len__(self):
        return len(self.raw)


def by_relevance(rids, raw):
    """``(rids, scores)`` of ``rids`` scored ``raw`` (parallel lists,
    already in relevance order: score descending, equal scores newest rid
    first, as ZCatalog's byValue; the statements order them, see
    ``relevance.RELEVANCE_ORDER``); ``scores``: rid -> (score, normalized
    score)."""
    rids = rids or []
    raw = raw or []
    return rids, Scores(dict(zip(rids, raw)), raw[0] if raw else 0)


def _tagged(meta, seq):
    """Metadata entries with the counter they were read at (an entry
    replaced whole: a reader never sees new metadata with an old tag)."""
    return {rid: (entry[0], entry[1], seq) if entry else
            (None, None, seq) for rid, entry in meta.items()}


def _meta_size(meta):
    return sum(120 + (len(e[0]) + 2 * len(e[1] or "")
                      if e and e[0] is not None else 0)
               for e in meta.values())


class BrainFactory:
    """The ``LazyMap`` function: rid -> brain, loading windows of rids
    (those the answer already knows are not read again)."""

    def __init__(self, tool, answer, rids, scores):
        self.tool = tool
        self.answer = answer
        self.rids = rids
        self.scores = scores
        self.klass = tool._catalog.brain_class()
        self.names = self.klass._pgc_names
        #: metadata read for this sequence only (not added to the answer)
        self.local = {}
        self.store = self.store_ref = None
        self.positions = None
        self.next_start = 0
        #: the sequence is being iterated (PGLazyMap.__iter__)
        self.iterating = False
        self.window = FIRST_WINDOW
        #: this transaction's metadata counters (a shared answer's brains
        #: are checked against them)
        self.view = None
        #: the process's metadata kept across answers (keptmeta.py), for
        #: a shared answer's brains
        self.kept = self.scope = None
        if answer.shared:
            store = tool._pgc_store()
            if store.counters is not None:
                self.view = store.counters.view()
                cache = get_cache()
                if cache is not None:
                    self.kept = cache.meta
                    self.scope = keptmeta.scope(store)

    def _layout(self, digest):
        """The names of a metadata layout this process does not know
        (asked only then: codec.meta_values)."""
        return self.tool._pgc_store().meta_layout()(digest)

    def _entry(self, rid):
        """The metadata entry of ``rid`` this sequence may use, or
        UNKNOWN."""
        entry = self.local.get(rid, UNKNOWN)
        if entry is UNKNOWN:
            entry = self.answer.meta_entry(rid, self.view)
            if entry is UNKNOWN and self.kept is not None:
                entry = self.kept.get(self.scope, rid, self.view)
                if entry is not UNKNOWN:
                    self.answer.adopt_meta(rid, entry)
        return entry

    def _position(self, rid):
        """Where ``rid`` is in the sequence: mostly just after the last
        window read (iteration, a page); else looked up (a map of every
        rid, made once: not for each first brain of a big answer)."""
        guess = self.next_start
        rids = self.rids
        if type(rids) is LazyRids:
            # the rids known so far, in rid order (lazy.py): what the
            # brain's own item read
            known = rids.rids
            if guess < len(known) and known[guess] == rid:
                return guess
            found = bisect.bisect_left(known, rid)
            return found if found < len(known) and known[found] == rid \
                else 0
        if guess < len(rids) and rids[guess] == rid:
            return guess
        if self.positions is None:
            self.positions = {r: i for i, r in enumerate(self.rids)}
        return self.positions.get(rid, 0)

    def _load_around(self, rid):
        start = self._position(rid)
        rids = self.rids
        stop = start + (ITER_WINDOW if self.iterating and start
                        else self.window)
        # a big answer's rids past its head are read only when asked for
        window = rids.known(start, stop) if type(rids) is LazyRids \
            else rids[start:stop]
        wanted = [r for r in window if self._entry(r) is UNKNOWN]
        if rid not in wanted:
            wanted.insert(0, rid)
        self.next_start = stop
        self.window = min(self.window * 2, MAX_WINDOW)
        store = self.tool._pgc_store()
        if self.answer.shared:
            # whether it may be shared: asked with the same statement
            store.expect_fill()
        found = store.metadata_window(wanted)
        found = {r: found.get(r) for r in wanted}
        added = self.answer.add_meta(store, found)
        if added is None:
            self.local.update(found)
        elif self.kept is not None and self.answer.shared:
            self.kept.put(self.scope, added)

    def __call__(self, rid):
        entry = self._entry(rid)
        if entry is UNKNOWN:
            self._load_around(rid)
            entry = self._entry(rid)
            if entry is UNKNOWN:    # pragma: no cover - just read
                entry = None
        if entry and entry[0] is not None:
            # the transaction's rid -> path map (tool.getpath) learns it
            if self.store is None:
                self.store = self.tool._pgc_store()
                self.store_ref = weakref.ref(self.store)
            path = self.store.paths[rid] = entry[0]
            extra = (path, self.store_ref)
        else:
            entry = None
            extra = ()
        cached = self.answer.values.get(rid)
        if (cached is None or cached[0] is not entry) and \
                self.kept is not None and entry is not None:
            values = self.kept.values(self.scope, rid, entry, self.names)
            if values is not None:
                cached = self.answer.values[rid] = (entry, values)
        if cached is not None and cached[0] is entry:
            values = cached[1]
        else:
            raw = entry[1] if entry else None
            meta = orjson.loads(raw) if raw else None
            if entry is not None and self.answer.shared and \
                    self.answer.meta.get(rid) is entry:
                # made once for a cached answer, typed values decoded (as
                # ZCatalog's brains share their metadata records): later
                # hits skip parsing and decoding
                values = meta_values(meta, self.names, self._layout, True)
                self.answer.values[rid] = (entry, values)
                if self.kept is not None:
                    self.kept.keep_values(self.scope, rid, entry,
                                          self.names, values)
            else:
                values = meta_values(meta, self.names, self._layout)
        if self.scores is not None:
            score, norm = self.scores.get(rid, (1, 1))
        else:
            score = norm = 1
        return self.klass._pgc_make(
            values + (rid, score, norm) + extra).__of__(self.tool)


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

    def __iter__(self):
        # an iteration (a loop, list()) reads every rid of a big answer at
        # once, not a window at a time as items and slices do (lazy.py);
        # then item by item as the sequence protocol would
        seq = self._seq
        if type(seq) is LazyRids:
            seq.read()
        if isinstance(self._func, BrainFactory):
            self._func.iterating = True
        index = 0
        while True:
            try:
                item = self[index]
            except IndexError:
                return
            yield item
            index += 1


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


class RelevanceOrder:
    """The rids of a text search, put in relevance order on first use.

    Until an item is read (``len()`` needs none), no score is computed."""

    def __init__(self, tool, answer):
        self.tool = tool
        self.answer = answer
        self.ordered = None
        self.scores = None

    def order(self):
        if self.ordered is None:
            self.ordered, self.scores = self.answer.relevance(
                self.tool._pgc_store())
        return self.ordered

    def __getitem__(self, index):
        return self.order()[index]

    def __len__(self):
        return len(self.answer.rids)

    def __iter__(self):
        return iter(self.order())


class RelevanceBrainFactory(BrainFactory):
    """Brains of a relevance-ordered result (scores from the ordering)."""

    def __init__(self, tool, answer, order):
        super().__init__(tool, answer, order, scores={})
        self.order = order

    def __call__(self, rid):
        if not self.scores:
            self.order.order()
            self.scores = self.order.scores
        return super().__call__(rid)


def results_for(tool, answer):
    """A new result sequence (brains wrapped in ``tool``) over ``answer``."""
    rids = answer.rids
    count = answer.count
    if answer.scoring is not None and answer.scores is None:
        if not rids:
            return LazyCat([]) if not count else \
                PGLazyMap(lambda rid: None, [], 0, count)
        order = RelevanceOrder(tool, answer)
        return PGLazyMap(RelevanceBrainFactory(tool, answer, order), order,
                         len(rids), actual_result_count=count)
    if not rids and not count and answer.counting is None:
        return LazyCat([])
    if answer.rest is not None:
        rids = LazyRids(answer, tool._pgc_store())
        if not rids.complete:
            return PGLazyMap(BrainFactory(tool, answer, rids, answer.scores),
                             rids, count, actual_result_count=count)
        rids = rids.rids
    counting = (lambda: answer.total(tool._pgc_store())) \
        if count is None else None
    return PGLazyMap(BrainFactory(tool, answer, rids, answer.scores), rids,
                     len(rids), actual_result_count=count, count=counting)


def make_results(tool, rids, actual_result_count, scores=None):
    """Brains of ``rids`` (an answer of this transaction only)."""
    return results_for(tool, Answer(rids, actual_result_count, scores))
