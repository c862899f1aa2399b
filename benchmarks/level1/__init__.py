"""level1: the catalog engine alone, at scale (ZCatalog vs plone.pgcatalog).

Synthetic catalog entries with the shape of a large Plone site are indexed
into a stock ZCatalog (``Products.CMFPlone.CatalogTool.CatalogTool``, its
BTrees in a ZODB on RelStorage) and into ``plone.pgcatalog``'s
``PGCatalogTool``, both configured with Plone's own index set and metadata
columns (read from ``Products/CMFPlone/profiles/default/catalog.xml``), both
fed through the same ``catalog_object(stub, uid=path)`` API.  Then the same
queries are timed on both, each in a fresh transaction, and their results
are compared.  See ``benchmarks/README.md`` (section level1).

Per scale and backend the parent runs two subprocesses against one database
(created for the pair, dropped afterwards unless ``--keep-databases`` /
``--reuse-databases``):

* ``_level1_build``: start Zope on RelStorage (``--build-cache-size``),
  create ``/plone/portal_catalog``, catalogue the entries in transactions of
  ``--commit-every``, then ``VACUUM (ANALYZE)`` the database;
* ``_level1_query``: start Zope on the same database with the small query
  cache (``--cache-size``), time the queries, collect the results for the
  parity check, and run the concurrency measurement.

Usage::

    python benchmarks/run_benchmarks.py level1 --scales 10000,100000,1000000 \\
        --output level1.json --chart level1.png
    python benchmarks/run_benchmarks.py concurrency --scales 100000

The package, one job per module:

* ``shape``: the shape of the synthetic site (types, states, tree, tags);
* ``plan``: the deterministic content plan and the stub the catalogs index;
* ``queries``: the timed queries and the sort keys of their results;
* ``catalogdef``: Plone's index set and columns on either catalog;
* ``build``: the ``_level1_build`` child;
* ``measure``: the ``_level1_query`` child (timings, parity results,
  concurrency);
* ``databases``: private server, per-run databases, reusable builds;
* ``parent``: the parent process (``level1``, ``concurrency``) and
  ``level1-report``;
* ``parity``, ``report``, ``charts``: comparing, printing and drawing;
* ``common``: level1's constants and helpers (what level2 and the other
  scripts share too is in ``benchmarks/shared.py``: backends, Zope on
  RelStorage in a child process, timing statistics, the environment);
* ``cli``: the subcommands, wired into ``run_benchmarks.py`` by
  :func:`add_parsers`.
"""
from .cli import add_parsers

__all__ = ["add_parsers"]
