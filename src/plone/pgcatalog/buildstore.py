"""Statements of online builds on catalog rows (next to ``store.py``).

Keyset pages of a catalog's paths (refresh and reindex walk the live
catalog's entries in path order, resumable at any path), and dropping a
whole catalog's rows in batches (the old catalog after a switch, a
cancelled build) on a connection of its own, so no transaction holds
100,000 row deletions at once.
"""
import logging

from plone.pgcatalog import db
from plone.pgcatalog import ddl
from plone.pgcatalog import schema
from plone.pgcatalog import store as store_module
from plone.pgcatalog.fragment import ident
from plone.pgcatalog.fragment import literal
from plone.pgcatalog.fragment import q


logger = logging.getLogger("plone.pgcatalog")

ENTRIES = ident(schema.ENTRIES)
CATALOGS = ident(schema.CATALOGS)
REGISTRY = ident(schema.INDEXES)
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
        ENTRIES, store.cid, condition, literal(int(limit))))]


def paths_not_in(build, live):
    """Paths of ``build``'s catalog that ``live``'s catalog lacks (both
    stores of one transaction)."""
    return [row[0] for row in build.rows(q(
        "SELECT b.path FROM {} b WHERE b.cid = {} AND NOT EXISTS (SELECT 1 "
        "FROM {} l WHERE l.cid = {} AND l.path = b.path) ORDER BY b.path",
        ENTRIES, build.cid, ENTRIES, live.cid))]


def catalog_exists(dsn, key):
    with db.get_pool(dsn).connection() as conn:
        return db.run(conn, q("SELECT 1 FROM {} WHERE key = {}", CATALOGS,
                              key)).fetchone() is not None


def drop_catalog(dsn, key, batch=DROP_BATCH):
    """Delete every row of catalog ``key`` (entries in batches of
    ``batch``, each committed), its catalog row, and the PostgreSQL indexes
    only it used.  Returns the number of entries deleted (0 when the
    catalog does not exist)."""
    deleted = 0
    with db.get_pool(dsn).connection() as conn:
        row = db.run(conn, q("SELECT cid FROM {} WHERE key = {}", CATALOGS,
                             key)).fetchone()
        if row is None:
            return 0
        cid = row[0]
        while True:
            n = db.run(conn, q(
                "DELETE FROM {} WHERE rid IN (SELECT rid FROM {} WHERE "
                "cid = {} LIMIT {})", ENTRIES, ENTRIES, cid,
                literal(int(batch)))).rowcount
            deleted += n
            if n < batch:
                break
        with conn.transaction():
            names = [r[0] for r in db.run(conn, q(
                "DELETE FROM {} WHERE cid = {} RETURNING pg_index", REGISTRY,
                cid)).fetchall()]
            db.run(conn, q("DELETE FROM {} WHERE cid = {}", CATALOGS, cid))
    store_module._cids.pop((dsn, key), None)
    if names:
        ddl.drop_unused(dsn, sorted(set(names)))
    logger.info("dropped catalog %s (%d entries)", key, deleted)
    return deleted
