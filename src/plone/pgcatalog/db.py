"""Connections, and the catalog's part in the ZODB transaction.

One PostgreSQL connection per ZODB transaction: the first catalog call in a
transaction takes a connection from the pool and joins a
:class:`CatalogSession` (an ``IDataManager``) to the transaction; every later
catalog call of that transaction reuses it; the connection goes back to the
pool when the transaction ends.

Writes are buffered in Python (:class:`PendingWrites`) and reach PostgreSQL
either before a search of the same transaction (read-your-own-writes: a
PostgreSQL transaction is opened and kept open until the ZODB transaction
ends) or at ``tpc_vote``.  The session sorts last among the transaction's
resources and commits PostgreSQL in ``tpc_vote``, after the storages voted:
if the catalog write fails, the ZODB transaction aborts before any storage
has committed.  Savepoints map to PostgreSQL savepoints plus a copy of the
buffer.  Writes are applied in (catalog, path) order so concurrent
transactions lock catalog rows in the same order and cannot deadlock on
them (the existing rows of a batch are locked in (catalog, path) order,
then written in cataloguing order); serialization failures, deadlocks and
lock timeouts surface as ``ConflictError`` so Zope retries.
"""
import logging
import threading

import orjson
import psycopg
import transaction as transaction_module
from psycopg import errors as pg_errors
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool
from transaction.interfaces import IDataManagerSavepoint
from transaction.interfaces import IDataManager
from zope.interface import implementer

from plone.pgcatalog import config
from plone.pgcatalog import schema
from plone.pgcatalog.errors import CatalogConflictError
from plone.pgcatalog.errors import DatabaseUnavailable


logger = logging.getLogger("plone.pgcatalog")

_pools = {}
_pools_lock = threading.Lock()
_schema_ready = set()

_TXN_KEY = "plone.pgcatalog.session"


class _Trace:
    """``PGCATALOG_TRACE_FILE=path``: append each catalog statement's time
    (ms, round trip included) and text to ``path`` (diagnostics)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def run(self, execute, query, params, prepare, binary):
        import time
        start = time.perf_counter()
        try:
            return execute(query, params, prepare, binary)
        finally:
            ms = (time.perf_counter() - start) * 1000
            with self.lock, open(self.path, "a") as out:
                out.write("%.3f\t%s\t%r\n" % (
                    ms, " ".join(str(query).split()), list(params)))


_trace = (_Trace(__import__("os").environ["PGCATALOG_TRACE_FILE"])
          if __import__("os").environ.get("PGCATALOG_TRACE_FILE") else None)
_commit_generation = [0]


def commit_generation():
    """Increases each time this process commits catalog writes (per-process
    caches of catalog-wide figures use it to know they are stale)."""
    return _commit_generation[0]


def _configure(conn):
    set_json_loads(orjson.loads, conn)
    # Prepared statements; ``auto`` lets PostgreSQL keep a generic plan
    # where it is as good as the custom ones (lookups: no planning per
    # call) and plan per call where the values matter (a top-N by date
    # under a security filter: 0.4 ms custom vs 15 ms generic, 10,000
    # entries).
    conn.execute("SET plan_cache_mode = %s" % config.get_plan_cache_mode())
    # A catalog row locked by another transaction is waited for at most
    # this long, then the request fails with a ConflictError and Zope
    # retries it: a wait can never turn into a deadlock with RelStorage's
    # commit lock (which PostgreSQL cannot see as one lock graph).
    conn.execute("SET lock_timeout = %d" % config.get_lock_timeout_ms())


def get_pool(dsn=None):
    """The connection pool for ``dsn`` (default: the configured DSN)."""
    dsn = dsn or config.get_dsn()
    pool = _pools.get(dsn)
    if pool is not None:
        return pool
    with _pools_lock:
        pool = _pools.get(dsn)
        if pool is None:
            pool = ConnectionPool(
                dsn, min_size=1, max_size=config.get_pool_max_size(),
                kwargs={"autocommit": True, "prepare_threshold": 0},
                configure=_configure, open=True, name="plone.pgcatalog")
            try:
                pool.wait(timeout=30)
            except Exception as exc:
                pool.close()
                raise DatabaseUnavailable(
                    "plone.pgcatalog cannot connect to PostgreSQL (%s): %s"
                    % (_safe_dsn(dsn), exc)) from exc
            _pools[dsn] = pool
    return pool


def close_pools():
    """Close every pool (tests, process shutdown)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()
        _schema_ready.clear()


def _safe_dsn(dsn):
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:
        return "<unparsable dsn>"
    params.pop("password", None)
    return " ".join("%s=%s" % item for item in sorted(params.items()))


def ensure_schema(dsn=None):
    """Create/upgrade the tables once per process and DSN."""
    dsn = dsn or config.get_dsn()
    if dsn in _schema_ready:
        return
    pool = get_pool(dsn)
    with pool.connection() as conn:
        schema.ensure_schema(conn)
    _schema_ready.add(dsn)


#: a transaction writing at least this many entries (install, rebuild,
#: imports) refreshes the planner's statistics right after it commits,
#: rather than leaving queries to wait for autovacuum.
ANALYZE_AFTER_ROWS = 200


def analyze(dsn):
    """ANALYZE the catalog tables (best effort)."""
    try:
        with get_pool(dsn).connection() as conn:
            conn.execute("ANALYZE pgcatalog_entries, pgcatalog_meta, "
                         "pgcatalog_text")
    except psycopg.Error:
        logger.warning("ANALYZE of the catalog tables failed",
                       exc_info=True)


def translate_error(exc):
    """Map a driver error to the exception callers should see."""
    if isinstance(exc, (pg_errors.SerializationFailure,
                        pg_errors.DeadlockDetected,
                        pg_errors.LockNotAvailable)):
        return CatalogConflictError(
            "concurrent catalog write, retry: %s" % exc)
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseUnavailable(
            "PostgreSQL went away during a catalog call: %s" % exc)
    return exc


class PendingWrites:
    """Catalog writes not yet sent to PostgreSQL, coalesced per entry.

    Keyed by ``(cid, path)``; each value is the list of operations for that
    entry in call order.  ``snapshot()`` / ``restore()`` serve savepoints.
    """

    def __init__(self):
        self.ops = {}
        self.counter = {}  # cid -> number of catalog/uncatalog calls

    def __bool__(self):
        return bool(self.ops) or bool(self.counter)

    def add(self, cid, path, op):
        self.ops.setdefault((cid, path), []).append(op)
        self.counter[cid] = self.counter.get(cid, 0) + 1

    def has_entries(self):
        return bool(self.ops)

    def take_ops(self):
        ops, self.ops = self.ops, {}
        return ops

    def take_counter(self):
        counter, self.counter = self.counter, {}
        return counter

    def snapshot(self):
        return ({key: list(value) for key, value in self.ops.items()},
                dict(self.counter))

    def restore(self, snap):
        ops, counter = snap
        self.ops = {key: list(value) for key, value in ops.items()}
        self.counter = dict(counter)


@implementer(IDataManager)
class CatalogSession:
    """The catalog's data manager for one ZODB transaction."""

    transaction_manager = None

    def __init__(self, txn, dsn):
        self.txn = txn
        self.dsn = dsn
        self.conn = None
        self.in_pg_txn = False
        self.pending = PendingWrites()
        self.counter_flushed = {}  # cid -> increments already in the PG txn
        self.dirty = set()  # cids written to in the PG txn (their stamp)
        self._sp_seq = 0
        self.cache = {}  # per-transaction caches (rid -> path, ...)
        self.rows_written = 0
        self.writer = None  # set by plone.pgcatalog.writer
        # (cid, path) -> the error the commit must raise: metadata ZCatalog
        # would have failed to pickle at commit time (its BTree keeps only
        # an entry's last record, so a later good record clears it)
        self.commit_errors = {}

    # -- connection ---------------------------------------------------------
    def connection(self):
        if self.conn is None:
            pool = get_pool(self.dsn)
            try:
                self.conn = pool.getconn(timeout=30)
            except Exception as exc:
                raise DatabaseUnavailable(
                    "plone.pgcatalog could not get a PostgreSQL connection: "
                    "%s" % exc) from exc
        return self.conn

    def _release(self):
        conn, self.conn = self.conn, None
        self.in_pg_txn = False
        self.cache.clear()
        if conn is not None:
            try:
                get_pool(self.dsn).putconn(conn)
            except Exception:  # pragma: no cover - pool closed under us
                logger.exception("returning a catalog connection failed")

    def _begin(self):
        if not self.in_pg_txn:
            self.connection().execute("BEGIN")
            self.in_pg_txn = True

    def execute(self, query, params=(), prepare=None, binary=False):
        """Run one statement after flushing this transaction's writes.

        Returns the cursor.  A broken idle connection is replaced once."""
        if self.pending.has_entries() or self.pending.counter:
            self.flush()
        if _trace is not None:
            return _trace.run(self._execute, query, params, prepare, binary)
        return self._execute(query, params, prepare, binary)

    def _execute(self, query, params, prepare, binary):
        try:
            return self.connection().execute(query, params, prepare=prepare,
                                             binary=binary)
        except psycopg.OperationalError as exc:
            if self.in_pg_txn:
                raise translate_error(exc) from exc
            # A connection that broke while idle in the pool (server
            # restart): discard it and try once with a fresh one.
            self._discard_broken()
            try:
                return self.connection().execute(query, params,
                                                 prepare=prepare,
                                                 binary=binary)
            except psycopg.Error as exc2:
                raise translate_error(exc2) from exc2
        except psycopg.Error as exc:
            raise translate_error(exc) from exc

    def _discard_broken(self):
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            finally:
                get_pool(self.dsn).putconn(conn)

    # -- writes -------------------------------------------------------------
    def flush(self):
        """Send buffered writes to PostgreSQL (opens the PG transaction)."""
        if not self.pending:
            return
        self._begin()
        ops = self.pending.take_ops()
        counter = self.pending.take_counter()
        for cid, n in counter.items():
            self.counter_flushed[cid] = self.counter_flushed.get(cid, 0) + n
        self.dirty.update(counter)
        self.dirty.update(cid for cid, _path in ops)
        if not ops:
            return
        conn = self.connection()
        self._count_written(ops)
        try:
            self.writer.apply(conn, ops)
        except psycopg.Error as exc:
            raise translate_error(exc) from exc

    def _count_written(self, ops):
        self.rows_written += len(ops)

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
        # '~' sorts after the storages' keys: vote last, commit PG there.
        return "~plone.pgcatalog:%d" % id(self)

    def abort(self, txn):
        self._rollback_all()

    def tpc_begin(self, txn):
        pass

    def commit(self, txn):
        pass

    def tpc_vote(self, txn):
        if self.commit_errors:
            raise next(iter(self.commit_errors.values()))
        if not self.pending and not self.in_pg_txn:
            return
        try:
            self.flush()
            conn = self.connection()
            for cid in sorted(self.dirty | set(self.counter_flushed)):
                conn.execute(
                    "UPDATE pgcatalog_catalogs SET counter = counter + %s, "
                    "stamp = stamp + 1 WHERE cid = %s",
                    (self.counter_flushed.get(cid, 0), cid))
            conn.execute("COMMIT")
            self.in_pg_txn = False
            self.counter_flushed.clear()
            self.dirty.clear()
            _commit_generation[0] += 1
        except psycopg.Error as exc:
            raise translate_error(exc) from exc

    def tpc_finish(self, txn):
        big = self.rows_written >= ANALYZE_AFTER_ROWS
        self._done()
        if big:
            analyze(self.dsn)

    def tpc_abort(self, txn):
        self._rollback_all()

    def _rollback_all(self):
        try:
            if self.in_pg_txn and self.conn is not None:
                try:
                    self.conn.execute("ROLLBACK")
                except psycopg.Error:
                    logger.warning("ROLLBACK of the catalog transaction "
                                   "failed; discarding the connection",
                                   exc_info=True)
                    self._discard_broken()
        finally:
            self.pending = PendingWrites()
            self.counter_flushed.clear()
            self.dirty.clear()
            self._done()

    def _done(self):
        self._release()
        _forget_session(self.txn)

    # -- savepoints ---------------------------------------------------------
    def savepoint(self):
        return SessionSavepoint(self)


@implementer(IDataManagerSavepoint)
class SessionSavepoint:

    def __init__(self, session):
        self.session = session
        self.snapshot = session.pending.snapshot()
        self.commit_errors = dict(session.commit_errors)
        self.counter_flushed = dict(session.counter_flushed)
        self.pg_name = None
        if session.in_pg_txn:
            session._sp_seq += 1
            self.pg_name = "pgc_sp_%d" % session._sp_seq
            session.connection().execute("SAVEPOINT " + self.pg_name)

    def rollback(self):
        session = self.session
        if session.in_pg_txn:
            if self.pg_name is not None:
                session.connection().execute(
                    "ROLLBACK TO SAVEPOINT " + self.pg_name)
            else:
                # Everything in the PG transaction came after this
                # savepoint: roll it back entirely.
                session.connection().execute("ROLLBACK")
                session.in_pg_txn = False
        session.pending.restore(self.snapshot)
        session.commit_errors = dict(self.commit_errors)
        session.counter_flushed = dict(self.counter_flushed)
        # rid -> path and "has metadata" facts may describe rolled-back rows
        session.cache.clear()


def _forget_session(txn):
    try:
        txn.set_data(_TXN_KEY, None)
    except Exception:  # pragma: no cover
        pass


def current_session(dsn=None, txn_manager=None):
    """The session of the current transaction, joined on first use."""
    tm = txn_manager or transaction_module.manager
    txn = tm.get()
    try:
        session = txn.data(_TXN_KEY)
    except KeyError:
        session = None
    if session is not None:
        return session
    dsn = dsn or config.get_dsn()
    ensure_schema(dsn)
    session = CatalogSession(txn, dsn)
    from plone.pgcatalog.writer import Writer
    session.writer = Writer()
    txn.join(session)
    txn.set_data(_TXN_KEY, session)
    return session
