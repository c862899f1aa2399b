"""The ``_backend`` process of level2 (one per backend, started by the
parent): Zope + Plone on RelStorage on a fresh database, the site and its
content, the database settled, the query phase (and ``--profile``), the
result as JSON in ``--result-file``."""
import sys
import time

import psycopg
import shared
from Products.GenericSetup.registry import _profile_registry

from .measure import measure_mixed
from .measure import measure_queries
from .profile import profile_queries
from .site import build_site
from .workload import ADMIN
from .workload import DISTRIBUTION
from .workload import PGCATALOG_PROFILE
from .workload import SITE_ID
from .workload import expected_results
from .workload import make_plan


def run_backend(args):
    backend = args.name
    with_pg = shared.is_pg(backend)
    plan = make_plan(args.docs, args.modifications)
    result = {
        "backend": backend,
        "python": sys.version.split()[0],
        "versions": shared.versions(),
        "settings": {
            "docs": args.docs, "modifications": len(plan["mods"]),
            "iterations": args.iterations, "warmup": args.warmup,
            "cache_size": args.cache_size,
            "relstorage": shared.RELSTORAGE_SETTINGS,
            "distribution": DISTRIBUTION, "site_id": SITE_ID,
            "user": "%s (Manager, Zope root acl_users, site owner)" % ADMIN,
        },
    }
    db, result["zope_startup_s"] = shared.start_backend(
        backend, args.dsn, args.cache_size, args.env, "pgcatalog-bench-")
    shared.log(backend, "Zope started in %.1fs" % result["zope_startup_s"])
    check_configuration(with_pg, result)

    build_site(db, plan, with_pg, backend, result)

    with psycopg.connect(args.dsn) as pg:
        result["zodb_objects"] = pg.execute(
            "SELECT count(*) FROM object_state").fetchone()[0]
    # Settle the database as autovacuum does on a live site (dead row
    # versions from the writes above removed, planner statistics fresh),
    # for both backends alike: the query phase measures steady state.
    t0 = time.perf_counter()
    with psycopg.connect(args.dsn, autocommit=True) as pg:
        pg.execute("VACUUM (ANALYZE)")
    result["settle_ms"] = (time.perf_counter() - t0) * 1000
    result["queries"] = measure_queries(db, args)
    if with_pg:
        # imported here: the ZCatalog backend's process has no
        # plone.pgcatalog configuration to read
        from plone.pgcatalog.search import cache as result_cache
        result["result_cache"] = result_cache.stats()
    profile = profile_queries(db, args) if args.profile else None
    result["mixed"] = measure_mixed(db, args, [d["id"] for d in plan["docs"]])
    result["pickle_cache_after_queries"] = [
        {"size": c["size"], "non_ghost": c["ngsize"]}
        for c in db.cacheDetailSize()]
    result["expected"] = expected_results(plan, SITE_ID)
    if profile:
        result["profile"] = profile

    db.close()
    shared.write_json(args.result_file, result)
    shared.log(backend, "done")


def check_configuration(with_pg, result):
    """plone.pgcatalog's ZCML (its GenericSetup profile) must be loaded for
    pgcatalog and only there."""
    result["pgcatalog_zcml_loaded"] = (
        PGCATALOG_PROFILE in _profile_registry.listProfiles())
    if with_pg != result["pgcatalog_zcml_loaded"]:
        if with_pg:
            raise SystemExit(
                "pgcatalog backend: GenericSetup profile %r is not registered "
                "(plone.pgcatalog's configure.zcml must register it; "
                "plone.autoinclude loads it through the plone.autoinclude "
                "plugin entry point)." % PGCATALOG_PROFILE)
        raise SystemExit("zcatalog backend: plone.pgcatalog's ZCML was "
                         "loaded although it was excluded")
