"""Facet counts beside a search's first page, on a level1 site: plone.pgcatalog's
``pgc_facets`` against ZCatalog with the counts made in Python from the
matches' metadata (what a site without a facet engine does).

    python benchmarks/facet_counts.py --dsn "host=... user=... dbname=postgres" \\
        [--scale 100000] [--iterations 15] [--output facets.json] \\
        [--hot-facets]

It reads the level1 databases of ``--scale`` (``run_benchmarks.py level1
--keep-databases``).  Each engine runs in its own process, the result
cache off, every request a fresh read-only transaction: the search's first
page of 20 (sorted by ``effective``, rendered) and the counts of five
facets over its matches: ``portal_type`` (counted as if the query's own
type were not there: the usual drill-down), ``review_state``, ``Subject``,
``Creator``, ``is_folderish``.  The counts of both engines must be equal.

``--facets``: other facets than those five (comma separated; e.g. only
the hot ones, ``portal_type,review_state,Subject``).

``--hot-facets``: plone.pgcatalog keeps the two facets that are not hot
by default, ``Creator`` and ``is_folderish``, hot too (``hot-indexes``,
``Creator`` in ``hot-set-exclude`` beside ``Subject``, as docs/facets.md
advises for facet indexes), registered with ``pgc_sync_indexes()`` before
the run and unregistered after it (the database is left as it was).

The searches (the anonymous filters: ``allowedRolesAndUsers`` and
``effectiveRange``, as Plone's search page adds them):

* FN: the anonymous filters + one type (News Item);
* FD: the anonymous filters + one common type (Document);
* FA: the anonymous filters alone (every type: the most matches).
"""
import json
import os
import statistics
import sys
import time

BACKENDS = ("zcatalog", "pgcatalog")
FACETS = ("portal_type", "review_state", "Subject", "Creator", "is_folderish")
#: ``--hot-facets``: the settings that keep every facet hot
HOT_FACETS = {
    "PGCATALOG_HOT_INDEXES": "portal_type review_state allowedRolesAndUsers "
    "Subject effectiveRange is_default_page modified Creator is_folderish",
    "PGCATALOG_HOT_SET_EXCLUDE": "Subject Creator",
}
PAGE = 20


def queries():
    from level1.plan import minutes_to_datetime
    from level1.queries import QUERY_NOW_MIN
    now = minutes_to_datetime(QUERY_NOW_MIN)
    anonymous = {"allowedRolesAndUsers": ["Anonymous"], "effectiveRange": now}
    return {
        "FN": dict(anonymous, portal_type="News Item"),
        "FD": dict(anonymous, portal_type="Document"),
        "FA": dict(anonymous),
    }


def python_counts(catalog, query):
    """The five facets counted from the matches' metadata (portal_type
    over the search without its own type)."""
    found = {}
    for name in facet_names():
        searched = query
        if name in query:
            searched = {k: v for k, v in query.items() if k != name}
        counts = {}
        for brain in catalog.unrestrictedSearchResults(**searched):
            value = getattr(brain, name)
            for v in (value if isinstance(value, (list, tuple)) else
                      [value]):
                counts[v] = counts.get(v, 0) + 1
        found[name] = counts
    return found


def pg_counts(catalog, query):
    # show_inactive: the query's own effectiveRange (level1's "now"), not
    # the clock's, which pgc_facets would add as searchResults does
    found = catalog.pgc_facets(query, facets=list(facet_names()),
                               show_inactive=True)
    return {name: dict(found[name]["values"]) for name in facet_names()}


def facet_names():
    """The facets counted: ``--facets`` (the child's environment), else
    :data:`FACETS`."""
    names = os.environ.get("FACET_COUNTS_FACETS")
    return tuple(names.split(",")) if names else FACETS


def child(args):
    import shared
    from level1.databases import db_name
    from level1.measure import Request
    dsn = "%s dbname=%s" % (args.dsn, db_name(args.child, args.scale,
                                              args.seed))
    db, _ = shared.start_backend(args.child, dsn, 100000, [], "facets-")
    counted = pg_counts if args.child == "pgcatalog" else python_counts
    hot_facets = args.hot_facets and args.child == "pgcatalog"
    if hot_facets:
        sync_hot(db, Request, HOT_FACETS)
    try:
        out = measure(args, db, Request, counted)
    finally:
        if hot_facets:
            sync_hot(db, Request, {})
    with open(args.result, "w") as f:
        json.dump(out, f)


def sync_hot(db, Request, settings):
    """Register the hot indexes ``settings`` name (the defaults when
    empty) in the catalog (``pgc_sync_indexes``), committed."""
    import shared
    import transaction
    for name in HOT_FACETS:
        os.environ.pop(name, None)
    os.environ.update(settings)
    t0 = time.perf_counter()
    with Request(db) as req:
        req.catalog.pgc_sync_indexes()
        transaction.commit()
    shared.log("pgcatalog", "hot indexes %s in %.1f s" % (
        "of the facets registered" if settings else "back to the defaults",
        time.perf_counter() - t0))


def measure(args, db, Request, counted):
    import shared
    out = {}
    for qid, query in queries().items():
        page = dict(query, sort_on="effective", sort_order="reverse",
                    b_size=PAGE)
        times = []
        for i in range(args.warmup + args.iterations):
            with Request(db) as req:
                t0 = time.perf_counter()
                results = req.catalog.unrestrictedSearchResults(**page)
                shared.render(results[:PAGE])
                counts = counted(req.catalog, query)
                if i >= args.warmup:
                    times.append((time.perf_counter() - t0) * 1000.0)
        with Request(db) as req:
            matches = len(req.catalog.unrestrictedSearchResults(**query))
        out[qid] = {"median": statistics.median(times),
                    "p95": sorted(times)[int(0.95 * (len(times) - 1))],
                    "matches": matches,
                    "counts": {name: sorted(
                        [str(v), n] for v, n in values.items())
                        for name, values in counts.items()}}
        shared.log(args.child, qid, "%.1f ms" % out[qid]["median"])
    return out


def main(argv=None):
    import shared
    p = shared.side_by_side_parser(__doc__.split("\n")[0])
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--output")
    p.add_argument("--facets", help="the facets to count, comma "
                   "separated (default: the five above)")
    p.add_argument("--hot-facets", action="store_true",
                   help="keep Creator and is_folderish hot too "
                   "(plone.pgcatalog)")
    args = p.parse_args(argv)
    args.dsn = shared.server_dsn(args.dsn)
    if args.facets:
        os.environ["FACET_COUNTS_FACETS"] = args.facets
    if args.child:
        return child(args)
    found = shared.run_side_by_side(
        __file__, args, args.backends.split(","),
        extra=["--hot-facets"] if args.hot_facets else [])
    names = list(found)
    print("| search | matches | %s |%s" % (
        " | ".join("%s ms (p95)" % b for b in names),
        " pg/zc |" if len(names) == 2 else ""))
    print("|---|---|%s" % ("---|" * (len(names) + (len(names) == 2))))
    problems = []
    for qid in found[names[0]]:
        rows = [found[b][qid] for b in names]
        line = "| %s | %d | %s |" % (qid, rows[0]["matches"], " | ".join(
            "%.1f (%.1f)" % (r["median"], r["p95"]) for r in rows))
        if len(names) == 2:
            zc, pg = found["zcatalog"][qid], found["pgcatalog"][qid]
            line += " %.2f |" % (pg["median"] / zc["median"])
            if zc["counts"] != pg["counts"]:
                problems.append("%s: the counts differ" % qid)
        print(line)
    print("parity: %s" % ("OK" if not problems else "; ".join(problems)))
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"scale": args.scale, "results": found,
                       "problems": problems}, f)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
