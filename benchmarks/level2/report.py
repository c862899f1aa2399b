"""The level2 text report: one table of every metric per backend (with
the pgcatalog/zcatalog ratio), the profile summaries, failures and the
parity verdict.  The same text goes into the JSON as ``table``."""
from shared import BACKENDS
from shared import fmt
from shared import load_line

from .workload import SCENARIOS


def format_report(results, failures, parity, env_info, args):
    names = [n for n in BACKENDS if n in results]
    lines = []
    if not names:
        lines.append("level2: no backend finished.")
        for n, why in failures.items():
            lines.append("BACKEND %s FAILED: %s (see its output above)"
                         % (n, why))
        lines.append("PARITY: FAILED (nothing to compare)")
        return "\n".join(lines)
    lines.append("level2: %d docs, %d iterations (+%d warm-up), cache-size "
                 "%d | %s | PostgreSQL %s over %s | Python %s"
                 % (args.docs, args.iterations, args.warmup, args.cache_size,
                    env_info["cpu_model"], env_info["postgresql"],
                    env_info["connection"], env_info["python"]))
    lines.append(load_line(env_info))
    header = ["metric"] + names
    pgs = [n for n in names if n != "zcatalog"] \
        if "zcatalog" in results else []
    ratio = bool(pgs)
    header += ["%s/zc" % ("engine" if n == "pgcatalog-engine" else "pg")
               for n in pgs]
    rows = []

    def row(label, getter, unit=""):
        vals = []
        for n in names:
            try:
                vals.append(getter(results[n]))
            except (KeyError, TypeError):
                vals.append(None)
        cells = [label] + [fmt(v, unit) for v in vals]
        b = vals[names.index("zcatalog")] if ratio else None
        for n in pgs:
            a = vals[names.index(n)]
            cells.append("%.2fx" % (a / b) if a is not None and b else "-")
        rows.append(cells)

    row("site creation (ms)", lambda r: r["site_creation"]["total_ms"])
    if pgs:
        row("  of which pgcatalog profile (ms)",
            lambda r: r["site_creation"]["pgcatalog_profile_ms"])
    row("creation ms/doc (mean)", lambda r: r["creation"]["mean_ms"])
    row("creation ms/doc (median)", lambda r: r["creation"]["median_ms"])
    row("creation ms/doc (p95)", lambda r: r["creation"]["p95_ms"])
    row("modification ms/doc (mean)", lambda r: r["modification"]["mean_ms"])
    row("modification ms/doc (median)",
        lambda r: r["modification"]["median_ms"])
    row("ZODB stores per created doc", lambda r: r["creation"]["stores_per_doc"])
    row("ZODB loads per created doc", lambda r: r["creation"]["loads_per_doc"])
    row("ZODB stores per modification",
        lambda r: r["modification"]["stores_per_doc"])
    row("ZODB objects after content", lambda r: r["zodb_objects"])
    for sid, label, _q, _s in SCENARIOS:
        for mode in ("len", "render"):
            for stat in ("median_ms", "p95_ms"):
                row("%s %s %s %s (ms)" % (sid, label, mode, stat[:-3]),
                    lambda r, sid=sid, mode=mode, stat=stat:
                    r["queries"][sid][mode][stat])
        row("%s loads/query len|render" % sid,
            lambda r, sid=sid: r["queries"][sid]["loads_len"])
        rows[-1][1:1 + len(names)] = [
            "%s|%s" % (fmt(results[n]["queries"][sid]["loads_len"]),
                       fmt(results[n]["queries"][sid]["loads_render"]))
            for n in names]
        row("%s count (actual)" % sid,
            lambda r, sid=sid: r["queries"][sid]["count"])
        rows[-1][1:1 + len(names)] = [
            "%d (%d)" % (results[n]["queries"][sid]["count"],
                         results[n]["queries"][sid]["actual_result_count"])
            for n in names]
        for i in range(len(pgs)):
            rows[-1][-1 - i] = ""
    row("mixed (scenarios + a modification every 10) median (ms)",
        lambda r: r["mixed"]["median_ms"])
    row("mixed (scenarios + a modification every 10) p95 (ms)",
        lambda r: r["mixed"]["p95_ms"])
    for n in pgs:
        stats = results[n].get("result_cache")
        if stats:
            cells = ["result cache (%s): hits/misses" % n] + [""] * (
                len(header) - 1)
            cells[1 + names.index(n)] = "%d/%d" % (stats["hits"],
                                                  stats["misses"])
            rows.append(cells)
    widths = [max(len(str(c[i])) for c in rows + [header])
              for i in range(len(header))]
    fmt_line = "  ".join("%%-%ds" % widths[0] if i == 0 else "%%%ds" % w
                         for i, w in enumerate(widths))
    lines.append(fmt_line % tuple(header))
    lines.append(fmt_line % tuple("-" * w for w in widths))
    for cells in rows:
        lines.append(fmt_line % tuple(cells))
    for n in names:
        prof = results[n].get("profile")
        if prof:
            lines.append(prof["text"].rstrip())
    for n, why in failures.items():
        lines.append("BACKEND %s FAILED: %s (see its output above)" % (n, why))
    if parity["ok"]:
        lines.append("PARITY: OK (%d checks; backends compared: %s; each "
                     "also checked against the plan-derived oracle)"
                     % (parity["checks"], ", ".join(parity["compared"])
                        or "none"))
    else:
        lines.append("PARITY: FAILED (%d problems)" % len(parity["problems"]))
        for p in parity["problems"]:
            lines.append("  PARITY FAILURE: " + p)
    return "\n".join(lines)
