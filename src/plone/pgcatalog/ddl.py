"""The PostgreSQL indexes behind a catalog's indexes: create, register, drop.

An index kind says which PostgreSQL indexes it wants
(``pgc_indexes()``: :class:`plone.pgcatalog.schema.IndexSpec`); B-trees are
partial on one catalog's rows, GIN indexes shared by the catalogs that use
the same name and kind.  ``pgcatalog_indexes`` records, per catalog and
index name, which PostgreSQL indexes it uses, so that:

* ``addIndex`` creates them (``CREATE INDEX IF NOT EXISTS``) and registers
  them; re-adding a name with another kind first drops what the old kind
  had (in the transaction: its values would not fit the old expressions);
* ``delIndex`` unregisters them in the transaction and drops them once it
  has committed (``DROP INDEX CONCURRENTLY``: readers are not blocked), a
  shared one when no catalog uses it any more;
* :func:`sync` (``reindexIndex``, ``pgc_sync_indexes``) creates what is
  missing and drops what this catalog's indexes no longer want.

Creation runs on a connection of its own (its lock must not be held until
the ZODB transaction ends) unless the transaction already wrote catalog
rows: then it joins the transaction (a separate connection would wait for
the transaction's own row locks).
"""
import logging

import psycopg
from psycopg import sql

from plone.pgcatalog import db
from plone.pgcatalog import schema


logger = logging.getLogger("plone.pgcatalog")

_REGISTERED_SQL = ("SELECT pg_index FROM pgcatalog_indexes WHERE cid = %s "
                   "AND name = %s")
_REGISTER_SQL = ("INSERT INTO pgcatalog_indexes (cid, name, pg_index) "
                 "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING")
_UNREGISTER_SQL = ("DELETE FROM pgcatalog_indexes WHERE cid = %s AND "
                   "name = %s AND pg_index = ANY(%s) RETURNING pg_index")
_USED_SQL = "SELECT 1 FROM pgcatalog_indexes WHERE pg_index = %s LIMIT 1"


def wanted(index, cid):
    """``{PostgreSQL index name: CREATE INDEX statement}`` of ``index``."""
    found = {}
    for spec in index.pgc_indexes():
        name, statement = spec.statement(cid, index.getId())
        found[name] = statement
    return found


def create(session, cid, index):
    """Create and register the PostgreSQL indexes of ``index``."""
    index_id = index.getId()
    want = wanted(index, cid)
    registered = {row[0] for row in session.execute(
        _REGISTERED_SQL, (cid, index_id)).fetchall()}
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
    if not want:
        return
    statements = list(want.values())
    registrations = [(cid, index_id, name) for name in want]
    if session.in_pg_txn:
        for statement in statements:
            session.execute_write(cid, statement, ())
        for params in registrations:
            session.execute_write(cid, _REGISTER_SQL, params)
        return
    try:
        with db.get_pool(session.dsn).connection() as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)",
                             (schema.DDL_LOCK,))
                for statement in statements:
                    conn.execute(statement, ())
                for params in registrations:
                    conn.execute(_REGISTER_SQL, params)
    except psycopg.Error as exc:
        raise db.translate_error(exc, "CREATE INDEX") from None


def remove(session, cid, index_id):
    """Unregister the PostgreSQL indexes of ``index_id`` (in the
    transaction) and drop those no catalog uses once it committed."""
    names = [row[0] for row in session.execute(
        _REGISTERED_SQL, (cid, index_id)).fetchall()]
    if names:
        _unregister(session, cid, index_id, names, now=False)


def _unregister(session, cid, index_id, names, now):
    session.execute_write(cid, _UNREGISTER_SQL, (cid, index_id, names))
    if now:
        _drop_now(session, cid, names)
    else:
        session.drop_after_commit(names, (cid, index_id))


def _drop_now(session, cid, names):
    """Drop, in the transaction, those of ``names`` no catalog uses."""
    for name in names:
        if not session.execute(_USED_SQL, (name,)).fetchone():
            session.execute_write(cid, sql.SQL(
                "DROP INDEX IF EXISTS {}").format(sql.Identifier(name)), ())


def drop_unused(dsn, names):
    """Drop the PostgreSQL indexes ``names`` that no catalog uses (after a
    commit; without blocking readers).  Best effort: what stays is dropped
    by a later :func:`sync`."""
    try:
        with db.get_pool(dsn).connection() as conn:
            for name in names:
                conn.execute("SELECT pg_advisory_lock(%s)", (schema.DDL_LOCK,))
                try:
                    if conn.execute(_USED_SQL, (name,)).fetchone():
                        continue
                    conn.execute(sql.SQL(
                        "DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                            sql.Identifier(name)))
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s)",
                                 (schema.DDL_LOCK,))
    except psycopg.Error:
        logger.warning("dropping unused catalog indexes %s failed (a later "
                       "pgc_sync_indexes drops them)", names, exc_info=True)


def sync(session, cid, indexes):
    """Make catalog ``cid``'s PostgreSQL indexes what ``indexes`` (its
    index objects) want: create the missing ones, unregister the others
    (dropped after the commit).  Returns ``(created, dropped)`` names."""
    created, dropped = [], []
    rows = session.execute("SELECT name, pg_index FROM pgcatalog_indexes "
                           "WHERE cid = %s", (cid,)).fetchall()
    registered = {}
    for name, pg_index in rows:
        registered.setdefault(name, set()).add(pg_index)
    existing = {row[0] for row in session.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = "
        "current_schema()").fetchall()}
    by_name = {index.getId(): index for index in indexes}
    for index_id, index in by_name.items():
        want = wanted(index, cid)
        if set(want) - existing or set(want) - registered.get(index_id,
                                                                set()):
            create(session, cid, index)
            created.extend(sorted(set(want) - existing))
    for index_id, names in registered.items():
        unwanted = names - set(wanted(by_name[index_id], cid)) \
            if index_id in by_name else names
        if unwanted:
            _unregister(session, cid, index_id, sorted(unwanted), now=False)
            dropped.extend(sorted(unwanted))
    # the shared expression indexes of schema versions before 4 (nobody
    # registers them): dropped after the commit
    legacy = [row[0] for row in session.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
        "AND indexname LIKE 'pgcatalog\\_x\\_%%' AND indexname NOT IN "
        "(SELECT pg_index FROM pgcatalog_indexes)").fetchall()]
    if legacy:
        session.drop_after_commit(legacy, None)
        dropped.extend(sorted(legacy))
    return created, dropped
