"""Catalog reads on PostgreSQL hot standbys (docs/standbys.md).

A transaction that reads the catalog in a snapshot of its own (ZEO,
FileStorage, DemoStorage, RelStorage in another database or with
``share-storage-snapshot off``) may read it on a standby of the catalog's
database (``standby-dsns``).  The session begins its PostgreSQL transaction
there and asks the snapshot's facts as on the primary
(:mod:`~plone.pgcatalog.pg.consistency`): the snapshot must hold exactly
the catalog commits the transaction's ZODB snapshot counts.  A standby that
has not replayed them yet (it lags, or this very request follows its own
write) is left for the primary at once, for this transaction, and not
tried again for BEHIND_PAUSE seconds; one that cannot be reached is left
for FAILED_PAUSE seconds.  A transaction that writes moves to the primary
before its first write.  So a read on a standby is never older or newer
than the objects the request loads, and a user's next request sees their
own change whatever process or standby serves it: its ZODB snapshot counts
the change, and only a snapshot that holds it is accepted.

This module keeps which standby to try next, their pauses, and what each
served (the control panel's status).
"""
import itertools
import logging
import threading
import time

from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo

from plone.pgcatalog import config
from plone.pgcatalog.pg import db

logger = logging.getLogger("plone.pgcatalog")

#: seconds a standby that could not be reached is left alone
FAILED_PAUSE = 5.0
#: seconds a standby found behind the objects is left alone
BEHIND_PAUSE = 0.05
#: seconds a transaction waits for a free connection of a standby's pool
#: (none free, or the standby unreachable: it reads on the primary); a
#: standby's pool connects in the background (a standby down at start-up
#: costs a request that much, not a connection timeout)
CHECKOUT = 0.2


def _standby_only(dsn):
    """``dsn`` connecting to a server in hot standby only (libpq's
    ``target_session_attrs=standby``, unless it says otherwise): a standby
    promoted to a primary (a failover) is refused, not read as one."""
    try:
        if "target_session_attrs" in conninfo_to_dict(dsn):
            return dsn
        return make_conninfo(dsn, target_session_attrs="standby")
    except Exception:  # noqa: B902 - a DSN libpq reads, psycopg cannot
        return dsn


class Standby:
    """One standby: when to try it again, and what it served."""

    def __init__(self, dsn):
        self.dsn = dsn
        #: what its connections are made with (its pool's key)
        self.connect_dsn = _standby_only(dsn)
        #: time.monotonic() before which it is not tried
        self.paused_until = 0.0
        #: read-only transactions it served, found behind, could not serve
        self.served = 0
        self.behind = 0
        self.failed = 0
        self.last_error = None
        self._logged = -60.0


_lock = threading.Lock()
#: dsn (as configured, and as connected with) -> Standby
_standbys = {}
_turn = itertools.count()
#: read-only transactions of the primary's (while standbys are
#: configured): (served, fell back to it)
_primary = {"served": 0}


def standbys_of(dsn):
    """The :class:`Standby` objects of the catalog database ``dsn`` (those
    configured for the configured DSN; none for another)."""
    dsns = config.get_standby_dsns()
    if not dsns or dsn != config.get_dsn():
        return []
    found = []
    with _lock:
        for standby_dsn in dsns:
            standby = _standbys.get(standby_dsn)
            if standby is None:
                standby = _standbys[standby_dsn] = Standby(standby_dsn)
                _standbys[standby.connect_dsn] = standby
            found.append(standby)
    return found


def choose(dsn):
    """The DSN (to connect with) of the standby of ``dsn`` to read on now
    (in turn, those not paused), or None."""
    candidates = standbys_of(dsn)
    if not candidates:
        return None
    now = time.monotonic()
    ready = [s for s in candidates if s.paused_until <= now]
    if not ready:
        return None
    return ready[next(_turn) % len(ready)].connect_dsn


def checkout(standby_dsn):
    """A connection of the standby's pool, or None (it was paused)."""
    try:
        return db.checkout(standby_dsn, timeout=CHECKOUT, connect=None)
    except Exception as exc:  # noqa: B902 - any failure: the primary reads
        failed(standby_dsn, exc)
        return None


def failed(standby_dsn, exc=None):
    """The standby could not serve (unreachable, refused): paused."""
    standby = _standbys.get(standby_dsn)
    if standby is None:
        return
    now = time.monotonic()
    standby.paused_until = now + FAILED_PAUSE
    with _lock:
        standby.failed += 1
    standby.last_error = type(exc).__name__ if exc is not None else None
    if now - standby._logged >= 60.0:
        standby._logged = now
        logger.warning("catalog standby %s cannot serve reads (%s); the "
                       "primary serves them, the standby is tried again in "
                       "%.0f s (logged once a minute)",
                       db.safe_dsn(standby_dsn), standby.last_error,
                       FAILED_PAUSE)


def behind(standby_dsn):
    """The standby's snapshot lacked commits the objects show: paused."""
    standby = _standbys.get(standby_dsn)
    if standby is not None:
        standby.paused_until = time.monotonic() + BEHIND_PAUSE
        with _lock:
            standby.behind += 1


def served(conn_dsn, dsn):
    """A read-only transaction of catalog database ``dsn`` ended, its
    reads served by ``conn_dsn`` (a standby's, or ``dsn``)."""
    standby = _standbys.get(conn_dsn) if conn_dsn != dsn else None
    if standby is not None:
        with _lock:
            standby.served += 1
    elif _standbys:
        with _lock:
            _primary["served"] += 1


def status(dsn):
    """What the standbys of ``dsn`` served: a list of dicts (``dsn``
    without its password, ``served``, ``behind``, ``failed``,
    ``paused``, ``share``: their part of the read-only transactions),
    and the primary's ``served``."""
    found = standbys_of(dsn)
    total = sum(s.served for s in found) + _primary["served"]
    now = time.monotonic()
    return {"primary_served": _primary["served"], "standbys": [
        {"dsn": db.safe_dsn(s.dsn), "served": s.served, "behind": s.behind,
         "failed": s.failed, "paused": s.paused_until > now,
         "last_error": s.last_error,
         "share": (float(s.served) / total) if total else 0.0}
        for s in found]}


def forget():
    """Forget the standbys' pauses and counts (tests)."""
    with _lock:
        _standbys.clear()
        _primary["served"] = 0
