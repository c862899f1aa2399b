"""What a transaction changed in a catalog, counted where readers see it.

The result cache (``cache.py``) keys an answer by counters of the parts of
the catalog the answer read, so a write invalidates only the answers it can
change: editing a document's title leaves the cached listings by type,
state, path or date standing, and their brains are refreshed one by one.

* :class:`Changes`: one transaction's changes to one catalog, found by the
  writer (``writer.py``) comparing each written entry's stored row with
  the new one: the index names whose values changed, whether entries came
  or went (``rows``), the rids whose metadata changed; ``all`` when a write
  cannot be described (a statement on many rows: clear, reindexIndex,
  refreshCatalog, set_metadata), which invalidates every answer.
* :class:`ChangeCounters`: a persistent object on the tool, conflict
  resolving like ``BTrees.Length`` (concurrent writers add up, never
  conflict), that every writing transaction bumps before its commit starts
  (a before-commit hook: the tool's ``_pgc_count_changes``).  A request reads
  it through its own ZODB connection: the counters of its snapshot, no
  statement.  Metadata changes are kept as a bounded log ``rid -> seq``
  (the last :data:`LOG_SIZE` changed rids; older ones are folded into
  ``floor``): a brain's metadata read at ``seq`` t is still the catalog's
  when no change to its rid was logged after t.

Why exact: an answer read from a PostgreSQL snapshot that holds exactly the
writes its ZODB snapshot counts (``store.snapshot_complete``) depends only
on the values of the indexes it names (filters, sort), on which entries
exist, and on the metadata of the brains read.  A later transaction whose
counters for those indexes, ``rows`` and ``all`` are the same sees a
catalog where no committed transaction changed any of them (each would
have bumped one); the same answer is then the one PostgreSQL would give.
Counters only grow, so a change undone later still counts as a change.

Entries touched (added, removed, or with index values changed) are also
logged, bounded (:data:`TOUCHED_SIZE`), each with a digest of its index
values before and after (:func:`facts`): an answer whose query cannot
match any entry touched since it was read (``search/exclusion.py``) is
still the answer, whatever ``rows`` and the index counters say (a new
document leaves the events portlet's and another folder's listings
standing).  A transaction whose touched entries cannot all be logged
raises the log's floor: answers read before it are read again.
"""
import zlib

import orjson
from persistent import Persistent
from ZODB.POSException import ConflictError

from plone.pgcatalog.pg import lists


#: metadata changes remembered by rid (older ones raise ``floor``)
LOG_SIZE = 256
#: touched entries remembered (older ones raise ``tfloor``), and at most
#: that many from one transaction (more: the transaction is not described)
TOUCHED_SIZE = 48
#: bits of an entry's digest (:func:`facts`)
FACT_BITS = 512

_DUMPS = orjson.OPT_SORT_KEYS


class Changes:
    """One transaction's changes to one catalog (see module docstring)."""

    __slots__ = ("all", "rows", "names", "meta", "touched", "opaque")

    def __init__(self):
        self.all = False
        self.rows = False
        self.names = set()
        self.meta = set()
        #: ``(facts before, facts after)`` of each entry touched (None:
        #: no entry), unless ``opaque``: more than TOUCHED_SIZE
        self.touched = []
        self.opaque = False

    def __bool__(self):
        return self.all or self.rows or bool(self.names) or bool(self.meta)

    def update(self, other):
        self.all = self.all or other.all
        self.rows = self.rows or other.rows
        self.names |= other.names
        self.meta |= other.meta
        self.opaque = self.opaque or other.opaque
        for item in other.touched:
            self._touch(*item)

    def _touch(self, before, after):
        if self.opaque:
            return
        if (before is None and after is None) or \
                len(self.touched) >= TOUCHED_SIZE:
            # no path (not described), or too many
            self.opaque = True
            self.touched = []
            return
        self.touched.append((before, after))

    def _touch_entry(self, path, old_idx, new_idx):
        """Log an entry at ``path`` touched, its index values ``old_idx``
        before and ``new_idx`` after (None: no entry); digests made only
        while the log takes them (a rebuild writes thousands)."""
        if self.opaque:
            return
        if path is None or len(self.touched) >= TOUCHED_SIZE:
            self._touch(None, None)
            return
        self._touch(None if old_idx is None else facts(old_idx, path),
                    None if new_idx is None else facts(new_idx, path))

    def entry(self, old, delete_first, upsert, path=None):
        """Count one entry's write: ``old`` the row locked before it
        (``(rid, idx, meta text, text index names)`` or None: no entry),
        then a delete if ``delete_first``, then ``upsert`` (or None), on
        the entry at ``path`` (None: the write is not logged as touching
        an entry, see ChangeCounters.untouched_by)."""
        if old is None or delete_first or upsert is None:
            # an entry comes or goes (a delete and an insert: a new rid)
            if old is not None or upsert is not None:
                self.rows = True
                self._touch_entry(
                    path, None if old is None else (old[1] or {}),
                    None if upsert is None else _after(upsert, {}))
            return
        rid, idx, meta, texts = old
        idx = idx or {}
        changed = set()
        if upsert.full:
            keys = set(idx) | set(upsert.idx_set)
            changed.update(k for k in keys if _differ(
                idx.get(k), upsert.idx_set.get(k)))
            # the text rows not written again are deleted
            changed.update(texts or ())
        else:
            changed.update(k for k, v in upsert.idx_set.items()
                           if _differ(idx.get(k), v))
            changed.update(k for k in upsert.idx_remove if k in idx)
            changed.update(upsert.text_remove)
        changed.update(upsert.text_set)
        if changed:
            self.names.update(changed)
            self._touch_entry(path, idx, _after(upsert, idx))
        if upsert.meta is not None and upsert.meta != meta:
            self.meta.add(rid)


def _after(upsert, idx):
    """The index values an entry holds after ``upsert`` over ``idx``."""
    if upsert.full:
        return upsert.idx_set
    after = dict(idx)
    after.update(upsert.idx_set)
    for name in upsert.idx_remove:
        after.pop(name, None)
    return after


def fact_bit(name, value):
    """The bit of index ``name`` holding the string ``value``."""
    return zlib.crc32(("%s\x1f%s" % (name, value)).encode(
        "utf-8", "surrogatepass")) % FACT_BITS


def path_bit(path):
    """The bit of an entry whose path is ``path`` or under it."""
    return fact_bit("\x00path", path)


def opaque_bit(name):
    """The bit of index ``name`` holding a string that may be the digest
    of a long keyword list this process cannot expand (pg/lists.py)."""
    return fact_bit(name, "\x02")


def facts(idx, path):
    """A digest of an entry at ``path`` whose stored index values are
    ``idx`` (``{name: JSON value}``), or None without a path: an int
    whose bits (:func:`fact_bit`) are set for each string value (or string
    in a list) of each index, and (:func:`path_bit`) for the entry's path
    and each path above it.  A string alone may be a long keyword list's
    digest: its list's strings too when this process knows it, else
    :func:`opaque_bit`.  A bit not set proves the entry holds no such
    string (a set one proves nothing)."""
    if path is None:
        return None
    bits = 0
    parts = path.split("/")
    for end in range(2, len(parts) + 1):
        bits |= 1 << path_bit("/".join(parts[:end]))
    for name, value in idx.items():
        items = value if type(value) is list else (value,)
        if isinstance(value, str):
            listed = lists.made(value)
            if listed is None:
                bits |= 1 << opaque_bit(name)
            else:
                items = [value] + list(listed)
        for item in items:
            if type(item) is str:
                bits |= 1 << fact_bit(name, item)
    return bits


def _differ(old, new):
    """Whether two index values (as stored in JSON) differ: compared as
    their canonical JSON (``True`` is not ``1``, ``1.0`` is not ``1``: a
    difference in doubt counts as a change)."""
    if old is None or new is None:
        return old is not new
    try:
        return orjson.dumps(old, option=_DUMPS) != \
            orjson.dumps(new, option=_DUMPS)
    except (TypeError, orjson.JSONEncodeError):
        return True


class ChangeCounters(Persistent):
    """A catalog's change counters (see module docstring)."""

    #: how many transactions changed which indexes have hot keys (hot.py):
    #: such a transaction does not merge with a concurrent catalog writer
    #: (see _p_resolveConflict)
    hot_epoch = 0
    #: the touched entries' log (counters made before it: empty, its floor
    #: at 0 for a sequence at 0, which no answer was read at)
    tseq = 0
    tfloor = 0
    tlog = ()

    def __init__(self, token):
        #: new counters, new token: answers keyed by counters made before
        #: (a removed and remade object) are never matched
        self.token = token
        self.all = 0
        self.rows = 0
        self.names = {}
        self.seq = 0
        self.floor = 0
        self.log = {}

    def bump(self, changes):
        """Count ``changes`` (a :class:`Changes`) in this transaction."""
        if not changes:
            return
        if changes.all:
            self.all += 1
        if changes.rows:
            self.rows += 1
        if changes.names:
            names = dict(self.names)
            for name in changes.names:
                names[name] = names.get(name, 0) + 1
            self.names = names
        if changes.meta:
            self.seq += 1
            log = dict(self.log)
            for rid in changes.meta:
                log[rid] = self.seq
            self.log, self.floor = _bounded(log, self.floor)
        if changes.rows or changes.names:
            self.tseq += 1
            if changes.opaque or not changes.touched:
                self.tlog, self.tfloor = (), self.tseq
            else:
                self.tlog, self.tfloor = _bounded_touched(
                    self.tlog + tuple((self.tseq,) + item
                                      for item in changes.touched),
                    self.tfloor)
        self._p_changed = True

    def bump_hot(self):
        """This transaction registers or unregisters hot keys."""
        self.hot_epoch += 1

    def view(self):
        """What readers of this snapshot need: ``(seq, floor, log)``."""
        return (self.seq, self.floor, self.log)

    def untouched_by(self, since, cannot_match):
        """Whether no entry touched after touched-sequence ``since`` (this
        snapshot's ``tseq`` when an answer was read) could change an answer
        whose query ``cannot_match(facts)`` an entry of those facts: every
        touched entry is logged since then and cannot match before nor
        after."""
        if since is None or since > self.tseq or self.tfloor > since:
            return False
        for seq, before, after in reversed(self.tlog):
            if seq <= since:
                break
            if (before is not None and not cannot_match(before)) or \
                    (after is not None and not cannot_match(after)):
                return False
        return True

    def _p_resolveConflict(self, old, committed, mine):
        """Concurrent bumps add up (as BTrees.Length's).

        Except beside a transaction that registered or unregistered hot
        keys (hot.py): it filled the hot rows from its snapshot, and the
        trigger of a concurrent writer wrote its entries' hot rows by the
        hot names of its own; whichever commits second must start again
        (ConflictError), from a snapshot holding the other's work."""
        if mine.get("hot_epoch", 0) != old.get("hot_epoch", 0) or \
                committed.get("hot_epoch", 0) != old.get("hot_epoch", 0):
            raise ConflictError("the catalog's hot keys were registered "
                                "by a concurrent transaction")
        result = dict(committed)
        for field in ("all", "rows", "seq"):
            result[field] = committed[field] + mine[field] - old[field]
        names = dict(committed["names"])
        for name in set(mine["names"]) | set(old["names"]):
            names[name] = (committed["names"].get(name, 0)
                           + mine["names"].get(name, 0)
                           - old["names"].get(name, 0))
        result["names"] = names
        # my metadata changes take the merged seq: a brain read before it
        # (at the committed seq or lower) counts them as changes
        log = dict(committed["log"])
        mine_old = old["log"]
        for rid, seq in mine["log"].items():
            if mine_old.get(rid) != seq:
                log[rid] = result["seq"]
        result["log"], result["floor"] = _bounded(
            log, max(committed["floor"], mine["floor"]))
        _merge_touched(result, old, committed, mine)
        return result


def _merge_touched(result, old, committed, mine):
    """The touched entries' log of two concurrent transactions' counters:
    mine renumbered after the committed ones (a reader of the committed
    state counts them as touched after it)."""
    base = old.get("tseq", 0)
    mine_seq = mine.get("tseq", 0)
    if mine_seq == base:
        return      # I touched nothing: the committed log stands
    tseq = committed.get("tseq", 0) + mine_seq - base
    result["tseq"] = tseq
    if mine.get("tfloor", 0) != old.get("tfloor", 0):
        # mine was not described (or dropped entries): nothing older
        # can be judged
        result["tlog"], result["tfloor"] = (), tseq
        return
    new = tuple((tseq,) + item[1:] for item in mine.get("tlog", ())
                if item[0] > base)
    result["tlog"], result["tfloor"] = _bounded_touched(
        tuple(committed.get("tlog", ())) + new,
        committed.get("tfloor", 0))


def _bounded_touched(log, floor):
    """``(log, floor)`` with at most TOUCHED_SIZE touched entries, the
    oldest folded into the floor."""
    if len(log) <= TOUCHED_SIZE:
        return log, floor
    cut = len(log) - TOUCHED_SIZE
    return log[cut:], max(floor, log[cut - 1][0])


def _bounded(log, floor):
    """``(log, floor)`` with at most LOG_SIZE rids, the oldest folded into
    the floor."""
    if len(log) <= LOG_SIZE:
        return log, floor
    ordered = sorted(log.items(), key=lambda item: item[1])
    cut = len(log) - LOG_SIZE
    floor = max(floor, ordered[cut - 1][1])
    return dict(ordered[cut:]), floor


def meta_current(view, rid, tag):
    """Whether metadata of ``rid`` read at seq ``tag`` is still current in
    the snapshot whose counters' view is ``view``."""
    if tag is None:
        return False
    seq, floor, log = view
    if tag == seq:
        return True
    # read at a later counter than the reader's: maybe not its metadata
    return floor <= tag < seq and log.get(rid, 0) <= tag


def read_names(catalog, query):
    """The catalog indexes a merged query reads: those it names and those
    it sorts on (sorted: their counters go into the answer's key)."""
    indexes = catalog._indexes
    names = {name for name in query if name in indexes}
    sort_on = query.get("sort_on")
    if isinstance(sort_on, str):
        sort_on = [sort_on]
    if isinstance(sort_on, (list, tuple)):
        names.update(n for n in sort_on if isinstance(n, str))
    return tuple(sorted(names))
