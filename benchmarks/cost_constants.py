"""The per-row costs behind the planner's microsecond constants, measured.

Two choices of plone.pgcatalog's compiler weigh rows by constants in
microseconds:

* ``relevance.entries_hashed``: the matches of a union read word by word,
  kept by conditions on the entries, each match's entry looked up by rid
  (``ENTRY_LOOKUP_US`` per match) or the entries meeting the conditions
  read once and joined to the matches by a hash (``ENTRY_HASHED_US`` per
  entry);
* ``postings.Postings.pays``: a union of words read word by word
  (``POSTING_US`` per row read) or matched at once (``UNION_ROW_US`` per
  row of the union) and its rows the other conditions keep scored over
  their lexemes (``ROW_SCORE_US`` per row).

Only the ratios between the constants of one choice decide anything.  This
script measures them on a level1 catalog (``benchmarks/level1``: built by
its ``_level1_build`` child, or reused, see ``--reuse-any-source``), with
the statements the compiler builds for a three-letter glob beside
``is_folderish=False`` (more_queries' GI), each in the form the compiler
puts it in a search (``relevance._scored``: ``SELECT rid, score FROM
<source> WHERE <where>``), counted and its scores read (``SELECT
count(*), max(score) FROM (...) s``, where the search's answer sorts and
aggregates them, the same in both ways of a choice):

=========  ==============================================================
postings   the union read word by word alone (``postings.postings_sql``)
lookup     the same, each match's entry looked up for ``is_folderish``
           (``relevance.postings_joined``)
hashed     the same, kept among the entries meeting it, read once and
           joined by a hash (``relevance.among_entries``)
matched    the union matched at once on the text rows, not scored
scored     the same, each row scored (``TextRow.rank``: the glob's one
           pass over the row's lexemes)
=========  ==============================================================

Per row, in each round (every statement once per round, in turn, so that
each difference is taken in the same minute), then the median of the
rounds:

* POSTING_US = postings / rows read (the words' document frequencies, as
  ``Postings.reads``);
* UNION_ROW_US = matched / matches;
* ROW_SCORE_US = (scored - matched) / matches;
* ENTRY_LOOKUP_US = (lookup - postings) / matches;
* ENTRY_HASHED_US = (hashed - postings) / entries meeting the condition.

Times are the client's (psycopg, unprepared: planned each time as the
engine's first runs of a statement are), on a connection of the engine's
pool (its planner settings), after ``--warmup`` untimed rounds: warm.  An
``EXPLAIN (ANALYZE, TIMING OFF)`` of each afterwards checks that the
lookup form looks entries up by their primary key and the hashed form
hashes them.

    python benchmarks/cost_constants.py --entries 100000 [--json costs.json]

The server is ``PGCATALOG_DSN``'s, or an embedded one (thrown away at
exit), or ``--private-server DIR``'s (kept: its catalog is reused by the
next run).  The database is level1's (``bench_l1_pgcatalog_<N>_<seed>``): a
kept level1 catalog is reused, and one built here is dropped unless
``--keep-database``.  A shared machine's speed moves by up to 2x between
minutes: the ratios, taken within rounds, are steadier than the figures.
Warm is in ``shared_buffers`` only if they hold the entries and text rows
(the embedded server's 128 MB do not at 100,000 entries: the run notes
it, and the rows read then cost about twice as much; README.md).
"""
import argparse
import json
import os
import statistics
import sys
import time

import shared
from shared import log

from level1.common import SEED
from level1.databases import db_name
from level1.databases import named_database
from level1.databases import private_server
from level1.databases import stored_build

BACKEND = "pgcatalog"
ORDER = ("postings", "lookup", "hashed", "matched", "scored")


def build_or_reuse(server, entries, seed, any_source, rebuild):
    """The DSN of a level1 catalog of ``entries`` entries, and whether it
    was built now."""
    name = db_name(BACKEND, entries, seed)
    dsn, existed = named_database(server, name, not rebuild)
    if existed and stored_build(dsn, BACKEND, entries, seed, any_source):
        log("reusing the level1 catalog in %s" % name)
        return dsn, False
    if existed:
        dsn, _ = named_database(server, name, False)
    log("building %d entries in %s (level1's _level1_build)" % (entries,
                                                                 name))
    env = shared.child_environment(BACKEND, dsn)
    env["PGCATALOG_CACHE"] = "off"
    result = shared.result_file("cost-")
    try:
        build, why = shared.run_child(shared.child_command(
            "_level1_build", "--name", BACKEND, "--dsn", dsn,
            "--scale", str(entries), "--seed", str(seed),
            "--result-file", result), env, result)
    finally:
        os.unlink(result)
    if build is None:
        raise SystemExit("build failed: %s" % why)
    return dsn, True


def statements(db, glob):
    """The probes (name -> Fragment) and the counts they are divided by,
    made by the engine's compiler for ``glob`` beside ``is_folderish``."""
    from level1.measure import Request

    from plone.pgcatalog.pg.fragment import TRUE
    from plone.pgcatalog.pg.fragment import and_
    from plone.pgcatalog.pg.fragment import q
    from plone.pgcatalog.schema import tables as schema
    from plone.pgcatalog.search import compiler
    from plone.pgcatalog.search import relevance

    seen = {}
    original = compiler.text_relevance

    def capture(conditions, store, window):
        seen.update(conditions=conditions, store=store)
        raise _Captured()

    compiler.text_relevance = capture
    try:
        with Request(db) as req:
            store = req.catalog._pgc_store()
            try:
                compiler.compile_search(req.catalog._catalog, {
                    "SearchableText": glob, "is_folderish": False}, store)
            except _Captured:
                pass
            cid = store.cid
            [text] = [c.text for c in seen["conditions"] if c.text]
            rest = [c.where for c in seen["conditions"]
                    if c.text is None and not c.everywhere]
            # text.postings reads the words' frequencies: in the request
            postings = text.postings(cid)
            if postings is None:
                raise SystemExit("%r is not read word by word" % glob)
    finally:
        compiler.text_relevance = original

    def probe(where, rank, source, rid):
        return q("SELECT count(*), max(s.score) FROM ({} OFFSET 0) s",
                 relevance._scored(where, rank, source, rid))

    # as compiler.postings_beside_entries makes them
    on_entries = and_(q("e.cid = {}", cid), *rest)
    matched = and_(q("e.cid = {}", cid), text.condition("e"))
    probes = {
        "postings": probe(TRUE, relevance.POSTINGS_SCORE,
                          relevance.postings(postings.statement),
                          relevance.TEXT_RID),
        "lookup": probe(and_(*rest), relevance.POSTINGS_SCORE,
                        relevance.postings_joined(postings.statement),
                        relevance.TEXT_RID),
        "hashed": probe(relevance.among_entries(on_entries),
                        relevance.POSTINGS_SCORE,
                        relevance.postings(postings.statement),
                        relevance.TEXT_RID),
        # the union matched at once, as for the glob alone without
        # postings (compiler.text_relevance): the text rows as ``e``
        "matched": probe(matched, q("0::float8"), relevance.TEXT_ROWS,
                         q("e.rid")),
        "scored": probe(matched, text.rank("e"), relevance.TEXT_ROWS,
                        q("e.rid")),
    }
    meeting = q("SELECT count(*) FROM {} WHERE {}", schema.FROM_ENTRIES,
                on_entries)
    return probes, meeting, postings


class _Captured(Exception):
    """Raised to stop the compiler once it reached text_relevance."""


def plan_nodes(plan, out=None):
    """The plan's nodes in preorder: type, relation, index, hash batches."""
    out = [] if out is None else out
    node = plan["Node Type"]
    if plan.get("Relation Name"):
        node += " on " + plan["Relation Name"]
    if plan.get("Index Name"):
        node += " using " + plan["Index Name"]
    if plan.get("Hash Batches"):
        node += " (batches %s, %s kB)" % (plan["Hash Batches"],
                                          plan.get("Peak Memory Usage"))
    out.append(node)
    for child in plan.get("Plans", ()):
        plan_nodes(child, out)
    return out


def measure(conn, probes, runs, warmup):
    """Each probe once per round, in turn; returns name -> [ns per round]
    (timed rounds only) and name -> its row."""
    times = {name: [] for name in probes}
    rows = {}
    for n in range(warmup + runs):
        for name in ORDER:
            fragment = probes[name]
            started = time.perf_counter_ns()
            row = conn.execute(fragment.text, fragment.params,
                               prepare=False).fetchone()
            spent = time.perf_counter_ns() - started
            rows[name] = row
            if n >= warmup:
                times[name].append(spent)
        log("round %d/%d%s" % (n + 1, warmup + runs,
                               " (warm-up)" if n < warmup else ""))
    return times, rows


def per_row(times, counts):
    """name -> list of µs per row, one per round (differences within the
    round)."""
    rounds = range(len(times["postings"]))
    t = {name: [v / 1e3 for v in values] for name, values in times.items()}
    return {
        "POSTING_US": [t["postings"][r] / counts["reads"] for r in rounds],
        "UNION_ROW_US": [t["matched"][r] / counts["matches"]
                         for r in rounds],
        "ROW_SCORE_US": [(t["scored"][r] - t["matched"][r])
                         / counts["matches"] for r in rounds],
        "ENTRY_LOOKUP_US": [(t["lookup"][r] - t["postings"][r])
                            / counts["matches"] for r in rounds],
        "ENTRY_HASHED_US": [(t["hashed"][r] - t["postings"][r])
                            / counts["meeting"] for r in rounds],
    }


def ratios(code, measured, counts):
    """The comparisons that decide: code's constants against the measured
    ones."""
    from plone.pgcatalog.search import relevance
    out = {}

    def both(name, f):
        out[name] = {"code": f(code), "measured": f(measured)}

    # entries_hashed: hashed when entries * H < matches * L, i.e. when the
    # entries meeting the conditions are fewer than L / H times the matches
    both("ENTRY_LOOKUP_US / ENTRY_HASHED_US (hashed below this "
         "entries/matches)",
         lambda c: c["ENTRY_LOOKUP_US"] / c["ENTRY_HASHED_US"])
    both("POSTING_US / UNION_ROW_US",
         lambda c: c["POSTING_US"] / c["UNION_ROW_US"])
    both("ROW_SCORE_US / UNION_ROW_US",
         lambda c: c["ROW_SCORE_US"] / c["UNION_ROW_US"])
    both("POSTING_US / (UNION_ROW_US + ROW_SCORE_US)",
         lambda c: c["POSTING_US"] / (c["UNION_ROW_US"] + c["ROW_SCORE_US"]))
    # Postings.pays: reads * P <= union * (U + share * R); the share of the
    # documents other conditions must keep for the words to pay, with this
    # glob's reads and the union as the code estimates it (the words' sum,
    # at most the documents) and as it is (its matches)
    reads, matches = counts["reads"], counts["matches"]
    estimate = min(reads, counts["documents"] or reads)

    def share(c, union):
        return (c["POSTING_US"] * reads / union - c["UNION_ROW_US"]) \
            / c["ROW_SCORE_US"]

    both("break-even kept share, union as Postings.pays estimates it",
         lambda c: share(c, estimate))
    both("break-even kept share, the true union",
         lambda c: share(c, matches))
    out["HASHED_ROWS_MAX (measured: this hash's larger side)"] = {
        "code": relevance.HASHED_ROWS_MAX,
        "measured": max(matches, counts["meeting"])}
    return out


def server_facts(conn):
    facts = {}
    for setting in ("server_version", "shared_buffers", "work_mem",
                    "random_page_cost", "max_parallel_workers_per_gather",
                    "plan_cache_mode"):
        facts[setting] = conn.execute(
            "SELECT current_setting(%s)", (setting,)).fetchone()[0]
    facts["shared_buffers_mb"] = conn.execute(
        "SELECT setting::bigint * current_setting('block_size')::bigint / "
        "1e6 FROM pg_settings WHERE name = 'shared_buffers'").fetchone()[0]
    facts["relation_mb"] = {
        name: round(size / 1e6, 1) for name, size in conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class "
            "c WHERE c.relkind = 'r' AND c.relname IN ('pgcatalog_entries', "
            "'pgcatalog_text', 'pgcatalog_hot')").fetchall()}
    return facts


def _number(value):
    if isinstance(value, int):
        return "{:,}".format(value)
    return "%.3g" % value


def report(result):
    code, measured = result["code"], result["measured"]
    lines = ["", "%d entries, glob %r beside is_folderish=False: %d rows read "
             "word by word, %d matches, %d entries meeting the condition, "
             "%d documents" % (
                 result["entries"], result["glob"], result["counts"]["reads"],
                 result["counts"]["matches"], result["counts"]["meeting"],
                 result["counts"]["documents"] or 0),
             "medians of %d rounds after %d warm-up rounds, ms: %s" % (
                 result["runs"], result["warmup"], ", ".join(
                     "%s %.1f" % (n, result["statement_ms"][n]) for n in ORDER)),
             "",
             "%-16s %6s %10s %14s %7s" % ("constant", "code", "measured",
                                          "(rounds)", "ratio"),
             "%-16s %6s %10s %14s %7s" % ("", "µs", "µs/row", "min-max",
                                          "m/code")]
    for name in ("ENTRY_LOOKUP_US", "ENTRY_HASHED_US", "POSTING_US",
                 "UNION_ROW_US", "ROW_SCORE_US"):
        spread = result["rounds_us"][name]
        lines.append("%-16s %6.1f %10.2f %6.2f-%-7.2f %7.2f" % (
            name, code[name], measured[name], min(spread), max(spread),
            measured[name] / code[name]))
    lines += ["", "%-68s %8s %9s" % ("ratios (what decides)", "code",
                                      "measured")]
    for name, pair in result["ratios"].items():
        lines.append("%-68s %8s %9s" % (name, _number(pair["code"]),
                                        _number(pair["measured"])))
    lines += ["", "plans (EXPLAIN ANALYZE, TIMING OFF):"]
    for name in ORDER:
        lines.append("  %-8s %s" % (name, " > ".join(result["plans"][name])))
    lines += result["warnings"] + result["notes"]
    lines.append("load average %s -> %s (on a shared machine the figures "
                 "move with its speed, their ratios less)" % tuple(
                     ", ".join("%.2f" % x for x in result[k])
                     for k in ("loadavg_start", "loadavg_end")))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100000,
                        help="catalog size (level1's content plan)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--runs", type=int, default=11,
                        help="timed rounds (every statement once each)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed rounds first")
    parser.add_argument("--json", metavar="FILE",
                        help="write the table and everything behind it here")
    parser.add_argument("--private-server", metavar="DIR",
                        help="a PostgreSQL server of our own, data kept in "
                             "DIR (see run_benchmarks.py level1)")
    parser.add_argument("--keep-database", action="store_true",
                        help="keep a catalog built here for the next run")
    parser.add_argument("--reuse-any-source", action="store_true",
                        help="reuse a catalog built by another source of "
                             "the same schema version")
    parser.add_argument("--rebuild", action="store_true",
                        help="build even if a fitting catalog exists")
    args = parser.parse_args(argv)
    loadavg_start = os.getloadavg()
    if args.private_server:
        server = private_server(args.private_server, 2048)
    else:
        from plone.pgcatalog.testing import pgserver
        server = pgserver.server_dsn()
    started = time.perf_counter()
    dsn, built = build_or_reuse(server, args.entries, args.seed,
                                args.reuse_any_source, args.rebuild)
    build_s = time.perf_counter() - started

    from level1.plan import Plan
    glob = Plan(args.entries, args.seed).words[40][:3] + "*"
    db, startup = shared.start_backend(BACKEND, dsn, 5000, [], "cost-")
    log("Zope started in %.1fs" % startup)

    from plone.pgcatalog.indexes.text import postings as word_by_word
    from plone.pgcatalog.pg import db as pgdb
    from plone.pgcatalog.search import relevance
    try:
        probes, meeting, postings = statements(db, glob)
        with pgdb.get_pool(dsn).connection() as conn:
            facts = server_facts(conn)
            counts = {"reads": postings.reads,
                      "documents": postings.documents,
                      "meeting": conn.execute(meeting.text, meeting.params)
                      .fetchone()[0]}
            times, rows = measure(conn, probes, args.runs, args.warmup)
            plans = {}
            for name in ORDER:
                plan = conn.execute(
                    "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
                    + probes[name].text, probes[name].params,
                    prepare=False).fetchone()[0]
                plans[name] = plan_nodes(plan[0]["Plan"])
    finally:
        db.close()
        pgdb.close_pools()
        if built and not args.keep_database:
            from plone.pgcatalog.testing import pgserver
            pgserver.drop_database(dsn)

    counts["matches"] = rows["postings"][0]
    warnings = []
    if rows["matched"][0] != counts["matches"] or \
            rows["scored"][0] != counts["matches"]:
        warnings.append("WARNING: the union matched at once has %s rows, "
                        "word by word %s" % (rows["matched"][0],
                                             counts["matches"]))
    if rows["lookup"][0] != rows["hashed"][0]:
        warnings.append("WARNING: looked up %s rows, hashed %s" % (
            rows["lookup"][0], rows["hashed"][0]))
    if not any("Index" in n and "pgcatalog_entries" in n
               for n in plans["lookup"]):
        warnings.append("WARNING: the lookup form did not look the entries "
                        "up by an index: ENTRY_LOOKUP_US is not measured")
    if not any(n.startswith("Hash") for n in plans["hashed"]):
        warnings.append("WARNING: the hashed form did not hash: "
                        "ENTRY_HASHED_US is not measured")
    if any("batches" in n and "batches 1," not in n
           for n in plans["hashed"]):
        warnings.append("WARNING: the hash spilled to disk in batches "
                        "(work_mem)")

    notes = []
    tables = sum(facts["relation_mb"].get(name, 0) for name in (
        "pgcatalog_entries", "pgcatalog_text"))
    if tables > float(facts["shared_buffers_mb"]):
        # at 100,000 entries on the embedded server's 128 MB: POSTING_US
        # and UNION_ROW_US about twice what they are with 1 GB, against
        # about the same ROW_SCORE_US
        notes.append("NOTE: the entries and text rows (%.0f MB) exceed "
                     "shared_buffers (%s): their rows come from the OS "
                     "cache, which weighs on the rows read (POSTING_US, "
                     "UNION_ROW_US) more than on the scoring" % (
                         tables, facts["shared_buffers"]))

    rounds = per_row(times, counts)
    code = {"ENTRY_LOOKUP_US": relevance.ENTRY_LOOKUP_US,
            "ENTRY_HASHED_US": relevance.ENTRY_HASHED_US,
            "POSTING_US": word_by_word.POSTING_US,
            "UNION_ROW_US": word_by_word.UNION_ROW_US,
            "ROW_SCORE_US": word_by_word.ROW_SCORE_US}
    measured = {name: statistics.median(values)
                for name, values in rounds.items()}
    result = {
        "benchmark": "cost_constants",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "entries": args.entries, "seed": args.seed, "glob": glob,
        "runs": args.runs, "warmup": args.warmup,
        "catalog_built_s": build_s if built else None,
        "server": facts, "counts": counts,
        "statement_ms": {name: statistics.median(v) / 1e6
                         for name, v in times.items()},
        "samples_ms": {name: [x / 1e6 for x in v]
                       for name, v in times.items()},
        "code": code, "measured": measured, "rounds_us": rounds,
        "plans": plans, "warnings": warnings, "notes": notes,
        "loadavg_start": loadavg_start, "loadavg_end": os.getloadavg(),
        "statements": {name: [f.text, [str(p) for p in f.params]]
                       for name, f in probes.items()},
    }
    result["ratios"] = ratios(code, measured, counts)
    result["table"] = report(result)
    print(result["table"])
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1, default=str)
        log("wrote", args.json)
    return 1 if warnings else 0


if __name__ == "__main__":
    sys.exit(main())
