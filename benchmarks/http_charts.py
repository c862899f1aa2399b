"""A chart of an HTTP load run (``http_load.py --output FILE.json``), stock
and plone.pgcatalog side by side::

    python benchmarks/http_charts.py http.json http.png

or directly: ``python benchmarks/http_load.py ... --chart http.png``.

Three panels: the median and the 95th percentile of each request kind
(ms, bars per backend), the requests per second of each kind and of all
readers, and the ratios plone.pgcatalog / stock (throughput above 1 and
times below 1: plone.pgcatalog ahead).  The title says what ran: the
documents, the storage, the run's windows, its date, and the mismatches
and errors the run found (every answer checked against the ZODB).
"""
import argparse
import json
import sys

#: the request kinds in the order of the chart (http_load.KINDS, EDITS)
READS = ("search-text", "search-type-state", "search-subject",
         "navigation", "breadcrumbs", "folder", "search-page",
         "document-page")
EDITS = ("edit-patch", "edit-create", "edit-publish", "edit-delete")
COLORS = {"stock": "tab:orange", "pgcatalog": "tab:blue"}


def _backends(record):
    return [b for b in ("stock", "pgcatalog") if b in record["results"]]


def _kinds(record, backend):
    return record["results"][backend]["load"]["kinds"]


def title(record):
    """What ran, and what the check found."""
    args = record["arguments"]
    backends = _backends(record)
    mismatches = sum(record["results"][b].get("mismatches", 0)
                     for b in backends)
    errors = sum(_kinds(record, b)[k]["errors"] for b in backends
                 for k in READS + EDITS if k in _kinds(record, b))
    windows = "%d windows each, by turns" % args["rounds"] \
        if args.get("rounds", 1) > 1 else "one window each"
    return ("HTTP load, %d documents, %s, %d clients, an edit every %g s; "
            "%g s counted per backend (%s); %s\n"
            "every answer checked against the ZODB: %d mismatches, %d "
            "errors" % (
                args["docs"], record.get("storage", args.get("storage")),
                args["clients"], args["edit_every"], args["seconds"],
                windows, record["date"][:10], mismatches, errors))


def write_chart(record, target):
    """The chart of ``record`` (the JSON of ``--output``) as a PNG file."""
    # optional (the bench extra): imported here, the Agg backend chosen
    # before pyplot
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    backends = _backends(record)
    kinds = [k for k in READS + EDITS if k in _kinds(record, backends[0])]
    width = 0.8 / max(len(backends), 1)
    fig, axes = plt.subplots(3, 1, figsize=(13, 12))
    ax = axes[0]
    for i, backend in enumerate(backends):
        rows = _kinds(record, backend)
        xs = [n + (i - (len(backends) - 1) / 2) * width
              for n in range(len(kinds))]
        ax.bar(xs, [rows[k]["p95_ms"] or 0 for k in kinds], width,
               color=COLORS[backend], alpha=0.35,
               label="%s p95" % backend)
        ax.bar(xs, [rows[k]["p50_ms"] or 0 for k in kinds], width,
               color=COLORS[backend], label="%s median" % backend)
    ax.set_yscale("log")
    ax.set_ylabel("ms per request (log scale)")
    ax.set_xticks(range(len(kinds)))
    ax.set_xticklabels(kinds, rotation=20, ha="right")
    ax.legend(fontsize=8, ncol=2)
    ax.set_title("time per request (median, and p95 behind it)")
    ax = axes[1]
    rated = kinds + ["readers"]
    for i, backend in enumerate(backends):
        rows = _kinds(record, backend)
        xs = [n + (i - (len(backends) - 1) / 2) * width
              for n in range(len(rated))]
        ax.bar(xs, [rows[k]["req_per_s"] for k in rated], width,
               color=COLORS[backend], label=backend)
    ax.set_ylabel("requests / s")
    ax.set_xticks(range(len(rated)))
    ax.set_xticklabels(rated, rotation=20, ha="right")
    ax.legend(fontsize=8)
    ax.set_title("throughput (the readers: every read kind together)")
    ax = axes[2]
    ratios = record.get("ratios") or {}
    shown = [k for k in rated if k in ratios]
    if shown:
        xs = range(len(shown))
        for offset, key, label, color in (
                (-width / 2, "req_per_s", "req/s (above 1: more)",
                 "tab:green"),
                (width / 2, "p50_ms", "median (below 1: faster)",
                 "tab:purple")):
            ax.bar([x + offset for x in xs],
                   [ratios[k][key] or 0 for k in shown], width,
                   color=color, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(shown, rotation=20, ha="right")
        ax.legend(fontsize=8)
    ax.set_title("plone.pgcatalog / stock")
    fig.suptitle(title(record), fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=90)
    plt.close(fig)
    return target


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("result", help="http_load.py --output FILE.json")
    p.add_argument("chart", help="the PNG file to write")
    args = p.parse_args(argv)
    with open(args.result) as f:
        record = json.load(f)
    print(write_chart(record, args.chart))
    return 0


if __name__ == "__main__":
    sys.exit(main())
