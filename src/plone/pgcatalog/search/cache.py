"""The result cache: answers kept in the process, exact, no statement on a hit.

Why it is exact:

* Every transaction that commits catalog writes increments the catalog's
  generation, a ``BTrees.Length.Length`` on the tool (conflict-resolving:
  concurrent writers never conflict on it), before its commit starts, and
  counts what it changed in the tool's change counters (``changes.py``:
  per index, entries added or removed, metadata per rid).  A request reads
  both through its own ZODB connection, so it sees the values of its ZODB
  snapshot at no cost (the ZODB cache; the storage's invalidations say when
  they changed).
* Keys: the catalog (database, tool key), the change counters of what the
  query reads (the indexes it names or sorts on, the entries, the
  "everything" counter), the catalog's configuration (indexes, metadata
  columns) and the effective query after CMFPlone's additions (roles and
  users; ``effectiveRange`` in the minutes DateRangeIndex compares),
  canonicalised by value *and type*.  A value that cannot be keyed exactly
  (an unknown type) bypasses the cache.  A transaction that began after a
  committed write to something an answer read finds another counter, so
  never that answer.
* Fills: an answer read in PostgreSQL is stored (under the counters of
  a snapshot whose generation is G) only when its PostgreSQL snapshot
  holds exactly the writes G counts.  The generation
  starts at the catalog's change stamp (the number of its writing commits,
  ``pgcatalog_commits``) and both go up by one with every writing
  transaction; so the snapshot's stamp must equal G, and no writing
  transaction may have been in progress when the snapshot was taken
  (:meth:`~plone.pgcatalog.pg.store.CatalogStore.snapshot_complete`, one
  statement per transaction that misses).  The stamp check does not rely on
  how the PostgreSQL snapshot relates in time to the ZODB's (measured: a
  RelStorage reader can load a newer generation than the snapshot its
  catalog statements see): with two-phase commit the catalog commits
  after the storages, so a visible catalog commit is always counted by G
  and an equal count means the same set.  A transaction whose catalog part
  committed while its ZODB part failed (possible without two-phase commit
  only) leaves the stamp ahead of the generation: nothing is filled after
  it, answers are read from PostgreSQL (correct, not cached) until the
  counter is resynchronised (remove the tool's ``_pgc_generation``: the
  next write makes it again from the stamp; docs/cache.md).
  Otherwise the answer serves its own transaction only.
* A transaction with its own catalog writes (pending or sent) neither reads
  nor fills the cache (read-your-own-writes).

Bounded (``cache-mb``, 64 MB by default) with LRU eviction; ``stats()`` for
code and the ZMI status page; ``cache off`` / ``PGCATALOG_CACHE=off`` turns
it off.
"""
import logging
import threading
import time
from collections import OrderedDict

from Acquisition import aq_base
from DateTime import DateTime

from plone.pgcatalog import config
from plone.pgcatalog.changes import read_names
from plone.pgcatalog.indexes.interfaces import IQueryValueKind
from plone.pgcatalog.indexes.interfaces import ISetQueryKind
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.search.keptmeta import KeptMetadata
from plone.pgcatalog.search.query import get_sort_attr
from plone.pgcatalog.search.query import reverse_for

logger = logging.getLogger("plone.pgcatalog")

#: the log says a cache fills nothing once this many answers were refused
#: since the last fill ...
SAY_AFTER = 20
#: ... and that many seconds went by (and not more often)
SAY_EVERY = 60.0
#: what the reasons mean, for the log
REASONS = (
    "count: the snapshot held another number of the catalog's commits "
    "than the ZODB's (a commit finishing; for good: a catalog commit whose "
    "ZODB part failed, see docs/cache.md); writer: a writer of this catalog "
    "was committing as the snapshot began (a prepared transaction left "
    "behind shows in pg_prepared_xacts).")


class Unkeyable(Exception):
    """A query value the cache cannot key exactly."""


_SCALARS = (type(None), bool, int, float, str, bytes)


def canonical(value):
    """A hashable key for ``value``, equal only for values equal in value
    and type; Unkeyable otherwise."""
    kind = type(value)
    if kind in _SCALARS:
        if kind is float and value != value:
            raise Unkeyable("NaN")
        return (kind.__name__, value)
    if isinstance(value, str):
        # Message and other str subclasses: the catalog stores and compares
        # them as plain strings (indexes/common.stored)
        return ("str", str(value))
    if kind in (list, tuple):
        return (kind.__name__, tuple(canonical(v) for v in value))
    if kind in (set, frozenset):
        items = [canonical(v) for v in value]
        try:
            return (kind.__name__, tuple(sorted(items)))
        except TypeError:
            raise Unkeyable("unsortable set")
    if kind is dict:
        items = [(canonical(k), canonical(v)) for k, v in value.items()]
        try:
            return ("dict", tuple(sorted(items)))
        except TypeError:
            raise Unkeyable("unsortable keys")
    if kind is DateTime:
        return ("DateTime", value.micros(), value.timezone())
    raise Unkeyable(kind.__name__)


def _value_key(index, value):
    """One query value (not a dict nor a list) of an IQueryValueKind
    index as the index compares it (a tagged tuple), or None when it
    compares the value as given."""
    try:
        return index.pgc_query_value(value)
    except Exception:  # noqa: B902 - the search raises it, in order
        raise Unkeyable("query value")


def _compared(index, value):
    """A query value of an IQueryValueKind index (a DateRangeIndex: a
    DateTime counts as its minutes) with each of its values as the index
    compares them."""
    if isinstance(value, dict):
        value = dict(value)
        if "query" in value:
            value["query"] = _compared(index, value["query"])
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_compared(index, v) for v in value)
    key = _value_key(index, value)
    return value if key is None else key


#: the options a list of strings keyed as a set may come with
_SET_OPTIONS = frozenset(("query", "operator"))


def _set_key(value):
    """The key of an ISetQueryKind index's query value that is a list of
    strings (alone, or a dict's ``query`` beside an ``operator``) as a
    set of strings, tagged apart from every canonical() key; else None."""
    options = ()
    if isinstance(value, dict):
        if "query" not in value or not set(value) <= _SET_OPTIONS:
            return None
        options = tuple(sorted((k, canonical(v)) for k, v in value.items()
                               if k != "query"))
        value = value["query"]
    if type(value) not in (list, tuple) or not value or \
            not all(isinstance(v, str) for v in value):
        return None
    return ("string set", options, tuple(sorted({str(v) for v in value})))


#: the keys saying how an answer is sorted (query.get_sort_attr), keyed
#: as _sorting says when the query sorts
_SORTING = ("sort_on", "sort-on", "sort_order", "sort-order")


def _sorting(query):
    """How a query sorts, as ZCatalog reads it: the names of its sort
    indexes (one name or a list of one alike) and the directions
    (query.reverse_for: a ``sort_order`` of "ascending" sorts as none);
    None when it sorts by nothing (its ``sort_order`` then says
    nothing)."""
    names = get_sort_attr("on", query)
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    if not all(type(name) is str for name in names):
        raise Unkeyable("sort_on")
    try:
        return tuple(names), tuple(reverse_for(query, names))
    except Exception:  # noqa: B902 - the search raises it, in order
        raise Unkeyable("sort_order")


def _sortable(value):
    """Unkeyable for a list the search fails to sort (it sorts every list
    of a query, as ZCatalog's make_query does: mixed types raise), of a
    key left out of the cache's key: the search must run, and raise."""
    if isinstance(value, (list, tuple)):
        try:
            sorted(value)
        except Exception:  # noqa: B902 - the search raises it, in order
            raise Unkeyable("unsortable list")


def _says_nothing(catalog, query, name):
    """Whether ``name`` is ``Language`` where it cannot change the answer:
    no index, and no language-aware text index asked (their words are
    stemmed in its languages); not a list (the search sorts every list of
    a query: one of mixed types raises, as in ZCatalog)."""
    if name != "Language" or name in catalog._indexes or \
            isinstance(query[name], (list, tuple)):
        return False
    indexes = catalog._indexes
    return not any(
        ITextKind.providedBy(indexes.get(key))
        and indexes[key].pgc_language is not None
        for key in query if isinstance(key, str))


def query_key(catalog, query):
    """The canonical key of a merged query dict on ``catalog``: values
    as the search compares them, the sorting as ZCatalog reads it, keys
    that cannot change the answer left out."""
    sorting = _sorting(query)
    items = []
    for name, value in query.items():
        if not isinstance(name, str):
            raise Unkeyable("key")
        if name in _SORTING:
            if sorting is not None:
                # keyed by ``sorting``
                _sortable(value)
                continue
            if not isinstance(value, (list, tuple)):
                # a sort_order without sort_on says nothing
                continue
        elif _says_nothing(catalog, query, name):
            continue
        if name in catalog._indexes:
            index = catalog.getIndex(name)
            if ISetQueryKind.providedBy(index):
                key = _set_key(value)
                if key is not None:
                    items.append((name, key))
                    continue
            if IQueryValueKind.providedBy(index):
                key = None if isinstance(value, (dict, list, tuple)) \
                    else _value_key(index, value)
                if key is not None:
                    # one value, converted: its tag keeps it apart from
                    # every canonical() key
                    items.append((name, key))
                    continue
                value = _compared(index, value)
        items.append((name, canonical(value)))
    return sorting, tuple(sorted(items, key=lambda item: item[0]))


class ResultCache:
    """Answers by key, LRU within a byte budget (thread-safe)."""

    def __init__(self, max_bytes):
        #: brains' metadata kept across answers (keptmeta.py): a quarter
        #: of the budget, the answers the rest
        self.meta = KeptMetadata(max_bytes // 4)
        self.max_bytes = max_bytes - self.meta.max_bytes
        self.entries = OrderedDict()
        self.sizes = {}
        self.bytes = 0
        self.hits = self.misses = self.evictions = 0
        self.bypasses = self.unfilled = 0
        #: hits of answers judged current after writes (:meth:`still`)
        self.kept_after_writes = 0
        #: loose_key -> the key of the latest answer that can be judged
        self.latest = {}
        #: answers not filled, by reason (consistency.refusal)
        self.refusals = {}
        #: when an answer was last filled (time.time()), and when the
        #: cache last said it could not fill
        self.last_fill = None
        self._last_said = 0.0
        self._since_fill = 0
        self._started = time.time()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            answer = self.entries.get(key)
            if answer is None:
                self.misses += 1
                return None
            self.entries.move_to_end(key)
            self.hits += 1
            return answer

    def still(self, key, counters):
        """The answer of a query kept under another key (the entries or
        its indexes changed since) when every entry touched since cannot
        match it (changes.ChangeCounters.untouched_by), now kept under
        ``key``; else None."""
        loose = loose_key(key)
        with self.lock:
            old = self.latest.get(loose)
            answer = None if old is None else self.entries.get(old)
        if answer is None or answer.judge is None or \
                not counters.untouched_by(answer.tseq, answer.judge):
            return None
        with self.lock:
            if self.entries.get(old) is not answer:
                return None     # evicted meanwhile
            if key not in self.entries:
                del self.entries[old]
                self.entries[key] = answer
                self.latest[loose] = key
            self.entries.move_to_end(key)
            answer.tseq = max(answer.tseq, counters.tseq)
            self.misses -= 1
            self.hits += 1
            self.kept_after_writes += 1
            return self.entries[key]

    def refused(self, reason):
        """An answer read from PostgreSQL was not filled (``reason``:
        consistency.COUNT or consistency.WRITER).  When nothing was filled
        for a while although answers were refused, say so in the log (once
        every :data:`SAY_EVERY` seconds): a cache that cannot fill costs
        every search a statement."""
        now = time.time()
        with self.lock:
            self.unfilled += 1
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
            self._since_fill += 1
            quiet = now - (self.last_fill or self._started)
            if self._since_fill < SAY_AFTER or quiet < SAY_EVERY or \
                    now - self._last_said < SAY_EVERY:
                return
            self._last_said = now
            since, refusals = self._since_fill, dict(self.refusals)
        logger.warning(
            "the result cache filled nothing for %d s: %d answers refused "
            "since (by reason, this process: %s).  %s", quiet, since,
            ", ".join("%s %d" % item for item in sorted(refusals.items())),
            REASONS)

    def put(self, key, answer):
        size = answer.size()
        if size > self.max_bytes:
            return
        with self.lock:
            self.last_fill = time.time()
            self._since_fill = 0
            if key in self.entries:
                return
            answer.cache = self
            answer.shared = True
            self.entries[key] = answer
            if answer.judge is not None:
                self.latest[loose_key(key)] = key
            self.sizes[id(answer)] = size
            self.bytes += size
            self._evict()

    def grew(self, answer, size):
        with self.lock:
            if id(answer) in self.sizes:
                self.sizes[id(answer)] += size
                self.bytes += size
                self._evict()

    def _evict(self):
        while self.bytes > self.max_bytes and self.entries:
            key, old = self.entries.popitem(last=False)
            self.bytes -= self.sizes.pop(id(old), 0)
            loose = loose_key(key)
            if self.latest.get(loose) == key:
                del self.latest[loose]
            old.cache = None
            self.evictions += 1

    def clear(self):
        with self.lock:
            for answer in self.entries.values():
                answer.cache = None
            self.entries.clear()
            self.sizes.clear()
            self.latest.clear()
            self.bytes = 0
        self.meta.clear()

    def stats(self):
        with self.lock:
            return {"entries": len(self.entries), "bytes": self.bytes,
                    "max_bytes": self.max_bytes, "hits": self.hits,
                    "misses": self.misses, "evictions": self.evictions,
                    "kept_after_writes": self.kept_after_writes,
                    "bypasses": self.bypasses, "unfilled": self.unfilled,
                    "unfilled_count": self.refusals.get("count", 0),
                    "unfilled_writer": self.refusals.get("writer", 0),
                    "kept_metadata": self.meta.stats(),
                    "last_fill": None if self.last_fill is None else
                    time.strftime("%Y-%m-%d %H:%M:%S",
                                  time.localtime(self.last_fill))}


_cache = []
_cache_lock = threading.Lock()


def get_cache():
    """This process's result cache, or None when turned off."""
    if not config.get_cache():
        return None
    if not _cache:
        with _cache_lock:
            if not _cache:
                _cache.append(ResultCache(
                    int(config.get_cache_mb() * 1024 * 1024)))
    return _cache[0]


def stats():
    """The cache's figures (None when it is off)."""
    cache = get_cache()
    return None if cache is None else cache.stats()


def forget():
    """Empty the cache (tests that rewind the database)."""
    if _cache:
        _cache[0].clear()


def generation(tool):
    """The catalog's generation in this transaction's ZODB snapshot (None:
    no counter yet: nothing is cached)."""
    # getattr, not __dict__: a ghost's __dict__ is empty until loaded
    counter = getattr(aq_base(tool), "_pgc_generation", None)
    return None if counter is None else counter()


def view(tool, store):
    """Give ``store`` this transaction's view of ``tool``'s changes: its
    generation (fill checks) and change counters (changes.py), both from
    the ZODB snapshot (no statement), or None when the catalog has none
    yet.  The result cache, the kept text statistics (textstats.py) and
    the kept catalog-wide values (``CatalogStore.stamped``) read them."""
    gen = generation(tool)
    counters = getattr(aq_base(tool), "_pgc_changes", None)
    if gen is None or counters is None:
        gen = counters = None
    store.cache_generation = gen
    store.counters = counters


def key_for(tool, store, query):
    """``(cache, key)`` of ``query`` on ``tool`` in this transaction, or
    ``(None, None)`` (cache off, own writes, no counters yet, a value that
    cannot be keyed).  The key holds the change counters of what the query
    reads (changes.py): the indexes it names or sorts on, the entries that
    exist, every answer's ``all``.  The transaction's generation (the fill
    check's) and its change counters go to ``store``."""
    view(tool, store)
    base = aq_base(tool)
    counters = store.counters
    cache = get_cache()
    if cache is None:
        return None, None
    session = store.session
    if store.wrote or session.pending or session.has_writes:
        cache.bypasses += 1
        return None, None
    catalog = tool._catalog
    try:
        if counters is None:
            raise Unkeyable("no counters")
        qkey = query_key(catalog, query)
    except Unkeyable:
        cache.bypasses += 1
        return None, None
    counts = counters.names
    names = read_names(catalog, query)
    return cache, (session.dsn, base._pgc_key, counters.token, counters.all,
                   counters.rows, tuple(catalog._indexes),
                   tuple(catalog.names), qkey,
                   tuple([counts.get(name, 0) for name in names]),
                   text_modes(catalog, names))


def loose_key(key):
    """``key`` (key_for's) without the counters of the entries and of the
    indexes read: an answer under it is still current when no entry
    touched since it was read can match its query (exclusion.py)."""
    return key[:4] + key[5:8] + key[9:]


def text_modes(catalog, names):
    """How the text indexes among ``names`` are searched (ZCTextIndex-exact
    or by language, and with which settings: language.LanguageText.key),
    which the answers depend on and which no catalog write may say."""
    indexes = catalog._indexes
    found = []
    for name in names:
        index = indexes.get(name)
        if ITextKind.providedBy(index) and index.pgc_language is not None:
            found.append((name, index.pgc_language.key()))
    return tuple(found)
