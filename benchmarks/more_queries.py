"""Query shapes level1 does not time, both engines side by side on a level1
site: text searches beside other conditions, and a few others a Plone site
sends.

    python benchmarks/more_queries.py --dsn "host=... user=... dbname=postgres" \\
        [--scale 100000] [--iterations 15] [--only TA,O5] [--output more.json]

It reads the level1 databases of ``--scale`` (``bench_l1_<backend>_<scale>_
<seed>``, made by ``run_benchmarks.py level1 --keep-databases``) on the
server ``--dsn``; each engine runs in its own process (the result cache
off), every query in a fresh read-only request, its first brains rendered
(as level1 does).  Parity: the counts and, for every-match answers, the
sets of paths must be the same; the relevance order, and so the members
of a page by relevance, is compared for information only (see
test_differential: equal scores are listed in another order, a broad
glob's words share the glob's frequency).

The queries (words chosen from the site's vocabulary as level1 does):

* TA: two words + ``allowedRolesAndUsers`` + ``effectiveRange``, every
  match (an anonymous ``@search`` of plone.restapi);
* TW: one common word, same filters, every match;
* TP: two words, same filters, a page of 10 (Plone's search page);
* TG: a word with a ``*`` (what Plone's search sends for the last word)
  + filters + four types, a page of 10;
* TB: a broad glob (three letters), a page of 20;
* TT: two words + type + state, every match;
* GE, GA, GS, GT, GF, GP, GM, GW, GI, GR, GN: globs as Plone sends them
  (a starred word, two starred words joined by AND, a word AND a glob),
  alone, beside the anonymous filters, a type, a folder, a section,
  ``is_folderish`` (not a hot index), and with the site root's path
  (plone.restapi);
* SU, SU4, SW: suggestions as ``pgc_suggest`` asks them: a three- and
  a four-letter prefix, a word and a prefix, of the ``Title`` beside the
  anonymous filters and four types, the first 10 by relevance;
* O1: ``review_state=pending``, every match (many key sets: per-user roles);
* O3: ``Subject``, any of three tags, every match;
* O5: the site root's ``path``, every match (every entry);
* O10: ``is_folderish``, every match (not a hot index);
* O19: two states + ``Creator``, every match;
* PSD, PSA, PF: a section's documents, its anonymous listing (two types,
  published, roles, ``effectiveRange``), a folder's documents, every
  match; PSP, PSPD: two sections, alone and with a type; PR, PRA: the site
  root's path (as plone.restapi adds it) with a type, and anonymous.

``--after-edit``: before each search, a committed change of one entry's
text (``Title``, ``Description`` and ``SearchableText`` of one of five
entries, a word added or taken off in turn), so every search is the first
after an edit of the text indexes, as on a site being edited; the texts
are put back after the run.  Only the searches are timed.
"""
import json
import statistics
import sys
import time

BACKENDS = ("zcatalog", "pgcatalog")


def queries(plan):
    from level1.plan import minutes_to_datetime
    from level1.queries import QUERY_NOW_MIN
    w = plan.words
    now = minutes_to_datetime(QUERY_NOW_MIN)
    anonymous = {"allowedRolesAndUsers": ["Anonymous"], "effectiveRange": now}
    # a top-level section, another, and a folder below a section
    section = plan.folder_paths[plan.levels[0][1]]
    other = plan.folder_paths[plan.levels[0][2]]
    folder = plan.folder_paths[plan.levels[1][3]]
    return {
        "TA": dict(anonymous, SearchableText="%s %s" % (w[29], w[79])),
        "TW": dict(anonymous, SearchableText=w[60]),
        "TP": dict(anonymous, SearchableText="%s %s" % (w[29], w[79]),
                   b_size=10),
        "TG": dict(anonymous, SearchableText=w[60] + "*",
                   portal_type=["Document", "News Item", "Event", "Folder"],
                   b_size=10),
        "TB": {"SearchableText": w[40][:3] + "*", "b_size": 20},
        "TT": {"SearchableText": "%s %s" % (w[29], w[79]),
               "portal_type": "Document", "review_state": "published"},
        # globs as Plone sends them (Plone 6.2's munge_search_term stars
        # every word and joins them with AND), without and beside filters
        "GE": {"SearchableText": w[40][:3] + "*"},
        "GA": dict(anonymous, SearchableText=w[40][:3] + "*", b_size=20),
        "GS": dict(anonymous, SearchableText=w[29][:4] + "*", b_size=10),
        "GT": {"SearchableText": w[40][:3] + "*", "portal_type": "Event",
               "b_size": 20},
        "GF": {"SearchableText": w[40][:3] + "*",
               "path": plan.folder_paths[plan.levels[1][3]], "b_size": 20},
        # in a top-level section, every match
        "GP": {"SearchableText": w[40][:3] + "*",
               "path": plan.folder_paths[plan.levels[0][0]]},
        "GM": dict(anonymous, SearchableText="%s* AND %s*" % (w[29], w[79]),
                   portal_type=["Document", "News Item", "Event", "Folder"],
                   b_size=10),
        "GW": {"SearchableText": "%s AND %s*" % (w[29], w[40][:3]),
               "b_size": 20},
        # beside an index that is not hot (the entries are read)
        "GI": {"SearchableText": w[40][:3] + "*", "is_folderish": False,
               "b_size": 20},
        # as plone.restapi's @search sends them: the site root's path
        # added, every match (it batches the answer itself)
        "GR": {"SearchableText": w[40][:3] + "*", "path": "/plone"},
        "GN": dict(anonymous, SearchableText="%s AND %s*" % (
            w[29], w[40][:3]), path="/plone"),
        # suggestions as pgc_suggest asks them (search/suggest.py): every
        # typed word a prefix of the Title, the searchable types, the
        # user's filters, the first 10 by relevance
        "SU": dict(anonymous, Title=w[40][:3] + "*",
                   portal_type=["Document", "News Item", "Event", "Folder"],
                   b_size=10),
        "SU4": dict(anonymous, Title=w[29][:4] + "*",
                    portal_type=["Document", "News Item", "Event",
                                 "Folder"], b_size=10),
        "SW": dict(anonymous, Title="%s* AND %s*" % (w[29], w[79][:3]),
                   portal_type=["Document", "News Item", "Event", "Folder"],
                   b_size=10),
        "O1": {"review_state": "pending"},
        "O3": {"Subject": ["Python", "Zope", "Volto"]},
        "O5": {"path": "/plone"},
        "O10": {"is_folderish": True},
        "O19": {"review_state": ["private", "pending"], "Creator": "user03"},
        # subtrees beside the hot conditions, every match: a section's
        # documents, its anonymous listing, a folder's documents, two
        # sections (with and without a type), and plone.restapi's shape
        # (the site root's path added) with a type and anonymous
        "PSD": {"path": section, "portal_type": "Document"},
        "PSA": dict(anonymous, path=section, review_state="published",
                    portal_type=["Document", "News Item"]),
        "PF": {"path": folder, "portal_type": "Document"},
        "PSP": {"path": [section, other]},
        "PSPD": {"path": [section, other], "portal_type": "Document"},
        "PR": {"path": "/plone", "portal_type": "Document"},
        "PRA": dict(anonymous, path="/plone", review_state="published",
                    portal_type=["Document", "News Item"]),
    }


#: ``--after-edit``: the entries whose texts change, as parts of the site
EDITED = (0.31, 0.43, 0.57, 0.71, 0.89)


def edit_text(db, plan, k, back=False):
    """Commit a change of the texts of entry ``EDITED[k % 5]``: a word
    added on even turns, taken off again on odd ones (``back``: put
    back as built)."""
    import transaction
    from level1.common import SITE_ID
    from level1.plan import make_stub_class
    values = dict(plan.entry(int(EDITED[k % len(EDITED)] * plan.n)))
    if not back and (k // len(EDITED)) % 2 == 0:
        for name in ("Title", "Description", "SearchableText"):
            values[name] = values[name] + " edited"
    conn = db.open()
    try:
        transaction.begin()
        catalog = conn.root()["Application"][SITE_ID]["portal_catalog"]
        catalog.catalog_object(make_stub_class()(values), uid=values["path"])
        transaction.commit()
    finally:
        transaction.abort()
        conn.close()


def child(args):
    import shared
    from level1.databases import db_name
    from level1.measure import Request
    from level1.plan import Plan
    dsn = "%s dbname=%s" % (args.dsn, db_name(args.child, args.scale,
                                              args.seed))
    db, _ = shared.start_backend(args.child, dsn, 100000, [], "moreq-")
    plan = Plan(args.scale, args.seed)
    out = {}
    only = set(args.only.split(",")) if args.only else None
    edits = 0
    for qid, query in queries(plan).items():
        if only and qid not in only:
            continue
        times = []
        for i in range(args.warmup + args.iterations):
            if args.after_edit:
                edit_text(db, plan, edits)
                edits += 1
            with Request(db) as req:
                t0 = time.perf_counter()
                results = req.catalog.unrestrictedSearchResults(**query)
                n = len(results)
                shared.render(results)
                if i >= args.warmup:
                    times.append((time.perf_counter() - t0) * 1000.0)
        with Request(db) as req:
            results = req.catalog.unrestrictedSearchResults(**query)
            page = [b.getPath() for b in results]
            actual = getattr(results, "actual_result_count", len(results))
        out[qid] = {"median": statistics.median(times),
                    "p95": sorted(times)[int(0.95 * (len(times) - 1))],
                    "count": n, "actual": actual, "paths": page,
                    "page": "b_size" in query,
                    "text": "SearchableText" in query or "Title" in query}
        shared.log(args.child, qid, "%.2f ms" % out[qid]["median"])
    if args.after_edit:
        for k in range(len(EDITED)):
            edit_text(db, plan, k, back=True)
    with open(args.result, "w") as f:
        json.dump(out, f)


def main(argv=None):
    import shared
    p = shared.side_by_side_parser(__doc__.split("\n")[0])
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--only", help="only these query ids (comma separated)")
    p.add_argument("--output")
    p.add_argument("--after-edit", action="store_true",
                   help="commit a change of one entry's texts before each "
                        "search")
    args = p.parse_args(argv)
    args.dsn = shared.server_dsn(args.dsn)
    if args.child:
        return child(args)
    found = shared.run_side_by_side(
        __file__, args, args.backends.split(","),
        (["--only", args.only] if args.only else []) +
        (["--after-edit"] if args.after_edit else []))
    problems = []
    print("| query | matches | %s |%s" % (
        " | ".join("%s ms (p95)" % b for b in found),
        " pg/zc |" if len(found) == 2 else ""))
    print("|---|---|%s" % ("---|" * (len(found) + (len(found) == 2))))
    for qid in next(iter(found.values())):
        rows = [found[b][qid] for b in found]
        line = "| %s | %d | %s |" % (qid, rows[0]["actual"], " | ".join(
            "%.2f (%.2f)" % (r["median"], r["p95"]) for r in rows))
        if len(rows) == 2:
            zc, pg = found["zcatalog"][qid], found["pgcatalog"][qid]
            line += " %.2f |" % (pg["median"] / zc["median"])
            if (zc["count"], zc["actual"]) != (pg["count"], pg["actual"]):
                problems.append("%s: counts %s vs %s" % (
                    qid, (zc["count"], zc["actual"]),
                    (pg["count"], pg["actual"])))
            elif not zc["page"] and set(zc["paths"]) != set(pg["paths"]):
                problems.append("%s: the sets of paths differ" % qid)
            elif zc["text"] and zc["paths"] != pg["paths"]:
                # the relevance order (and so which matches a page
                # holds): a documented difference (scoring.py: document
                # frequencies counted up to DF_EXACT_LIMIT)
                print("(info) %s: the relevance order differs%s" % (
                    qid, " (the page's members too)"
                    if set(zc["paths"]) != set(pg["paths"]) else ""))
        print(line)
    print("parity: %s" % ("OK" if not problems else "; ".join(problems)))
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"scale": args.scale, "results": found,
                       "problems": problems}, f)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
