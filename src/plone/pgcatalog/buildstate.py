"""The durable state of an online build, and its progress reports.

A :class:`BuildState` is a small persistent object on the tool
(``_pgc_build``), set when a build is registered and changed by every
batch's commit (the tool itself is written only when a build starts,
switches or is cancelled: live writers read it, see ``tool._pgc_changed``).
It holds what a killed process needs to go on (``--resume``): the mode, the
build's catalog key, the position of the last entry done, the counts and
times; and what the ZMI shows (``as_dict``).

:class:`Progress` reports done / total, rate and ETA to the log every
``log_every`` seconds and to a ZCatalog progress handler
(``Products.ZCatalog.ProgressHandler``: ``init``, ``report``, ``finish``).
"""
import logging
import time

from persistent import Persistent


logger = logging.getLogger("plone.pgcatalog")

#: modes: rebuild (walk the site, like clearFindAndRebuild), refresh
#: (reindex the catalog's own paths, like refreshCatalog(clear=1)),
#: reindex (some indexes of the live catalog, in place)
MODES = ("rebuild", "refresh", "reindex")
#: phases: building (batches go on; writers mirror into the build),
#: done (switched, or reindexed), cancelled
BUILDING, DONE, CANCELLED = "building", "done", "cancelled"


class BuildState(Persistent):
    """What an online build has done so far (committed with each batch)."""

    #: rows to drop once the grace period after ``finished`` has passed
    #: (the old catalog after a switch, the build after a cancel)
    drop_key = None
    dropped = False

    def __init__(self, mode, key, indexes, batch_size, total):
        if mode not in MODES:
            raise ValueError("mode must be one of %s, not %r"
                             % (", ".join(MODES), mode))
        self.mode = mode
        #: the build's catalog key (None: reindex, in place)
        self.key = key
        #: rebuild/refresh: the index names the build was started with;
        #: reindex: the indexes to recompute
        self.indexes = tuple(indexes)
        self.batch_size = int(batch_size)
        self.phase = BUILDING
        #: position of the last entry done: a path tuple (rebuild, in walk
        #: order) or a path string (refresh, reindex: catalog path order)
        self.last = None
        self.done = 0
        self.total = int(total or 0)
        self.batches = 0
        self.skipped = 0
        self.started = self.updated = time.time()
        self.finished = None
        self.old_key = None

    @property
    def mirrors(self):
        """Live writers copy their writes into the build."""
        return self.phase == BUILDING and self.key is not None

    def advance(self, last, done, skipped=0):
        self.last = last
        self.done += done
        self.skipped += skipped
        self.batches += 1
        self.updated = time.time()

    def as_dict(self):
        elapsed = (self.finished or self.updated) - self.started
        rate = self.done / elapsed if elapsed > 0 else None
        left = max(self.total - self.done, 0)
        return {"mode": self.mode, "phase": self.phase, "key": self.key,
                "indexes": list(self.indexes), "done": self.done,
                "total": self.total, "batches": self.batches,
                "skipped": self.skipped,
                "last": "/".join(self.last) if isinstance(self.last, tuple)
                else self.last,
                "started": _iso(self.started), "updated": _iso(self.updated),
                "finished": _iso(self.finished), "elapsed": round(elapsed, 1),
                "rate": None if rate is None else round(rate, 1),
                "eta": None if not rate or self.phase != BUILDING
                else round(left / rate),
                "old_key": self.old_key, "drop_key": self.drop_key,
                "dropped": self.dropped}


def _iso(stamp):
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


class Progress:
    """Progress of one process's run of a build: the log and a pghandler."""

    def __init__(self, ident, state, pghandler=None, log_every=10.0):
        self.ident = ident
        self.state = state
        self.pghandler = pghandler
        self.log_every = log_every
        self.started = time.monotonic()
        self.done_before = state.done
        self.logged = self.started

    def init(self):
        if self.pghandler is not None:
            self.pghandler.init(self.ident, self.state.total)
        logger.info("%s: %s of about %d entries (%d done before)",
                    self.ident, self.state.mode, self.state.total,
                    self.done_before)

    def rate(self):
        elapsed = time.monotonic() - self.started
        done = self.state.done - self.done_before
        return done / elapsed if elapsed > 0 else 0.0

    def line(self):
        state = self.state
        rate = self.rate()
        left = max(state.total - state.done, 0)
        eta = "?" if not rate else "%ds" % round(left / rate)
        share = (100.0 * state.done / state.total) if state.total else 100.0
        return "%s: %d / %d (%.0f%%), %.0f entries/s, ETA %s" % (
            self.ident, state.done, state.total, min(share, 100.0), rate, eta)

    def report(self):
        if self.pghandler is not None:
            self.pghandler.report(self.state.done)
        now = time.monotonic()
        if now - self.logged >= self.log_every:
            self.logged = now
            logger.info(self.line())

    def finish(self):
        if self.pghandler is not None:
            self.pghandler.finish()
        logger.info("%s: %s", self.ident, self.line())
