"""A session's commit: the ZODB's two-phase commit protocol, and savepoints.

:class:`TwoPhaseCommit` is the ``IDataManager`` part of
:class:`~plone.pgcatalog.pg.session.CatalogSession`: it sorts last among
the transaction's resources, logs the commit (the change stamp), prepares
the PostgreSQL transaction in ``tpc_vote`` after the storages voted (two-phase
commit, when the server allows it and other resources take part) or
commits it there, commits the prepared transaction in ``tpc_finish`` after
the storages finished, and in ``tpc_abort`` rolls back (or, when the
storage's own transaction committed, commits) what it prepared, on fresh
connections if needed.  :class:`SessionSavepoint` rolls the session back
with a ZODB savepoint.
"""
import logging
import time
import uuid

import psycopg
from psycopg import sql
from transaction.interfaces import IDataManagerSavepoint
from zope.interface import implementer

from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.pg import consistency
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import dberrors
from plone.pgcatalog.pg import upkeep
from plone.pgcatalog.schema import ddl

logger = logging.getLogger("plone.pgcatalog")

#: attempts (and first pause, doubled each time) to finish a prepared
#: transaction whose connection went away
FINISH_ATTEMPTS = 6
FINISH_PAUSE = 0.05


class TwoPhaseCommit:
    """The commit protocol of a catalog session (a mixin of
    :class:`~plone.pgcatalog.pg.session.CatalogSession`, whose state it
    reads and changes; the session's ``_end`` ends the transaction)."""

    # -- IDataManager -------------------------------------------------------
    def sortKey(self):
        # '~' sorts after the storages' keys: vote and finish last.
        return "~plone.pgcatalog:%d" % id(self)

    def abort(self, txn):
        self._end()

    def tpc_begin(self, txn):
        pass

    def commit(self, txn):
        pass

    def tpc_vote(self, txn):
        if self.commit_errors:
            raise next(iter(self.commit_errors.values()))
        if self.failed is not None:
            raise self.failed
        if not self.pending and not self.wrote:
            return  # read only: the snapshot ends in tpc_finish
        self.settle()
        self.writes_sent = True
        self.flush()
        self._uncounted()
        if self.on_standby:
            # (read there; the commit is the primary's)
            self._begin_checked()
        conn = self.connection()
        gid = None
        cids = self.dirty | set(self.counter_flushed)
        two_phase = db.two_phase(self.dsn) and _other_resources(txn, self)
        try:
            with conn.pipeline():
                # the commit is never cut short by the reads' limit
                self._unlimited(conn)
                for cid in sorted(cids):
                    # insert-only: concurrent writers never conflict here
                    db.run(conn, db.log_commit(
                        cid, self.counter_flushed.get(cid, 0)), prepare=True)
                found = None
                if two_phase and self.storage_shared:
                    # the storage's own PostgreSQL transaction (it voted):
                    # what an in-doubt catalog transaction follows
                    found = db.run(conn, consistency.STORAGE_XID)
                elif not two_phase:
                    conn.execute("COMMIT", prepare=False)
            if two_phase:
                row = found.fetchone() if found is not None else None
                self.storage_xid = row[0] if row else None
                gid = consistency.gid(uuid.uuid4().hex, cids,
                                      self.storage_xid)
                # known before it is sent: if the acknowledgement is lost,
                # the abort rolls back what the server may have prepared
                self.prepared = gid
                conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(
                    sql.Literal(gid)), prepare=False)
        except psycopg.Error as exc:
            self._contain(conn, exc, False)
            raise dberrors.translate_error(exc, "commit") from None
        self.begun = False
        self.epoch += 1
        if gid is None:
            self._committed()

    def _uncounted(self):
        """Writes made after the before-commit hooks counted them (by a
        data manager's commit): too late for the ZODB's counters, so this
        process's result cache is emptied and the writes are logged (other
        processes may serve answers from before them; docs/cache.md), with
        the values kept under the counters (uniqueValues, text
        statistics)."""
        late = [cid for cid in self.counted if self.changes.get(cid)]
        if late:
            logger.error(
                "catalog writes after the transaction's before-commit hooks "
                "(catalogs %s): the result cache's counters miss them; "
                "write to the catalog before the commit starts", late)
            # and what is kept under the same counters (store.py)
            from plone.pgcatalog.pg.store import forget_caches
            forget_caches()

    def _committed(self):
        self.wrote = False
        upkeep.committed(self.dsn, self.dirty | set(self.counter_flushed))
        self.counter_flushed.clear()
        self.dirty.clear()

    def tpc_finish(self, txn):
        if self.prepared is not None:
            # The storages have finished: the ZODB transaction is
            # committed.  This must not fail (the transaction package would
            # abort us after the ZODB committed): a prepared transaction
            # survives its connection, so try on fresh ones, then leave it
            # to be committed later (db.resolve_in_doubt).
            gid, self.prepared = self.prepared, None
            self._finish_prepared(gid, "COMMIT PREPARED")
            self._committed()
        fold = upkeep.fold_due(self.dsn, self.rows_written)
        due = upkeep.analyze_due(self.dsn, self.rows_written)
        drops, self.drops = self.drops, {}
        hooks, self.commit_hooks = self.commit_hooks, []
        self._end()
        for hook in hooks:
            hook()
        if drops:
            ddl.drop_unused(self.dsn, sorted(drops))
        if fold:
            upkeep.fold_hot_counts(self.dsn)
        if due:
            upkeep.analyze(self.dsn)

    def tpc_abort(self, txn):
        gid, self.prepared = self.prepared, None
        if gid is not None:
            # voted (the catalog is last to vote, so every resource voted):
            # a storage failed to finish, or the acknowledgement of PREPARE
            # was lost.  Follow the storage's own transaction when it is in
            # this database; roll back otherwise.
            command = "ROLLBACK PREPARED"
            if self._storage_committed():
                logger.critical(
                    "a storage failed in tpc_finish after its database "
                    "transaction committed: the catalog's commits too (%s)",
                    gid)
                command = "COMMIT PREPARED"
            self._finish_prepared(gid, command)
            if command == "COMMIT PREPARED":
                self._committed()
        self._end()

    def _storage_committed(self):
        """Whether the storage's PostgreSQL transaction of this commit (in
        the catalog's database) committed; False when unknown."""
        if not self.storage_xid:
            return False
        try:
            with db.get_pool(self.dsn).connection() as conn:
                return db.run(conn, consistency.xact_status(
                    self.storage_xid)).fetchone()[0] == "committed"
        except psycopg.Error:
            logger.warning("could not read the storage transaction's status",
                           exc_info=True)
            return False

    def _finish_prepared(self, gid, command):
        statement = sql.SQL(command + " {}").format(sql.Literal(gid))
        pause = FINISH_PAUSE
        for attempt in range(FINISH_ATTEMPTS):
            try:
                self.connection().execute(statement, prepare=False)
                return
            except psycopg.errors.UndefinedObject:
                # nothing (left) prepared under that id: PREPARE never
                # reached the server, or another process finished it
                return
            except psycopg.Error as exc:
                if not dberrors.connection_lost(exc) and not self.conn.broken:
                    logger.critical("%s %s failed: %s", command, gid, exc)
                    break
                self._drop_connection()
                time.sleep(pause)
                pause *= 2
            except DatabaseUnavailable:
                time.sleep(pause)
                pause *= 2
        logger.critical(
            "%s %s could not be sent (PostgreSQL unreachable); the prepared "
            "catalog transaction is left to be resolved (it is retried by "
            "the next transaction of this process and at start-up)",
            command, gid)
        db.unresolved(self.dsn, gid, command)

    # -- savepoints ---------------------------------------------------------
    def savepoint(self):
        return SessionSavepoint(self)


def _other_resources(txn, session):
    """Whether resources other than ``session`` take part in ``txn`` (a
    catalog-only commit needs no two-phase commit)."""
    resources = getattr(txn, "_resources", None)
    if resources is None:
        return True
    return any(r is not session for r in resources)


@implementer(IDataManagerSavepoint)
class SessionSavepoint:

    def __init__(self, session):
        self.session = session
        self.snapshot = session.pending.snapshot()
        self.commit_errors = dict(session.commit_errors)
        self.counter_flushed = dict(session.counter_flushed)
        self.dirty = set(session.dirty)
        self.drops = dict(session.drops)
        self.commit_hooks = list(session.commit_hooks)
        self.wrote = session.wrote
        self.failed = session.failed
        self.pg_name = None
        if session.begun:
            session._sp_seq += 1
            pg_name = "pgc_sp_%d" % session._sp_seq
            try:
                session.connection().execute("SAVEPOINT " + pg_name,
                                             prepare=False)
            except psycopg.Error as exc:
                # refused (cancelled) or the connection gone: the catalog
                # transaction was ended, its writes, if any, lost and the
                # loss kept for the commit (session.failed).  The savepoint
                # marks that state (nothing in PostgreSQL to roll back to;
                # a rollback keeps the loss): the ZODB transaction goes on,
                # where a savepoint that raised would doom it.
                session._contain(session.conn, exc, False)
                dberrors.translate_error(exc, "SAVEPOINT")    # logged
                self.wrote = session.wrote
                self.failed = session.failed
            else:
                self.pg_name = pg_name

    def _send(self, statement):
        try:
            self.session.connection().execute(statement, prepare=False)
        except psycopg.Error as exc:
            self.session._contain(self.session.conn, exc, False)
            raise dberrors.translate_error(exc, statement) from None

    def rollback(self):
        session = self.session
        if session.begun:
            # big answers found before the rollback keep what they found
            session.settle()
        if session.begun:
            session.epoch += 1
            if self.pg_name is not None:
                self._send("ROLLBACK TO SAVEPOINT " + self.pg_name)
            elif session.wrote:
                # Every write in the PG transaction came after this
                # savepoint: roll it back entirely.
                self._send("ROLLBACK")
                session.begun = False
        if isinstance(session.failed, DatabaseUnavailable):
            # the connection went away: every write of the transaction is
            # lost, those before this savepoint too
            pass
        else:
            session.wrote = self.wrote and session.begun
            session.failed = self.failed
        session.drops = dict(self.drops)
        session.commit_hooks = list(self.commit_hooks)
        session.pending.restore(self.snapshot)
        session.commit_errors = dict(self.commit_errors)
        session.counter_flushed = dict(self.counter_flushed)
        session.dirty = set(self.dirty)
        # rid -> path and "has metadata" facts may describe rolled-back rows
        session.cache.clear()
