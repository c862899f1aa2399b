"""Online build and rebuild: batches, progress, resumable, atomic switch.

``clearFindAndRebuild``, ``refreshCatalog`` and ``reindexIndex`` of the
tool keep ZCatalog's semantics (one transaction, the caller's).  An
:class:`OnlineRebuild` does the same work in many short transactions of its
own (``batch_size`` entries each, committed), for big sites, cron jobs and
deployment steps (``cli/rebuild.py``; docs/rebuild.md):

* **rebuild** (``clearFindAndRebuild``) and **refresh** (``refreshCatalog``
  with ``clear``) build a new catalog under a fresh key (a new
  ``pgcatalog_catalogs`` row, its PostgreSQL indexes registered at the
  start) while the tool keeps answering from its own key.  When the build
  is complete, one ZODB transaction sets the tool's ``_pgc_key`` to the
  build's key (the switch): a reader sees the old catalog or the new one,
  never a half-built one.  The old catalog's rows are dropped after a grace
  period (readers whose ZODB snapshot predates the switch still read them).
* **reindex** (``reindexIndex``) recomputes some indexes of the live
  catalog in place, batch by batch (no copy; see docs/rebuild.md).

Writes during a build reach it too, and a batch never leaves a stale
entry behind (``mirror.py``); before the switch, entries of objects removed
while a batch indexed them are dropped (``_forget_removed``).

Durable state (``buildstate.BuildState`` on the tool) is committed with
every batch: a killed process goes on with :meth:`OnlineRebuild.run` from
the last batch committed; :meth:`OnlineRebuild.cancel` abandons a build
(its rows dropped after the grace period).  Memory stays bounded: each
batch is committed and the ZODB connection's cache minimized, and the walk
(``walk.py``) is a generator.
"""
import itertools
import logging
import random
import time
import uuid

import transaction
from Acquisition import aq_base
from transaction.interfaces import TransientError
from ZODB.POSException import ConflictError

from plone.pgcatalog.buildstate import BUILDING
from plone.pgcatalog.buildstate import CANCELLED
from plone.pgcatalog.buildstate import DONE
from plone.pgcatalog.buildstate import MODES
from plone.pgcatalog.buildstate import BuildState
from plone.pgcatalog.buildstate import Progress
from plone.pgcatalog.indexes.interfaces import IReindexedKind
from plone.pgcatalog.ops import buildstore
from plone.pgcatalog.ops import mirror
from plone.pgcatalog.ops.mirror import read_current
from plone.pgcatalog.ops.walk import walk
from plone.pgcatalog.pg.store import store_for
from plone.pgcatalog.pg.writer import DELETE
from plone.pgcatalog.schema import ddl

logger = logging.getLogger("plone.pgcatalog")

DEFAULT_BATCH = 500
#: a step of a build that conflicts with concurrent writers (its start, a
#: batch) is tried again, the pause (seconds, randomized) doubling each
#: time up to PAUSE_MAX, for at least this many attempts and as long as
#: RETRY_SECONDS have not passed (a busy editor holds rows a moment per
#: commit: the build waits its turn, it does not give up)
RETRIES = 8
RETRY_SECONDS = 120.0
START_PAUSE = 0.05
PAUSE_MAX = 2.0
#: seconds between the switch and dropping the old catalog's rows
DEFAULT_GRACE = 30.0


def reindexed(tool, names):
    """Tell the indexes ``names`` that every entry's value of them was
    written again (IReindexedKind: a language-aware text index becomes
    complete)."""
    for name in names:
        index = tool._catalog.getIndex(name)
        if IReindexedKind.providedBy(index):
            index.pgc_reindexed()


class BuildError(ValueError):
    """An online build cannot do what it was asked (none in progress, one
    already in progress, an unknown index, ...)."""


class OnlineRebuild:
    """Build, resume, switch and cancel online builds of ``tool`` (a
    portal_catalog, wrapped in its site).  Uses the transaction manager of
    the tool's ZODB connection: every method commits."""

    def __init__(self, tool, batch_size=None, pghandler=None,
                 log_every=10.0, grace=DEFAULT_GRACE):
        self.tool = tool
        self.batch_size = batch_size
        self.pghandler = pghandler
        self.log_every = log_every
        self.grace = grace
        self._units = None      # the walk, kept between batches
        self._units_at = None   # ... positioned after this path
        self._checked = None    # the last path checked before the switch

    @property
    def ident(self):
        return "online build of %s" % "/".join(self.tool.getPhysicalPath())

    def state(self):
        return mirror.current_state(self.tool)

    def status(self):
        """The last build's facts (None: none ever)."""
        state = self.state()
        return None if state is None else state.as_dict()

    # -- start ---------------------------------------------------------------
    def start(self, mode="rebuild", indexes=()):
        """Register a build (committed): ``rebuild`` / ``refresh`` into a
        new key, ``reindex`` of ``indexes`` in place.  A start that
        conflicts with a concurrent commit (an editor's) is tried again, as
        batches are (:meth:`_retried`)."""
        # a new build walks from the start (this object may have run one)
        self._units = self._units_at = self._checked = None
        return self._retried("the start", lambda: self._start(mode, indexes))

    def _retried(self, what, step, cleanup=None):
        """``step()`` in a transaction of its own (it commits), tried again
        when it conflicts with a concurrent commit (an editor's):
        :data:`RETRIES` times at least, for :data:`RETRY_SECONDS`, waiting
        a little longer each time (``cleanup()`` after each failure)."""
        pause = START_PAUSE
        deadline = time.monotonic() + RETRY_SECONDS
        attempt = 0
        while True:
            attempt += 1
            transaction.begin()
            try:
                return step()
            except BuildError:
                transaction.abort()
                raise
            except (ConflictError, TransientError) as exc:
                transaction.abort()
                if cleanup is not None:
                    cleanup()
                if attempt >= RETRIES and time.monotonic() > deadline:
                    raise
                logger.info("%s: %s conflicted with a concurrent commit "
                            "(%s); again in %.2f s", self.ident, what,
                            exc.__class__.__name__, pause)
                time.sleep(pause * (1 + random.random()))
                pause = min(pause * 2, PAUSE_MAX)

    def _start(self, mode, indexes):
        tool = self.tool
        state = self.state()
        if state is not None and state.phase == BUILDING:
            raise BuildError("an online %s is in progress (resume or cancel "
                             "it)" % state.mode)
        if mode not in MODES:
            raise BuildError("mode must be one of %s, not %r"
                             % (", ".join(MODES), mode))
        batch = int(self.batch_size or DEFAULT_BATCH)
        if batch < 1:
            raise BuildError("the batch size must be at least 1")
        total = len(tool)
        if mode == "reindex":
            names = [indexes] if isinstance(indexes, str) else list(indexes)
            if not names:
                raise BuildError("reindex needs at least one index name")
            unknown = [n for n in names if n not in tool._catalog._indexes]
            if unknown:
                raise BuildError("no such index: %s" % ", ".join(
                    map(repr, unknown)))
            for name in names:
                tool._pgc_create_ddl(tool._catalog.getIndex(name))
            state = BuildState(mode, None, names, batch, total)
        else:
            if indexes:
                raise BuildError("only reindex takes index names")
            key = uuid.uuid4().hex
            store = store_for(tool._pgc_session(), key, False)
            for index in tool.index_objects():
                ddl.create(store.session, store.cid, index)
            self.tool._pgc_hot_guard()
            state = BuildState(mode, key, tool._catalog._indexes, batch,
                               total)
        # a write of the tool: live writers in flight conflict and, retried,
        # mirror into the build
        aq_base(tool)._pgc_build = state
        transaction.get().note("plone.pgcatalog: online %s started" % mode)
        transaction.commit()
        logger.info("%s: %s registered (key %s, about %d entries)",
                    self.ident, mode, state.key, total)
        return state

    # -- batches --------------------------------------------------------------
    def run(self, max_batches=None):
        """Go on with the registered build until it is complete, then
        switch (rebuild/refresh) or finish (reindex).  ``max_batches``:
        stop after that many batches (False is returned; run again to go
        on).  Returns True when the build is done."""
        state = self.state()
        if state is None or state.phase != BUILDING:
            raise BuildError("no online build in progress")
        if state.key is not None:
            self._sync_indexes()
        progress = Progress(self.ident, self.state(), self.pghandler,
                            self.log_every)
        progress.init()
        batches = 0
        more = True
        while more:
            if max_batches is not None and batches >= max_batches:
                logger.info("%s: stopped after %d batches (resumable)",
                            self.ident, batches)
                return False
            more = self._batch_with_retries()
            batches += 1
            progress.state = self.state()
            progress.report()
        self._finish()
        progress.state = self.state()
        progress.finish()
        return True

    def _batch_with_retries(self, batch=None):
        def forget_walk():
            self._units = None
        return self._retried("a batch", batch or self._batch, forget_walk)

    def _batch(self):
        """One batch, committed.  Returns whether there may be more."""
        transaction.begin()
        tool = self.tool
        state = self.state()
        if state is None or state.phase != BUILDING:
            raise BuildError("the online build was cancelled or finished "
                             "by another process")
        jar = aq_base(tool)._p_jar
        checked = set()
        read_current(jar, tool, checked)
        size = self.batch_size or state.batch_size
        if state.mode == "rebuild":
            last, done, skipped = self._rebuild_batch(tool, state, size,
                                                      jar, checked)
        else:
            last, done, skipped = self._paths_batch(tool, state, size,
                                                    jar, checked)
        more = last is not None
        if more:
            state.advance(last, done, skipped)
        transaction.get().note("plone.pgcatalog: online %s batch %d"
                               % (state.mode, state.batches))
        transaction.commit()
        self._units_at = last if more else None
        jar.cacheMinimize()
        return more

    def _rebuild_batch(self, tool, state, size, jar, checked):
        store = store_for(tool._pgc_session(), state.key, True)
        if self._units is None or self._units_at != state.last:
            self._units = walk(tool, state.last)
        last, done = None, 0
        for path, objects in itertools.islice(self._units, size):
            for obj in objects:
                mirror.index_into(tool, store, obj)
                read_current(jar, obj, checked)
                done += 1
            last = path
        return last, done, 0

    def _paths_batch(self, tool, state, size, jar, checked):
        live = tool._pgc_store()
        paths = buildstore.paths_after(live, state.last, size)
        if not paths:
            return None, 0, 0
        build = None if state.key is None else store_for(
            live.session, state.key, True)
        root = tool.getPhysicalRoot()
        done = skipped = 0
        for path in paths:
            obj = root.unrestrictedTraverse(path, None)
            if obj is None:
                # refresh: not carried over (refreshCatalog uncatalogs it);
                # reindex: left as it is (reindexIndex skips it)
                logger.warning("%s: could not resolve %s", self.ident, path)
                skipped += 1
                continue
            if build is None:
                tool.catalog_object(obj, path, idxs=list(state.indexes),
                                    update_metadata=0)
            else:
                mirror.index_into(tool, build, obj, path)
                read_current(jar, obj, checked)
            done += 1
        return paths[-1], done, skipped

    # -- the end ------------------------------------------------------------
    def _sync_indexes(self, wait=0):
        """The build's PostgreSQL indexes registered, missing or invalid
        ones built after the commit (another process may have started the
        build), waiting for them at most ``wait`` seconds: ``CREATE INDEX
        CONCURRENTLY`` waits for older snapshots, and RelStorage's load
        connections (this process's too) hold theirs between transactions.
        Until built, queries are answered without them (ddl.py)."""
        def register():
            state = self.state()
            store = store_for(self.tool._pgc_session(), state.key, True)
            ddl.sync(store.session, store.cid, self.tool.index_objects())
            self.tool._pgc_hot_guard()
            transaction.commit()

        # beside writers, as the start
        self._retried("registering the indexes", register)
        deadline = time.monotonic() + wait
        while not ddl.wait_for_builds(0.5):
            if time.monotonic() > deadline:
                logger.info("%s: the new catalog's PostgreSQL indexes are "
                            "still being built (in the background)",
                            self.ident)
                return
            # a new ZODB transaction: RelStorage's load connection leaves
            # its old snapshot, which the concurrent build waits for
            transaction.begin()
            transaction.abort()

    def _finish(self):
        state = self.state()
        if state.key is not None:
            self._checked = None
            while self._batch_with_retries(self._forget_removed):
                pass
            self._sync_indexes(wait=ddl.BUILD_WAIT)
        transaction.begin()
        tool = self.tool
        state = self.state()
        if state.phase != BUILDING:
            raise BuildError("the online build was cancelled or finished "
                             "by another process")
        if state.key is not None:
            if tuple(tool._catalog._indexes) != state.indexes:
                transaction.abort()
                raise BuildError(
                    "the catalog's indexes changed during the online build; "
                    "cancel it and start again")
            base = aq_base(tool)
            state.old_key = state.drop_key = base._pgc_key
            base._pgc_key = state.key
            # the result cache's generation counts the old catalog's
            # commits: the next write starts it again from the new
            # catalog's stamp (cache.py); until then nothing is cached
            for name in ("_pgc_generation", "_pgc_changes"):
                if name in base.__dict__:
                    delattr(base, name)
        # every entry's values of them written again (a rebuild's: all)
        reindexed(tool, state.indexes)
        state.phase = DONE
        state.finished = time.time()
        transaction.get().note("plone.pgcatalog: online %s done"
                               % state.mode)
        transaction.commit()
        logger.info("%s: %s done: %d entries in %.0f s%s", self.ident,
                    state.mode, state.done, state.finished - state.started,
                    " (switched to key %s)" % state.key if state.key else "")

    def _forget_removed(self):
        """Remove from the build the entries of objects gone meanwhile (one
        batch of candidates, committed; whether there may be more).  A
        batch reading its ZODB snapshot can index an object a concurrent
        transaction is deleting (the deletion changes the container's
        BTree, not the records the batch asked to stay current) after the
        mirrored delete ran: such entries are among those the live catalog
        lacks (few, unless the live catalog was out of date or empty), and
        their objects cannot be found now.  A deletion after the check is
        mirrored."""
        transaction.begin()
        tool = self.tool
        state = self.state()
        live = tool._pgc_store()
        build = store_for(live.session, state.key, True)
        size = self.batch_size or state.batch_size
        paths = buildstore.paths_not_in(build, live, self._checked, size)
        root = tool.getPhysicalRoot()
        for path in paths:
            if root.unrestrictedTraverse(path, None) is None:
                logger.info("%s: %s is gone, not carried over", self.ident,
                            path)
                build.add(path, DELETE)
        transaction.commit()
        aq_base(tool)._p_jar.cacheMinimize()
        if paths:
            self._checked = paths[-1]
        return len(paths) == size

    def cancel(self):
        """Abandon the build in progress (committed); its rows are dropped
        by :meth:`drop` after the grace period."""
        transaction.begin()
        state = self.state()
        if state is None or state.phase != BUILDING:
            transaction.abort()
            raise BuildError("no online build in progress")
        state.phase = CANCELLED
        state.finished = time.time()
        state.drop_key = state.key
        # a write of the tool: writers still mirroring conflict, are retried
        aq_base(self.tool)._p_changed = True
        transaction.get().note("plone.pgcatalog: online %s cancelled"
                               % state.mode)
        transaction.commit()
        logger.info("%s: %s cancelled", self.ident, state.mode)
        return state

    def drop(self, grace=None, wait=True):
        """Drop the rows the last build left behind (the old catalog after
        a switch, a cancelled build's) once ``grace`` seconds have passed
        since it ended (sleeping until then with ``wait``).  Returns the
        number of entries dropped, or None when nothing is due."""
        grace = self.grace if grace is None else grace
        transaction.begin()
        state = self.state()
        if state is None or not state.drop_key or state.dropped:
            transaction.abort()
            return None
        key, due = state.drop_key, state.finished + grace
        dsn = self.tool._pgc_session().dsn
        transaction.abort()
        if due > time.time():
            if not wait:
                return None
            time.sleep(due - time.time())
        deleted = buildstore.drop_catalog(dsn, key)
        transaction.begin()
        self.state().dropped = True
        transaction.commit()
        return deleted
