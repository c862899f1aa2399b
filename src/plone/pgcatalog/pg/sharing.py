"""Reading the catalog in RelStorage's own snapshot (docs/transactions.md).

When RelStorage keeps the ZODB in the catalog's database, a transaction's
catalog statements read in the snapshot its objects are loaded in: the
snapshot is exported from RelStorage's load connection
(``pg_export_snapshot()``) and imported by the catalog's connection
(``SET TRANSACTION SNAPSHOT``).  That connection must reach the server the
load connection reaches: the primary, or, when RelStorage loads from a
read-only replica (``ro-replica-conf``) that is one of the catalog's
standbys (``standby-dsns``), that standby (docs/standbys.md).  Which
server a load connection reaches is asked once per process and replica
(the server's start time, the database's oid and name, compared with the
catalog's primary and standbys); a replica the catalog does not know, or
another database, shares nothing: the catalog takes a snapshot of its own,
checked against the objects' (consistency.py).
"""
import logging
import threading
import time
from typing import NamedTuple

from plone.pgcatalog import config
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import standby

logger = logging.getLogger("plone.pgcatalog")


class StorageSnapshot(NamedTuple):
    """RelStorage's snapshot of one ZODB transaction, exported."""

    #: what ``SET TRANSACTION SNAPSHOT`` takes
    snapshot_id: str
    #: the DSN of the catalog pool whose server holds it: the catalog's
    #: (the primary) or a standby's (:attr:`standby.Standby.connect_dsn`)
    dsn: str


#: which server and database a connection reaches (the server's start
#: time, the database's oid and name): two connections saying the same
#: reach the same database of the same server
IDENTITY = ("SELECT extract(epoch FROM pg_postmaster_start_time())::text, "
            "d.oid::bigint, d.datname FROM pg_database d "
            "WHERE d.datname = current_database()")

#: psycopg2's TRANSACTION_STATUS_INTRANS (idle in a transaction)
_INTRANS = 2

_lock = threading.Lock()
#: (catalog dsn, storage dsn, replica) -> the catalog pool DSN whose server
#: RelStorage's load connection reaches, or False (none of the catalog's)
_servers = {}


def storage_snapshot(dsn, jar):
    """The ZODB transaction's own database snapshot, exported from the load
    connection of ``jar``'s RelStorage (a :class:`StorageSnapshot`), when
    the catalog database ``dsn`` is RelStorage's database on the same
    server (the primary or one of its standbys); else None."""
    found = _open_load(dsn, jar)
    if found is None:
        return None
    connection, key = found
    server = _servers.get(key)
    if server is False:
        return None
    try:
        # a cursor of its own on RelStorage's connection (in its
        # transaction): RelStorage's cursor may hold rows it has not read
        cursor = connection.cursor()
        if server is None:
            server = _identify(key, cursor)
            if not server:
                return None
        cursor.execute("SELECT pg_export_snapshot()")
        found = cursor.fetchone()[0]
        cursor.close()
        return StorageSnapshot(found, server)
    except Exception:  # noqa: B902 - another driver, a closed connection
        logger.warning("could not export RelStorage's snapshot",
                       exc_info=True)
        return None


def shares_database(dsn, jar):
    """Whether ``jar``'s RelStorage is known (by an export made before in
    this process) to load from the catalog database ``dsn`` itself (not
    a standby), and has its snapshot open: a transaction could share it.
    Sends nothing."""
    found = _open_load(dsn, jar)
    return found is not None and _servers.get(found[1]) == dsn


def _open_load(dsn, jar):
    """RelStorage's load connection of ``jar`` (psycopg2's) and the key
    of the server it reaches in ``_servers``, when snapshots are shared
    and it is in a transaction RelStorage began; else None."""
    if jar is None or not config.get_share_storage_snapshot():
        return None
    storage = getattr(jar, "_storage", None)
    load = getattr(storage, "_load_connection", None)
    adapter = getattr(storage, "_adapter", None)
    if not load or adapter is None or \
            "postgresql" not in type(adapter).__module__:
        return None
    if not _in_transaction(load):
        # RelStorage has no snapshot open (between its transactions, or
        # restarting): exporting would begin a transaction on its
        # connection behind its back, which its later loads would read in;
        # the catalog takes a snapshot of its own (checked, consistency.py)
        return None
    connection = load.connection
    # RelStorage marks a connection made to a replica with its name
    key = (dsn, getattr(getattr(adapter, "connmanager", None), "_dsn", None),
           getattr(connection, "replica", None))
    return connection, key


def _identify(key, cursor):
    """The catalog pool whose server the load connection (``cursor``'s)
    reaches, remembered under ``key``; None (not remembered: a standby
    could not be asked) or False when none does."""
    dsn, _, replica = key
    cursor.execute(IDENTITY)
    theirs = tuple(cursor.fetchone())
    with db.get_pool(dsn).connection() as conn:
        ours = tuple(conn.execute(IDENTITY).fetchone())
    found = dsn if theirs == ours else None
    unknown = False
    if found is None:
        for one in standby.standbys_of(dsn):
            # (one paused after a failure is not asked: each transaction
            # would wait for it)
            identity = None if one.paused_until > time.monotonic() else \
                standby.ask(one, IDENTITY)
            if identity is None:
                unknown = True
            elif tuple(identity) == theirs:
                found = one.connect_dsn
                break
    if found is None and unknown:
        return None
    with _lock:
        _servers[key] = found or False
    if found == dsn:
        logger.info("catalog and RelStorage share a database: catalog reads "
                    "use each ZODB transaction's own snapshot")
    elif found:
        logger.info("RelStorage loads from the catalog's standby %s: catalog "
                    "reads use each ZODB transaction's own snapshot there",
                    db.safe_dsn(found))
    elif replica is not None:
        logger.warning(
            "RelStorage loads from a replica (%s) that is not one of the "
            "catalog's standbys (standby-dsns): a catalog snapshot is taken "
            "at the first catalog statement of a transaction, after the "
            "ZODB's (see docs/standbys.md)", replica)
    else:
        logger.warning(
            "the catalog is not in RelStorage's database: a catalog "
            "snapshot is taken at the first catalog statement of a "
            "transaction, after the ZODB's (see docs/transactions.md)")
    return found or False


def forget(dsn=None):
    """Ask again which server RelStorage's connections reach (those of
    catalog database ``dsn``, or all): a snapshot could not be imported
    where it was expected, or the pools were closed."""
    with _lock:
        for key in list(_servers):
            if dsn is None or key[0] == dsn:
                del _servers[key]


def _in_transaction(load):
    """RelStorage's load connection is in a transaction it began (its
    driver says so): the only state in which its snapshot is exported."""
    if not getattr(load, "active", False):
        return False
    status = getattr(getattr(load, "connection", None),
                     "get_transaction_status", None)
    if status is None:  # a driver that cannot tell
        return False
    try:
        return status() == _INTRANS
    except Exception:  # noqa: B902 - a closed connection
        return False


db.forget_on_close(forget)
