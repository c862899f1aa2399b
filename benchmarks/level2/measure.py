"""The level2 query phase in a backend process: each scenario run as its
own synthetic request, ``len`` and ``render`` passes interleaved, timed
after a warm-up; then one untimed run per scenario whose full result is kept
for the parity check."""
import hashlib
import statistics
import time

import transaction
from AccessControl.SecurityManagement import newSecurityManager
from AccessControl.SecurityManagement import noSecurityManager
from Products.CMFCore.utils import getToolByName
from Testing.makerequest import makerequest
from zope.component.hooks import setSite
from zope.event import notify
from zope.globalrequest import setRequest
from ZPublisher.pubevents import PubStart
from ZPublisher.pubevents import PubSuccess

import shared

from .workload import ADMIN
from .workload import SCENARIOS
from .workload import SITE_ID
from .workload import scenario_query


class Request:
    """One synthetic request: its own ZODB connection from the pool, a
    fresh HTTPRequest, the admin (Manager) logged in, the site as local
    site, and the PubStart/PubSuccess events the WSGI publisher fires.
    Leaving aborts the transaction and returns the connection to the pool,
    which trims its cache to ``cache-size`` (Connection.close -> incrgc).

    Not ``plone.pgcatalog.testing.zopeapp.Request``: that one fires no publication
    events."""

    def __init__(self, db, commit=False):
        self.db = db
        self.commit = commit

    def __enter__(self):
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
        try:
            # A read-only request: nothing to commit, so abort (cheaper,
            # same effect on the connection) and end it like the WSGI
            # publisher ends a successful request.
            if self.commit and exc[0] is None:
                transaction.commit()
            else:
                transaction.abort()
            notify(PubSuccess(self.request))
        finally:
            noSecurityManager()
            setSite(None)
            setRequest(None)
            self.request.close()
            self.conn.close()
        return False


def timed_query(db, query, render, profiler=None):
    """One request running ``query`` (and rendering the first brains if
    ``render``); returns (ns spent on the query, len(results), ZODB loads
    during it).  ``profiler`` (cProfile) is enabled around the query only."""
    with Request(db) as req:
        catalog = getToolByName(req.site, "portal_catalog")
        req.conn.getTransferCounts(True)
        if profiler is not None:
            profiler.enable()
        t0 = time.perf_counter_ns()
        results = catalog.searchResults(**query)
        n = len(results)
        if render:
            shared.render(results)
        elapsed = time.perf_counter_ns() - t0
        if profiler is not None:
            profiler.disable()
        n_load, _ = req.conn.getTransferCounts(True)
    return elapsed, n, n_load


def measure_queries(db, args):
    """Every scenario: ``--warmup`` untimed then ``--iterations`` timed runs
    of each pass, then its result for the parity check."""
    out = {}
    for sid, label, template, is_sorted in SCENARIOS:
        query = scenario_query(template, SITE_ID)
        warmup_loads = 0
        for _ in range(args.warmup):
            warmup_loads += timed_query(db, query, False)[2]
            warmup_loads += timed_query(db, query, True)[2]
        samples = {False: [], True: []}
        load_counts = {False: [], True: []}
        lengths = set()
        for _ in range(args.iterations):
            for render in (False, True):    # interleaved: same conditions
                elapsed, n, n_load = timed_query(db, query, render)
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
            "len": shared.stats(samples[False]),
            "render": shared.stats(samples[True]),
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
        shared.log(args.name, "%s len %.3f/%.3f ms  render %.3f/%.3f ms  "
                   "(median/p95) count=%d actual=%s loads=%.1f/%.1f"
                   % (sid, entry["len"]["median_ms"], entry["len"]["p95_ms"],
                      entry["render"]["median_ms"], entry["render"]["p95_ms"],
                      count, actual, entry["loads_len"],
                      entry["loads_render"]))
    return out


#: the mixed run: one content modification every this many queries
MIXED_EVERY = 10


def _modify(db, doc_ids, n):
    """A modification like an editor's: a new title, reindexObject(),
    commit (in its own request; not timed)."""
    with Request(db, commit=True) as req:
        obj = req.site[doc_ids[n % len(doc_ids)]]
        obj.setTitle("Mixed %d" % n)
        obj.reindexObject()


def measure_mixed(db, args, doc_ids):
    """The six scenarios interleaved (render pass), one content
    modification every MIXED_EVERY queries: each catalog pays for its
    invalidations (ZCatalog's BTrees reloaded, our cached answers of the
    old generation unused).  Run after the parity results are taken; the
    modifications are the same for both backends."""
    queries = [scenario_query(t, SITE_ID) for _s, _l, t, _o in SCENARIOS]
    samples, n = [], 0
    for _ in range(args.iterations):
        for query in queries:
            if n and n % MIXED_EVERY == 0:
                _modify(db, doc_ids, n)
            samples.append(timed_query(db, query, True)[0])
            n += 1
    out = shared.stats(samples)
    out["queries"] = n
    out["modifications"] = (n - 1) // MIXED_EVERY
    shared.log(args.name, "mixed: %d queries, %d modifications, median "
               "%.3f p95 %.3f ms" % (n, out["modifications"],
                                     out["median_ms"], out["p95_ms"]))
    return out
