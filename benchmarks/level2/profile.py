"""``--profile`` in a backend process: a separate, untimed pass of the
query phase under cProfile, and where its time went (psycopg, i.e.
plone.pgcatalog's SQL; psycopg2, i.e. RelStorage's loads; the rest)."""
import cProfile
import io
import pstats
import sys

from .measure import timed_query
from .workload import SCENARIOS
from .workload import SITE_ID
from .workload import scenario_query


def classify_profile(stats):
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


def profile_queries(db, args):
    """A separate pass after the measured one, so cProfile's overhead never
    reaches the reported timings: the same requests again (warm-up +
    iterations, len and render), profiled, not timed.  Prints the top
    functions to stderr, writes ``--profile-file``; returns the split (and
    the header text the report shows)."""
    profiler = cProfile.Profile()
    for sid, label, template, is_sorted in SCENARIOS:
        query = scenario_query(template, SITE_ID)
        for _ in range(args.warmup + args.iterations):
            timed_query(db, query, False, profiler)
            timed_query(db, query, True, profiler)
    stream = io.StringIO()
    if args.profile_file:
        profiler.dump_stats(args.profile_file)
    stats = pstats.Stats(profiler, stream=stream)
    split = classify_profile(stats)
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
    return dict(split, queries=n_queries, text=header)
