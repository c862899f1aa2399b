"""The ``_level1_build`` child process: create ``/plone/portal_catalog`` on an
empty database, catalogue the plan's entries in transactions, ``VACUUM
(ANALYZE)``, and record what it cost (also in the database, for
``--reuse-databases``)."""
import json
import resource
import time

import psycopg
import transaction
from OFS.Folder import Folder

import shared
from shared import log
from shared import write_json

from .catalogdef import configure_catalog
from .common import PLAN_VERSION, SITE_ID, source_state
from .plan import Plan, make_stub_class


def _db_sizes(dsn):
    out = {}
    with psycopg.connect(dsn, autocommit=True) as pg:
        out["database_bytes"] = pg.execute(
            "SELECT pg_database_size(current_database())").fetchone()[0]
        rows = pg.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
            "n.nspname = 'public' AND c.relkind = 'r'").fetchall()
        tables = dict(rows)
        out["tables_bytes"] = tables
        out["zodb_bytes"] = sum(v for k, v in tables.items()
                                if not k.startswith(("pgcatalog_",
                                                     "level1_")))
        out["pgcatalog_bytes"] = sum(v for k, v in tables.items()
                                     if k.startswith("pgcatalog_"))
        out["zodb_objects"] = pg.execute(
            "SELECT count(*) FROM object_state").fetchone()[0]
        # the catalog's tables: heap, TOAST and indexes apart (the report's
        # bytes per entry per table and index)
        out["pgcatalog_relations"] = {
            name: {"heap": heap, "toast": total - heap - indexes,
                   "indexes": indexes}
            for name, heap, indexes, total in pg.execute(
                "SELECT c.relname, pg_relation_size(c.oid), "
                "pg_indexes_size(c.oid), pg_total_relation_size(c.oid) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = "
                "c.relnamespace WHERE n.nspname = 'public' AND c.relkind = "
                "'r' AND c.relname LIKE 'pgcatalog\\_%'").fetchall()}
    return out


def run_build(args):
    backend = args.name
    t0 = time.perf_counter()
    plan = Plan(args.scale, args.seed)
    log(backend, "plan of %d entries in %.1fs (%d folders, levels %s)"
         % (plan.n, time.perf_counter() - t0, plan.n_folders,
            plan.level_sizes))
    db, startup = shared.start_backend(
        backend, args.dsn, args.build_cache_size, args.env, "pgcatalog-l1-")
    log(backend, "Zope started in %.1fs" % startup)
    Stub = make_stub_class()

    conn = db.open()
    app = conn.root()["Application"]
    app._setObject(SITE_ID, Folder(SITE_ID))
    site = app[SITE_ID]
    if backend == "zcatalog":
        # Each backend imports only its own catalog class.
        from Products.CMFPlone.CatalogTool import CatalogTool
        tool = CatalogTool()
    else:
        from plone.pgcatalog.tool import PGCatalogTool
        tool = PGCatalogTool()
    site._setObject("portal_catalog", tool)
    tool = site["portal_catalog"]
    t_conf = time.perf_counter()
    config = configure_catalog(tool, backend)
    transaction.commit()
    config["seconds"] = time.perf_counter() - t_conf
    klass = type(tool.aq_base)
    log(backend, "catalog %s.%s: %d indexes, %d columns (stand-ins: %s)"
         % (klass.__module__, klass.__name__, len(config["indexes"]),
            len(config["columns"]), ", ".join(config["stand_ins"])))

    gen_ns = catalog_ns = commit_ns = 0
    progress = []
    started = time.perf_counter()
    every = args.commit_every
    log_every = max(every, (plan.n // 20) // every * every)
    next_log = log_every
    conn.getTransferCounts(True)
    loads = stores = 0
    stream = plan.entries()
    max_modified = args.max_modified_objects
    commits = early_commits = max_seen_modified = 0
    since_commit = 0
    for i in range(plan.n):
        a = time.perf_counter_ns()
        stub = Stub(next(stream))
        b = time.perf_counter_ns()
        tool.catalog_object(stub, uid=stub.path)
        c = time.perf_counter_ns()
        gen_ns += b - a
        catalog_ns += c - b
        since_commit += 1
        # RelStorage (PostgreSQL) takes one advisory lock per modified
        # object at commit; PostgreSQL's default lock table holds about
        # 64 * max_connections of them: commit before a ZCatalog
        # transaction modifies more objects than that.
        modified = len(getattr(conn, "_registered_objects", ()))
        max_seen_modified = max(max_seen_modified, modified)
        full = max_modified and modified >= max_modified
        if since_commit >= every or full or i + 1 == plan.n:
            if full and since_commit < every and i + 1 < plan.n:
                early_commits += 1
            commits += 1
            since_commit = 0
            c = time.perf_counter_ns()
            transaction.commit()
            conn.cacheGC()
            commit_ns += time.perf_counter_ns() - c
            n_load, n_store = conn.getTransferCounts(True)
            loads += n_load
            stores += n_store
            progress.append((i + 1, (catalog_ns + commit_ns) / 1e9))
            if i + 1 >= next_log or i + 1 == plan.n:
                next_log += log_every
                done = (catalog_ns + commit_ns) / 1e9
                log(backend, "%d/%d catalogued: %.1fs (%.0f/s; catalog_object"
                     " %.1fs, commit %.1fs, stub generation %.1fs)"
                     % (i + 1, plan.n, done, (i + 1) / done,
                        catalog_ns / 1e9, commit_ns / 1e9, gen_ns / 1e9))
    wall = time.perf_counter() - started
    count = len(tool)
    transaction.abort()
    conn.close()
    db.close()
    if count != plan.n:
        raise SystemExit("%s: catalog holds %d entries, expected %d"
                         % (backend, count, plan.n))

    t0 = time.perf_counter()
    with psycopg.connect(args.dsn, autocommit=True) as pg:
        pg.execute("VACUUM (ANALYZE)")
    vacuum_s = time.perf_counter() - t0
    sizes = _db_sizes(args.dsn)
    build_s = (catalog_ns + commit_ns) / 1e9
    result = {
        "backend": backend, "scale": plan.n, "seed": args.seed,
        "plan_version": PLAN_VERSION,
        "catalog_class": "%s.%s" % (klass.__module__, klass.__name__),
        "configuration": config,
        "zope_startup_s": startup,
        "commit_every": every,
        "max_modified_objects": max_modified,
        "commits": commits,
        "commits_early_for_modified_objects": early_commits,
        "max_modified_objects_seen": max_seen_modified,
        "build_cache_size": args.build_cache_size,
        "entries": count,
        "build_s": build_s,
        "catalog_object_s": catalog_ns / 1e9,
        "commit_s": commit_ns / 1e9,
        "stub_generation_s": gen_ns / 1e9,
        "wall_s": wall,
        "entries_per_s": plan.n / build_s if build_s else None,
        "vacuum_analyze_s": vacuum_s,
        "zodb_loads": loads, "zodb_stores": stores,
        "progress": progress[:: max(1, len(progress) // 200)]
        + ([progress[-1]] if progress else []),
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        / 1024.0,
        "sizes": sizes,
        "versions": shared.versions(),
        "source": source_state(),
    }
    with psycopg.connect(args.dsn, autocommit=True) as pg:
        pg.execute("CREATE TABLE IF NOT EXISTS level1_build_info "
                   "(info jsonb NOT NULL)")
        pg.execute("DELETE FROM level1_build_info")
        pg.execute("INSERT INTO level1_build_info VALUES (%s::jsonb)",
                   (json.dumps(result, default=str),))
    write_json(args.result_file, result)
    log(backend, "built %d entries in %.1fs (%.0f entries/s); VACUUM ANALYZE"
         " %.1fs; database %.0f MB" % (
             count, build_s, result["entries_per_s"] or 0, vacuum_s,
             sizes["database_bytes"] / 1e6))
