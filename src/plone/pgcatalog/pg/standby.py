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
served (the control panel's status), and holds the session's part
(:class:`StandbyReads`).
"""
import itertools
import logging
import threading
import time

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo

from plone.pgcatalog import config
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import dberrors

logger = logging.getLogger("plone.pgcatalog")

#: seconds a standby that could not be reached is left alone
FAILED_PAUSE = 5.0
#: seconds a standby found behind the objects is left alone
BEHIND_PAUSE = 0.05
#: seconds between two readings of a standby's replay lag (per process)
LAG_EVERY = 1.0
#: a standby's replay lag, in seconds: 0 when it has replayed all it
#: received, else the age of the last commit it replayed
LAG_SQL = ("SELECT CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM "
           "pg_last_wal_replay_lsn() THEN 0 ELSE coalesce(extract(epoch FROM "
           "now() - pg_last_xact_replay_timestamp()), 0) END::float8")
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
        #: times it was not tried, its lag past standby-max-lag
        self.lagging = 0
        #: its replay lag (seconds) when last read, and when (monotonic)
        self.lag = None
        self.lag_at = None
        self.last_error = None
        self._logged = -60.0


_lock = threading.Lock()
#: dsn (as configured, and as connected with) -> Standby
_standbys = {}
_turn = itertools.count()
#: read-only transactions the primary served while standbys are configured
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
    standby = ready[next(_turn) % len(ready)]
    bound = config.get_standby_max_lag()
    if bound and lag_of(standby, now) > bound:
        with _lock:
            standby.lagging += 1
        return None
    return standby.connect_dsn


def lag_of(standby, now=None):
    """The standby's replay lag in seconds, read again at most every
    LAG_EVERY seconds (on a connection of its pool; one it cannot give is
    the standby's failure: infinite lag, and it is paused)."""
    now = time.monotonic() if now is None else now
    if standby.lag_at is not None and now - standby.lag_at < LAG_EVERY:
        return float("inf") if standby.lag is None else standby.lag
    standby.lag_at = now
    row = ask(standby, LAG_SQL)
    standby.lag = None if row is None else float(row[0])
    return float("inf") if standby.lag is None else standby.lag


def ask(standby, statement):
    """The first row of constant ``statement`` run on a connection of the
    standby's pool, or None: it could not be reached or failed (it is
    paused)."""
    conn = checkout(standby.connect_dsn)
    if conn is None:
        return None
    try:
        row = conn.execute(statement, prepare=False).fetchone()
        conn.rollback()
    except psycopg.Error as exc:
        db.discard(standby.connect_dsn, conn)
        failed(standby.connect_dsn, exc)
        return None
    db.checkin(standby.connect_dsn, conn)
    return row


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
    ``lagging``, ``paused``, ``lag``: the replay lag last read, seconds
    or None; ``share``: their part of the read-only transactions), and
    the primary's ``served``."""
    found = standbys_of(dsn)
    total = sum(s.served for s in found) + _primary["served"]
    now = time.monotonic()
    return {"primary_served": _primary["served"], "standbys": [
        {"dsn": db.safe_dsn(s.dsn), "served": s.served, "behind": s.behind,
         "failed": s.failed, "lagging": s.lagging,
         "lag": s.lag, "paused": s.paused_until > now,
         "last_error": s.last_error,
         "share": (float(s.served) / total) if total else 0.0}
        for s in found]}


def forget():
    """Forget the standbys' pauses and counts (tests)."""
    with _lock:
        _standbys.clear()
        _primary["served"] = 0


def refused(exc):
    """``exc`` says the server cannot serve now (starting, shutting down,
    a recovery conflict), not that the statement is wrong or too slow."""
    return isinstance(exc, psycopg.OperationalError) and \
        not isinstance(exc, psycopg.errors.QueryCanceled)


class StandbyReads:
    """The part of :class:`~plone.pgcatalog.pg.session.CatalogSession`
    that reads on a standby (a mixin: it reads and changes the session's
    ``conn``, ``conn_dsn``, ``dsn``, ``begun``, ``epoch``, ``facts``,
    ``snapshot_id``, ``snapshot_dsn``; the session's ``connection`` asks
    it where to read)."""

    @property
    def on_standby(self):
        """This transaction's statements go to a standby (standby.py)."""
        return self.conn_dsn != self.dsn

    def _standby_to_read(self):
        """The standby this transaction may begin reading on, or None.  A
        transaction sharing the storage's snapshot reads where it is (a
        standby RelStorage loads from, sharing.py; the primary: None).
        Else a transaction without writes whose catalogs' ZODB generations
        are known (its snapshot is checked against them)."""
        if self.has_writes or self.writes_sent or self.begun:
            return None
        if not standbys_of(self.dsn):
            return None
        self._ask_storage_snapshot()
        if self.snapshot_id:
            return self.snapshot_dsn if self.snapshot_dsn != self.dsn \
                else None
        if not self.watched:
            return None
        return choose(self.dsn)

    def _leave_standby(self):
        """End the PostgreSQL transaction on the standby (reads only) and
        give its connection back: the next statement begins on the
        primary (in a snapshot of its own, when it shared the storage's
        there)."""
        if self.snapshot_dsn == self.conn_dsn:
            self._unshare()
        conn, self.conn = self.conn, None
        conn_dsn, self.conn_dsn = self.conn_dsn, self.dsn
        self.begun = False
        self.epoch += 1
        self.facts = {}
        self._facts_cursor = None
        if conn is None:
            return
        try:
            # (COMMIT: psycopg keeps what it prepared, see _end)
            conn.execute("COMMIT", prepare=False)
        except psycopg.Error:
            db.discard(conn_dsn, conn)
            return
        db.checkin(conn_dsn, conn)


    def _leave_unchecked_standby(self):
        """Leave a standby snapshot begun early when no catalog's
        generation is known yet: a statement in it could not be checked,
        and a standby's snapshot may be older than anything the objects
        show."""
        if self.on_standby and not self.watched and not self.storage_shared:
            self._leave_standby()

    def _standby_failed(self, conn, exc, fresh):
        """Whether statement failure ``exc`` on ``conn`` was the standby's
        (gone, shutting down, a recovery conflict), then paused and left:
        the statement runs again on the primary, in a snapshot checked as
        this one was."""
        lost = dberrors.connection_lost(exc) or conn.broken
        if not self.on_standby or self.wrote or not (
                lost or (fresh and refused(exc))):
            return False
        failed(self.conn_dsn, exc)
        if self.snapshot_dsn == self.conn_dsn:
            self._unshare()
        if lost:
            self._drop_connection()
        else:
            self._leave_standby()
        return True
