"""The charts (matplotlib): query time against catalog size per query, with
the build cost, and queries/s against threads for the concurrency run."""
import math
import os

from shared import BACKENDS


def _size_label(n):
    if n >= 1000000 and n % 1000000 == 0:
        return "%dM" % (n // 1000000)
    if n >= 1000 and n % 1000 == 0:
        return "%dk" % (n // 1000)
    return str(n)


def _size_ticks(ax, scales):
    # optional matplotlib, see write_charts
    from matplotlib.ticker import NullLocator
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(scales)
    ax.set_xticklabels([_size_label(s) for s in scales])
    if len(scales) == 1:
        ax.set_xlim(scales[0] / 2, scales[0] * 2)


def write_charts(data, target):
    # matplotlib is imported here, not at the top: it is optional (the
    # parent reports a missing one and goes on without charts), and the Agg
    # backend must be chosen before pyplot is imported.
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator
    scales = sorted(data)
    qids = []
    for s in scales:
        for b in BACKENDS:
            for qid in data[s].get(b, {}).get("query", {}).get("queries", {}):
                if qid not in qids:
                    qids.append(qid)
    files = []
    colors = {"zcatalog": "tab:orange", "pgcatalog": "tab:blue",
              "pgcatalog-engine": "tab:purple",
              "pgcatalog-standby": "tab:green"}
    if qids:
        ncols = 4
        nrows = math.ceil((len(qids) + 1) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols,
                                                        3.3 * nrows))
        axes = list(axes.flat)
        for ax, qid in zip(axes, qids):
            label = None
            for b in BACKENDS:
                xs, ys, ps = [], [], []
                for s in scales:
                    q = data[s].get(b, {}).get("query", {}).get(
                        "queries", {}).get(qid)
                    if q:
                        label = q["label"]
                        xs.append(s)
                        ys.append(q["render"]["median_ms"])
                        ps.append(q["render"]["p95_ms"])
                if xs:
                    ax.plot(xs, ys, "o-", color=colors[b], label=b)
                    ax.plot(xs, ps, ":", color=colors[b], alpha=0.6)
            ax.set_xscale("log")
            ax.set_yscale("log")
            _size_ticks(ax, scales)
            ax.axhline(20, color="grey", lw=0.6, ls="--")
            ax.set_title("%s: %s" % (qid, label), fontsize=8)
            ax.set_xlabel("catalog entries", fontsize=7)
            ax.set_ylabel("ms (median, p95 dotted)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="both", alpha=0.3)
        # build cost panel
        ax = axes[len(qids)]
        for b in BACKENDS:
            xs = [s for s in scales if data[s].get(b, {}).get("build")]
            ys = [data[s][b]["build"]["build_s"] for s in xs]
            if xs:
                ax.plot(xs, ys, "s-", color=colors[b], label=b)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _size_ticks(ax, scales)
        ax.set_title("building the catalog (s)", fontsize=8)
        ax.set_xlabel("catalog entries", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        for ax in axes[len(qids) + 1:]:
            ax.axis("off")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right")
        fig.suptitle("level1: query time (search + len + first page of 20 "
                     "brains) against catalog size; ZCatalog on RelStorage "
                     "vs plone.pgcatalog (grey: 20 ms)")
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        fig.savefig(target, dpi=110)
        plt.close(fig)
        files.append(target)
    # concurrency
    conc = [(s, b, data[s][b]["query"]["concurrency"]) for s in scales
            for b in BACKENDS
            if data[s].get(b, {}).get("query", {}).get("concurrency")]
    if conc:
        fig, ax = plt.subplots(figsize=(6, 4))
        styles = ["-", "--", "-.", ":"]
        for k, s in enumerate(sorted({c[0] for c in conc})):
            for s2, b, c in conc:
                if s2 != s:
                    continue
                ts = sorted(c["runs"], key=int)
                ax.plot([int(t) for t in ts], [c["runs"][t]["qps"]
                                               for t in ts],
                        "o" + styles[k % 4], color=colors[b],
                        label="%s, %s entries" % (b, _size_label(s)))
        ax.set_xlabel("threads")
        ax.set_ylabel("queries / s (log)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        threads = sorted({int(t) for _s, _b, c in conc for t in c["runs"]})
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("concurrency: one Zope process, T threads")
        fig.tight_layout()
        root, ext = os.path.splitext(target)
        name = root + "-concurrency" + (ext or ".png")
        fig.savefig(name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files
