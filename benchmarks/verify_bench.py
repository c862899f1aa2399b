"""How long verifying a catalog takes (``plone.pgcatalog.ops.verify``), per
1,000 objects, on a real Plone site::

    python benchmarks/verify_bench.py --docs 3000 [--folder-size 500]
        [--batch 500] [--cache-size 5000] [--defects 1.0]

Builds a Plone site (the "volto" distribution and plone.pgcatalog's
profile, as level2 does) on history-free RelStorage in a scratch database
(the embedded PostgreSQL unless ``PGCATALOG_DSN`` is set), with ``--docs``
Documents in folders of ``--folder-size`` (title, description, subjects,
about 60 words of text; every other one published), then times, each on a
fresh ZODB connection with an emptied ZODB cache (the objects come from
the storage, as on a site verified after a restart):

1. ``verify`` of the clean site: both passes (catalog entries, then the
   site walk), ``--quick`` (no values compared), and each pass alone;
2. ``verify --repair`` with ``--defects`` percent of the documents
   planted as divergences (a third missing, a third with a stale value, a
   third orphans), committing per batch as ``pgcatalog-verify`` does;
3. a second ``verify`` (clean again).

Prints one line per measurement (seconds, ms per 1,000 objects, and the
CPU time of this process per 1,000 objects: the Python side, less
sensitive to a busy machine than the wall time; the resident set size
before and after each run) and the peak RSS of the process (the build
included); ``--json PATH`` writes them.  Per 1,000 objects
is the number to extrapolate from: both passes are linear (one batch of
rows, one batch of objects at a time).
"""
import argparse
import os
import random
import resource
import time

import shared
import transaction

WORDS = ("catalog postgres plone zope search index query verify repair "
         "object folder document metadata value entry batch memory "
         "transaction snapshot backup restore python benchmark").split()


def build(db, args):
    """The site and its documents, committed in batches; the seconds."""
    from AccessControl.SecurityManagement import newSecurityManager
    from level2.site import create_site
    from level2.workload import ADMIN
    from Products.CMFCore.indexing import processQueue
    from Testing.makerequest import makerequest
    from zope.globalrequest import setRequest

    rnd = random.Random(42)
    conn = db.open()
    app = makerequest(conn.root()["Application"])
    setRequest(app.REQUEST)
    app.acl_users.userFolderAddUser(ADMIN, "admin", ["Manager"], [])
    transaction.commit()
    acl = app.acl_users
    newSecurityManager(None, acl.getUser(ADMIN).__of__(acl))
    site = create_site(app, True, "pgcatalog", {})
    wf = site.portal_workflow
    t0 = time.perf_counter()
    folder = None
    for n in range(args.docs):
        if n % args.folder_size == 0:
            fid = "folder-%d" % (n // args.folder_size)
            # the volto distribution: Documents are the containers
            site.invokeFactory("Document", fid, title="Folder %s" % fid)
            folder = site[fid]
        did = "doc-%d" % n
        folder.invokeFactory(
            "Document", did, title="Document %d %s" % (n, rnd.choice(WORDS)),
            description=" ".join(rnd.choice(WORDS) for _ in range(60)),
            subject=tuple(rnd.sample(WORDS, 3)))
        if n % 2 == 0:
            wf.doActionFor(folder[did], "publish")
        if n % 250 == 249:
            processQueue()
            transaction.commit()
            conn.cacheGC()
    processQueue()
    transaction.commit()
    seconds = time.perf_counter() - t0
    shared.log("built %d documents in %.1f s" % (args.docs, seconds))
    conn.close()
    return seconds


class Session:
    """A fresh connection (emptied ZODB cache), a request, the admin, the
    site as local site."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        from AccessControl.SecurityManagement import newSecurityManager
        from level2.workload import ADMIN
        from level2.workload import SITE_ID
        from Testing.makerequest import makerequest
        from zope.component.hooks import setSite
        from zope.globalrequest import setRequest
        self.db.cacheMinimize()
        self.conn = self.db.open()
        self.conn.cacheMinimize()
        self.app = makerequest(self.conn.root()["Application"])
        setRequest(self.app.REQUEST)
        acl = self.app.acl_users
        newSecurityManager(None, acl.getUser(ADMIN).__of__(acl))
        self.site = self.app[SITE_ID]
        setSite(self.site)
        return self

    def __exit__(self, *exc):
        from zope.component.hooks import setSite
        transaction.abort()
        setSite(None)
        self.conn.close()
        return False


def rss_mb():
    """The process's resident set size now (Linux), in MB; None elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def timed(db, label, objects, func, results):
    with Session(db) as s:
        rss_before = rss_mb()
        t0 = time.perf_counter()
        c0 = time.process_time()
        report = func(s.site.portal_catalog)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0
        rss_after = rss_mb()
    per_k = seconds * 1000.0 / objects * 1000.0 if objects else 0.0
    cpu_k = cpu * 1000.0 / objects * 1000.0 if objects else 0.0
    line = "%-34s %7.2f s  %7.0f ms / 1,000 objects (CPU %5.0f ms)" % (
        label, seconds, per_k, cpu_k)
    if report is not None:
        line += "  (%d entries, %d objects, %d differences, %d repaired)" % (
            report.entries, report.objects, report.total, report.repaired)
    if rss_before is not None:
        line += "  RSS %.0f -> %.0f MB" % (rss_before, rss_after)
    print(line, flush=True)
    results[label] = {"seconds": seconds, "ms_per_1000": per_k,
                      "cpu_ms_per_1000": cpu_k, "rss_mb": [rss_before,
                                                           rss_after],
                      "report": None if report is None else {
                          "counts": report.counts, "entries": report.entries,
                          "objects": report.objects,
                          "repaired": report.repaired}}
    return report


def plant(db, args):
    """``--defects`` percent of the documents made divergent: missing,
    stale value (the object changed behind the catalog's back), orphan."""
    with Session(db) as s:
        catalog = s.site.portal_catalog
        docs = [b.getPath() for b in catalog.unrestrictedSearchResults(
            portal_type="Document") if "/doc-" in b.getPath()]
        rnd = random.Random(7)
        chosen = rnd.sample(docs, max(3, int(len(docs) * args.defects
                                             / 100)))
        for i, path in enumerate(chosen):
            obj = s.app.unrestrictedTraverse(path)
            if i % 3 == 0:
                catalog.uncatalog_object(path)
            elif i % 3 == 1:
                obj.title = "Changed behind the catalog's back"
            else:
                obj.aq_parent._delObject(obj.getId(), suppress_events=True)
        transaction.commit()
        return len(chosen)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=3000)
    p.add_argument("--folder-size", type=int, default=500)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--cache-size", type=int, default=5000)
    p.add_argument("--defects", type=float, default=1.0)
    p.add_argument("--no-passes", action="store_true",
                   help="do not time each pass alone")
    p.add_argument("--json")
    p.add_argument("--profile", help="write a cProfile of the clean verify "
                                     "to this file")
    args = p.parse_args(argv)
    with shared.scratch_database("verify_bench") as dsn:
        db, startup = shared.start_backend("pgcatalog", dsn, args.cache_size,
                                           [], "verify-bench-")
        build_s = build(db, args)
        results = {"docs": args.docs, "batch": args.batch,
                   "cache_size": args.cache_size, "build_s": build_s,
                   "loadavg_start": os.getloadavg()}
        from plone.pgcatalog.ops import verify
        from plone.pgcatalog.ops.verify import Verifier

        with Session(db) as s:
            objects = len(s.site.portal_catalog)
        print("site: %d catalog entries (%d documents, folders, the site)"
              % (objects, args.docs))

        def entries_only(catalog):
            v = Verifier(catalog, batch=args.batch)
            v.check_entries()
            return v.report.finish()

        def walk_only(catalog):
            v = Verifier(catalog, batch=args.batch)
            v.find_missing()
            return v.report.finish()

        def clean(catalog):
            if not args.profile:
                return verify.verify(catalog, batch=args.batch)
            import cProfile
            profiler = cProfile.Profile()
            report = profiler.runcall(verify.verify, catalog,
                                      batch=args.batch)
            profiler.dump_stats(args.profile)
            return report

        timed(db, "verify (clean)", objects, clean, results)
        timed(db, "verify --quick (clean)", objects,
              lambda c: verify.verify(c, batch=args.batch, values=False),
              results)
        if not args.no_passes:
            timed(db, "  pass 1: catalog entries", objects, entries_only,
                  results)
            timed(db, "  pass 2: site walk", objects, walk_only, results)
        planted = plant(db, args)
        print("planted %d divergences" % planted)
        timed(db, "verify --repair (%.3g%% defects)" % args.defects, objects,
              lambda c: verify.verify(c, batch=args.batch, repair=True,
                                      on_batch=transaction.commit), results)
        again = timed(db, "verify again", objects,
                      lambda c: verify.verify(c, batch=args.batch), results)
        results["clean_after_repair"] = again.clean
        results["peak_rss_mb"] = resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024.0
        results["loadavg_end"] = os.getloadavg()
        print("clean after repair: %s; peak RSS %.0f MB; load average %s -> "
              "%s" % (again.clean, results["peak_rss_mb"],
                      results["loadavg_start"], results["loadavg_end"]))
        if args.json:
            shared.write_json(args.json, results)
        db.close()


if __name__ == "__main__":
    main()
