"""The PostgreSQL indexes behind a catalog's indexes: register, build, drop.

An index kind says which PostgreSQL indexes it wants
(``pgc_indexes()``: :class:`plone.pgcatalog.schema.tables.IndexSpec`); those whose
expressions no stored value can fail are shared by the catalogs that use
the same name and kind, a DateIndex's B-tree is partial on one catalog's
rows.  ``pgcatalog_indexes`` records, per catalog and
index name, which PostgreSQL indexes it uses, so that:

* ``addIndex`` registers them in its transaction, and they are built once
  that transaction committed (:func:`build`), with ``CREATE INDEX
  CONCURRENTLY`` on a connection of their own.  A plain ``CREATE INDEX``
  takes a SHARE lock on ``pgcatalog_entries``, the table every catalog of
  the database writes to, until the end of its transaction: every site's
  writes waited for the request that added an index to commit.  A concurrent
  build blocks no reads and no writes.  The cost: until it is built, queries
  on the new index are answered correctly but without it (slower on large
  catalogs); the build scans the table twice and waits for the transactions
  older than it to end.  The committing transaction waits for it at most
  :data:`BUILD_WAIT` seconds (not at all when its snapshot is RelStorage's,
  whose load connection is such an older transaction), then it goes on in
  the background.  A build that failed (or a process that died) leaves an
  INVALID index behind: the next build of that name drops it and builds it
  again, and ``pgc_sync_indexes`` (:func:`sync`) finds the catalog's missing
  and invalid indexes and builds them.
* Re-adding a name with another kind first drops what the old kind had (in
  the transaction: its values would not fit the old expressions);
* ``delIndex`` unregisters them in the transaction and drops them once it
  has committed (``DROP INDEX CONCURRENTLY``: readers are not blocked), a
  shared one when no catalog uses it any more;
* :func:`sync` (``reindexIndex``, ``pgc_sync_indexes``) registers and builds
  what is missing and drops what this catalog's indexes no longer want.

Builds and drops take a lock per PostgreSQL index name
(:data:`~plone.pgcatalog.schema.tables.INDEX_LOCK`): a name is built or dropped by
one process at a time, and only while it is (build) or is not (drop)
registered.
"""
import contextlib
import logging
import queue
import threading

import psycopg
from psycopg import sql

from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")

#: seconds a commit that added indexes waits for them to be built before it
#: leaves the rest to the background builder
BUILD_WAIT = 30.0



def select_registered(cid, index_id):
    return q("SELECT pg_index FROM {} WHERE cid = {} AND name = {}",
             schema.INDEXES_TABLE, cid, index_id)


def insert_registered(cid, index_id, name):
    return q("INSERT INTO {} (cid, name, pg_index) VALUES ({}, {}, {}) "
             "ON CONFLICT DO NOTHING", schema.INDEXES_TABLE, cid, index_id,
             name)


def delete_registered(cid, index_id, names):
    return q("DELETE FROM {} WHERE cid = {} AND name = {} AND pg_index = "
             "ANY({}) RETURNING pg_index", schema.INDEXES_TABLE, cid,
             index_id, names)


def select_used(name):
    return q("SELECT 1 FROM {} WHERE pg_index = {} LIMIT 1",
    schema.INDEXES_TABLE, name)


def select_validity(name):
    """Whether index ``name`` is valid (no row: it does not exist)."""
    return q("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid "
             "= i.indexrelid WHERE c.relnamespace = "
             "current_schema()::regnamespace AND c.relname = {}", name)


#: the catalog's PostgreSQL indexes that can serve queries
_VALID_SQL = (
    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = "
    "i.indexrelid WHERE c.relnamespace = current_schema()::regnamespace "
    "AND i.indisvalid")
def wanted(index, cid):
    """``{PostgreSQL index name: CREATE INDEX CONCURRENTLY statement}`` of
    ``index``."""
    found = {}
    for spec in index.pgc_indexes():
        name, statement = spec.statement(cid, index.getId(),
                                         concurrently=True)
        found[name] = statement
    return found


def create(session, cid, index, refill_now=True):
    """Register the PostgreSQL indexes of ``index`` (in the transaction)
    and build them once it committed.  Returns whether the catalog's hot
    names changed (``refill_now``: hot.sync)."""
    index_id = index.getId()
    want = wanted(index, cid)
    registered = {row[0] for row in session.execute(
        select_registered(cid, index_id)).fetchall()}
    stale = sorted(registered - set(want))
    session.cancel_drops(want)
    if stale:
        # another kind under this name: its expressions may not take the
        # values this kind writes, so they go now, in the transaction
        _unregister(session, cid, index_id, stale, now=True)
    # the same, deleted earlier in this transaction (dropped at commit)
    dropping = sorted(name for name, owner in session.drops.items()
                      if owner == (cid, index_id))
    if dropping:
        session.cancel_drops(dropping)
        _drop_now(session, cid, dropping)
    changed = hot.sync(session, cid, index, refill_now)
    for name in want:
        session.execute_write(cid, insert_registered(cid, index_id, name))
    if want:
        _builds_of(session).statements.update(want)
    return changed


class _AfterCommit:
    """The commit hook building what a transaction registered (one per
    transaction: one wait).  What a savepoint rolled back stays here but is
    not built: only registered names are."""

    def __init__(self, session):
        self.session = session
        self.statements = {}

    def __call__(self):
        # RelStorage's load connection (same database) holds a snapshot
        # older than the build until this transaction's end: do not wait
        wait = 0 if self.session.storage_offered else BUILD_WAIT
        build(self.session.dsn, self.statements, wait)


def _builds_of(session):
    for hook in session.commit_hooks:
        if isinstance(hook, _AfterCommit):
            return hook
    hook = _AfterCommit(session)
    session.on_commit(hook)
    return hook


# -- building after the commit ----------------------------------------------
_jobs = queue.Queue()
_builder = None
_builder_lock = threading.Lock()
_pending = set()


class _Job:

    def __init__(self, dsn, statements):
        self.dsn = dsn
        self.statements = dict(statements)
        self.done = threading.Event()


def build(dsn, statements, wait=BUILD_WAIT):
    """Build the registered ones of ``statements`` (``{name: CREATE INDEX
    CONCURRENTLY ...}``) in the background builder; wait at most ``wait``
    seconds.  Returns whether they were built (or found built) by then."""
    global _builder
    if not statements:
        return True
    job = _Job(dsn, statements)
    with _builder_lock:
        _pending.add(job)
        if _builder is None or not _builder.is_alive():
            _builder = threading.Thread(
                target=_work, name="plone.pgcatalog index builder",
                daemon=True)
            _builder.start()
    _jobs.put(job)
    if not job.done.wait(wait):
        logger.info("building catalog indexes %s goes on in the background",
                    sorted(statements))
    return job.done.is_set()


def wait_for_builds(timeout=None):
    """Wait until the builds scheduled so far are done (tests, scripts).
    Returns whether they are."""
    with _builder_lock:
        jobs = list(_pending)
    return all(job.done.wait(timeout) for job in jobs)


def _work():
    while True:
        job = _jobs.get()
        try:
            build_now(job.dsn, job.statements)
        except Exception:
            logger.warning("building catalog indexes %s failed (a later "
                           "pgc_sync_indexes builds them)",
                           sorted(job.statements), exc_info=True)
        finally:
            job.done.set()
            with _builder_lock:
                _pending.discard(job)


@contextlib.contextmanager
def _name_lock(conn, name):
    db.run(conn, q("SELECT pg_advisory_lock({}, hashtext({}))",
                   schema.INDEX_LOCK, name))
    try:
        yield
    finally:
        db.run(conn, q("SELECT pg_advisory_unlock({}, hashtext({}))",
                       schema.INDEX_LOCK, name))


def build_now(dsn, statements):
    """Build, here and now, the registered ones of ``statements`` that are
    missing or invalid (an invalid one is dropped first); on a connection of
    its own, in autocommit mode (``CREATE INDEX CONCURRENTLY`` runs in no
    transaction block), waiting as long as the build needs.  A build that
    fails is logged and its invalid leftover dropped.  Returns the names
    built."""
    built = []
    with psycopg.connect(dsn, autocommit=True,
                         application_name=db.APPLICATION_NAME) as conn:
        conn.execute("SET lock_timeout = 0")
        if not db.owns_tables(conn):
            logger.warning(
                "the catalog's PostgreSQL indexes %s are not built: this "
                "process's role does not own the catalog tables.  Queries "
                "on them are answered without them (slower on big sites) "
                "until pgc_sync_indexes() runs as the tables' owner "
                "(docs/upgrade.md, least-privilege role)",
                ", ".join(sorted(statements)))
            return built
        for name, statement in sorted(statements.items()):
            with _name_lock(conn, name):
                if not db.run(conn, select_used(name)).fetchone():
                    continue  # rolled back, or deleted since
                found = db.run(conn, select_validity(name)).fetchone()
                if found and found[0]:
                    continue
                if found:
                    _drop_concurrently(conn, name)
                try:
                    conn.execute(statement, ())
                except psycopg.Error:
                    logger.warning("building catalog index %s failed (a "
                                   "later pgc_sync_indexes builds it)", name,
                                   exc_info=True)
                    if not conn.broken:
                        _drop_concurrently(conn, name)
                    continue
                built.append(name)
        if built:
            db.ensure_statistics(conn, built=True)
    return built


def _drop_concurrently(conn, name):
    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
        sql.Identifier(name)))


def remove(session, cid, index_id):
    """Unregister the PostgreSQL indexes of ``index_id`` (in the
    transaction) and drop those no catalog uses once it committed."""
    names = [row[0] for row in session.execute(
        select_registered(cid, index_id)).fetchall()]
    if names:
        _unregister(session, cid, index_id, names, now=False)
    hot.unregister(session, cid, index_id)


def _unregister(session, cid, index_id, names, now):
    session.execute_write(cid, delete_registered(cid, index_id, names))
    if now:
        _drop_now(session, cid, names)
    else:
        session.drop_after_commit(names, (cid, index_id))


def _drop_now(session, cid, names):
    """Drop, in the transaction, those of ``names`` no catalog uses."""
    for name in names:
        if not session.execute(select_used(name)).fetchone():
            session.execute_write(cid, sql.SQL(
                "DROP INDEX IF EXISTS {}").format(sql.Identifier(name)), ())


def drop_unused(dsn, names):
    """Drop the PostgreSQL indexes ``names`` that no catalog uses (after a
    commit; without blocking readers).  Best effort: what stays is dropped
    by a later :func:`sync`."""
    try:
        with db.get_pool(dsn).connection() as conn:
            for name in names:
                with _name_lock(conn, name):
                    if db.run(conn, select_used(name)).fetchone():
                        continue
                    _drop_concurrently(conn, name)
            db.ensure_statistics(conn)
    except psycopg.Error:
        logger.warning("dropping unused catalog indexes %s failed (a later "
                       "pgc_sync_indexes drops them)", names, exc_info=True)


def sync(session, cid, indexes):
    """Make catalog ``cid``'s PostgreSQL indexes what ``indexes`` (its
    index objects) want: register the missing and invalid ones (built after
    the commit), unregister the others (dropped after the commit).  Returns
    ``(created, dropped)`` names."""
    created, dropped = [], []
    rows = session.execute(q("SELECT name, pg_index FROM {} WHERE cid = {}",
                             schema.INDEXES_TABLE, cid)).fetchall()
    registered = {}
    for name, pg_index in rows:
        registered.setdefault(name, set()).add(pg_index)
    existing = {row[0] for row in session.execute(_VALID_SQL).fetchall()}
    by_name = {index.getId(): index for index in indexes}
    # the hot rows are computed again once, after every index's hot names
    hot_changed = False
    for index_id, index in by_name.items():
        want = wanted(index, cid)
        if set(want) - existing or set(want) - registered.get(index_id,
                                                                set()):
            hot_changed = create(session, cid, index, False) or hot_changed
            created.extend(sorted(set(want) - existing))
        else:
            hot_changed = hot.sync(session, cid, index, False) or hot_changed
    for index_id, names in registered.items():
        unwanted = names - set(wanted(by_name[index_id], cid)) \
            if index_id in by_name else names
        if unwanted:
            _unregister(session, cid, index_id, sorted(unwanted), now=False)
            dropped.extend(sorted(unwanted))
    if hot.prune(session, cid, by_name, False) or hot_changed:
        hot.refilled(session, cid)
    # catalog indexes no catalog registers (a drop that did not happen):
    # dropped after the commit
    legacy = [row[0] for row in session.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
        "AND indexname LIKE 'pgcatalog\\_x\\_%%' AND indexname NOT IN "
        "(SELECT pg_index FROM pgcatalog_indexes)").fetchall()]
    if legacy:
        session.drop_after_commit(legacy, None)
        dropped.extend(sorted(legacy))
    return created, dropped
