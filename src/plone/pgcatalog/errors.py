"""The named exceptions of plone.pgcatalog, in one place.

``CatalogError`` is ZCatalog's own class, so callers catching it keep working.
"""
from Products.ZCatalog.Catalog import CatalogError  # noqa: F401  (re-export)
from ZODB.POSException import ConflictError


class PGCatalogError(Exception):
    """Base class of plone.pgcatalog's own errors."""


class ConfigurationError(PGCatalogError):
    """No usable PostgreSQL DSN was configured.

    Set ``PGCATALOG_DSN`` or add ``<product-config plone.pgcatalog> dsn ...``
    to zope.conf.
    """


class DatabaseUnavailable(PGCatalogError):
    """PostgreSQL could not be reached or went away during a catalog call."""


class UnsupportedIndexType(PGCatalogError, ValueError):
    """``addIndex`` was asked for an index type plone.pgcatalog cannot serve."""


class CatalogConflictError(ConflictError):
    """Two transactions wrote the same catalog rows concurrently.

    A ``ConflictError`` so that Zope's publisher retries the request, as it does
    for ZODB write conflicts.
    """
