"""The command line of level2 (wired into ``run_benchmarks.py``): ``level2``
and the hidden child subcommand ``_backend``."""
import argparse

from shared import add_child_options

from .parent import run_parent


def _common(p):
    p.add_argument("--docs", type=int, default=500)
    p.add_argument("--modifications", type=int, default=50)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--cache-size", type=int, default=400)


def run_backend(args):
    # Imported here, not at the top: the backend process imports Zope, Plone
    # and their catalogs at module level (about a second); the parent and
    # every other subcommand must not pay for that.
    from . import backend
    return backend.run_backend(args)


def add_parsers(sub):
    p = sub.add_parser("level2", help="real Plone site on RelStorage: "
                       "ZCatalog vs plone.pgcatalog")
    _common(p)
    p.add_argument("--backends", default="zcatalog,pgcatalog-engine,pgcatalog")
    p.add_argument("--output", help="write everything as JSON here")
    p.add_argument("--profile", action="store_true",
                   help="cProfile the query phase of the pgcatalog backend")
    p.add_argument("--profile-backends", default="pgcatalog",
                   help="backends --profile applies to (default pgcatalog)")
    p.add_argument("--pg-env", action="append", metavar="KEY=VALUE",
                   help="extra environment for the pgcatalog backend, "
                   "e.g. a switch that turns a result cache off")
    p.add_argument("--keep-databases", action="store_true",
                   help="do not drop the per-backend databases")
    p.set_defaults(func=run_parent)

    p = sub.add_parser("_backend", help=argparse.SUPPRESS)
    _common(p)
    add_child_options(p)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--profile-file")
    p.set_defaults(func=run_backend)
