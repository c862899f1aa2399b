"""Testing helpers of plone.pgcatalog, each in its own module:

``layers``    the test layers (a Plone site with plone.pgcatalog installed)
              and the catalog snapshot/restore they isolate state with;
              exported here too (``from plone.pgcatalog.testing import
              PGCATALOG_FUNCTIONAL_TESTING``);
``pgserver``  a private, throwaway PostgreSQL server (or ``PGCATALOG_DSN``);
``zopeapp``   a real Zope application on any ZODB database (e.g. RelStorage);
``runner``    ``pgcatalog-testrunner``: another package's unmodified test
              suite on plone.pgcatalog.
"""
import importlib


# The names of ``layers`` exported here. They are imported on first use, not
# with this package: ``layers`` needs plone.app.testing (the ``test`` extra),
# while ``pgserver`` and ``zopeapp`` must stay importable without it (the
# benchmarks use them with the ``bench`` extra only).
_LAYERS_NAMES = (
    "snapshot",
    "restore",
    "PGDatabaseLayer",
    "PGCATALOG_DATABASE",
    "CatalogStateLayerMixin",
    "PGCatalogFixture",
    "PGCATALOG_FIXTURE",
    "PGCatalogFunctionalTesting",
    "PGCATALOG_INTEGRATION_TESTING",
    "PGCATALOG_FUNCTIONAL_TESTING",
    "PGCatalogRestAPIFixture",
    "PGCATALOG_RESTAPI_FIXTURE",
    "PGCATALOG_RESTAPI_FUNCTIONAL_TESTING",
    "PGCatalogMultilingualFixture",
    "PGCATALOG_MULTILINGUAL_FIXTURE",
    "PGCATALOG_MULTILINGUAL_INTEGRATION_TESTING",
)

__all__ = _LAYERS_NAMES


def __getattr__(name):
    if name in _LAYERS_NAMES:
        layers = importlib.import_module(__name__ + ".layers")
        return getattr(layers, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(set(globals()) | set(_LAYERS_NAMES))
