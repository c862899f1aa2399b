"""The catalog's part in a ZODB transaction: one PostgreSQL transaction.

The first catalog call of a ZODB transaction takes a connection from the
pool and joins a :class:`CatalogSession` (an ``IDataManager``) to the
transaction.  Every catalog statement of that ZODB transaction then runs in
one PostgreSQL transaction at ``REPEATABLE READ``:

* **One snapshot.**  Every read of the ZODB transaction sees the same
  catalog.  When the catalog lives in the database of the site's RelStorage,
  the snapshot is *the ZODB's own* (RelStorage's load connection exports it,
  ``pg_export_snapshot``; the session imports it, ``SET TRANSACTION
  SNAPSHOT``), or one of its own found to hold the same commits (no
  export: agreement.py): the catalog answers exactly for the objects the
  request can load.  Elsewhere the snapshot is taken at the first catalog
  statement.
* **Conflicts as in the ZODB.**  A write to an entry that another
  transaction changed (or removed, or created) after this snapshot fails
  with a serialization failure, raised as ``ConflictError``: Zope retries
  the request, as it does for ZODB write conflicts.  Writes to different
  entries never conflict (the change counter is an insert-only log).
* **Read your own writes.**  Catalog writes are buffered in Python
  (:class:`~plone.pgcatalog.pg.writer.PendingWrites`) and sent before the
  next statement of the same transaction, or at ``tpc_vote``.
* **Failures contained.**  Once the transaction holds writes, each
  statement runs inside a savepoint (sent in the same round trip): a
  statement PostgreSQL refuses is rolled back alone and the transaction
  goes on.  A refused statement of a read-only transaction ends it; the
  next statement starts a new one.  Driver errors never reach callers
  (:func:`plone.pgcatalog.pg.dberrors.translate_error`).
* **Commits that cannot run ahead of the ZODB.**  The session sorts last
  among the transaction's resources.  With PostgreSQL's two-phase commit
  (``max_prepared_transactions`` > 0) it prepares in ``tpc_vote``, after the
  storages voted, and commits the prepared transaction in ``tpc_finish``,
  after the storages finished; if a storage fails to finish, the prepared
  transaction is rolled back.  A prepared transaction left behind by a crash
  is resolved by :func:`plone.pgcatalog.pg.db.resolve_in_doubt`.  Without
  two-phase commit (or when the catalog is the only resource with changes)
  PostgreSQL commits in ``tpc_vote``.
* **Connections that went away are replaced** (a server restart, a killed
  backend): a transaction without writes retries on a fresh connection; one
  with writes fails with :class:`DatabaseUnavailable`, a ``TransientError``
  Zope retries.

Where the parts live: this module holds the session's state, its
connection and statements (:class:`CatalogSession`) and finds the current
transaction's session (:func:`current_session`); the session's snapshot
agreeing with the objects' is ``agreement.py``'s, its reads on hot
standbys ``standby.py``'s (:class:`~plone.pgcatalog.pg.standby.StandbyReads`),
its buffered writes
``writer.py``'s (:class:`~plone.pgcatalog.pg.writer.SessionWrites`), its
commit and savepoints ``twophase.py``'s; connections and error translation
are ``db.py``'s and ``dberrors.py``'s.
"""
import logging
import time
import weakref

import psycopg
import transaction as transaction_module
from psycopg import sql
from transaction.interfaces import IDataManager
from zope.interface import implementer

from plone.pgcatalog import config
from plone.pgcatalog.errors import CatalogStatementError
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.pg import agreement
from plone.pgcatalog.pg import consistency
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import dberrors
from plone.pgcatalog.pg import sharing
from plone.pgcatalog.pg import standby
from plone.pgcatalog.pg import twophase
from plone.pgcatalog.pg import writer as writer_module
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.search import lazy

logger = logging.getLogger("plone.pgcatalog")

#: a connection idle in a transaction
_INTRANS = psycopg.pq.TransactionStatus.INTRANS

_TXN_KEY = "plone.pgcatalog.pg.session"

#: attempts of a statement whose connection turned out dead
CONNECT_ATTEMPTS = 3

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


@implementer(IDataManager)
class CatalogSession(agreement.SnapshotAgreement, standby.StandbyReads,
                     twophase.TwoPhaseCommit, writer_module.SessionWrites):
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
        #: the DSN of ``conn``'s pool: ``dsn``, or a standby's (reads only:
        #: standby.py)
        self.conn_dsn = dsn
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
        #: this ZODB transaction sent catalog writes (it is no reader)
        self.writes_sent = False
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

    def keep(self, key, value):
        """Keep ``value`` under ``key`` for the rest of this transaction
        (the per-transaction cache: stores, rid -> path...)."""
        self.cache[key] = value
        return value

    def track_lazy(self, sequence):
        """A big answer whose rest may be read later (lazy.py)."""
        self.lazy.add(sequence)

    def untrack_lazy(self, sequence):
        """A big answer read whole, or given up (lazy.py)."""
        self.lazy.discard(sequence)

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
            self.conn_dsn = self.dsn
            reader = self._standby_to_read()
            if reader is not None:
                self.conn = standby.checkout(reader)
                if self.conn is not None:
                    self.conn_dsn = reader
            if self.conn is None:
                self.conn = db.checkout(self.dsn)
        return self.conn

    def _drop_connection(self):
        """Throw the connection away (it broke): the PostgreSQL transaction
        is gone with it."""
        conn, self.conn = self.conn, None
        conn_dsn, self.conn_dsn = self.conn_dsn, self.dsn
        self.begun = False
        self.epoch += 1
        if conn is not None:
            db.discard(conn_dsn, conn)

    def _begin_statements(self, conn):
        """BEGIN (and the shared snapshot), sent ahead of a statement in
        the same round trip."""
        conn.execute(_BEGIN, prepare=False)
        self.epoch += 1
        # facts about the snapshot are about this PostgreSQL transaction's
        self.facts = {}
        self._ask_storage_snapshot()
        if self.snapshot_id and self.snapshot_dsn != self.conn_dsn:
            # the storage's snapshot is on a standby this transaction does
            # not read on (it writes, or the standby failed)
            self._unshare()
        self.shared = bool(self.snapshot_id)
        if self.snapshot_id:
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                sql.Literal(self.snapshot_id)), prepare=False)
        if self.timeout_ms:
            conn.execute(_timeout_sql(self.timeout_ms), prepare=False)
        self._facts_cursor = None
        if self.watched:
            # does the snapshot agree with the objects'? (consistency.py)
            self._facts_cursor = consistency.queue_facts(conn, self.watched)

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
        """Run one statement (a :class:`~plone.pgcatalog.pg.fragment.Fragment`,
        or constant SQL with ``params``), after sending this transaction's
        pending writes, in the session's PostgreSQL transaction; the
        cursor."""
        if isinstance(query, Fragment):
            query, params = query.text, query.params
        if self.pending:
            self.flush()
        return self._run(query, params, prepare, binary)

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
        self._leave_unchecked_standby()
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
                if self._standby_failed(conn, exc, fresh):
                    continue
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
                    sharing.forget(self.dsn)
                    raise DatabaseUnavailable(
                        "the storage's snapshot ended before the catalog "
                        "could read in it (PostgreSQL restarted?); the "
                        "request is retried") from None
                failed(conn, exc, fresh)
                raise  # pragma: no cover - failed() raises
            if fresh and self._facts_cursor is not None:
                cursor, self._facts_cursor = self._facts_cursor, None
                # (a standby left for the primary is not a replaced
                # snapshot: the primary's is checked as the first)
                replaced = not self.on_standby
                verdict = self._agree(cursor.fetchall(), resnapshots)
                if verdict is agreement.RESHARE:
                    continue
                if not verdict:
                    resnapshots += replaced
                    continue
            return result

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
            cursor = _queue(conn, query, params, prepare, binary)
            if write:
                self._limited(conn)
            if guarded:
                conn.execute("RELEASE SAVEPOINT pgc_stmt", prepare=False)
            elif riders:
                del riding[:]
                for fragment, callback, ready in riders:
                    riding.append((_queue(conn, fragment.text,
                                          fragment.params, ready),
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
            if guarded and _to_savepoint(conn):
                return
            # a read-only transaction (or its first statement), or the
            # savepoint itself refused: start again at the next
            # statement; writes, if any, are gone
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

    def _end(self):
        """End the PostgreSQL transaction (if any) and give the connection
        back to the pool."""
        conn = self.conn
        parked = False
        try:
            if conn is not None and self.begun:
                # big answers still held keep what they found
                self.settle()
                conn = self.conn
            # A transaction that wrote nothing ends with COMMIT even when
            # the ZODB's aborts (psycopg forgets what it prepared when it
            # sees a ROLLBACK), sent without waiting for the answer
            # (parking.py: a round trip less per request).
            parked = conn is not None and self.begun and not self.wrote \
                and conn.info.transaction_status == _INTRANS
            if conn is not None and self.begun and not parked:
                try:
                    conn.execute("ROLLBACK" if self.wrote else "COMMIT",
                                 prepare=False)
                except psycopg.Error:
                    logger.warning("ending the catalog transaction failed; "
                                   "discarding the connection",
                                   exc_info=True)
                    self._drop_connection()
        finally:
            if self.sent and not self.writes_sent:
                standby.served(self.conn_dsn, self.dsn)
            agreement.early_snapshots.remember(self)
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
            conn_dsn, self.conn_dsn = self.conn_dsn, self.dsn
            if conn is not None and parked:
                db.end_read_only(conn_dsn, conn)
            elif conn is not None:
                db.checkin(conn_dsn, conn)
            _forget_session(self.txn)


def _queue(conn, query, params, prepare, binary=False):
    """A statement queued on ``conn`` as psycopg's ``prepare`` says; its
    cursor."""
    return conn.cursor().execute(query, params, prepare=prepare,
                                 binary=binary)


def _forget_session(txn):
    try:
        txn.set_data(_TXN_KEY, None)
    except Exception:  # pragma: no cover
        pass




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


def _begin_early(dsn, cids):
    current_session(dsn).begin_early(cids)


agreement.begin_early_with(_begin_early)


def _to_savepoint(conn):
    """Roll back to the savepoint a failed statement was sent in; False
    when there is none: the ``SAVEPOINT`` itself failed (a statement
    timeout or a cancel can refuse any command), which left the
    transaction aborted, with its writes."""
    try:
        with conn.pipeline():
            conn.execute("ROLLBACK TO SAVEPOINT pgc_stmt", prepare=False)
            conn.execute("RELEASE SAVEPOINT pgc_stmt", prepare=False)
    except psycopg.Error as exc:
        if dberrors.connection_lost(exc) or conn.broken:
            raise
        logger.debug("no savepoint to roll back to", exc_info=True)
        return False
    return True
