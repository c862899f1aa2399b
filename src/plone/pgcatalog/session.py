"""The catalog's part in a ZODB transaction: one PostgreSQL transaction.

The first catalog call of a ZODB transaction takes a connection from the
pool and joins a :class:`CatalogSession` (an ``IDataManager``) to the
transaction.  Every catalog statement of that ZODB transaction then runs in
one PostgreSQL transaction at ``REPEATABLE READ``:

* **One snapshot.**  Every read of the ZODB transaction sees the same
  catalog.  When the catalog lives in the database of the site's RelStorage,
  the snapshot is *the ZODB's own* (RelStorage's load connection exports it,
  ``pg_export_snapshot``; the session imports it, ``SET TRANSACTION
  SNAPSHOT``): the catalog answers exactly for the objects the request can
  load.  Elsewhere the snapshot is taken at the first catalog statement.
* **Conflicts as in the ZODB.**  A write to an entry that another
  transaction changed (or removed, or created) after this snapshot fails
  with a serialization failure, raised as ``ConflictError``: Zope retries
  the request, as it does for ZODB write conflicts.  Writes to different
  entries never conflict (the change counter is an insert-only log).
* **Read your own writes.**  Catalog writes are buffered in Python
  (:class:`~plone.pgcatalog.writer.PendingWrites`) and sent before the
  next statement of the same transaction, or at ``tpc_vote``.
* **Failures contained.**  Once the transaction holds writes, each
  statement runs inside a savepoint (sent in the same round trip): a
  statement PostgreSQL refuses is rolled back alone and the transaction
  goes on.  A refused statement of a read-only transaction ends it; the
  next statement starts a new one.  Driver errors never reach callers
  (:func:`plone.pgcatalog.dberrors.translate_error`).
* **Commits that cannot run ahead of the ZODB.**  The session sorts last
  among the transaction's resources.  With PostgreSQL's two-phase commit
  (``max_prepared_transactions`` > 0) it prepares in ``tpc_vote``, after the
  storages voted, and commits the prepared transaction in ``tpc_finish``,
  after the storages finished; if a storage fails to finish, the prepared
  transaction is rolled back.  A prepared transaction left behind by a crash
  is resolved by :func:`plone.pgcatalog.db.resolve_in_doubt`.  Without
  two-phase commit (or when the catalog is the only resource with changes)
  PostgreSQL commits in ``tpc_vote``.
* **Connections that went away are replaced** (a server restart, a killed
  backend): a transaction without writes retries on a fresh connection; one
  with writes fails with :class:`DatabaseUnavailable`, a ``TransientError``
  Zope retries.

Why one module of some 640 lines: :class:`CatalogSession` is one
``IDataManager``; its methods are the transaction protocol (statements,
savepoints, vote, finish, abort) acting on the same few fields, and read
best side by side.  Connections and error translation are ``db.py``'s; the
write buffer and its batches are ``writer.py``'s.
"""
import logging
import threading
import time
import uuid
import weakref

import psycopg
import transaction as transaction_module
from psycopg import sql
from transaction.interfaces import IDataManager
from transaction.interfaces import IDataManagerSavepoint
from transaction.interfaces import ISynchronizer
from zope.interface import implementer

from plone.pgcatalog import cache as result_cache
from plone.pgcatalog import config
from plone.pgcatalog import consistency
from plone.pgcatalog import db
from plone.pgcatalog import dberrors
from plone.pgcatalog import ddl
from plone.pgcatalog import lazy
from plone.pgcatalog import writer as writer_module
from plone.pgcatalog.changes import Changes
from plone.pgcatalog.errors import CatalogReadConflictError
from plone.pgcatalog.errors import CatalogStatementError
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.fragment import Fragment
from plone.pgcatalog.fragment import literal
from plone.pgcatalog.fragment import q


logger = logging.getLogger("plone.pgcatalog")

_TXN_KEY = "plone.pgcatalog.session"

#: attempts of a statement whose connection turned out dead
CONNECT_ATTEMPTS = 3
#: attempts (and first pause, doubled each time) to finish a prepared
#: transaction whose connection went away
FINISH_ATTEMPTS = 6
FINISH_PAUSE = 0.05
#: seconds a transaction's early snapshot waits for a free connection
#: (none free: it begins at the first statement, as without)
EARLY_CHECKOUT = 0.05

_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ"


def _timeout_sql(ms):
    """``SET LOCAL statement_timeout``: until the end of the PostgreSQL
    transaction, or of the savepoint it was set in if that is rolled
    back."""
    return q("SET LOCAL statement_timeout = {}", literal(int(ms))).ddl


def _snapshot_gone(exc):
    """``exc`` says the snapshot to import does not exist (any more)."""
    return isinstance(exc, (psycopg.errors.InvalidParameterValue,
                            psycopg.errors.UndefinedObject)) and \
        "snapshot" in (exc.diag.message_primary or "")


#: cid -> when the catalog's lag behind its objects was last logged
_lag_logged = {}
#: prepared catalog transactions a reader waited for in vain
_stuck = set()


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


@implementer(IDataManager)
class CatalogSession:
    """The catalog's data manager for one ZODB transaction."""

    transaction_manager = None
    #: the transaction manager it was made for
    manager = None

    def __init__(self, txn, dsn, jar=None):
        self.txn = txn
        self.dsn = dsn
        #: the ZODB connection whose storage may share its snapshot
        self.jar = jar
        self.conn = None
        #: a PostgreSQL transaction is open on ``conn``
        self.begun = False
        #: it holds this ZODB transaction's writes
        self.wrote = False
        #: the global id of its prepared transaction (after tpc_vote)
        self.prepared = None
        #: an error that makes the commit fail (writes were lost)
        self.failed = None
        #: read-only statements sent with the next one (see ride)
        self.riders = []
        #: cid -> the ZODB generation of the catalogs this transaction uses
        #: (their snapshots must agree: consistency.py)
        self.watched = {}
        #: cid -> consistency.Facts of this PostgreSQL transaction's snapshot
        self.facts = {}
        #: the facts asked with BEGIN (a cursor, read once the pipeline ends)
        self._facts_cursor = None
        #: the storage's snapshot to import ("": none; None: not asked yet)
        self.snapshot_id = None
        #: this PostgreSQL transaction imported the storage's snapshot
        self.shared = False
        #: the storage shares the catalog's database (its snapshot was)
        self.storage_shared = False
        #: the storage's PostgreSQL transaction id of this commit (xid8
        #: text), when it shares the database (tpc_vote)
        self.storage_xid = None
        self.pending = writer_module.PendingWrites()
        #: moves whenever what this session's statements see may change
        #: (writes sent, a savepoint rolled back, the PostgreSQL transaction
        #: begun or ended): big answers read their rest only in the epoch
        #: they were found in (lazy.py)
        self.epoch = 0
        #: the big answers found in this session whose rest may be unread
        #: (lazy.LazyRids), settled before the epoch moves
        self.lazy = weakref.WeakSet()
        self.counter_flushed = {}  # cid -> increments already in the PG txn
        self.dirty = set()  # cids written to in the PG txn (their stamp)
        #: cid -> what this transaction changed, not yet counted by the
        #: catalog's ChangeCounters (changes.py; taken by take_changes)
        self.changes = {}
        #: cids whose changes a before-commit hook counted
        self.counted = set()
        #: catalog key -> "registered" / "counted": the tool's
        #: before-commit hook that counts its changes (tool.py)
        self.count_hooks = {}
        #: catalog keys whose generation this transaction counted
        self.generation_counted = set()
        #: cids whose hot keys this transaction registered or unregistered
        #: (hot.py; the tool makes it conflict with concurrent writers)
        self.hot_changed = set()
        #: cids of the catalogs this transaction created (nobody else can
        #: write them before it commits)
        self.created_cids = set()
        self._sp_seq = 0
        self.cache = {}  # per-transaction caches (rid -> path, ...)
        self.rows_written = 0
        self.writer = None  # set by current_session
        # (cid, path) -> the error the commit must raise: metadata ZCatalog
        # would have failed to pickle at commit time (its BTree keeps only
        # an entry's last record, so a later good record clears it)
        self.commit_errors = {}
        #: PostgreSQL indexes to drop once this transaction committed:
        #: name -> (cid, index id) that used it
        self.drops = {}
        self.commit_hooks = []
        #: statement timeout (ms) of this transaction's reads; 0: none set
        #: (the server's own applies).  Writes and the commit run without
        #: one (statement-timeout-ms, docs/admin.md).
        self.timeout_ms = config.get_statement_timeout_ms()
        #: searches at least this long (ms) go to the slow-query log; 0: off
        self.slow_ms = config.get_slow_query_ms()
        #: the site's own settings these come from (use_settings), or None
        self.site_settings = None
        #: the PostgreSQL transaction was begun with the ZODB's
        #: (begin_early), before the first catalog call
        self.early = False
        #: a catalog statement ran (in a snapshot of its own, when
        #: ``snapshot_id`` is ""): the thread's next transaction begins
        #: early
        self.sent = False

    def use_settings(self, site):
        """Take the site's own settings (a dict of ``config.OVERRIDABLE``
        names: its registry's, settings.py) for this transaction, unless
        its PostgreSQL transaction has begun (the first catalog of a
        transaction decides)."""
        if self.site_settings is not None or \
                (self.begun and not self.early):
            return
        self.site_settings = site
        self.slow_ms = config.get_slow_query_ms(site)
        # begun early (begin_early), the transaction has the process's limit
        self.set_timeout(config.get_statement_timeout_ms(site))

    def set_timeout(self, timeout_ms):
        """The reads' statement timeout from now on (milliseconds, 0 = no
        limit), in the PostgreSQL transaction already begun too."""
        if timeout_ms == self.timeout_ms:
            return
        self.timeout_ms = timeout_ms
        if self.begun:
            try:
                self.conn.execute(_timeout_sql(timeout_ms), prepare=False)
            except psycopg.Error as exc:
                self._contain(self.conn, exc, False)

    def created_catalog(self, cid):
        """Catalog ``cid``'s row was made in this transaction."""
        self.created_cids.add(cid)

    def hot_changed_shared(self):
        """The catalogs whose hot keys this transaction changed and that
        other transactions may write meanwhile (not those it created)."""
        return self.hot_changed - self.created_cids

    def on_commit(self, callback):
        """Call ``callback()`` once this transaction committed."""
        self.commit_hooks.append(callback)

    def drop_after_commit(self, names, owner):
        for name in names:
            self.drops[name] = owner

    def cancel_drops(self, names):
        for name in names:
            self.drops.pop(name, None)

    @property
    def in_pg_txn(self):
        """This transaction's writes are in PostgreSQL (not only pending)."""
        return self.wrote

    @property
    def has_writes(self):
        return self.wrote or bool(self.pending)

    # -- connection ---------------------------------------------------------
    def connection(self):
        if self.conn is None:
            self.conn = db.checkout(self.dsn)
        return self.conn

    def _drop_connection(self):
        """Throw the connection away (it broke): the PostgreSQL transaction
        is gone with it."""
        conn, self.conn = self.conn, None
        self.begun = False
        self.epoch += 1
        if conn is not None:
            db.discard(self.dsn, conn)

    def _begin_statements(self, conn):
        """BEGIN (and the shared snapshot), sent ahead of a statement in
        the same round trip."""
        conn.execute(_BEGIN, prepare=False)
        self.epoch += 1
        # facts about the snapshot are about this PostgreSQL transaction's
        self.facts = {}
        if self.snapshot_id is None:
            self.snapshot_id = db.storage_snapshot(self.dsn, self.jar) or ""
            self.storage_shared = bool(self.snapshot_id)
        self.shared = bool(self.snapshot_id)
        if self.snapshot_id:
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                sql.Literal(self.snapshot_id)), prepare=False)
        if self.timeout_ms:
            conn.execute(_timeout_sql(self.timeout_ms), prepare=False)
        self._facts_cursor = None
        if self.watched:
            # does the snapshot agree with the objects'? (consistency.py)
            fragment = consistency.facts_sql(self.watched)
            self._facts_cursor = conn.cursor().execute(
                fragment.text, fragment.params)

    def _unlimited(self, conn):
        """Lift the reads' statement timeout for the writes queued next (the
        caller queues :meth:`_limited` after them)."""
        if self.timeout_ms:
            conn.execute(_timeout_sql(0), prepare=False)

    def _limited(self, conn):
        if self.timeout_ms:
            conn.execute(_timeout_sql(self.timeout_ms), prepare=False)

    # -- statements ---------------------------------------------------------
    def execute(self, query, params=(), prepare=None, binary=False):
        """Run one statement (a :class:`~plone.pgcatalog.fragment.Fragment`,
        or constant SQL with ``params``), after sending this transaction's
        pending writes, in the session's PostgreSQL transaction; the
        cursor."""
        if isinstance(query, Fragment):
            query, params = query.text, query.params
        if self.pending:
            self.flush()
        return self._run(query, params, prepare, binary)

    def execute_write(self, cid, query, params=()):
        """Run one writing statement on catalog ``cid``'s rows (None: no
        catalog's rows, e.g. a new catalog's own)."""
        if isinstance(query, Fragment):
            query, params = query.text, query.params
        if self.pending:
            self.flush()
        self.settle()
        self._begin_checked()
        try:
            cursor = self._run(query, params, None, False, write=True)
        finally:
            self.epoch += 1
        if cid is not None:
            self.dirty.add(cid)
            # a statement on any number of rows: every answer may change
            self._changes(cid).all = True
        return cursor

    def settle(self):
        """Read the rest of the big answers found in the current state
        (it is about to change: lazy.py)."""
        if self.lazy:
            lazy.settle(self)

    def views_open(self):
        """Whether big answers of this session wait for their rest (its
        reads then run in a savepoint: a refused one must not end the
        snapshot they need)."""
        return bool(self.lazy) and bool(lazy.open_sequences(self))

    def execute_settled(self, fragment):
        """The first row of a read-only statement run in the session's
        current state, pending writes left pending (a big answer's rest,
        read before they are sent: lazy.py)."""
        return self._run(fragment.text, fragment.params, False,
                         True).fetchone()

    def _changes(self, cid):
        changes = self.changes.get(cid)
        if changes is None:
            changes = self.changes[cid] = Changes()
        return changes

    def take_changes(self, cid):
        """What this transaction changed in catalog ``cid`` since the last
        call, its pending writes sent first (a before-commit hook counts
        them: changes.py)."""
        self.flush()
        self.counted.add(cid)
        return self.changes.pop(cid, None) or Changes()

    def commits_catalog(self, cid):
        """Whether the commit will log a change of catalog ``cid`` (its
        change stamp goes up: tpc_vote), as things stand."""
        return bool((self.wrote or self.pending) and (
            cid in self.dirty or cid in self.counter_flushed
            or cid in self.pending.counter))

    def _send(self, queue, failed):
        """``queue(conn, fresh)`` queues statements in one pipeline of the
        session's transaction (BEGIN first when it is ``fresh``); its
        result is returned.  When the connection turns out dead and the
        transaction had no writes, again on a fresh connection; any other
        failure goes to ``failed(conn, exc, fresh)``, which raises.  A
        fresh snapshot behind the objects' is rolled back (with what
        ``queue`` sent after BEGIN: reads only, writes begin with
        :meth:`_begin_checked`) and replaced by one that agrees, and
        ``queue`` runs again: :meth:`_agree`."""
        attempt = 0
        resnapshots = 0
        while True:
            attempt += 1
            conn = self.connection()
            fresh = not self.begun
            try:
                with conn.pipeline():
                    if fresh:
                        self._begin_statements(conn)
                    result = queue(conn, fresh)
                self.begun = True
                self.sent = True
            except psycopg.Error as exc:
                self._facts_cursor = None
                if dberrors.connection_lost(exc) and not self.wrote \
                        and attempt < CONNECT_ATTEMPTS:
                    # died while idle in the pool (a server restart, a
                    # killed backend): nothing of ours was lost
                    self._drop_connection()
                    db.check_pool(self.dsn)
                    continue
                if fresh and self.snapshot_id and _snapshot_gone(exc):
                    # the storage's transaction that exported the snapshot
                    # is gone (a server restart ended it): this ZODB
                    # transaction's objects cannot be matched any more
                    self._contain(conn, exc, False)
                    raise DatabaseUnavailable(
                        "the storage's snapshot ended before the catalog "
                        "could read in it (PostgreSQL restarted?); the "
                        "request is retried") from None
                failed(conn, exc, fresh)
                raise  # pragma: no cover - failed() raises
            if fresh and self._facts_cursor is not None:
                cursor, self._facts_cursor = self._facts_cursor, None
                if not self._agree(cursor.fetchall(), resnapshots):
                    resnapshots += 1
                    continue
            return result

    def _begin_checked(self):
        """Begin the PostgreSQL transaction in a snapshot that agrees with
        the objects' (consistency.py) before writes go into it: a snapshot
        found behind is replaced, which writes sent with it would not
        survive.  Reads begin with their statement (run again in the new
        snapshot)."""
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
            rows = self._run(fragment.text, fragment.params, True,
                             False).fetchall()
        if not self._agree(rows, 0, end=True):
            # the next statement begins a snapshot that agrees
            self._end_snapshot()

    def _agree(self, rows, resnapshots, end=False):
        """Take the facts of a new snapshot; whether it agrees with the
        objects' (else it was ended, unless ``end`` leaves that to the
        caller, and the caller runs again on a new one).  Raises
        CatalogReadConflictError when it cannot be made to agree."""
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
        # must not end this session's transaction
        with db.get_pool(self.dsn).connection() as conn:
            while time.monotonic() < deadline:
                if not db.run(conn, fragment).fetchone()[0]:
                    return True
                time.sleep(consistency.POLL)
        _stuck.update(xids)
        logger.warning("prepared catalog transactions %s still unfinished "
                       "after %.1f s: their process may have died (they are "
                       "resolved at the next start, db.resolve_in_doubt)",
                       sorted(xids), consistency.WAIT)
        return False

    def _end_snapshot(self):
        """End this PostgreSQL transaction (it holds no writes) so that the
        next statement begins a snapshot of its own, newer than the
        storage's."""
        try:
            self.conn.execute("ROLLBACK", prepare=False)
        except psycopg.Error:
            self._drop_connection()
        self.begun = False
        self.epoch += 1
        self.facts = {}
        self.snapshot_id = ""

    def ride(self, fragment, callback, prepare=False):
        """Send the read-only ``fragment`` with this transaction's next
        statement, in the same round trip; ``callback(rows)`` gets its rows
        (not called if that statement fails, nor when it runs in a
        savepoint).  ``prepare``: a statement whose plan does not depend
        on its values, prepared (psycopg's ``prepare``)."""
        self.riders.append((fragment, callback, prepare))

    def _run(self, query, params, prepare, binary, write=False):
        started = time.perf_counter()
        riders, self.riders = self.riders, []
        riding = []
        guard = self.wrote or self.views_open()

        def queue(conn, fresh):
            guarded = guard and not fresh
            if guarded:
                conn.execute("SAVEPOINT pgc_stmt", prepare=False)
            if write:
                self._unlimited(conn)
            cursor = conn.execute(query, params, prepare=prepare,
                                  binary=binary)
            if write:
                self._limited(conn)
            if guarded:
                conn.execute("RELEASE SAVEPOINT pgc_stmt", prepare=False)
            elif riders:
                del riding[:]
                for fragment, callback, ready in riders:
                    riding.append((conn.cursor().execute(
                        fragment.text, fragment.params, prepare=ready),
                        callback))
            return cursor

        def failed(conn, exc, fresh):
            self._contain(conn, exc, guard and not fresh)
            raise dberrors.translate_error(exc, query,
                                           self.timeout_ms) from None

        cursor = self._send(queue, failed)
        for rider, callback in riding:
            callback(rider.fetchall())
        if write:
            self.wrote = True
        if db.trace is not None:
            db.trace.write(started, query, params)
        return cursor

    def _contain(self, conn, exc, guarded):
        """Leave the session usable after statement failure ``exc``."""
        dberrors.forget_prepared(conn)
        if dberrors.connection_lost(exc) or conn.broken:
            self._lose_connection("PostgreSQL went away")
            return
        try:
            if guarded:
                with conn.pipeline():
                    conn.execute("ROLLBACK TO SAVEPOINT pgc_stmt",
                                 prepare=False)
                    conn.execute("RELEASE SAVEPOINT pgc_stmt", prepare=False)
                return
            # a read-only transaction (or its first statement): start
            # again at the next statement; writes, if any, are gone
            conn.execute("ROLLBACK", prepare=False)
            self.begun = False
            self.epoch += 1
            if self.wrote:
                self.failed = CatalogStatementError(
                    "a refused catalog statement rolled back this "
                    "transaction's catalog writes")
                self.wrote = False
        except psycopg.Error:
            logger.warning("could not roll back a failed catalog statement; "
                           "dropping the connection", exc_info=True)
            self._lose_connection("the catalog connection broke")

    def _lose_connection(self, why):
        """The connection, and the PostgreSQL transaction with it, are
        gone: this transaction's writes, if any, too (its commit fails)."""
        if self.wrote:
            self.failed = DatabaseUnavailable(
                "%s with this transaction's catalog writes" % why)
        self.wrote = False
        self._drop_connection()

    # -- writes -------------------------------------------------------------
    def flush(self):
        """Send buffered writes to PostgreSQL (in a savepoint: if they are
        refused, the transaction cannot commit, but goes on until then)."""
        if not self.pending:
            return
        if self.failed is not None:
            # the commit will fail anyway: keep the writes in Python
            return
        lazy = writer_module.lazy_metadata(self.pending.ops)
        if lazy:
            # one statement for the batch: which entries have metadata
            statement = writer_module.with_metadata(list(lazy))
            present = {tuple(r) for r in self._run(
                statement.text, statement.params, True, False).fetchall()}
            writer_module.resolve_metadata(lazy, present)
        ops = self.pending.take_ops()
        counter = self.pending.take_counter()
        for cid, n in counter.items():
            self.counter_flushed[cid] = self.counter_flushed.get(cid, 0) + n
        self.dirty.update(counter)
        self.dirty.update(cid for cid, _path in ops)
        if not ops:
            return
        self.rows_written += len(ops)
        # big answers found before these writes keep what they found
        self.settle()
        self._begin_checked()

        def queue(conn, fresh):
            conn.execute("SAVEPOINT pgc_flush", prepare=False)
            self._unlimited(conn)
            found = self.writer.apply(conn, ops)
            self._limited(conn)
            conn.execute("RELEASE SAVEPOINT pgc_flush", prepare=False)
            return found

        def failed(conn, exc, fresh):
            error = dberrors.translate_error(exc, "catalog writes")
            dberrors.forget_prepared(conn)
            if dberrors.connection_lost(exc) or conn.broken:
                self._contain(conn, exc, False)
            else:
                try:
                    with conn.pipeline():
                        conn.execute("ROLLBACK TO SAVEPOINT pgc_flush",
                                     prepare=False)
                        conn.execute("RELEASE SAVEPOINT pgc_flush",
                                     prepare=False)
                    # the transaction (begun here if it was not) goes on
                    self.begun = True
                except psycopg.Error:
                    self._contain(conn, exc, False)
            self.failed = error
            raise error from None

        try:
            found = self._send(queue, failed)
        finally:
            self.epoch += 1
        self.wrote = True
        for cid, changes in found.items():
            self._changes(cid).update(changes)

    def set_commit_error(self, cid, path, exc, what=None):
        """Make this transaction's commit fail with ``exc`` (or not, with
        None) because of entry ``path``'s latest record, as the ZODB would
        when pickling ZCatalog's data."""
        if exc is None:
            self.commit_errors.pop((cid, path), None)
            return
        logger.error("%s: %s (the transaction cannot commit)", what, exc)
        self.commit_errors[(cid, path)] = exc

    def counter_delta(self, cid):
        return (self.counter_flushed.get(cid, 0)
                + self.pending.counter.get(cid, 0))

    # -- IDataManager -------------------------------------------------------
    def sortKey(self):
        # '~' sorts after the storages' keys: vote and finish last.
        return "~plone.pgcatalog:%d" % id(self)

    def abort(self, txn):
        self._end()

    def tpc_begin(self, txn):
        pass

    def commit(self, txn):
        pass

    def tpc_vote(self, txn):
        if self.commit_errors:
            raise next(iter(self.commit_errors.values()))
        if self.failed is not None:
            raise self.failed
        if not self.pending and not self.wrote:
            return  # read only: the snapshot ends in tpc_finish
        self.settle()
        self.flush()
        self._uncounted()
        conn = self.connection()
        gid = None
        cids = self.dirty | set(self.counter_flushed)
        two_phase = db.two_phase(self.dsn) and _other_resources(txn, self)
        try:
            with conn.pipeline():
                # the commit is never cut short by the reads' limit
                self._unlimited(conn)
                for cid in sorted(cids):
                    # insert-only: concurrent writers never conflict here
                    db.run(conn, db.log_commit(
                        cid, self.counter_flushed.get(cid, 0)), prepare=True)
                found = None
                if two_phase and self.storage_shared:
                    # the storage's own PostgreSQL transaction (it voted):
                    # what an in-doubt catalog transaction follows
                    found = db.run(conn, consistency.STORAGE_XID)
                elif not two_phase:
                    conn.execute("COMMIT", prepare=False)
            if two_phase:
                row = found.fetchone() if found is not None else None
                self.storage_xid = row[0] if row else None
                gid = consistency.gid(uuid.uuid4().hex, cids,
                                      self.storage_xid)
                # known before it is sent: if the acknowledgement is lost,
                # the abort rolls back what the server may have prepared
                self.prepared = gid
                conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(
                    sql.Literal(gid)), prepare=False)
        except psycopg.Error as exc:
            self._contain(conn, exc, False)
            raise dberrors.translate_error(exc, "commit") from None
        self.begun = False
        self.epoch += 1
        if gid is None:
            self._committed()

    def _uncounted(self):
        """Writes made after the before-commit hooks counted them (by a
        data manager's commit): too late for the ZODB's counters, so this
        process's result cache is emptied and the writes are logged (other
        processes may serve answers from before them; docs/cache.md), with
        the values kept under the counters (uniqueValues, text
        statistics)."""
        late = [cid for cid in self.counted if self.changes.get(cid)]
        if late:
            logger.error(
                "catalog writes after the transaction's before-commit hooks "
                "(catalogs %s): the result cache's counters miss them; "
                "write to the catalog before the commit starts", late)
            # and what is kept under the same counters (store.py)
            from plone.pgcatalog.store import forget_caches
            forget_caches()

    def _committed(self):
        self.wrote = False
        db.committed(self.dsn, self.dirty | set(self.counter_flushed))
        self.counter_flushed.clear()
        self.dirty.clear()

    def tpc_finish(self, txn):
        if self.prepared is not None:
            # The storages have finished: the ZODB transaction is
            # committed.  This must not fail (the transaction package would
            # abort us after the ZODB committed): a prepared transaction
            # survives its connection, so try on fresh ones, then leave it
            # to be committed later (db.resolve_in_doubt).
            gid, self.prepared = self.prepared, None
            self._finish_prepared(gid, "COMMIT PREPARED")
            self._committed()
        big = self.rows_written >= db.ANALYZE_AFTER_ROWS
        due = db.analyze_due(self.dsn, self.rows_written)
        drops, self.drops = self.drops, {}
        hooks, self.commit_hooks = self.commit_hooks, []
        self._end()
        for hook in hooks:
            hook()
        if drops:
            ddl.drop_unused(self.dsn, sorted(drops))
        if big:
            db.fold_hot_counts(self.dsn)
        if due:
            db.analyze(self.dsn)

    def tpc_abort(self, txn):
        gid, self.prepared = self.prepared, None
        if gid is not None:
            # voted (the catalog is last to vote, so every resource voted):
            # a storage failed to finish, or the acknowledgement of PREPARE
            # was lost.  Follow the storage's own transaction when it is in
            # this database; roll back otherwise.
            command = "ROLLBACK PREPARED"
            if self._storage_committed():
                logger.critical(
                    "a storage failed in tpc_finish after its database "
                    "transaction committed: the catalog's commits too (%s)",
                    gid)
                command = "COMMIT PREPARED"
            self._finish_prepared(gid, command)
            if command == "COMMIT PREPARED":
                self._committed()
        self._end()

    def _storage_committed(self):
        """Whether the storage's PostgreSQL transaction of this commit (in
        the catalog's database) committed; False when unknown."""
        if not self.storage_xid:
            return False
        try:
            with db.get_pool(self.dsn).connection() as conn:
                return db.run(conn, consistency.xact_status(
                    self.storage_xid)).fetchone()[0] == "committed"
        except psycopg.Error:
            logger.warning("could not read the storage transaction's status",
                           exc_info=True)
            return False

    def _finish_prepared(self, gid, command):
        statement = sql.SQL(command + " {}").format(sql.Literal(gid))
        pause = FINISH_PAUSE
        for attempt in range(FINISH_ATTEMPTS):
            try:
                self.connection().execute(statement, prepare=False)
                return
            except psycopg.errors.UndefinedObject:
                # nothing (left) prepared under that id: PREPARE never
                # reached the server, or another process finished it
                return
            except psycopg.Error as exc:
                if not dberrors.connection_lost(exc) and not self.conn.broken:
                    logger.critical("%s %s failed: %s", command, gid, exc)
                    break
                self._drop_connection()
                time.sleep(pause)
                pause *= 2
            except DatabaseUnavailable:
                time.sleep(pause)
                pause *= 2
        logger.critical(
            "%s %s could not be sent (PostgreSQL unreachable); the prepared "
            "catalog transaction is left to be resolved (it is retried by "
            "the next transaction of this process and at start-up)",
            command, gid)
        db.unresolved(self.dsn, gid, command)

    def _end(self):
        """End the PostgreSQL transaction (if any) and give the connection
        back to the pool."""
        conn = self.conn
        try:
            if conn is not None and self.begun:
                # big answers still held keep what they found
                self.settle()
                conn = self.conn
            if conn is not None and self.begun:
                try:
                    # A transaction that holds no writes ends with COMMIT
                    # even when the ZODB's aborts: the two are the same to
                    # PostgreSQL, but psycopg forgets every statement it
                    # prepared on this connection when it sees a ROLLBACK,
                    # so a request that aborts (a conflict retry, a view
                    # that aborts, a test) would have the next one parse
                    # and plan its prepared lookups again (about 1 ms).
                    conn.execute("ROLLBACK" if self.wrote else "COMMIT",
                                 prepare=False)
                except psycopg.Error:
                    logger.warning("ending the catalog transaction failed; "
                                   "discarding the connection",
                                   exc_info=True)
                    self._drop_connection()
        finally:
            _early.remember(self)
            self.pending = writer_module.PendingWrites()
            self.counter_flushed.clear()
            self.dirty.clear()
            self.changes.clear()
            self.counted.clear()
            self.count_hooks.clear()
            self.generation_counted.clear()
            self.hot_changed.clear()
            self.created_cids.clear()
            self.drops = {}
            self.commit_hooks = []
            self.begun = False
            self.epoch += 1
            self.wrote = False
            self.watched = {}
            self.facts = {}
            self.cache.clear()
            conn, self.conn = self.conn, None
            if conn is not None:
                db.checkin(self.dsn, conn)
            _forget_session(self.txn)

    # -- savepoints ---------------------------------------------------------
    def savepoint(self):
        return SessionSavepoint(self)

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
        try:
            self.conn = db.checkout(self.dsn, timeout=EARLY_CHECKOUT)
        except DatabaseUnavailable:
            return
        conn = self.conn
        try:
            self.snapshot_id = ""
            with conn.pipeline():
                self._begin_statements(conn)
                fragment = consistency.facts_sql(cids)
                cursor = conn.cursor().execute(fragment.text,
                                               fragment.params)
            for cid, stamp, prepared, moved in cursor.fetchall():
                self.facts[cid] = consistency.Facts(stamp, prepared, moved)
            self.begun = self.early = True
        except psycopg.Error:
            self._facts_cursor = None
            self.snapshot_id = None
            self.facts = {}
            self._drop_connection()


def _other_resources(txn, session):
    """Whether resources other than ``session`` take part in ``txn`` (a
    catalog-only commit needs no two-phase commit)."""
    resources = getattr(txn, "_resources", None)
    if resources is None:
        return True
    return any(r is not session for r in resources)


@implementer(IDataManagerSavepoint)
class SessionSavepoint:

    def __init__(self, session):
        self.session = session
        self.snapshot = session.pending.snapshot()
        self.commit_errors = dict(session.commit_errors)
        self.counter_flushed = dict(session.counter_flushed)
        self.dirty = set(session.dirty)
        self.drops = dict(session.drops)
        self.commit_hooks = list(session.commit_hooks)
        self.wrote = session.wrote
        self.failed = session.failed
        self.pg_name = None
        if session.begun:
            session._sp_seq += 1
            self.pg_name = "pgc_sp_%d" % session._sp_seq
            self._send("SAVEPOINT " + self.pg_name)

    def _send(self, statement):
        try:
            self.session.connection().execute(statement, prepare=False)
        except psycopg.Error as exc:
            self.session._contain(self.session.conn, exc, False)
            raise dberrors.translate_error(exc, statement) from None

    def rollback(self):
        session = self.session
        if session.begun:
            # big answers found before the rollback keep what they found
            session.settle()
        if session.begun:
            session.epoch += 1
            if self.pg_name is not None:
                self._send("ROLLBACK TO SAVEPOINT " + self.pg_name)
            elif session.wrote:
                # Every write in the PG transaction came after this
                # savepoint: roll it back entirely.
                self._send("ROLLBACK")
                session.begun = False
        if isinstance(session.failed, DatabaseUnavailable):
            # the connection went away: every write of the transaction is
            # lost, those before this savepoint too
            pass
        else:
            session.wrote = self.wrote and session.begun
            session.failed = self.failed
        session.drops = dict(self.drops)
        session.commit_hooks = list(self.commit_hooks)
        session.pending.restore(self.snapshot)
        session.commit_errors = dict(self.commit_errors)
        session.counter_flushed = dict(self.counter_flushed)
        session.dirty = set(self.dirty)
        # rid -> path and "has metadata" facts may describe rolled-back rows
        session.cache.clear()


def _forget_session(txn):
    try:
        txn.set_data(_TXN_KEY, None)
    except Exception:  # pragma: no cover
        pass


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
    (:meth:`CatalogSession.begin_early`); the others (a shared snapshot,
    no catalog, answers from the result cache alone) are left alone, and
    pay nothing."""

    dsn = None
    cids = ()
    #: the transaction managers this thread registered with
    managers = ()

    def remember(self, session):
        """The session's transaction ends: whether the thread's next one
        begins early."""
        if session.sent and session.snapshot_id == "" and session.watched:
            self.dsn = session.dsn
            self.cids = tuple(sorted(session.watched))
            manager = session.manager
            if manager is not None and manager not in self.managers:
                manager.registerSynch(_SYNCHRONIZER)
                self.managers += (manager,)
        else:
            self.cids = ()

    def take(self):
        cids, self.cids = self.cids, ()
        return self.dsn, cids


_early = EarlySnapshot()


@implementer(ISynchronizer)
class _Synchronizer:

    def newTransaction(self, txn):
        dsn, cids = _early.take()
        if not cids:
            return
        try:
            manager = transaction_module.manager
            if manager.get() is not txn:
                return
            current_session(dsn).begin_early(cids)
        except Exception:  # noqa: B902 - never fail a transaction's begin
            logger.debug("could not begin the catalog snapshot early",
                         exc_info=True)

    def beforeCompletion(self, txn):
        pass

    def afterCompletion(self, txn):
        pass


_SYNCHRONIZER = _Synchronizer()


def current_session(dsn=None, txn_manager=None, jar=None):
    """The session of the current transaction, joined on first use.
    ``jar``: the ZODB connection of the caller (the tool's), whose storage
    may share its snapshot."""
    tm = txn_manager or transaction_module.manager
    txn = tm.get()
    try:
        session = txn.data(_TXN_KEY)
    except KeyError:
        session = None
    if session is not None:
        if session.jar is None and jar is not None:
            session.jar = jar
        return session
    dsn = dsn or config.get_dsn()
    db.ensure_schema(dsn)
    session = CatalogSession(txn, dsn, jar)
    session.manager = tm
    session.writer = writer_module.Writer()
    txn.join(session)
    txn.set_data(_TXN_KEY, session)
    return session
