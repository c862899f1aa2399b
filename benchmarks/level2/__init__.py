"""level2: a real Plone site, ZCatalog vs plone.pgcatalog.

A real Plone 6 site (plone.distribution "volto", no default content) on
RelStorage (PostgreSQL, history-free), once with the stock ZCatalog and once
with plone.pgcatalog installed by its profile; each backend runs in its own
subprocess against a fresh database on the same PostgreSQL server.  See
``benchmarks/README.md`` and ``workload`` for the workload.

Usage::

    python benchmarks/run_benchmarks.py level2 --docs 500 --iterations 50 \\
        --warmup 5 --cache-size 400 --output results.json [--profile] \\
        [--backends zcatalog,pgcatalog]

The package, one job per module:

* ``workload``: the site, the scenarios, the deterministic content plan and
  the results it predicts (no Zope);
* ``parent``: the ``level2`` parent process (one ``_backend`` child per
  backend, parity, report, JSON);
* ``parity``, ``report``: comparing and printing;
* ``backend``: the ``_backend`` child process, start to finish;
* ``site``: the site and its content, in the child;
* ``measure``: the timed queries (one synthetic request each), in the child;
* ``profile``: ``--profile``'s untimed cProfile pass, in the child;
* ``cli``: the subcommands, wired into ``run_benchmarks.py`` by
  :func:`add_parsers`.

Only ``backend``, ``site``, ``measure`` and ``profile`` import Zope; the
command line imports them when ``_backend`` runs.
"""
from .cli import add_parsers

__all__ = ["add_parsers"]
