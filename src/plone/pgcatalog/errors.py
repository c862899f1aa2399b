"""The named exceptions of plone.pgcatalog, in one place.

``CatalogError`` is ZCatalog's own class, so callers catching it keep working.
"""
from Products.ZCatalog.Catalog import CatalogError  # noqa: F401  (re-export)
from transaction.interfaces import TransientError
from ZODB.POSException import ConflictError
from ZODB.POSException import ReadConflictError


class PGCatalogError(Exception):
    """Base class of plone.pgcatalog's own errors."""


class ConfigurationError(PGCatalogError):
    """A setting of plone.pgcatalog is missing or has a value it cannot
    take (no PostgreSQL DSN: set ``PGCATALOG_DSN`` or add
    ``<product-config plone.pgcatalog> dsn ...`` to zope.conf).

    The message names the setting; docs/configuration.md lists them all.
    """


class SchemaError(ConfigurationError):
    """The catalog tables in PostgreSQL do not fit this process: missing,
    older than this release and not to be upgraded by it, newer than it, or
    made by a development version from before the first release.

    The message names the command that resolves it (``pgcatalog-migrate``,
    docs/upgrade.md)."""


class DatabaseUnavailable(PGCatalogError, TransientError):
    """PostgreSQL could not be reached or went away during a catalog call.

    A ``TransientError``: Zope's publisher retries the request, which gets
    a fresh connection."""


class AnswerLost(PGCatalogError, TransientError):
    """The rest of a big every-match answer cannot be read in the state it
    was found in (its catalog transaction lost its connection before the
    rest was read: plone.pgcatalog.search.lazy).

    A ``TransientError``: Zope's publisher retries the request, whose search
    runs again."""


class CatalogStatementError(PGCatalogError, ValueError):
    """PostgreSQL refused a catalog statement (a value it cannot take).

    The message says no more than that; the statement and PostgreSQL's
    own message are in the server log.  The transaction goes on: the
    failed statement is rolled back alone."""


class CatalogStatementTimeout(CatalogStatementError):
    """A catalog read ran longer than ``statement-timeout-ms`` and PostgreSQL
    cancelled it.

    The message says the limit and where to change it; the statement is in
    the server log.  The transaction goes on (the cancelled statement is
    rolled back alone; this transaction's catalog writes are kept)."""


class CatalogMissing(PGCatalogError):
    """The catalog's rows are gone from PostgreSQL (its ``pgcatalog_catalogs``
    row was deleted, or the database was replaced by one without it).

    Restore the database, or make a new empty catalog with
    ``portal_catalog.pgc_recreate_catalog()`` and rebuild it."""


class UnsupportedIndexType(PGCatalogError, ValueError):
    """``addIndex`` was asked for an index type plone.pgcatalog cannot serve."""


class IndexKindContractError(PGCatalogError, TypeError):
    """An index kind's class breaks its contract
    (plone.pgcatalog.indexes.interfaces): it does not provide IIndexKind, a
    capability it declares misses a member (or has it with another
    signature), or it defines a capability's members without declaring
    the capability (the engine would never use them).  Raised when the
    kind is registered (``plone.pgcatalog.indexes.kind_for``); the message
    names the class, the interface and the member."""


class CatalogReadConflictError(ReadConflictError):
    """The catalog's snapshot could not be brought in line with the
    objects' snapshot of this transaction (a catalog commit was finishing
    while it began, and another one came meanwhile).

    A ``ConflictError`` (a read conflict, as the ZODB raises when a
    transaction cannot see an object as of its snapshot): Zope's publisher
    retries the request, whose new snapshot agrees."""


class CatalogConflictError(ConflictError):
    """Two transactions wrote the same catalog rows concurrently.

    A ``ConflictError`` so that Zope's publisher retries the request, as it does
    for ZODB write conflicts.
    """
