"""Language-aware text search on a level1 site: the switch over (an
in-place reindex of the text index), then its searches beside the same
searches ZCTextIndex-exact and ZCatalog's.

    python benchmarks/language_text.py --dsn "host=... user=... dbname=postgres" \\
        [--scale 100000] [--iterations 15] [--keep] [--output lang.json] \\
        [--backends pgcatalog] [--kept]

It reads the level1 databases of ``--scale`` (``run_benchmarks.py level1
--keep-databases``).  Each engine runs in its own process, the result
cache off, every query in a fresh read-only request with its first brains
rendered (as more_queries.py).  The plone.pgcatalog process times the
queries ZCTextIndex-exact, switches ``SearchableText`` to language-aware
search (English; level1's entries have no language) and reindexes it,
entry by entry from level1's generator in committed batches of 1,000 (the
time and rate are reported), times the queries again, and switches back
unless ``--keep``.  ZCatalog has no language-aware search: its column is
its exact search of the same words, for scale.  The answers by language
differ from the exact ones by design (stems match); their counts are
shown.

The queries (more_queries.py's, words from the site's vocabulary):

* TP: two words + ``allowedRolesAndUsers`` + ``effectiveRange``, a page of
  10 by relevance (Plone's search page);
* TA: the same, every match (an anonymous ``@search``);
* TW: one common word, same filters, every match;
* TG: a word with a ``*`` + filters + four types, a page of 10;
* TT: two words + type + state, every match;
* LP: a phrase of two words beside the anonymous filters, a page of 10;
* LG: the two words as Plone's search box sends them (``a* AND b*``),
  beside the same filters, a page of 10.
"""
import json
import statistics
import sys
import time

BACKENDS = ("zcatalog", "pgcatalog")
BATCH = 1000


def queries(plan):
    from more_queries import queries as more
    found = {qid: query for qid, query in more(plan).items()
             if qid in ("TP", "TA", "TW", "TG", "TT")}
    w = plan.words
    phrase = dict(found["TP"])
    phrase["SearchableText"] = '"%s %s"' % (w[29], w[79])
    found["LP"] = phrase
    # two words as Plone's search box sends them (each a prefix, AND)
    typed = dict(found["TP"])
    typed["SearchableText"] = "%s* AND %s*" % (w[29], w[79])
    found["LG"] = typed
    return found


def timed(db, plan, iterations, warmup):
    import shared
    from level1.measure import Request
    out = {}
    for qid, query in queries(plan).items():
        times = []
        for i in range(warmup + iterations):
            with Request(db) as req:
                t0 = time.perf_counter()
                results = req.catalog.unrestrictedSearchResults(**query)
                n = len(results)
                shared.render(results)
                if i >= warmup:
                    times.append((time.perf_counter() - t0) * 1000.0)
        with Request(db) as req:
            results = req.catalog.unrestrictedSearchResults(**query)
            actual = getattr(results, "actual_result_count", len(results))
        out[qid] = {"median": statistics.median(times),
                    "p95": sorted(times)[int(0.95 * (len(times) - 1))],
                    "count": n, "actual": actual}
    return out


def switch_over(db, plan):
    """SearchableText by language, every entry's row written again; the
    seconds it took."""
    import transaction
    from level1.measure import Request
    from level1.plan import make_stub_class
    from plone.pgcatalog.ops.rebuild import reindexed
    stub_class = make_stub_class()
    t0 = time.perf_counter()
    with Request(db) as req:
        req.catalog.pgc_language_text("SearchableText", languages=["en"],
                                      default="en")
        transaction.commit()
    stream = plan.entries()
    done = 0
    while done < plan.n:
        with Request(db) as req:
            for _ in range(min(BATCH, plan.n - done)):
                stub = stub_class(next(stream))
                req.catalog.catalog_object(stub, uid=stub.path,
                                           idxs=["SearchableText"],
                                           update_metadata=0)
                done += 1
            transaction.commit()
    with Request(db) as req:
        reindexed(req.catalog, ["SearchableText"])
        status = req.catalog.pgc_language_status("SearchableText")
        transaction.commit()
    assert status["ready"] and status["rows"] == status["entries"], status
    return time.perf_counter() - t0


def switch_back(db):
    import transaction
    from level1.measure import Request
    with Request(db) as req:
        req.catalog.pgc_exact_text("SearchableText")
        transaction.commit()


def child(args):
    import shared
    from level1.databases import db_name
    from level1.measure import Request
    from level1.plan import Plan
    dsn = "%s dbname=%s" % (args.dsn, db_name(args.child, args.scale,
                                              args.seed))
    db, _ = shared.start_backend(args.child, dsn, 100000, [], "langtext-")
    plan = Plan(args.scale, args.seed)
    out = {}
    if args.child == "zcatalog":
        out["exact"] = timed(db, plan, args.iterations, args.warmup)
    else:
        with Request(db) as req:
            mode = req.catalog.pgc_language_status("SearchableText")["mode"]
        if args.kept:
            # the searches by language of a catalog --keep left so
            assert mode == "language", mode
            out["language"] = timed(db, plan, args.iterations, args.warmup)
            out["exact"] = {qid: {"median": 0.0, "p95": 0.0, "count": 0,
                                  "actual": 0} for qid in out["language"]}
            out["switch"] = {"seconds": 0.0, "entries": 0,
                             "per_second": 0.0}
            with open(args.result, "w") as f:
                json.dump(out, f)
            return
        if mode == "language":
            switch_back(db)
        out["exact"] = timed(db, plan, args.iterations, args.warmup)
        seconds = switch_over(db, plan)
        out["switch"] = {"seconds": seconds, "entries": plan.n,
                         "per_second": plan.n / seconds}
        shared.log(args.child, "switch", "%.0f s (%.0f entries/s)" % (
            seconds, plan.n / seconds))
        out["language"] = timed(db, plan, args.iterations, args.warmup)
        if not args.keep:
            switch_back(db)
    with open(args.result, "w") as f:
        json.dump(out, f)


def main(argv=None):
    import shared
    p = shared.side_by_side_parser(__doc__.split("\n")[0])
    p.add_argument("--keep", action="store_true",
                   help="leave SearchableText searched by language")
    p.add_argument("--kept", action="store_true",
                   help="time the searches by language of a catalog a "
                   "run with --keep left switched over, without switching "
                   "(the exact and switch figures then show 0)")
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help="pgcatalog alone where no ZCatalog database of "
                   "that size exists (its column then shows 0)")
    p.add_argument("--output")
    args = p.parse_args(argv)
    args.dsn = shared.server_dsn(args.dsn)
    if args.child:
        return child(args)
    backends = args.backends.split(",")
    if "pgcatalog" not in backends:
        p.error("--backends: pgcatalog is the one switched over")
    found = shared.run_side_by_side(
        __file__, args, backends, (["--keep"] if args.keep else []) +
        (["--kept"] if args.kept else []))
    pg = found["pgcatalog"]
    zc = found["zcatalog"]["exact"] if "zcatalog" in found else None
    if zc is None:
        empty = {"median": 0.0, "p95": 0.0, "count": None, "actual": 0}
        zc = {qid: empty for qid in pg["exact"]}
    switch = pg["switch"]
    print("switch over: %d entries in %.0f s (%.0f entries/s)" % (
        switch["entries"], switch["seconds"], switch["per_second"]))
    print("| query | ZCatalog ms (p95) | matches | exact ms (p95) | matches "
          "| by language ms (p95) | matches | language/ZCatalog |")
    print("|---|---|---|---|---|---|---|---|")
    problems = []
    for qid in zc:
        z, e, g = zc[qid], pg["exact"][qid], pg["language"][qid]
        if z["count"] is not None and \
                (z["count"], z["actual"]) != (e["count"], e["actual"]):
            problems.append("%s: exact counts %s vs %s" % (
                qid, (z["count"], z["actual"]), (e["count"], e["actual"])))
        print("| %s | %.2f (%.2f) | %d | %.2f (%.2f) | %d | %.2f (%.2f) | %d "
              "| %.2f |" % (qid, z["median"], z["p95"], z["actual"],
                            e["median"], e["p95"], e["actual"], g["median"],
                            g["p95"], g["actual"],
                            g["median"] / z["median"] if z["median"]
                            else 0.0))
    print("parity of the exact searches: %s" % (
        "OK" if not problems else "; ".join(problems)))
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"scale": args.scale, "results": found,
                       "problems": problems}, f)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
