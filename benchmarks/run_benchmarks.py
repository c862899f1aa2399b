#!/usr/bin/env python
"""plone.pgcatalog benchmarks.

``level2``: a real Plone 6 site on RelStorage, stock ZCatalog against
plone.pgcatalog (the package ``level2/``).  ``level1``, ``concurrency`` and
``level1-report``: the catalog engine alone at 10k-1M entries (the package
``level1/``).  What both share is ``shared.py``.  See
``benchmarks/README.md``.

Usage::

    python benchmarks/run_benchmarks.py level2 --docs 500 --iterations 50 \\
        --warmup 5 --cache-size 400 --output results.json [--profile] \\
        [--backends zcatalog,pgcatalog]
    python benchmarks/run_benchmarks.py level1 --scales 2000,10000

``_backend``, ``_level1_build`` and ``_level1_query`` are the internal
subcommands the parents run in child processes (this same script).

The packages ``level1``, ``level2`` and the module ``shared`` are found
because Python puts this script's directory first on ``sys.path``.
"""
import argparse
import sys
import traceback

import level1
import level2


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    level2.add_parsers(sub)
    level1.add_parsers(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
