"""Driver errors turned into the exceptions callers see.

No psycopg error and no SQL text reaches a caller of the catalog: a
conflict becomes ``ConflictError`` (Zope retries), a lost connection
``DatabaseUnavailable`` (retried too), a vanished catalog
``CatalogMissing``, anything else ``CatalogStatementError`` (a
``ValueError``) with the details in the log.
"""
import logging

import psycopg
from psycopg import errors as pg_errors

from plone.pgcatalog.errors import CatalogConflictError
from plone.pgcatalog.errors import CatalogMissing
from plone.pgcatalog.errors import CatalogStatementError
from plone.pgcatalog.errors import CatalogStatementTimeout
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")


#: SQLSTATEs of a connection that is gone (class 08, server shutdown,
#: crash, not accepting connections yet)
_GONE_STATES = ("57P01", "57P02", "57P03")


def forget_prepared(conn):
    """After a failed pipeline psycopg's record of the statements it
    prepared can be wrong (a name it thinks prepared was skipped): forget
    them all (the server's are deallocated with the next statement)."""
    prepared = getattr(conn, "_prepared", None)
    if prepared is not None:
        prepared.clear()


def connection_lost(exc):
    """The error says the connection (or the server) is gone."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _GONE_STATES


def timed_out(exc):
    """The statement was cancelled by ``statement_timeout`` (not by an
    administrator's pg_cancel_backend, which is QueryCanceled too)."""
    return isinstance(exc, pg_errors.QueryCanceled) and \
        "statement timeout" in (exc.diag.message_primary or "")


def translate_error(exc, query=None, timeout_ms=None):
    """The exception callers see for a driver error ``exc`` (never the
    driver's own, and never SQL text in its message):

    * concurrent writes (serialization failure, deadlock, lock timeout):
      :class:`CatalogConflictError`, which Zope retries;
    * a connection or server that went away: :class:`DatabaseUnavailable`,
      which Zope retries too;
    * a read cancelled by the statement timeout (``timeout_ms``):
      :class:`CatalogStatementTimeout`, saying the limit and its setting;
    * anything else (a value PostgreSQL cannot take, a limit): logged with
      the statement, then :class:`CatalogStatementError`."""
    if isinstance(exc, (pg_errors.SerializationFailure,
                        pg_errors.DeadlockDetected,
                        pg_errors.LockNotAvailable)):
        return CatalogConflictError(
            "concurrent catalog write, retry: %s" % exc.diag.message_primary
            if exc.diag.message_primary else "concurrent catalog write")
    if isinstance(exc, pg_errors.UniqueViolation) and \
            exc.diag.table_name == schema.ENTRIES:
        # two transactions catalogued the same new path
        return CatalogConflictError("concurrent catalog write, retry")
    if isinstance(exc, pg_errors.ForeignKeyViolation) and \
            exc.diag.table_name == schema.ENTRIES:
        forget_catalogs()
        return CatalogMissing(
            "The PostgreSQL rows of this catalog are gone (pgcatalog_catalogs "
            "has no row for it).  Restore the database from a backup, or "
            "make a new empty catalog (portal_catalog.pgc_recreate_catalog()"
            ") and rebuild it (Clear and Rebuild).")
    if connection_lost(exc):
        return DatabaseUnavailable(
            "PostgreSQL went away during a catalog call (%s)"
            % type(exc).__name__)
    if timed_out(exc):
        logger.warning("catalog statement cancelled after %s ms "
                       "(statement-timeout-ms)\nstatement: %s",
                       timeout_ms or "?", _one_line(query))
        limit = ("%d ms" % timeout_ms if timeout_ms
                 else "the server's statement_timeout")
        return CatalogStatementTimeout(
            "A catalog read took longer than %s and was cancelled (the "
            "statement timeout).  Narrow the search, or raise "
            "statement-timeout-ms in <product-config plone.pgcatalog> "
            "(environment: PGCATALOG_STATEMENT_TIMEOUT_MS; 0 = no limit) or "
            "in the site's catalog control panel." % limit)
    logger.error("catalog statement failed: %s: %s\nstatement: %s",
                 type(exc).__name__, exc, _one_line(query))
    return CatalogStatementError(
        "plone.pgcatalog could not run a catalog statement (%s); the "
        "details are in the server log" % type(exc).__name__)


def _one_line(query):
    return " ".join(str(query).split()) if query is not None else "?"


#: catalogs whose cid this process knows, forgotten when their row vanished
_forget_callbacks = []


def on_forget_catalogs(callback):
    """Call ``callback()`` when a catalog's rows turned out to be gone
    (per-process caches of catalog ids must forget them)."""
    _forget_callbacks.append(callback)


def forget_catalogs():
    for callback in _forget_callbacks:
        callback()
