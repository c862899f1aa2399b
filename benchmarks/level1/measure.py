"""The ``_level1_query`` child process: time the queries in fresh read-only
requests, keep their results for the parity check, and measure queries/s
from several threads."""
import hashlib
import resource
import statistics
import threading
import time
import traceback

import transaction
from Testing.makerequest import makerequest
from zope.globalrequest import setRequest

import shared
from shared import log
from shared import write_json

from .common import MIN_ITERATIONS, SITE_ID, source_state
from .plan import Plan
from .queries import make_queries, sort_key_value


class Request:
    """A read-only request: a pooled ZODB connection, a new transaction
    (RelStorage polls for invalidations), a fresh HTTPRequest; afterwards
    abort and close (the connection's cache is trimmed to cache-size).

    Not ``plone.pgcatalog.testing.zopeapp.Request`` nor ``level2.measure.Request``:
    both log a user in and make the object at the site id the local site,
    which needs a Plone site; here ``/plone`` is a plain OFS folder and the
    queries run unrestricted, with no user and no local site."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        self.conn = self.db.open()
        transaction.begin()
        self.app = makerequest(self.conn.root()["Application"])
        self.request = self.app.REQUEST
        setRequest(self.request)
        self.catalog = self.app[SITE_ID]["portal_catalog"]
        return self

    def __exit__(self, *exc):
        try:
            transaction.abort()
        finally:
            setRequest(None)
            self.request.close()
            self.conn.close()
        return False


def _execute(catalog, kind, query, render):
    """Run one query; returns its length."""
    if kind == "unique":
        return len(catalog.uniqueValuesFor(query))
    results = catalog.unrestrictedSearchResults(**query)
    n = len(results)
    if render:
        shared.render(results)
    return n


def run_query_process(args):
    backend = args.name
    plan = Plan(args.scale, args.seed)
    db, startup = shared.start_backend(
        backend, args.dsn, args.cache_size, args.env, "pgcatalog-l1-",
        ro_replica=args.ro_replica)
    db.setPoolSize(max([8] + args.threads) + 2)
    log(backend, "query process: Zope started in %.1fs, cache-size %d"
         % (startup, args.cache_size))
    queries = make_queries(plan)
    if args.only:
        queries = [q for q in queries if q[0] in args.only.split(",")]
    result = {"backend": backend, "scale": plan.n, "zope_startup_s": startup,
              "cache_size": args.cache_size, "queries": {},
              "source": source_state()}

    def timed(kind, query, render):
        with Request(db) as req:
            req.conn.getTransferCounts(True)
            t0 = time.perf_counter_ns()
            n = _execute(req.catalog, kind, query, render)
            elapsed = time.perf_counter_ns() - t0
            n_load, _ = req.conn.getTransferCounts(True)
        return elapsed, n, n_load

    if not args.skip_queries:
        for qid, label, kind, variants, sort_key in queries:
            first = None
            for w in range(args.warmup):
                query = variants[w % len(variants)]
                e, _, _ = timed(kind, query, False)
                if first is None:
                    first = e
                timed(kind, query, True)
            samples = {False: [], True: []}
            loads = {False: [], True: []}
            lengths = {}
            started = time.perf_counter()
            for it in range(args.iterations):
                if it >= MIN_ITERATIONS and args.max_seconds_per_query and \
                        time.perf_counter() - started > \
                        args.max_seconds_per_query:
                    break
                v = (args.warmup + it) % len(variants)
                for render in (False, True):
                    e, n, n_load = timed(kind, variants[v], render)
                    samples[render].append(e)
                    loads[render].append(n_load)
                    lengths.setdefault(v, set()).add(n)
            entry = {
                "label": label, "kind": kind, "variants": variants,
                "sort_key": sort_key,
                "len": shared.stats(samples[False]),
                "render": shared.stats(samples[True]),
                "first_run_ms": first / 1e6 if first is not None else None,
                "loads_len": statistics.fmean(loads[False]),
                "loads_render": statistics.fmean(loads[True]),
                "lengths_varied": sorted(str(v) for v, seen in
                                         lengths.items() if len(seen) > 1),
            }
            entry["results"] = [
                _result_for_parity(db, plan, kind, query, sort_key,
                                   args.parity_max_paths)
                for query in variants]
            entry["count"] = entry["results"][0]["count"]
            entry["actual_result_count"] = \
                entry["results"][0]["actual_result_count"]
            result["queries"][qid] = entry
            log(backend, "%-5s len %8.3f/%8.3f ms  render %8.3f/%8.3f ms "
                 "(median/p95) count=%s actual=%s loads=%.1f/%.1f%s"
                 % (qid, entry["len"]["median_ms"], entry["len"]["p95_ms"],
                    entry["render"]["median_ms"], entry["render"]["p95_ms"],
                    entry["count"], entry["actual_result_count"],
                    entry["loads_len"], entry["loads_render"],
                    " (%d variants)" % len(variants)
                    if len(variants) > 1 else ""))
    if args.threads and not args.skip_concurrency:
        result["concurrency"] = run_concurrency(db, queries, args)
    if shared.is_pg(backend):
        result["standbys"] = _standby_share()
    result["pickle_cache_after"] = [
        {"size": c["size"], "non_ghost": c["ngsize"]}
        for c in db.cacheDetailSize()]
    result["maxrss_mb"] = resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024.0
    db.close()
    write_json(args.result_file, result)
    log(backend, "query process done")


def _standby_share():
    """Where the read-only transactions of this process read the catalog:
    ``{"primary": n, "standby": n}`` (standby.py's counts; both 0 without
    standbys)."""
    from plone.pgcatalog import config
    from plone.pgcatalog.pg import standby
    found = standby.status(config.get_dsn())
    return {"primary": found["primary_served"],
            "standby": sum(s["served"] for s in found["standbys"])}


def _result_for_parity(db, plan, kind, query, sort_key, max_paths):
    """The result kept for the comparison between engines: counts; the
    ordered paths (with their sort keys) of ordered results up to
    ``max_paths``; the sorted set of unordered results when it has at
    most ``max_paths`` entries."""
    with Request(db) as req:
        if kind == "unique":
            values = list(req.catalog.uniqueValuesFor(query))
            return {"count": len(values), "actual_result_count": len(values),
                    "values": [repr(v) for v in values], "paths": None}
        results = req.catalog.unrestrictedSearchResults(**query)
        count = len(results)
        actual = getattr(results, "actual_result_count", count)
        paths = None
        keys = None
        if sort_key is not None:
            paths = [b.getPath() for b in results[:max_paths]]
            keys = [sort_key_value(plan, sort_key, p) for p in paths]
        elif count <= max_paths:
            paths = sorted(b.getPath() for b in results)
        out = {"count": count, "actual_result_count": actual,
               "paths": paths, "keys": keys,
               "paths_truncated": sort_key is not None and count > max_paths}
        if paths is not None:
            out["paths_sha256"] = hashlib.sha256(
                "\n".join(paths).encode()).hexdigest()
        return out


def run_concurrency(db, queries, args):
    """Queries per second from T threads of this process (each with its
    own ZODB connection per request, as Zope's worker threads have)."""
    mix = [q for q in queries if q[2] == "search"]
    out = {"mix": [q[0] for q in mix], "duration_s": args.concurrency_duration,
           "warmup_s": args.concurrency_warmup, "runs": {}}
    for n_threads in args.threads:
        stop = threading.Event()
        measuring = threading.Event()
        counts = [0] * n_threads
        lat = [[] for _ in range(n_threads)]
        errors = []

        def worker(k):
            j = k * 3
            try:
                while not stop.is_set():
                    qid, _label, kind, variants, _key = mix[j % len(mix)]
                    query = variants[(j // len(mix)) % len(variants)]
                    j += 1
                    t0 = time.perf_counter_ns()
                    with Request(db) as req:
                        _execute(req.catalog, kind, query, True)
                    if measuring.is_set() and not stop.is_set():
                        counts[k] += 1
                        lat[k].append(time.perf_counter_ns() - t0)
            except Exception:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=worker, args=(k,), daemon=True)
                   for k in range(n_threads)]
        for t in threads:
            t.start()
        time.sleep(args.concurrency_warmup)
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        measuring.set()
        time.sleep(args.concurrency_duration)
        stop.set()
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("concurrency worker failed:\n" + errors[0])
        total = sum(counts)
        all_lat = [x for per in lat for x in per]
        run = {"threads": n_threads, "queries": total, "elapsed_s": elapsed,
               "qps": total / elapsed, "process_cpu_s": cpu,
               "latency": shared.stats(all_lat)}
        out["runs"][str(n_threads)] = run
        log(args.name, "concurrency %d thread(s): %.1f queries/s (median "
             "latency %.2f ms, process CPU %.0f%%)" % (
                 n_threads, run["qps"],
                 run["latency"].get("median_ms", float("nan")),
                 100 * cpu / elapsed))
    return out
