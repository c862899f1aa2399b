"""Connections to PostgreSQL: pools, what the server can do, errors.

The catalog's part in a ZODB transaction (one PostgreSQL transaction per ZODB
transaction, snapshots, two-phase commit) is :mod:`plone.pgcatalog.pg.session`;
this module gives it connections (:func:`checkout`, replaced when they went
away), tells it what the server offers (:func:`two_phase`), and resolves prepared transactions a crashed
process left behind (:func:`resolve_in_doubt`).
"""
import logging
import os
import threading
import time

import orjson
import psycopg
from psycopg import sql
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

from plone.pgcatalog import __version__
from plone.pgcatalog import config
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.errors import SchemaError
from plone.pgcatalog.pg import consistency
from plone.pgcatalog.pg import parking
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.schema import planstats
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")

#: the catalog's connections say who they are (pg_stat_activity)
APPLICATION_NAME = "plone.pgcatalog"

_pools = {}
_pools_lock = threading.Lock()
_schema_ready = set()

class _Trace:
    """``PGCATALOG_TRACE_FILE=path``: append each catalog statement's time
    (ms, round trip included), text, parameters and, in a Zope request,
    the request (a number per request, its method and path) to ``path``
    (diagnostics)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.requests = 0

    def request(self):
        """``n METHOD /path`` of the request this thread serves, or ''."""
        from zope.globalrequest import getRequest

        request = getRequest()
        environ = getattr(request, "environ", None)
        if not isinstance(environ, dict):
            return ""
        label = environ.get("pgcatalog.trace")
        if label is None:
            with self.lock:
                self.requests += 1
                label = environ["pgcatalog.trace"] = "%d %s %s" % (
                    self.requests, environ.get("REQUEST_METHOD", ""),
                    environ.get("PATH_INFO", ""))
        return label

    def write(self, started, query, params):
        ms = (time.perf_counter() - started) * 1000
        label = self.request()
        with self.lock, open(self.path, "a") as out:
            out.write("%.3f\t%s\t%r\t%s\n" % (
                ms, " ".join(str(query).split()), list(params), label))


#: the statement trace, when PGCATALOG_TRACE_FILE is set
trace = (_Trace(os.environ["PGCATALOG_TRACE_FILE"])
         if os.environ.get("PGCATALOG_TRACE_FILE") else None)


def _configure(conn):
    set_json_loads(orjson.loads, conn)
    # Prepared statements; ``auto`` lets PostgreSQL keep a generic plan
    # where it is as good as the custom ones (lookups: no planning per
    # call) and plan per call where the values matter (a top-N by date
    # under a security filter: 0.4 ms custom vs 15 ms generic, 10,000
    # entries).
    run(conn, q("SELECT set_config('plan_cache_mode', {}, false)",
                config.get_plan_cache_mode()))
    # A catalog row locked by another transaction is waited for at most
    # this long (default 200 ms), then the request fails with a ConflictError
    # and Zope retries it: a wait can never turn into a deadlock with
    # RelStorage's commit lock (which PostgreSQL cannot see as one lock
    # graph), and under REPEATABLE READ a wait only pays off when the
    # holder rolls back (if it commits, this write conflicts anyway).
    run(conn, q("SELECT set_config('lock_timeout', {}, false)",
                "%dms" % config.get_lock_timeout_ms()))
    # The planner's view of the catalog's work (configuration.md): no
    # parallel workers, pages in memory.
    workers = config.get_parallel_workers()
    if workers is not None:
        run(conn, q("SELECT set_config('max_parallel_workers_per_gather', "
                    "{}, false)", str(workers)))
    jit = config.get_jit()
    if jit is not None:
        run(conn, q("SELECT set_config('jit', {}, false)", jit))
    cost = config.get_random_page_cost()
    if cost is not None:
        run(conn, q("SELECT set_config('random_page_cost', {}, false)",
                    repr(cost)))


#: seconds the pool keeps trying one replacement connection (backing off 1,
#: 2 s...) before it gives up and starts again with the next request that
#: waits: after a server restart or failover it reconnects within a second
#: or two of the server's return (psycopg_pool's default, 300 s, lets the
#: pauses grow to minutes)
RECONNECT_TIMEOUT = 3.0


#: seconds a new pool waits for its first connection
POOL_CONNECT = 30.0


def get_pool(dsn=None, connect=POOL_CONNECT):
    """The connection pool for ``dsn`` (default: the configured DSN);
    a new one waits up to ``connect`` seconds for its first connection
    (None: not at all, it connects in the background)."""
    dsn = dsn or config.get_dsn()
    pool = _pools.get(dsn)
    if pool is not None:
        return pool
    with _pools_lock:
        pool = _pools.get(dsn)
        if pool is None:
            pool = ConnectionPool(
                dsn, min_size=1, max_size=config.get_pool_max_size(),
                kwargs={"autocommit": True, "prepare_threshold": 0,
                        "application_name": APPLICATION_NAME},
                configure=_configure, open=True, name="plone.pgcatalog",
                reconnect_timeout=RECONNECT_TIMEOUT)
            try:
                if connect is not None:
                    pool.wait(timeout=connect)
            except Exception as exc:
                pool.close()
                raise DatabaseUnavailable(
                    "plone.pgcatalog cannot connect to PostgreSQL (%s): %s"
                    % (safe_dsn(dsn), exc)) from exc
            _pools[dsn] = pool
    return pool


#: what other modules remember of the servers, forgotten with the pools
_forget_on_close = []


def forget_on_close(forget):
    """Call ``forget()`` when the pools are closed (what a module
    remembers of the servers they reached)."""
    _forget_on_close.append(forget)


def close_pools():
    """Close every pool (tests, process shutdown)."""
    parking.release_all(checkin, discard)
    with _pools_lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()
        _schema_ready.clear()
        _two_phase.clear()
    for forget in _forget_on_close:
        forget()


def safe_dsn(dsn):
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:
        return "<unparsable dsn>"
    params.pop("password", None)
    return " ".join("%s=%s" % item for item in sorted(params.items()))


def ensure_schema(dsn=None):
    """Check, once per process and DSN, that the catalog tables fit this
    release (:func:`check_schema`, as ``schema-migration`` allows); then
    the planner statistics objects and the in-doubt transactions."""
    dsn = dsn or config.get_dsn()
    if dsn in _schema_ready:
        return
    pool = get_pool(dsn)
    with pool.connection() as conn:
        try:
            check_schema(conn, config.get_schema_migration(), dsn)
        except psycopg.errors.InsufficientPrivilege:
            role = conn.info.user
            raise SchemaError(
                "The role %s may not read or change the catalog tables in %s: "
                "grant it what running processes need with `pgcatalog-migrate "
                "--grant %s` run as the tables' owner (or let it create them: "
                "docs/upgrade.md)." % (role, safe_dsn(dsn), role)) from None
        if owns_tables(conn):
            # a database whose indexes were built before plone.pgcatalog
            # made statistics objects for them gets them now (once)
            ensure_statistics(conn)
    _schema_ready.add(dsn)
    try:
        resolve_in_doubt(dsn)
    except psycopg.Error:  # e.g. no right to read pg_prepared_xacts
        logger.warning("could not look for in-doubt catalog transactions",
                       exc_info=True)


def owns_tables(conn):
    """The connection's role owns the catalog tables (or is a member of
    the role that does): it may build their indexes and statistics.  A
    least-privilege role reads and writes rows only (docs/upgrade.md)."""
    found = conn.execute(
        "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = "
        "to_regclass('pgcatalog_entries')").fetchone()
    return bool(found and found[0])


def _steps_text(steps):
    return "; ".join("%d: %s" % (step.version, step.title) for step in steps)


def check_schema(conn, policy, dsn=None):
    """The :class:`~plone.pgcatalog.schema.migrations.State` of ``conn``'s catalog
    tables once this release can work on them: created or upgraded here
    when ``policy`` (``schema-migration``) allows, else
    :class:`~plone.pgcatalog.errors.SchemaError` naming what to run."""
    where = safe_dsn(dsn) if dsn else "this database"
    state = migrations.read_state(conn)
    if state.runs():
        return state
    if state.prerelease is not None:
        raise SchemaError(
            "The catalog tables in %s were made by a development version of "
            "plone.pgcatalog from before its first release (schema version "
            "%s), which no release upgrades: give the catalog a new database "
            "(or drop the pgcatalog_* tables), then build it again "
            "(pgcatalog-rebuild, or reinstall the profile).  See "
            "docs/upgrade.md." % (where, state.prerelease))
    if state.version is not None and state.version > migrations.SCHEMA_VERSION:
        raise SchemaError(
            "The catalog tables in %s have schema version %d (made by "
            "pgcatalog-plone %s), which this process (pgcatalog-plone %s, "
            "schema version %d) cannot work on: upgrade pgcatalog-plone in "
            "this process.  See docs/upgrade.md." % (
                where, state.version, state.release, __version__,
                migrations.SCHEMA_VERSION))
    pending = state.pending()
    if state.empty and policy == "off":
        raise SchemaError(
            "There are no catalog tables in %s and this process may not "
            "create them (schema-migration off): run `pgcatalog-migrate "
            "--apply` as the database owner.  See docs/upgrade.md." % where)
    if not state.empty and policy != "upgrade":
        raise SchemaError(
            "The catalog tables in %s have schema version %d; this process "
            "(pgcatalog-plone %s) needs version %d.  Pending: %s.  Run "
            "`pgcatalog-migrate --apply` (`pgcatalog-migrate` shows what it "
            "will do), or let a process upgrade by itself with "
            "schema-migration upgrade.  See docs/upgrade.md." % (
                where, state.version, __version__,
                migrations.SCHEMA_VERSION, _steps_text(pending)))

    def progress(step, event, seconds):
        if event == "done":
            logger.warning("catalog schema in %s: %s (version %d) in %.1f s",
                           where, step.title, step.version, seconds)

    migrations.apply(conn, progress=progress)
    state = migrations.read_state(conn)
    if not state.runs():  # pragma: no cover - a newer release raced us
        raise SchemaError("The catalog tables in %s changed while this "
                          "process upgraded them: restart it." % where)
    return state


def ensure_statistics(conn, built=False):
    """The planner statistics of the expression indexes
    (:func:`plone.pgcatalog.schema.planstats.ensure_statistics`), filled at once
    when some were made or indexes were ``built`` (a new index would
    otherwise be estimated blind until autovacuum analyzes the table: a
    shared one has its expressions' statistics from ANALYZE itself).  Best
    effort: the indexes work without them, and the next call makes what is
    missing."""
    try:
        created = planstats.ensure_statistics(conn)
        if created or built:
            with conn.transaction():
                # autovacuum, should it be analyzing, gives way to a waiter
                conn.execute("SET LOCAL lock_timeout = 0")
                run(conn, q("ANALYZE {}", schema.ENTRIES_TABLE))
            if created:
                logger.info("planner statistics made for %d catalog "
                            "index(es)", len(created))
    except psycopg.Error:
        logger.warning("making the catalog indexes' planner statistics "
                       "failed", exc_info=True)


# -- connections ------------------------------------------------------------

_exhausted_logged = [0.0]


def checkout(dsn, timeout=None, connect=POOL_CONNECT):
    """A connection of ``dsn``'s pool (for one ZODB transaction).

    When the pool has none free within ``pool-timeout`` (more threads than
    ``pool-max-size``), :class:`DatabaseUnavailable` (retried by Zope),
    logged once a minute.  ``timeout``: a shorter wait, failing
    silently.  ``connect``: how long a new pool waits to connect."""
    pool = get_pool(dsn, connect)
    if _unresolved.get(dsn):
        resolve_unresolved(dsn)
    parked = parking.take(dsn, discard)
    if parked is not None:
        return parked
    try:
        return pool.getconn(timeout=timeout or config.get_pool_timeout())
    except Exception as exc:  # noqa: B902 - PoolTimeout, closed pool
        if timeout:
            raise DatabaseUnavailable(
                "no catalog connection free within %.2f s" % timeout) \
                from None
        now = time.monotonic()
        if now - _exhausted_logged[0] > 60:
            _exhausted_logged[0] = now
            logger.error(
                "no catalog connection free within %.1f s (pool-max-size %d, "
                "%s): raise pool-max-size to the number of Zope threads "
                "(logged once a minute)", config.get_pool_timeout(),
                config.get_pool_max_size(), type(exc).__name__)
        raise DatabaseUnavailable(
            "plone.pgcatalog could not get a PostgreSQL connection (%s)"
            % type(exc).__name__) from None


def checkin(dsn, conn):
    """Give a connection back to its pool (ready: idle, no transaction)."""
    try:
        get_pool(dsn).putconn(conn)
    except Exception:  # noqa: B902 - the pool was closed under us
        logger.warning("returning a catalog connection failed",
                       exc_info=True)


def end_read_only(dsn, conn):
    """End the transaction of ``conn``, which wrote nothing, and give the
    connection back without waiting for PostgreSQL's answer
    (parking.py)."""
    if not parking.park(dsn, conn):
        discard(dsn, conn)


def discard(dsn, conn):
    """Close a connection that broke and give it back (the pool replaces
    it)."""
    try:
        conn.close()
    finally:
        checkin(dsn, conn)


def check_pool(dsn):
    """After a connection turned out dead: test the idle ones and replace
    the dead (a server restart kills them all)."""
    try:
        get_pool(dsn).check()
    except Exception:  # noqa: B902 - best effort
        logger.warning("checking the catalog pool failed", exc_info=True)


# -- what the server offers ------------------------------------------------

#: dsn -> whether PREPARE TRANSACTION is available
_two_phase = {}


def two_phase(dsn):
    """PostgreSQL's two-phase commit is available (``max_prepared_
    transactions`` > 0, not turned off with ``two-phase-commit off``)."""
    found = _two_phase.get(dsn)
    if found is None:
        found = False
        if config.get_two_phase_commit():
            with get_pool(dsn).connection() as conn:
                found = int(conn.execute(
                    "SHOW max_prepared_transactions").fetchone()[0]) > 0
            if not found:
                logger.warning(
                    "PostgreSQL has max_prepared_transactions = 0: catalog "
                    "writes commit in the ZODB's vote, before the storages "
                    "finish (a storage failing after its vote leaves the "
                    "catalog ahead of the ZODB).  Set max_prepared_"
                    "transactions (> the number of Zope threads) for "
                    "two-phase commit; see docs/transactions.md.")
        _two_phase[dsn] = found
    return found


# -- commits ------------------------------------------------------------------


def log_commit(cid, delta):
    """Every writing transaction logs its change count (insert-only: two
    transactions writing the same catalog never conflict on it)."""
    return q("INSERT INTO {} (cid, delta) VALUES ({}, {})",
             schema.COMMITS_TABLE, cid, delta)


def run(conn, fragment, **kw):
    """Run a Fragment on a connection; the cursor."""
    return conn.execute(fragment.text, fragment.params, **kw)

_commit_generation = [0]


def commit_generation():
    """Increases each time this process commits catalog writes (per-process
    caches of catalog-wide figures use it to know they are stale)."""
    return _commit_generation[0]


def count_commit():
    """This process committed catalog writes (upkeep.committed)."""
    _commit_generation[0] += 1


#: dsn -> {gid: "COMMIT PREPARED" / "ROLLBACK PREPARED"} this process could
#: not send (PostgreSQL unreachable at the time)
_unresolved = {}


def unresolved(dsn, gid, command):
    _unresolved.setdefault(dsn, {})[gid] = command


def resolve_unresolved(dsn):
    """Send what this process owes its prepared transactions."""
    owed = _unresolved.get(dsn) or {}
    for gid, command in list(owed.items()):
        try:
            with get_pool(dsn).connection() as conn:
                if conn.execute("SELECT 1 FROM pg_prepared_xacts WHERE gid = "
                                "%s", (gid,)).fetchone():
                    conn.execute(sql.SQL(command + " {}").format(
                        sql.Literal(gid)))
            owed.pop(gid, None)
            logger.warning("%s %s: done (late)", command, gid)
        except psycopg.Error:
            logger.warning("%s %s still fails", command, gid, exc_info=True)
            return


def resolve_in_doubt(dsn, older_than=None, decision=None):
    """Finish the catalog's prepared transactions that nobody will finish:
    a process crashed between preparing one (its vote, after the storages
    voted) and committing it (after the storages finished).  Their row locks
    would block every later write of those entries.

    Those older than ``older_than`` seconds (``in-doubt-seconds``, default
    60: a live process finishes its own in milliseconds) follow what the
    ZODB holds when that can be read: with RelStorage in the catalog's
    database the global id names the storage's own transaction, committed
    (the catalog commits too) or aborted (it rolls back); one still in
    progress is left.  Otherwise (another storage, or a transaction too old
    for PostgreSQL to know) they are committed, or rolled back with
    ``in-doubt-resolution rollback``, and logged: verify the catalog
    against the ZODB.  Returns ``[(gid, command)]``; run at start-up."""
    older_than = config.get_in_doubt_seconds() if older_than is None \
        else older_than
    default = "%s PREPARED" % (decision or config.get_in_doubt_resolution())
    done = []
    with get_pool(dsn).connection() as conn:
        rows = conn.execute(
            "SELECT gid, prepared, transaction::text FROM pg_prepared_xacts "
            "WHERE gid LIKE %s "
            "AND database = current_database() AND prepared < "
            "now() - make_interval(secs => %s)",
            (consistency.GID_PREFIX + "%", older_than)).fetchall()
        for gid, prepared, xid in rows:
            storage_xid = consistency.storage_xid_of(gid)
            status = None
            if storage_xid is not None:
                status = run(conn, consistency.xact_status(
                    storage_xid)).fetchone()[0]
            if status == "in progress":
                continue
            command = {"committed": "COMMIT PREPARED",
                       "aborted": "ROLLBACK PREPARED"}.get(status, default)
            try:
                conn.execute(sql.SQL(command + " {}").format(
                    sql.Literal(gid)))
            except psycopg.errors.UndefinedObject:
                continue  # finished meanwhile
            except psycopg.Error:
                logger.warning("%s %s failed", command, gid, exc_info=True)
                continue
            if status is None and command == "COMMIT PREPARED":
                # its ZODB part may never come: this process answers from
                # the catalog's lead at once (consistency.accept_lead)
                consistency.accept_lead(dsn, dict(run(
                    conn, consistency.commits_of_sql(xid)).fetchall()))
            if status is None:
                logger.warning(
                    "in-doubt catalog transaction %s (prepared %s): %s "
                    "(in-doubt-resolution); verify the catalog against the "
                    "ZODB", gid, prepared, command)
            else:
                logger.warning(
                    "in-doubt catalog transaction %s (prepared %s): %s, as "
                    "its storage transaction %s", gid, prepared, command,
                    status)
            done.append((gid, command))
    return done
