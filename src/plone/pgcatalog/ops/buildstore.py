"""Statements of online builds on catalog rows (next to ``store.py``).

Keyset pages of a catalog's paths (refresh and reindex walk the live
catalog's entries in path order, resumable at any path), and dropping a
whole catalog's rows in batches (the old catalog after a switch, a
cancelled build) on a connection of its own, so no transaction holds
100,000 row deletions at once.
"""
import logging

import psycopg

from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import store as store_module
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import ddl
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")

#: rows deleted per statement when a catalog is dropped
DROP_BATCH = 5000


def paths_after(store, after, limit):
    """Up to ``limit`` paths of ``store``'s catalog after ``after`` (None:
    from the first), in path order (code points, as ``path`` is
    ``COLLATE "C"``)."""
    if after is None:
        condition = q("TRUE")
    else:
        condition = q("path > {}", after)
    return [row[0] for row in store.rows(q(
        "SELECT path FROM {} WHERE cid = {} AND {} ORDER BY path LIMIT {}",
        schema.ENTRIES_TABLE, store.cid, condition, literal(int(limit))))]


#: how long dropping a catalog's PostgreSQL index may wait for the
#: transactions using the table (the pool's connections wait 200 ms)
DROP_LOCK_TIMEOUT = "60s"


def _drop_indexes(dsn, names):
    """Drop those of the PostgreSQL indexes ``names`` no catalog uses,
    without blocking readers (``DROP INDEX CONCURRENTLY``), on a connection
    of its own that waits for the transactions using the table.  Best
    effort: what stays is dropped by a later ``pgc_sync_indexes``."""
    try:
        with psycopg.connect(dsn, autocommit=True,
                             application_name=db.APPLICATION_NAME) as conn:
            db.run(conn, q("SELECT set_config('lock_timeout', {}, false)",
                           DROP_LOCK_TIMEOUT))
            for name in names:
                with ddl._name_lock(conn, name):
                    if db.run(conn, ddl.select_used(name)).fetchone():
                        continue
                    ddl._drop_concurrently(conn, name)
    except psycopg.Error:
        logger.warning("dropping the PostgreSQL indexes %s failed (a later "
                       "pgc_sync_indexes drops them)", names, exc_info=True)


def paths_not_in(build, live, after, limit):
    """Up to ``limit`` paths after ``after`` (None: from the first) of
    ``build``'s catalog that ``live``'s catalog lacks, in path order (both
    stores of one transaction)."""
    condition = q("TRUE") if after is None else q("b.path > {}", after)
    return [row[0] for row in build.rows(q(
        "SELECT b.path FROM {} b WHERE b.cid = {} AND {} AND NOT EXISTS "
        "(SELECT 1 FROM {} l WHERE l.cid = {} AND l.path = b.path) ORDER BY "
        "b.path LIMIT {}", schema.ENTRIES_TABLE, build.cid, condition,
        schema.ENTRIES_TABLE, live.cid,
        literal(int(limit))))]


def catalog_exists(dsn, key):
    with db.get_pool(dsn).connection() as conn:
        return db.run(conn, q("SELECT 1 FROM {} WHERE key = {}",
        schema.CATALOGS_TABLE,
                              key)).fetchone() is not None


def drop_catalog(dsn, key, batch=DROP_BATCH):
    """Delete every row of catalog ``key`` (entries in batches of
    ``batch``, each committed), its catalog row, and the PostgreSQL indexes
    only it used.  Returns the number of entries deleted (0 when the
    catalog does not exist)."""
    deleted = 0
    with db.get_pool(dsn).connection() as conn:
        row = db.run(conn, q("SELECT cid FROM {} WHERE key = {}",
        schema.CATALOGS_TABLE,
                             key)).fetchone()
        if row is None:
            return 0
        cid = row[0]
        while True:
            n = db.run(conn, q(
                "DELETE FROM {} WHERE rid IN (SELECT rid FROM {} WHERE "
                "cid = {} LIMIT {})", schema.ENTRIES_TABLE,
                schema.ENTRIES_TABLE, cid,
                literal(int(batch)))).rowcount
            deleted += n
            if n < batch:
                break
        with conn.transaction():
            names = [r[0] for r in db.run(conn, q(
                "DELETE FROM {} WHERE cid = {} RETURNING pg_index",
                schema.INDEXES_TABLE,
                cid)).fetchall()]
            db.run(conn, q("DELETE FROM {} WHERE cid = {}",
            schema.CATALOGS_TABLE, cid))
    store_module._cids.pop((dsn, key), None)
    if names:
        _drop_indexes(dsn, sorted(set(names)))
    logger.info("dropped catalog %s (%d entries)", key, deleted)
    return deleted
