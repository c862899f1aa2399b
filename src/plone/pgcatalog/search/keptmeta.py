"""Brains' metadata kept per process across answers.

A cached answer (``cache.py``) keeps the metadata of the brains read from
it; an answer read again (an edit changed what it reads) used to read all
of it again: after each new document, a navigation tree of every document
read the metadata of every one of them.  What an answer learns is also
kept here, by rid, for the next answers of the same catalog.

Why exact: an entry is ``(path, metadata JSON text, seq)``, read at the
catalog's metadata counter ``seq`` from a snapshot that holds exactly what
its ZODB snapshot counts (``Answer.learns``).  A rid never changes its path
(a moved or replaced entry gets a new rid), and every change of a rid's
metadata is logged in the change counters (``changes.py``): a reader uses
an entry only if no change of its rid was logged after ``seq`` in the
reader's own counters (``changes.meta_current``), as it uses a cached
answer's.  Entries are kept under the counters' token (new counters, new
token: nothing older matches), their ``all`` counter (a write that cannot
be described, such as a rewrite of every entry's metadata, changes it) and
the database.  Only entries with a path
are kept (a rid read as absent may be one a transaction had not committed
yet).

Part of the result cache: off with it, bounded by a share of its budget
(LRU).
"""
import threading
from collections import OrderedDict

from plone.pgcatalog.changes import meta_current

#: no entry kept (or none current)
UNKNOWN = object()


def scope(store):
    """The scope of entries read by ``store``'s transaction: its database,
    its change counters' token and ``all`` counter (None without
    counters)."""
    counters = store.counters
    if counters is None:
        return None
    return (store.session.dsn, counters.token, counters.all)


def same_text(kept, entry):
    """Whether two entries hold the same path and metadata text."""
    return kept is entry or (kept[0] == entry[0] and kept[1] == entry[1])


def entry_size(entry):
    """Approximate bytes of a metadata entry (as ``Answer.size`` counts)."""
    return 120 + len(entry[0]) + 2 * len(entry[1] or "")


class KeptMetadata:
    """rid -> ``[entry, (column names, decoded brain values) or None]``
    per scope (:func:`scope`), LRU within ``max_bytes`` (thread-safe)."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.entries = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = 0
        self.lock = threading.Lock()

    def get(self, scope, rid, view):
        """The entry of ``rid`` current in the snapshot whose metadata
        counters are ``view``, or UNKNOWN."""
        key = (scope, rid)
        with self.lock:
            kept = self.entries.get(key)
            if kept is None or not meta_current(view, rid, kept[0][2]):
                self.misses += 1
                return UNKNOWN
            self.entries.move_to_end(key)
            self.hits += 1
            return kept[0]

    def values(self, scope, rid, entry, names):
        """The brain values of the metadata columns ``names`` made from
        an entry of the same path and metadata text as ``entry`` (brain
        values depend on nothing else), else None."""
        kept = self.entries.get((scope, rid))
        if kept is not None and kept[1] is not None and \
                same_text(kept[0], entry) and kept[1][0] == names:
            return kept[1][1]
        return None

    def keep_values(self, scope, rid, entry, names, values):
        kept = self.entries.get((scope, rid))
        if kept is not None and same_text(kept[0], entry):
            kept[1] = (names, values)

    def put(self, scope, entries):
        """Keep ``entries`` (rid -> tagged entry) read in one snapshot; an
        entry replaces a kept one read at an older counter, and keeps its
        brain values when its path and metadata text are the same (a
        listing read again after an edit decodes the changed brains
        only)."""
        if scope is None:
            return
        with self.lock:
            for rid, entry in entries.items():
                if not entry or entry[0] is None or len(entry) < 3:
                    continue
                key = (scope, rid)
                old = self.entries.get(key)
                values = None
                if old is not None:
                    if old[0][2] >= entry[2]:
                        continue
                    self.bytes -= entry_size(old[0])
                    if same_text(old[0], entry):
                        values = old[1]
                self.entries[key] = [entry, values]
                self.entries.move_to_end(key)
                self.bytes += entry_size(entry)
            while self.bytes > self.max_bytes and self.entries:
                _key, old = self.entries.popitem(last=False)
                self.bytes -= entry_size(old[0])

    def clear(self):
        with self.lock:
            self.entries.clear()
            self.bytes = 0

    def stats(self):
        with self.lock:
            return {"entries": len(self.entries), "bytes": self.bytes,
                    "max_bytes": self.max_bytes, "hits": self.hits,
                    "misses": self.misses}
