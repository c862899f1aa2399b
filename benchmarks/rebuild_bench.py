"""Online rebuild of a real Plone site: time, peak memory, search latency.

    python benchmarks/rebuild_bench.py [--docs 4000] [--batch 500]
        [--folders 8] [--output rebuild.json]

A scratch database on the benchmark server (``PGCATALOG_DSN`` or the
embedded one) gets a Plone site (plone.distribution "volto", no default
content, plone.pgcatalog's profile) on history-free RelStorage with
``--docs`` Documents in ``--folders`` folders (a child process, committed
every 100 documents).  A second child process, started fresh so that its
peak RSS is the rebuild's own, opens the site and:

1. measures search latency for ``--baseline`` seconds with no rebuild;
2. runs an online rebuild (``OnlineRebuild``: start, run to the switch,
   drop the old rows) while a thread with its own ZODB connection keeps
   searching; every answer's Document count is checked (never a half
   catalog) and errors are counted;
3. reports the rebuild's wall time and rate, the process's RSS before and
   its peak (``resource.getrusage``) after, and the search latencies
   (median, p95, max) before and during the rebuild.

Searches run with the result cache off (``PGCATALOG_CACHE=off``: each is a
statement, not a cache hit) and vary their Subject, so they measure the
engine.  The searching thread shares the process (and its GIL) with the
rebuild: a pessimistic figure next to a Zope instance whose requests run
in another process than ``pgcatalog-rebuild``.
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time

import shared

SITE_ID = "Plone"
SUBJECTS = ["s%02d" % n for n in range(40)]


def rss_mb():
    """The process's resident set now (MB), from /proc."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _login(app):
    from AccessControl.SecurityManagement import newSecurityManager
    from AccessControl.users import system
    from Testing.makerequest import makerequest
    from zope.globalrequest import setRequest
    app = makerequest(app)
    setRequest(app.REQUEST)
    newSecurityManager(None, system)
    return app


def build_site(args):
    """Child: the site and its documents."""
    import transaction
    from plone.distribution.api import site as site_api
    from zope.component.hooks import setSite
    db, _ = shared.start_backend("pgcatalog", args.dsn, 20000, [],
                                 "rebuild-bench-")
    conn = db.open()
    app = _login(conn.root()["Application"])
    site_api.create(app, "volto", {
        "site_id": SITE_ID, "title": "Rebuild benchmark",
        "description": "", "default_language": "en",
        "portal_timezone": "UTC", "setup_content": False})
    site = app[SITE_ID]
    setSite(site)
    site.portal_setup.runAllImportStepsFromProfile(
        "profile-plone.pgcatalog:default")
    transaction.commit()
    rnd = random.Random(7)
    t0 = time.perf_counter()
    for f in range(args.folders):
        # "volto": Documents are folderish (no Folder type)
        site.invokeFactory("Document", "f%d" % f, title="Folder %d" % f)
    for n in range(args.docs):
        folder = site["f%d" % (n % args.folders)]
        folder.invokeFactory(
            "Document", "d%05d" % n, title="Document %d" % n,
            description="about %s and %s" % tuple(rnd.sample(SUBJECTS, 2)),
            subject=tuple(rnd.sample(SUBJECTS, 3)))
        if n % 100 == 99:
            transaction.commit()
            conn.cacheGC()
    transaction.commit()
    shared.log("site: %d documents in %.0f s, %d entries" % (
        args.docs, time.perf_counter() - t0, len(site.portal_catalog)))
    conn.close()
    db.close()
    return 0


def _searcher(db, stop, samples, counts, errors, expected):
    import transaction
    from zope.component.hooks import setSite
    conn = db.open()
    rnd = random.Random(3)
    try:
        while not stop.is_set():
            transaction.begin()
            try:
                site = conn.root()["Application"][SITE_ID]
                setSite(site)
                catalog = site.portal_catalog
                t0 = time.perf_counter()
                found = catalog.unrestrictedSearchResults(
                    portal_type="Document", Subject=rnd.choice(SUBJECTS),
                    sort_on="modified", sort_order="descending",
                    b_size=20, b_start=0)
                [b.Title for b in found[:20]]
                total = len(catalog.unrestrictedSearchResults(
                    portal_type="Document"))
                samples.append((time.perf_counter() - t0) * 1000)
                counts[total == expected] = counts.get(
                    total == expected, 0) + 1
            except Exception as exc:  # noqa: B902 - counted, reported
                errors.append(repr(exc))
            finally:
                transaction.abort()
            time.sleep(0.005)
    finally:
        setSite(None)
        conn.close()


def _latency(samples):
    if not samples:
        return None
    ordered = sorted(samples)
    return {"n": len(samples), "median_ms": round(statistics.median(
        ordered), 2), "p95_ms": round(ordered[int(0.95 * (len(ordered) -
                                                           1))], 2),
        "max_ms": round(ordered[-1], 2)}


def rebuild(args):
    """Child: the online rebuild, measured."""
    import transaction
    from zope.component.hooks import setSite

    from plone.pgcatalog.ops.rebuild import OnlineRebuild
    os.environ["PGCATALOG_CACHE"] = "off"
    db, _ = shared.start_backend("pgcatalog", args.dsn, 5000, [],
                                 "rebuild-bench-")
    conn = db.open()
    app = _login(conn.root()["Application"])
    site = app[SITE_ID]
    setSite(site)
    catalog = site.portal_catalog
    entries = len(catalog)
    expected = len(catalog.unrestrictedSearchResults(portal_type="Document"))
    transaction.abort()
    conn.cacheMinimize()
    result = {"entries": entries, "documents": expected,
              "batch": args.batch, "rss_before_mb": round(rss_mb(), 1),
              "peak_before_mb": round(peak_mb(), 1)}

    def measure(seconds=None, work=None):
        stop = threading.Event()
        samples, counts, errors = [], {}, []
        thread = threading.Thread(target=_searcher, args=(
            db, stop, samples, counts, errors, expected))
        thread.start()
        try:
            if work is None:
                time.sleep(seconds)
                out = None
            else:
                out = work()
        finally:
            stop.set()
            thread.join()
        return out, samples, counts, errors

    _, base, counts, errors = measure(seconds=args.baseline)
    result["search_idle"] = _latency(base)

    def work():
        build = OnlineRebuild(catalog, batch_size=args.batch, grace=0,
                              log_every=5.0)
        t0 = time.perf_counter()
        build.start("rebuild")
        build.run()
        t_run = time.perf_counter() - t0
        build.drop(grace=0)
        return t_run, time.perf_counter() - t0, build.status()

    (t_run, t_all, status), during, counts, errors = measure(work=work)
    result.update({
        "rebuild_s": round(t_run, 1), "with_drop_s": round(t_all, 1),
        "rate_per_s": round(entries / t_run, 1),
        "peak_rss_mb": round(peak_mb(), 1),
        "rss_after_mb": round(rss_mb(), 1),
        "search_during": _latency(during),
        "answers_complete": counts.get(True, 0),
        "answers_incomplete": counts.get(False, 0),
        "search_errors": len(errors), "first_errors": errors[:3],
        "status": status})
    conn.close()
    db.close()
    print(json.dumps(result))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=4000)
    p.add_argument("--folders", type=int, default=8)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--baseline", type=float, default=10.0)
    p.add_argument("--output")
    p.add_argument("--phase", choices=("site", "rebuild"),
                   help=argparse.SUPPRESS)
    p.add_argument("--dsn", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.phase == "site":
        return build_site(args)
    if args.phase == "rebuild":
        return rebuild(args)
    common = ["--docs", str(args.docs), "--folders", str(args.folders),
              "--batch", str(args.batch), "--baseline", str(args.baseline)]
    with shared.scratch_database("rebuild_bench") as dsn:
        me = [sys.executable, os.path.abspath(__file__)]
        subprocess.run(me + common + ["--phase", "site", "--dsn", dsn],
                       check=True)
        out = subprocess.run(me + common + ["--phase", "rebuild", "--dsn",
                                            dsn], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["load"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
