#!/usr/bin/env python
"""plone.pgcatalog benchmarks.

``level2``: a real Plone 6 site (plone.distribution "volto", no default
content) on RelStorage (PostgreSQL, history-free), once with the stock
ZCatalog and once with plone.pgcatalog installed by its profile; each
backend runs in its own subprocess against a fresh database on the same
PostgreSQL server.  See ``benchmarks/README.md`` and
``shared/reference/level2-workload.md`` for the workload.

Usage::

    python benchmarks/run_benchmarks.py level2 --docs 500 --iterations 50 \\
        --warmup 5 --cache-size 400 --output results.json [--profile] \\
        [--backends zcatalog,pgcatalog]

``_backend`` is the internal subcommand the parent runs once per backend.
"""
import argparse
import atexit
import cProfile
import hashlib
import io
import json
import math
import os
import platform
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback


BACKENDS = ("zcatalog", "pgcatalog")
PGCATALOG_PROFILE = "plone.pgcatalog:default"
DISTRIBUTION = "volto"
SITE_ID = "Plone"
ADMIN = "admin"
SEED = 42

# Pool of 15 subject tags; "Python" is the one P4 asks for.
TAGS = (
    "Python", "Plone", "Zope", "PostgreSQL", "Catalog", "Search",
    "Performance", "Security", "Workflow", "Volto", "React", "Database",
    "Indexing", "Caching", "Testing",
)

# id, label, query (``{site}`` is replaced by the site id), sorted?
SCENARIOS = (
    ("P3", "simple field match",
     {"portal_type": "Document"}, False),
    ("P4", "complex multi-index",
     {"portal_type": "Document", "review_state": "published",
      "Subject": "Python", "sort_on": "modified",
      "sort_order": "descending", "b_size": 20}, True),
    ("P5", "full text",
     {"SearchableText": "benchmark document"}, False),
    ("P6", "navigation",
     {"path": {"query": "/{site}", "depth": 1},
      "sort_on": "getObjPositionInParent"}, True),
    ("P8", "security filtered",
     {"portal_type": "Document", "review_state": "published",
      "allowedRolesAndUsers": ["Anonymous"]}, False),
    ("P9", "date sorted + pagination",
     {"sort_on": "created", "sort_order": "descending", "b_size": 50}, True),
)
SORTED_SCENARIOS = tuple(s[0] for s in SCENARIOS if s[3])
RENDER_BRAINS = 20

# RelStorage settings used for every backend (documented in README.md).
RELSTORAGE_SETTINGS = {
    "keep_history": False,       # history-free
    "driver": "psycopg2",        # RelStorage 4.3's CPython PostgreSQL driver
    "cache_local_mb": 10,        # RelStorage default in-process pickle cache
    "cache_local_dir": None,     # no persistent cache files: cold at start
    "cache_servers": (),         # no memcache
    "shared_blob_dir": False,    # blobs in the database, local blob cache
    "commit_lock_timeout": 30,
}


def _scenario_query(query, site_id):
    def fill(value):
        if isinstance(value, str):
            return value.replace("{site}", site_id)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value
    return fill(query)


def _log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr,
          flush=True)


# ---------------------------------------------------------------------------
# Deterministic content plan (identical for every backend)
# ---------------------------------------------------------------------------

MINUTES_PER_YEAR = 365 * 24 * 60


def make_plan(n_docs, n_mods):
    """Everything random about the content, drawn from random.Random(42).

    Dates are explicit so that the sorted scenarios have no ties at
    ZCatalog's DateIndex resolution (one minute) and do not depend on the
    wall clock: ``created`` = 2024-01-01T00:00Z + a distinct random minute
    of 2024, ``modified`` = created + up to 30 days (distinct minutes too);
    the documents touched by the modification phase get
    2025-01-01T00:00Z + k minutes (k = 1..n_mods).  Titles keep
    "Benchmark Document" so P5 matches every document before and after the
    modification phase.
    """
    rng = random.Random(SEED)
    n_published = round(n_docs * 0.7)
    n_pending = round(n_docs * 0.1)
    states = (["published"] * n_published + ["pending"] * n_pending
              + ["private"] * (n_docs - n_published - n_pending))
    rng.shuffle(states)
    created = rng.sample(range(MINUTES_PER_YEAR), n_docs)
    used_modified = set()
    docs = []
    for i in range(n_docs):
        tag = rng.choice(TAGS)
        tag_a, tag_b = rng.sample(TAGS, 2)
        subjects = rng.sample(TAGS, rng.randint(0, 4))
        modified = created[i] + rng.randint(0, 30 * 24 * 60)
        while modified in used_modified:
            modified += 1
        used_modified.add(modified)
        docs.append({
            "id": "benchmark-document-%d" % i,
            "title": "Benchmark Document %d \u2014 %s" % (i, tag),
            "description": ("A benchmark document about %s and %s."
                            % (tag_a, tag_b)),
            "subjects": subjects,
            "state": states[i],
            "created_min": created[i],
            "modified_min": modified,
        })
    mods = []
    for k, i in enumerate(rng.sample(range(n_docs), min(n_mods, n_docs))):
        mods.append({
            "index": i,
            "title": "Benchmark Document %d \u2014 revised %d" % (i, k + 1),
            "modified_min": MINUTES_PER_YEAR + k + 1,
        })
    return {"docs": docs, "mods": mods}


def expected_results(plan, site_id):
    """Expected counts/ordering computed from the plan alone (an oracle
    independent of both catalogs).  Only documents are considered; the
    parent compares each backend against it (site root excluded)."""
    docs = [dict(d) for d in plan["docs"]]
    for m in plan["mods"]:
        docs[m["index"]]["modified_min"] = m["modified_min"]
        docs[m["index"]]["title"] = m["title"]

    def path(d):
        return "/%s/%s" % (site_id, d["id"])

    published = [d for d in docs if d["state"] == "published"]
    p4 = sorted((d for d in published if "Python" in d["subjects"]),
                key=lambda d: -d["modified_min"])
    p9 = sorted(docs, key=lambda d: -d["created_min"])
    return {
        "P3": {"actual": len(docs), "paths": sorted(map(path, docs))},
        "P4": {"actual": len(p4), "paths": [path(d) for d in p4[:20]]},
        "P5": {"actual": len(docs), "paths": sorted(map(path, docs))},
        "P6": {"actual": len(docs), "paths": [path(d) for d in docs]},
        "P8": {"actual": len(published),
               "paths": sorted(map(path, published))},
        "P9": {"actual": len(docs), "paths": [path(d) for d in p9[:50]]},
    }


def _minutes_to_datetime(minutes):
    from DateTime import DateTime
    return DateTime("2024/01/01 00:00:00 UTC") + minutes / 1440.0


# ---------------------------------------------------------------------------
# Backend subprocess: Zope + Plone on RelStorage, the workload, JSON out
# ---------------------------------------------------------------------------

def open_database(dsn, cache_size, workdir):
    """History-free RelStorage at ``dsn`` with the settings above (the
    package's own helper, shared with the tests)."""
    from plone.pgcatalog.zopeapp import open_relstorage
    return open_relstorage(dsn, cache_size, workdir, **RELSTORAGE_SETTINGS)


def start_zope(db, workdir, with_pgcatalog):
    """Start Zope the way ``Zope2.startup_wsgi()`` does for a WSGI instance,
    on ``db`` (see plone.pgcatalog.zopeapp).  plone.autoinclude loads every
    installed Plone add-on (as in a real instance); for the ZCatalog backend
    plone.pgcatalog is left out so the stock site carries none of its
    configuration."""
    from plone.pgcatalog.zopeapp import start_zope as start
    start(db, workdir, with_pgcatalog=with_pgcatalog)


class Request:
    """One synthetic request: its own ZODB connection from the pool, a
    fresh HTTPRequest, the admin (Manager) logged in, the site as local
    site, and the PubStart/PubSuccess events the WSGI publisher fires.
    Leaving aborts the transaction and returns the connection to the pool,
    which trims its cache to ``cache-size`` (Connection.close -> incrgc)."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        import transaction
        from AccessControl.SecurityManagement import newSecurityManager
        from Testing.makerequest import makerequest
        from zope.component.hooks import setSite
        from zope.event import notify
        from zope.globalrequest import setRequest
        from ZPublisher.pubevents import PubStart

        self.conn = self.db.open()
        transaction.begin()       # RelStorage polls for invalidations here
        self.app = makerequest(self.conn.root()["Application"])
        self.request = self.app.REQUEST
        setRequest(self.request)
        notify(PubStart(self.request))
        self.site = self.app[SITE_ID]
        setSite(self.site)
        acl = self.app.acl_users
        newSecurityManager(self.request, acl.getUser(ADMIN).__of__(acl))
        return self

    def __exit__(self, *exc):
        import transaction
        from AccessControl.SecurityManagement import noSecurityManager
        from zope.component.hooks import setSite
        from zope.event import notify
        from zope.globalrequest import setRequest
        from ZPublisher.pubevents import PubSuccess

        try:
            # A read-only request: nothing to commit, so abort (cheaper,
            # same effect on the connection) and end it like the WSGI
            # publisher ends a successful request.
            transaction.abort()
            notify(PubSuccess(self.request))
        finally:
            noSecurityManager()
            setSite(None)
            setRequest(None)
            self.request.close()
            self.conn.close()
        return False


def _stats(samples_ns):
    ms = sorted(s / 1e6 for s in samples_ns)
    if not ms:
        return {}
    p95 = ms[max(0, math.ceil(0.95 * len(ms)) - 1)]   # nearest rank
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p95_ms": p95,
        "mean_ms": statistics.fmean(ms),
        "min_ms": ms[0],
        "max_ms": ms[-1],
    }


def _versions():
    from importlib.metadata import version, PackageNotFoundError
    out = {}
    for name in ("Products.CMFPlone", "Zope", "ZODB", "RelStorage",
                 "Products.ZCatalog", "plone.distribution", "plone.volto",
                 "psycopg", "psycopg2-binary", "plone.pgcatalog"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _classify_profile(stats):
    """Split profiled time: psycopg (v3, plone.pgcatalog's SQL round trips),
    psycopg2 (RelStorage's ZODB loads), rest.  Time of a driver is the
    cumulative time of the calls *into* it from outside it."""
    def kind(func):
        filename, _line, name = func
        text = filename + " " + name
        if "psycopg2" in text:
            return "psycopg2"
        if ("/psycopg/" in filename or "/psycopg_pool/" in filename
                or "/psycopg_binary/" in filename or "psycopg_binary" in name
                or "'psycopg." in name):
            return "psycopg"
        return None

    total = stats.total_tt
    spent = {"psycopg": 0.0, "psycopg2": 0.0}
    calls = {"psycopg": 0, "psycopg2": 0}
    for func, (_cc, _nc, _tt, _ct, callers) in stats.stats.items():
        k = kind(func)
        if k is None:
            continue
        for caller, edge in callers.items():
            if kind(caller) != k:
                # edge = (cc, nc, tt, ct) for this caller -> func
                spent[k] += edge[3]
                calls[k] += edge[1]
    rest = max(0.0, total - spent["psycopg"] - spent["psycopg2"])
    return {
        "total_s": total,
        "psycopg_s": spent["psycopg"],
        "psycopg_calls_in": calls["psycopg"],
        "psycopg2_relstorage_s": spent["psycopg2"],
        "psycopg2_calls_in": calls["psycopg2"],
        "rest_s": rest,
    }


def run_backend(args):
    import transaction

    backend = args.name
    with_pg = backend == "pgcatalog"
    if with_pg:
        os.environ["PGCATALOG_DSN"] = args.dsn
    for item in args.env or ():
        key, _, value = item.partition("=")
        os.environ[key] = value

    import logging
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    plan = make_plan(args.docs, args.modifications)
    result = {
        "backend": backend,
        "python": sys.version.split()[0],
        "versions": _versions(),
        "settings": {
            "docs": args.docs, "modifications": len(plan["mods"]),
            "iterations": args.iterations, "warmup": args.warmup,
            "cache_size": args.cache_size, "relstorage": RELSTORAGE_SETTINGS,
            "distribution": DISTRIBUTION, "site_id": SITE_ID,
            "user": "%s (Manager, Zope root acl_users, site owner)" % ADMIN,
        },
    }

    workdir = tempfile.mkdtemp(prefix="pgcatalog-bench-%s-" % backend)
    atexit.register(shutil.rmtree, workdir, True)
    t0 = time.perf_counter()
    db = open_database(args.dsn, args.cache_size, workdir)
    start_zope(db, workdir, with_pg)
    result["zope_startup_s"] = time.perf_counter() - t0
    _log(backend, "Zope started in %.1fs" % result["zope_startup_s"])

    from Products.GenericSetup.registry import _profile_registry
    result["pgcatalog_zcml_loaded"] = (
        PGCATALOG_PROFILE in _profile_registry.listProfiles())
    if with_pg != result["pgcatalog_zcml_loaded"]:
        if with_pg:
            raise SystemExit(
                "pgcatalog backend: GenericSetup profile %r is not registered "
                "(plone.pgcatalog's configure.zcml must register it; "
                "plone.autoinclude loads it through the z3c.autoinclude "
                "entry point)." % PGCATALOG_PROFILE)
        raise SystemExit("zcatalog backend: plone.pgcatalog's ZCML was "
                         "loaded although it was excluded")

    # -- site creation ----------------------------------------------------
    from AccessControl.SecurityManagement import newSecurityManager
    from AccessControl.SecurityManagement import noSecurityManager
    from Testing.makerequest import makerequest
    from zope.component.hooks import setSite
    from zope.globalrequest import setRequest
    from plone.distribution.api import site as site_api

    conn = db.open()
    app = makerequest(conn.root()["Application"])
    setRequest(app.REQUEST)
    app.acl_users.userFolderAddUser(ADMIN, "admin", ["Manager"], [])
    transaction.commit()
    acl = app.acl_users
    newSecurityManager(None, acl.getUser(ADMIN).__of__(acl))
    answers = {
        "site_id": SITE_ID,
        "title": "Benchmark Site",
        "description": "plone.pgcatalog level2 benchmark",
        "default_language": "en",
        "portal_timezone": "UTC",
        "setup_content": False,
    }
    t0 = time.perf_counter()
    site_api.create(app, DISTRIBUTION, answers)
    t_site = time.perf_counter() - t0
    site = app[SITE_ID]
    setSite(site)
    t_profile = 0.0
    if with_pg:
        t0 = time.perf_counter()
        site.portal_setup.runAllImportStepsFromProfile(
            "profile-" + PGCATALOG_PROFILE)
        transaction.commit()
        t_profile = time.perf_counter() - t0
    catalog = site.portal_catalog
    from Acquisition import aq_base
    klass = type(aq_base(catalog))
    result["catalog_class"] = "%s.%s" % (klass.__module__, klass.__name__)
    result["site_creation"] = {
        "distribution_ms": t_site * 1000,
        "pgcatalog_profile_ms": t_profile * 1000,
        "total_ms": (t_site + t_profile) * 1000,
    }
    _log(backend, "site created in %.0f ms (+ profile %.0f ms), catalog %s"
         % (t_site * 1000, t_profile * 1000, result["catalog_class"]))
    if with_pg and klass.__module__.startswith("Products.CMFPlone"):
        raise SystemExit("pgcatalog backend: portal_catalog is still %s "
                         "after the profile" % result["catalog_class"])

    # -- content creation -------------------------------------------------
    wf = site.portal_workflow
    times, loads, stores = [], [], []
    transitions = {"published": ("publish",), "pending": ("submit",),
                   "private": ()}
    conn.getTransferCounts(True)
    for doc in plan["docs"]:
        t0 = time.perf_counter_ns()
        site.invokeFactory("Document", doc["id"], title=doc["title"],
                           description=doc["description"])
        obj = site[doc["id"]]
        obj.setSubject(doc["subjects"])
        for tr in transitions[doc["state"]]:
            wf.doActionFor(obj, tr)
        obj.creation_date = _minutes_to_datetime(doc["created_min"])
        obj.setModificationDate(_minutes_to_datetime(doc["modified_min"]))
        transaction.commit()
        times.append(time.perf_counter_ns() - t0)
        n_load, n_store = conn.getTransferCounts(True)
        loads.append(n_load)
        stores.append(n_store)
    result["creation"] = dict(
        _stats(times), total_s=sum(times) / 1e9,
        stores_per_doc=statistics.fmean(stores),
        loads_per_doc=statistics.fmean(loads),
        stores_per_doc_median=statistics.median(stores),
        samples_ms=[t / 1e6 for t in times], stores=stores)
    _log(backend, "created %d docs: %.1f ms/doc (mean), %.1f stores/doc"
         % (len(times), result["creation"]["mean_ms"],
            result["creation"]["stores_per_doc"]))

    # -- modification -----------------------------------------------------
    times, loads, stores = [], [], []
    for mod in plan["mods"]:
        doc = plan["docs"][mod["index"]]
        t0 = time.perf_counter_ns()
        obj = site[doc["id"]]
        obj.setTitle(mod["title"])
        obj.reindexObject()
        # reindexObject() stamped "now"; the indexing queue runs at commit,
        # so the deterministic date below is what gets indexed.
        obj.setModificationDate(_minutes_to_datetime(mod["modified_min"]))
        transaction.commit()
        times.append(time.perf_counter_ns() - t0)
        n_load, n_store = conn.getTransferCounts(True)
        loads.append(n_load)
        stores.append(n_store)
    result["modification"] = dict(
        _stats(times), total_s=sum(times) / 1e9,
        stores_per_doc=statistics.fmean(stores) if stores else 0,
        loads_per_doc=statistics.fmean(loads) if loads else 0,
        samples_ms=[t / 1e6 for t in times])
    _log(backend, "modified %d docs: %.1f ms/doc (mean)"
         % (len(times), result["modification"].get("mean_ms", 0)))

    # Content fingerprint read from the objects (not the catalog), so the
    # parent can check both backends hold the same content.
    digest = hashlib.sha256()
    for doc in plan["docs"]:
        obj = site[doc["id"]]
        digest.update(repr((
            obj.getId(), obj.Title(), obj.Description(), obj.Subject(),
            wf.getInfoFor(obj, "review_state"), obj.created().ISO8601(),
            obj.modified().ISO8601())).encode())
    result["content_sha256"] = digest.hexdigest()
    result["workflow_chain"] = list(wf.getChainForPortalType("Document"))

    noSecurityManager()
    setSite(None)
    setRequest(None)
    transaction.abort()
    app.REQUEST.close()
    conn.close()

    # -- queries ----------------------------------------------------------
    import psycopg
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
    result["queries"] = run_queries(db, args)
    result["pickle_cache_after_queries"] = [
        {"size": c["size"], "non_ghost": c["ngsize"]}
        for c in db.cacheDetailSize()]
    result["expected"] = expected_results(plan, SITE_ID)
    if args.profile_report:
        result["profile"] = args.profile_report

    db.close()
    with open(args.result_file, "w") as f:
        json.dump(result, f, indent=1)
    _log(backend, "done")


def run_queries(db, args):
    profiler = None

    def timed(query, render):
        with Request(db) as req:
            from Products.CMFCore.utils import getToolByName
            catalog = getToolByName(req.site, "portal_catalog")
            req.conn.getTransferCounts(True)
            if profiler is not None:
                profiler.enable()
            t0 = time.perf_counter_ns()
            results = catalog.searchResults(**query)
            n = len(results)
            if render:
                for brain in results[:RENDER_BRAINS]:
                    brain.getPath()
                    brain.getURL()
                    brain.Title
                    brain.modified
                    brain.review_state
            elapsed = time.perf_counter_ns() - t0
            if profiler is not None:
                profiler.disable()
            n_load, _ = req.conn.getTransferCounts(True)
        return elapsed, n, n_load

    out = {}
    for sid, label, template, is_sorted in SCENARIOS:
        query = _scenario_query(template, SITE_ID)
        warmup_loads = 0
        for _ in range(args.warmup):
            warmup_loads += timed(query, False)[2]
            warmup_loads += timed(query, True)[2]
        samples = {False: [], True: []}
        load_counts = {False: [], True: []}
        lengths = set()
        for _ in range(args.iterations):
            for render in (False, True):    # interleaved: same conditions
                elapsed, n, n_load = timed(query, render)
                samples[render].append(elapsed)
                load_counts[render].append(n_load)
                lengths.add(n)
        # One untimed request for the result itself (parity).
        with Request(db) as req:
            results = req.site.portal_catalog.searchResults(**query)
            paths = [b.getPath() for b in results]
            actual = getattr(results, "actual_result_count", len(results))
            count = len(results)
        entry = {
            "label": label,
            "query": query,
            "len": _stats(samples[False]),
            "render": _stats(samples[True]),
            "loads_len": statistics.fmean(load_counts[False]),
            "loads_render": statistics.fmean(load_counts[True]),
            "loads_warmup_total": warmup_loads,
            "count": count,
            "actual_result_count": actual,
            "counts_seen": sorted(lengths),
            "sorted": is_sorted,
            "paths_sha256": hashlib.sha256(
                "\n".join(paths if is_sorted else sorted(paths)).encode()
            ).hexdigest(),
        }
        entry["paths"] = paths if is_sorted else sorted(paths)
        out[sid] = entry
        _log(args.name, "%s len %.3f/%.3f ms  render %.3f/%.3f ms  "
             "(median/p95) count=%d actual=%s loads=%.1f/%.1f"
             % (sid, entry["len"]["median_ms"], entry["len"]["p95_ms"],
                entry["render"]["median_ms"], entry["render"]["p95_ms"],
                count, actual, entry["loads_len"], entry["loads_render"]))

    args.profile_report = None
    if args.profile:
        # A separate pass after the measured one, so cProfile's overhead
        # never reaches the reported timings: the same requests again
        # (warm-up + iterations, len and render), profiled, not timed.
        profiler = cProfile.Profile()
        for sid, label, template, is_sorted in SCENARIOS:
            query = _scenario_query(template, SITE_ID)
            for _ in range(args.warmup + args.iterations):
                timed(query, False)
                timed(query, True)
        stream = io.StringIO()
        if args.profile_file:
            profiler.dump_stats(args.profile_file)
        stats = pstats.Stats(profiler, stream=stream)
        split = _classify_profile(stats)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        n_queries = len(SCENARIOS) * 2 * (args.warmup + args.iterations)
        header = (
            "cProfile of the %s query phase (separate, untimed pass of "
            "%d queries):\n"
            "  total %.3fs | psycopg (pgcatalog SQL) %.3fs (%.0f%%, %d calls "
            "in) | psycopg2 (RelStorage loads) %.3fs (%.0f%%) | rest %.3fs "
            "(%.0f%%)\n" % (
                args.name, n_queries, split["total_s"], split["psycopg_s"],
                100 * split["psycopg_s"] / (split["total_s"] or 1),
                split["psycopg_calls_in"], split["psycopg2_relstorage_s"],
                100 * split["psycopg2_relstorage_s"] / (split["total_s"] or 1),
                split["rest_s"], 100 * split["rest_s"] / (split["total_s"] or 1)))
        print(header + stream.getvalue(), file=sys.stderr, flush=True)
        args.profile_report = dict(split, queries=n_queries, text=header)
    return out


# ---------------------------------------------------------------------------
# Parent: one subprocess per backend, table, parity, JSON
# ---------------------------------------------------------------------------

def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _environment(server_dsn):
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    host = conninfo_to_dict(server_dsn).get("host") or ""
    kind = ("unix socket" if not host or host.startswith("/")
            else "tcp (%s)" % host)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]
        pg_full = conn.execute("SELECT version()").fetchone()[0]
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "postgresql": pg_version,
        "postgresql_full": pg_full,
        "connection": kind,
        "loadavg_start": os.getloadavg(),
        "pgcatalog_dsn_from_env": bool(os.environ.get("PGCATALOG_DSN")),
    }


def run_parent(args):
    from plone.pgcatalog import pgserver

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        if b not in BACKENDS:
            raise SystemExit("unknown backend %r (known: %s)"
                             % (b, ", ".join(BACKENDS)))
    server = pgserver.server_dsn()
    env_info = _environment(server)
    _log("PostgreSQL %s over %s; backends: %s"
         % (env_info["postgresql"], env_info["connection"],
            ", ".join(backends)))

    results, failures = {}, {}
    started = time.time()
    for name in backends:
        dsn = pgserver.fresh_database("bench_%s" % name)
        fd, result_file = tempfile.mkstemp(prefix="bench-%s-" % name,
                                           suffix=".json")
        os.close(fd)
        cmd = [sys.executable, os.path.abspath(__file__), "_backend",
               "--name", name, "--dsn", dsn,
               "--docs", str(args.docs),
               "--modifications", str(args.modifications),
               "--iterations", str(args.iterations),
               "--warmup", str(args.warmup),
               "--cache-size", str(args.cache_size),
               "--result-file", result_file]
        if args.profile and name in args.profile_backends.split(","):
            cmd.append("--profile")
            if args.output:
                cmd += ["--profile-file", "%s.%s.pstats" % (
                    os.path.splitext(args.output)[0], name)]
        for item in (args.pg_env or ()) if name == "pgcatalog" else ():
            cmd += ["--env", item]
        child_env = dict(os.environ)
        child_env.pop("PGCATALOG_DSN", None)
        if name == "pgcatalog":
            child_env["PGCATALOG_DSN"] = dsn
        _log("backend %s: fresh database %s"
             % (name, dsn.split("dbname=")[-1].split()[0]))
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=child_env)
        wall = time.perf_counter() - t0
        try:
            if proc.returncode == 0:
                with open(result_file) as f:
                    results[name] = json.load(f)
                results[name]["wall_s"] = wall
            else:
                failures[name] = "exit code %d" % proc.returncode
                _log("backend %s FAILED (%s)" % (name, failures[name]))
        finally:
            os.unlink(result_file)
            if not args.keep_databases:
                pgserver.drop_database(dsn)

    env_info["loadavg_end"] = os.getloadavg()
    parity = check_parity(results)
    report = format_report(results, failures, parity, env_info, args)
    print(report)
    if args.output:
        with open(args.output, "w") as f:
            json.dump({
                "benchmark": "level2",
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "duration_s": time.time() - started,
                "environment": env_info,
                "arguments": {k: v for k, v in vars(args).items()
                              if k != "func"},
                "scenarios": {s[0]: {"label": s[1], "query": s[2],
                                     "sorted": s[3]} for s in SCENARIOS},
                "backends": results,
                "failures": failures,
                "parity": parity,
                "table": report,
            }, f, indent=1, default=str)
        _log("wrote", args.output)
    if failures or not parity["ok"]:
        return 1
    return 0


def check_parity(results):
    """Counts, result sets and (for P4/P6/P9) the ordered paths must agree
    between the backends; each backend is also checked against the
    plan-derived oracle (documents only)."""
    problems, checks = [], 0
    names = list(results)
    for name, res in results.items():
        expected = res.get("expected", {})
        for sid, exp in expected.items():
            got = res["queries"][sid]
            doc_paths = [p for p in got["paths"]
                         if p.startswith("/%s/" % SITE_ID)]
            checks += 1
            if sid in ("P4", "P9"):
                ok = doc_paths[:len(exp["paths"])] == exp["paths"][
                    :len(doc_paths)]
            else:
                ok = doc_paths == exp["paths"]
            if not ok:
                problems.append("%s %s: result paths differ from the "
                                "plan-derived expectation" % (name, sid))
            if len(got["counts_seen"]) != 1:
                problems.append("%s %s: len() varied between iterations: %s"
                                % (name, sid, got["counts_seen"]))
    if len(names) >= 2:
        ref = names[0]
        for other in names[1:]:
            a, b = results[ref], results[other]
            checks += 1
            if a.get("content_sha256") != b.get("content_sha256"):
                problems.append("content fingerprint differs: %s vs %s"
                                % (ref, other))
            for sid, _label, _q, is_sorted in SCENARIOS:
                qa, qb = a["queries"][sid], b["queries"][sid]
                for key in ("count", "actual_result_count"):
                    checks += 1
                    if qa[key] != qb[key]:
                        problems.append("%s %s: %s=%s, %s=%s" % (
                            sid, key, ref, qa[key], other, qb[key]))
                checks += 1
                if qa["paths"] != qb["paths"]:
                    what = "ordered paths" if is_sorted else "result set"
                    first = next((i for i, (x, y) in enumerate(
                        zip(qa["paths"], qb["paths"])) if x != y),
                        min(len(qa["paths"]), len(qb["paths"])))
                    problems.append(
                        "%s: %s differ (first difference at #%d: %s=%r, "
                        "%s=%r)" % (
                            sid, what, first, ref,
                            qa["paths"][first] if first < len(qa["paths"])
                            else None, other,
                            qb["paths"][first] if first < len(qb["paths"])
                            else None))
    return {"ok": not problems, "checks": checks, "problems": problems,
            "compared": names}


def _fmt(value, unit=""):
    if value is None:
        return "-"
    if abs(value) >= 100:
        return "%.0f%s" % (value, unit)
    if abs(value) >= 10:
        return "%.1f%s" % (value, unit)
    return "%.3g%s" % (value, unit) if abs(value) < 1 else "%.2f%s" % (
        value, unit)


def format_report(results, failures, parity, env_info, args):
    names = [n for n in BACKENDS if n in results]
    lines = []
    if not names:
        lines.append("level2: no backend finished.")
        for n, why in failures.items():
            lines.append("BACKEND %s FAILED: %s (see its output above)"
                         % (n, why))
        lines.append("PARITY: FAILED (nothing to compare)")
        return "\n".join(lines)
    lines.append("level2: %d docs, %d iterations (+%d warm-up), cache-size "
                 "%d | %s | PostgreSQL %s over %s | Python %s"
                 % (args.docs, args.iterations, args.warmup, args.cache_size,
                    env_info["cpu_model"], env_info["postgresql"],
                    env_info["connection"], env_info["python"]))
    lines.append("load average (1/5/15 min) at start %s, at end %s%s" % (
        "/".join("%.2f" % x for x in env_info["loadavg_start"]),
        "/".join("%.2f" % x for x in env_info["loadavg_end"]),
        "  <- busy machine: timings are noisy"
        if max(env_info["loadavg_start"][0], env_info["loadavg_end"][0])
        > (os.cpu_count() or 1) * 0.75 else ""))
    header = ["metric"] + names
    ratio = "zcatalog" in results and "pgcatalog" in results
    if ratio:
        header.append("pg/zc")
    rows = []

    def row(label, getter, unit=""):
        vals = []
        for n in names:
            try:
                vals.append(getter(results[n]))
            except (KeyError, TypeError):
                vals.append(None)
        cells = [label] + [_fmt(v, unit) for v in vals]
        if ratio:
            a = vals[names.index("pgcatalog")]
            b = vals[names.index("zcatalog")]
            cells.append("%.2fx" % (a / b) if a is not None and b else "-")
        rows.append(cells)

    row("site creation (ms)", lambda r: r["site_creation"]["total_ms"])
    if "pgcatalog" in results:
        row("  of which pgcatalog profile (ms)",
            lambda r: r["site_creation"]["pgcatalog_profile_ms"])
    row("creation ms/doc (mean)", lambda r: r["creation"]["mean_ms"])
    row("creation ms/doc (median)", lambda r: r["creation"]["median_ms"])
    row("creation ms/doc (p95)", lambda r: r["creation"]["p95_ms"])
    row("modification ms/doc (mean)", lambda r: r["modification"]["mean_ms"])
    row("modification ms/doc (median)",
        lambda r: r["modification"]["median_ms"])
    row("ZODB stores per created doc", lambda r: r["creation"]["stores_per_doc"])
    row("ZODB loads per created doc", lambda r: r["creation"]["loads_per_doc"])
    row("ZODB stores per modification",
        lambda r: r["modification"]["stores_per_doc"])
    row("ZODB objects after content", lambda r: r["zodb_objects"])
    for sid, label, _q, _s in SCENARIOS:
        for mode in ("len", "render"):
            for stat in ("median_ms", "p95_ms"):
                row("%s %s %s %s (ms)" % (sid, label, mode, stat[:-3]),
                    lambda r, sid=sid, mode=mode, stat=stat:
                    r["queries"][sid][mode][stat])
        row("%s loads/query len|render" % sid,
            lambda r, sid=sid: r["queries"][sid]["loads_len"])
        rows[-1][1:1 + len(names)] = [
            "%s|%s" % (_fmt(results[n]["queries"][sid]["loads_len"]),
                       _fmt(results[n]["queries"][sid]["loads_render"]))
            for n in names]
        row("%s count (actual)" % sid,
            lambda r, sid=sid: r["queries"][sid]["count"])
        rows[-1][1:1 + len(names)] = [
            "%d (%d)" % (results[n]["queries"][sid]["count"],
                         results[n]["queries"][sid]["actual_result_count"])
            for n in names]
        if ratio:
            rows[-1][-1] = ""
    widths = [max(len(str(c[i])) for c in rows + [header])
              for i in range(len(header))]
    fmt_line = "  ".join("%%-%ds" % widths[0] if i == 0 else "%%%ds" % w
                         for i, w in enumerate(widths))
    lines.append(fmt_line % tuple(header))
    lines.append(fmt_line % tuple("-" * w for w in widths))
    for cells in rows:
        lines.append(fmt_line % tuple(cells))
    for n in names:
        prof = results[n].get("profile")
        if prof:
            lines.append(prof["text"].rstrip())
    for n, why in failures.items():
        lines.append("BACKEND %s FAILED: %s (see its output above)" % (n, why))
    if parity["ok"]:
        lines.append("PARITY: OK (%d checks; backends compared: %s; each "
                     "also checked against the plan-derived oracle)"
                     % (parity["checks"], ", ".join(parity["compared"])
                        or "none"))
    else:
        lines.append("PARITY: FAILED (%d problems)" % len(parity["problems"]))
        for p in parity["problems"]:
            lines.append("  PARITY FAILURE: " + p)
    return "\n".join(lines)


# ---------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--docs", type=int, default=500)
        p.add_argument("--modifications", type=int, default=50)
        p.add_argument("--iterations", type=int, default=50)
        p.add_argument("--warmup", type=int, default=5)
        p.add_argument("--cache-size", type=int, default=400)

    p = sub.add_parser("level2", help="real Plone site on RelStorage: "
                       "ZCatalog vs plone.pgcatalog")
    common(p)
    p.add_argument("--backends", default="zcatalog,pgcatalog")
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
    common(p)
    p.add_argument("--name", required=True, choices=BACKENDS)
    p.add_argument("--dsn", required=True)
    p.add_argument("--result-file", required=True)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--profile-file")
    p.add_argument("--env", action="append")
    p.set_defaults(func=run_backend, profile_report=None)

    # level1 (and its concurrency run) live in the package benchmarks/level1/
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import level1
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
