"""A session's snapshot that agrees with its objects' (consistency.py says
what agreeing means; this module is what a session does about it).

:class:`SnapshotAgreement` is the part of
:class:`~plone.pgcatalog.pg.session.CatalogSession` that watches the
catalogs a transaction uses, takes the facts of each new PostgreSQL
snapshot, waits for the prepared transactions a snapshot behind the objects
lacks, replaces that snapshot, and raises
:class:`~plone.pgcatalog.errors.CatalogReadConflictError` when a snapshot
ahead of them must be read again.  :class:`EarlySnapshot` begins a
thread's next catalog snapshot as its ZODB transaction begins, where the
catalog cannot share the storage's snapshot.
"""
import logging
import threading
import time

import psycopg
import transaction as transaction_module
from transaction.interfaces import ISynchronizer
from zope.interface import implementer

from plone.pgcatalog.errors import CatalogReadConflictError
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.pg import consistency
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import dberrors
from plone.pgcatalog.pg import sharing
from plone.pgcatalog.pg import standby

logger = logging.getLogger("plone.pgcatalog")

#: seconds a transaction's early snapshot waits for a free connection
#: (none free: it begins at the first statement, as without)
EARLY_CHECKOUT = 0.05
#: times a snapshot of its own is taken again because it holds the objects'
#: count while this catalog's writers were committing (see _unsure), before
#: the request is retried
UNSURE_RESNAPSHOTS = 3


#: a guessed snapshot (SnapshotAgreement.guessing) is tried while fewer
#: than this share of the recent guesses of the catalog's database failed
#: (an exponential average weighing the last one GUESS_WEIGHT)
GUESS_MISSES = 0.25
GUESS_WEIGHT = 0.05
#: while more fail, one transaction in this many guesses again (to learn
#: when guessing pays again)
GUESS_PROBE = 16

#: catalog DSN -> [the recent guesses' share of failures, transactions
#: since the last guess]
_guesses = {}


class _Reshare:
    """What :meth:`SnapshotAgreement._agree` answers for a guessed snapshot
    given up: it did not agree (false), and the storage's is taken next
    (not a snapshot of its own taken again)."""

    def __bool__(self):
        return False


RESHARE = _Reshare()

#: cid -> when the catalog's lag behind its objects was last logged
_lag_logged = {}
#: prepared catalog transactions a reader waited for in vain
_stuck = set()


def _may_guess(dsn):
    """Whether a transaction on catalog database ``dsn`` guesses its
    snapshot (most guesses held lately, or it is a probe's turn)."""
    state = _guesses.setdefault(dsn, [0.0, 0])
    if state[0] < GUESS_MISSES:
        return True
    state[1] += 1
    if state[1] < GUESS_PROBE:
        return False
    state[1] = 0
    return True


def _guessed(dsn, held):
    """A guessed snapshot held (or not): the average moves."""
    state = _guesses.setdefault(dsn, [0.0, 0])
    state[0] += GUESS_WEIGHT * ((0.0 if held else 1.0) - state[0])


def forget_guesses():
    """Start judging guesses afresh (tests)."""
    _guesses.clear()


def _lagging(behind, watched):
    """Log (once a minute per catalog) that a snapshot of its own still
    lacks commits the ZODB generation counts, with none being finished."""
    now = time.monotonic()
    for cid, facts in behind.items():
        if now - _lag_logged.get(cid, -60.0) < 60.0:
            continue
        _lag_logged[cid] = now
        logger.warning(
            "catalog %d: PostgreSQL holds %d writing commits, the ZODB "
            "counts %d, and none is being finished: the catalog lacks "
            "commits its objects show (an in-doubt transaction rolled back, "
            "a restored database?); run pgcatalog-verify (docs/verify.md)",
            cid, facts.stamp, watched[cid])


class SnapshotAgreement:
    """The snapshot-agreement part of a catalog session (a mixin of
    :class:`~plone.pgcatalog.pg.session.CatalogSession`, whose state it
    reads and changes: ``watched``, ``facts``, ``begun``, ``conn``,
    ``snapshot_id``, ``snapshot_dsn``, ``storage_shared``,
    ``storage_offered``; statements go through the session's ``_send``,
    ``_run`` and ``_contain``)."""

    #: the storage's snapshot to import ("": none; None: not asked yet)
    snapshot_id = None
    #: the DSN of the catalog pool whose server holds it (the primary's or
    #: a standby's: sharing.py)
    snapshot_dsn = None
    #: the storage offered its snapshot (kept when this transaction had to
    #: leave it for a snapshot of its own)
    storage_offered = False
    #: this PostgreSQL transaction imported the storage's snapshot
    shared = False
    #: the storage shares the catalog's database (its snapshot was)
    storage_shared = False
    #: this PostgreSQL transaction took a snapshot of its own where it
    #: could share the storage's, and keeps it only when it holds exactly
    #: the objects' commits (_agree); else the storage's is exported
    guessing = False
    #: this transaction guessed (once at most)
    guessed = False

    def _ask_storage_snapshot(self):
        """Whether this transaction reads in the storage's own snapshot
        (sharing.py), and on which server: asked once, before its first
        statement."""
        if self.snapshot_id is None:
            if self._guess():
                return
            found = sharing.storage_snapshot(self.dsn, self.jar)
            self.snapshot_id = found.snapshot_id if found else ""
            self.snapshot_dsn = found.dsn if found else None
            self.storage_shared = self.storage_offered = found is not None

    def _guess(self):
        """Take a snapshot of its own in place of the storage's (no
        export: a round trip to RelStorage's connection and a file the
        server writes), when the storage is known to share the catalog's
        database and the snapshot's facts will say whether it holds
        exactly the objects' commits (_agree).  Not on standbys, nor
        twice in a transaction."""
        if self.guessed or not self.watched or \
                standby.standbys_of(self.dsn) or \
                not sharing.shares_database(self.dsn, self.jar) or \
                not _may_guess(self.dsn):
            return False
        self.guessed = self.guessing = True
        self.snapshot_id = ""
        self.snapshot_dsn = None
        self.storage_shared = self.storage_offered = True
        return True

    def _guess_held(self, rows):
        """Whether the guessed snapshot whose facts are ``rows`` holds
        exactly the commits the objects' snapshot counts, for every
        catalog watched (consistency.complete of a snapshot of its own);
        judged once, as it begins."""
        held = all(
            self.watched.get(cid) is None or consistency.complete(
                consistency.Facts(stamp, prepared, moved),
                self.watched[cid], False)
            for cid, stamp, prepared, moved in rows)
        _guessed(self.dsn, held)
        return held

    def _unshare(self):
        """Read in a snapshot of its own from now on (checked against the
        objects', as on ZEO): the storage's is on a server this
        transaction no longer reads on."""
        self.snapshot_id = ""
        self.snapshot_dsn = None
        self.storage_shared = False

    def learn_facts(self, cid, stamp, prepared, moved):
        """What this PostgreSQL transaction's snapshot holds of catalog
        ``cid`` (consistency.Facts), asked by the result cache."""
        facts = self.facts[cid] = consistency.Facts(stamp, prepared, moved)
        return facts

    def _begin_checked(self):
        """Begin the PostgreSQL transaction in a snapshot that agrees with
        the objects' (consistency.py) before writes go into it: a snapshot
        found behind is replaced, which writes sent with it would not
        survive.  Reads begin with their statement (run again in the new
        snapshot).  Reads begun on a standby end there: writes go to the
        primary."""
        if self.on_standby:
            self._leave_standby()
        if self.begun or not self.watched:
            return

        def failed(conn, exc, fresh):
            self._contain(conn, exc, False)
            raise dberrors.translate_error(exc, "BEGIN",
                                           self.timeout_ms) from None

        self._send(lambda conn, fresh: None, failed)

    def watch(self, cid, generation):
        """Catalog ``cid`` is used in this transaction, whose ZODB snapshot
        counts ``generation`` of its writing commits (None: no counter
        yet): the PostgreSQL snapshot must agree (consistency.py).  A
        PostgreSQL transaction already begun is checked now."""
        if generation is None or cid in self.watched:
            return
        self.watched[cid] = generation
        consistency.saw((self.dsn, cid), generation)
        if not self.begun:
            return
        facts = self.facts.get(cid)
        if facts is not None:
            # asked with BEGIN (begin_early) or by the result cache
            rows = [(cid, facts.stamp, facts.prepared, facts.moved)]
        else:
            fragment = consistency.facts_sql([cid])
            rows = self._run(fragment.text, fragment.params,
                             consistency.GENERIC_PLAN, False).fetchall()
        if not self._agree(rows, 0, end=True):
            # the next statement begins a snapshot that agrees
            self._end_snapshot()

    def _agree(self, rows, resnapshots, end=False):
        """Take the facts of a new snapshot; whether it agrees with the
        objects' (else it was ended, unless ``end`` leaves that to the
        caller, and the caller runs again on a new one).  Raises
        CatalogReadConflictError when it cannot be made to agree."""
        if self.guessing and not self._guess_held(rows) and \
                not self.wrote and not self.views_open():
            # the storage's own snapshot, exported, instead (the catalog
            # showed or lacked commits of the objects', or writers were
            # committing as it was taken)
            if not end:
                self._end_snapshot()
            return RESHARE
        behind, ahead = {}, {}
        for cid, stamp, prepared, moved in rows:
            facts = self.facts[cid] = consistency.Facts(stamp, prepared,
                                                        moved)
            generation = self.watched.get(cid)
            if generation is None:
                continue
            if stamp < generation:
                behind[cid] = facts
            elif stamp > generation:
                ahead[cid] = stamp
        now = time.monotonic()
        if any(consistency.ahead_verdict((self.dsn, cid), stamp,
                                         self.watched[cid], now)
               == consistency.RETRY for cid, stamp in ahead.items()):
            # commits its objects do not show (this transaction's ZODB
            # snapshot is older than them): run again in a newer one
            raise CatalogReadConflictError(
                "the catalog shows commits that this transaction's objects "
                "do not (made after its ZODB snapshot); the request is "
                "retried")
        if behind and self.on_standby:
            # a standby that has not replayed them yet: the primary reads
            # (standby.py), not waited for
            standby.behind(self.conn_dsn)
            self._leave_standby()
            return False
        if not behind and self._unsure():
            return self._take_again(resnapshots, end)
        if resnapshots:
            # a snapshot of its own, taken after waiting: it holds exactly
            # what the objects show, or the request runs again
            if behind:
                _lagging(behind, self.watched)
            return True
        if not behind:
            return True
        waiting = [x for f in behind.values() for x in f.prepared]
        if waiting and not self._wait_for(waiting):
            # their process died between the storages' commit and the
            # catalog's (in-doubt): nothing to wait for, no use retrying;
            # answered from what is committed until they are resolved
            return True
        if self.wrote or self.views_open():
            raise CatalogReadConflictError(
                "the catalog's snapshot misses commits the objects show "
                "(they were being finished); the request is retried")
        if not end:
            self._end_snapshot()
        return False

    def _unsure(self):
        """The prepared transactions of this catalog's writers a snapshot of
        its own holding exactly the objects' count of commits may lack (or
        ``[None]`` when one finished as it was taken): the two sets may
        still differ, a writer the objects count missing here while another
        they do not count is visible (consistency.complete).  A snapshot
        shared with the storage holds the objects' own commits: none."""
        if self.storage_shared and not self.guessing:
            return []
        found = []
        for cid, facts in self.facts.items():
            if self.watched.get(cid) == facts.stamp:
                # (one that outlived a wait is in doubt, its process gone:
                # answered from what is committed until it is resolved)
                found.extend(x for x in facts.prepared if x not in _stuck)
                if facts.moved:
                    found.append(None)
        return found

    def _take_again(self, resnapshots, end):
        """A snapshot that may hold other commits than its count says
        (_unsure): taken again once those writers finished (on a standby:
        the primary reads), or, when it was already taken again
        UNSURE_RESNAPSHOTS times or this transaction used it, the request
        is retried.  False (the snapshot ended unless ``end``)."""
        if self.on_standby:
            standby.behind(self.conn_dsn)
            self._leave_standby()
            return False
        if resnapshots >= UNSURE_RESNAPSHOTS or self.wrote or \
                self.views_open():
            raise CatalogReadConflictError(
                "the catalog's snapshot was taken while writers were "
                "committing: it may not hold the commits the objects show; "
                "the request is retried")
        waiting = [x for x in self._unsure() if x is not None]
        if waiting and not self._wait_for(waiting):
            # in doubt (their process died between the storages' commit
            # and the catalog's): nothing to wait for, as when behind
            return True
        if not end:
            self._end_snapshot()
        return False

    def _wait_for(self, xids):
        """Wait (at most consistency.WAIT seconds) until the prepared
        transactions ``xids`` are finished (pg_prepared_xacts is the
        server's present, not the snapshot's); whether they are.  Those
        that outlived a wait once are not waited for again (their process
        died: db.resolve_in_doubt finishes them)."""
        xids = [x for x in xids if x not in _stuck]
        if not xids:
            return False
        deadline = time.monotonic() + consistency.WAIT
        fragment = consistency.still_prepared_sql(xids)
        # on a connection of its own: a failure here (a cancel, a timeout)
        # must not end this session's transaction; a server that went away
        # meanwhile is the caller's DatabaseUnavailable (Zope retries it),
        # never the driver's error
        try:
            with db.get_pool(self.dsn).connection() as conn:
                while time.monotonic() < deadline:
                    if not db.run(conn, fragment).fetchone()[0]:
                        return True
                    time.sleep(consistency.POLL)
        except psycopg.Error as exc:
            raise dberrors.translate_error(exc, fragment.text,
                                           self.timeout_ms) from None
        _stuck.update(xids)
        logger.warning("prepared catalog transactions %s still unfinished "
                       "after %.1f s: their process may have died (they are "
                       "resolved at the next start, db.resolve_in_doubt)",
                       sorted(xids), consistency.WAIT)
        return False

    def _end_snapshot(self):
        """End this PostgreSQL transaction (it holds no writes) so that the
        next statement begins a snapshot of its own, newer than the
        storage's.  COMMIT, not ROLLBACK (the same for a transaction that
        wrote nothing): psycopg forgets the connection's prepared
        statements after a ROLLBACK, and the facts would be planned
        again."""
        if self.conn is not None:
            try:
                self.conn.execute("COMMIT", prepare=False)
            except psycopg.Error:
                self._drop_connection()
        self.begun = False
        self.epoch += 1
        self.facts = {}
        self.snapshot_id = ""
        self._end_guess()

    def _end_guess(self):
        """A guessed snapshot ends: the next one is the storage's."""
        if self.guessing:
            self.guessing = False
            self.snapshot_id = None

    # -- a snapshot begun with the ZODB's -----------------------------------
    def begin_early(self, cids):
        """Begin the PostgreSQL transaction now, as the ZODB transaction
        begins (:class:`EarlySnapshot`), with a snapshot of its own and the
        facts of catalogs ``cids``: a snapshot taken with the ZODB's, not
        at the first catalog statement, rarely shows commits the objects
        do not (consistency.py).  Best effort: when no connection is free
        at once or PostgreSQL fails, the first statement begins as
        usual."""
        if self.begun or self.conn is not None:
            return
        reader = standby.choose(self.dsn)
        if reader is not None:
            # read on a standby (standby.py): its facts are checked as the
            # primary's (watch), a standby behind left for the primary
            self.conn = standby.checkout(reader)
            if self.conn is not None:
                self.conn_dsn = reader
        if self.conn is None:
            try:
                self.conn = db.checkout(self.dsn, timeout=EARLY_CHECKOUT)
            except DatabaseUnavailable:
                return
        conn = self.conn
        try:
            self.snapshot_id = ""
            with conn.pipeline():
                self._begin_statements(conn)
                cursor = consistency.queue_facts(conn, cids)
            for cid, stamp, prepared, moved in cursor.fetchall():
                self.facts[cid] = consistency.Facts(stamp, prepared, moved)
            self.begun = self.early = True
        except psycopg.Error as exc:
            if self.on_standby:
                standby.failed(self.conn_dsn, exc)
            self._facts_cursor = None
            self.snapshot_id = None
            self.facts = {}
            self._drop_connection()


class EarlySnapshot(threading.local):
    """Begins a catalog snapshot as a ZODB transaction begins.

    A transaction reads the catalog in a PostgreSQL snapshot and loads
    objects in a ZODB snapshot.  Where the catalog cannot share the
    storage's snapshot (ZEO, FileStorage, RelStorage in another database)
    it takes one of its own; taken at the first catalog statement, some
    milliseconds after the ZODB's, it may show a commit the objects do not
    show, and the transaction must run again (consistency.py: a
    ``ReadConflictError`` Zope retries, after a pause of up to a second).
    Taken as the ZODB transaction begins (``ISynchronizer.newTransaction``,
    beside the ZODB connection's own), the two are a round trip apart.

    Per thread: a thread whose last transaction ran a catalog statement in
    a snapshot of its own begins the next one early
    (:meth:`SnapshotAgreement.begin_early`); the others (a shared snapshot,
    no catalog, answers from the result cache alone) are left alone, and
    pay nothing."""

    dsn = None
    cids = ()
    #: the transaction managers this thread registered with
    managers = ()

    def remember(self, session):
        """The session's transaction ends: whether the thread's next one
        begins early."""
        if session.sent and session.snapshot_id == "" and \
                session.watched and not session.storage_offered:
            manager = session.manager
            if manager is not None and manager not in self.managers:
                # registering calls newTransaction at once, with the
                # transaction that is ending: nothing to begin for it yet
                self.cids = ()
                manager.registerSynch(_SYNCHRONIZER)
                self.managers += (manager,)
            self.dsn = session.dsn
            self.cids = tuple(sorted(session.watched))
        else:
            self.cids = ()

    def take(self):
        cids, self.cids = self.cids, ()
        return self.dsn, cids


early_snapshots = EarlySnapshot()

#: ``begin(dsn, cids)``: begins the current transaction's session early
#: (every thread's: not a thread-local attribute); given by session.py,
#: which makes sessions (begin_early_with)
_begin = []


def begin_early_with(begin):
    """Early snapshots begin with ``begin(dsn, cids)`` (session.py)."""
    _begin[:] = [begin]


@implementer(ISynchronizer)
class _Synchronizer:

    def newTransaction(self, txn):
        dsn, cids = early_snapshots.take()
        if not cids or not _begin:
            return
        try:
            manager = transaction_module.manager
            if manager.get() is not txn:
                return
            _begin[0](dsn, cids)
        except Exception:  # noqa: B902 - never fail a transaction's begin
            logger.debug("could not begin the catalog snapshot early",
                         exc_info=True)

    def beforeCompletion(self, txn):
        pass

    def afterCompletion(self, txn):
        pass


_SYNCHRONIZER = _Synchronizer()
