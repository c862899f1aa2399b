"""The text report: per scale a table of query times for both engines, the
build cost, the concurrency runs, the engine's targets, and the parity
verdict."""
from shared import BACKENDS
from shared import RENDER_BRAINS
from shared import SHORT_NAMES
from shared import fmt
from shared import load_line

from .queries import VARIANTS


#: level1's text queries: their own target at 1,000,000 entries (100 ms)
TEXT_QUERIES = ("P5", "FTF")
#: the size target: the catalog's tables at 1,000,000 entries, at most half
#: of the 11,960 MB measured on 2026-11-23
SIZE_BAR_MB = 5980


def _misses(pgq, qids, stat, limit):
    """``"yes"``, or ``"NO (<query> <ms>, ...)"``: the len ``stat`` of the
    queries ``qids`` at or above ``limit`` ms."""
    over = [(qid, pgq[qid]["len"][stat]) for qid in qids
            if pgq[qid]["len"].get(stat) is not None
            and pgq[qid]["len"][stat] >= limit]
    if not over:
        return "yes"
    return "NO (%s)" % ", ".join("%s %.2f" % found for found in over)


def _bar(scale, pgq, build):
    """The engine's targets at ``scale`` (len medians and p95s,
    the catalog's tables on disk), as report lines."""
    found = []
    if scale == 1000000:
        other = [qid for qid in pgq if qid not in TEXT_QUERIES]
        text = [qid for qid in pgq if qid in TEXT_QUERIES]
        found.append("1,000,000: every non-text len median < 20 ms: %s"
                     % _misses(pgq, other, "median_ms", 20))
        found.append("1,000,000: every non-text len p95 < 50 ms: %s"
                     % _misses(pgq, other, "p95_ms", 50))
        if text:
            found.append("1,000,000: text (%s) len medians < 100 ms: %s"
                         % (", ".join(text),
                            _misses(pgq, text, "median_ms", 100)))
        sizes = (build or {}).get("sizes") or {}
        if sizes.get("pgcatalog_bytes"):
            mb = sizes["pgcatalog_bytes"] / 1e6
            found.append("1,000,000: catalog tables <= %d MB: %s (%.1f MB)"
                         % (SIZE_BAR_MB, "yes" if mb <= SIZE_BAR_MB
                            else "NO", mb))
    if scale == 100000:
        found.append("100,000: every len median < 10 ms: %s"
                     % _misses(pgq, list(pgq), "median_ms", 10))
    return found


def _q(per, backend, qid, mode="render", stat="median_ms"):
    try:
        return per[backend]["query"]["queries"][qid][mode][stat]
    except (KeyError, TypeError):
        return None


def _routing(per):
    """What routing reads to the standby changed (``--standby``): the share
    of read-only transactions it served, and the p99 of every query's
    ``len`` routed against every read on the primary."""
    share = per["pgcatalog-standby"]["query"].get("standbys") or {}
    total = share.get("primary", 0) + share.get("standby", 0)
    pgq = per["pgcatalog"]["query"]["queries"]
    worse = [(_q(per, "pgcatalog-standby", qid, "len", "p99_ms") or 0) -
             (_q(per, "pgcatalog", qid, "len", "p99_ms") or 0)
             for qid in pgq]
    concurrency = []
    runs = [per[b]["query"].get("concurrency") for b in
            ("pgcatalog", "pgcatalog-standby")]
    if all(runs):
        for t in sorted(runs[0]["runs"], key=int):
            pg, sb = (r["runs"].get(t, {}).get("latency", {}).get("p99_ms")
                      for r in runs)
            if pg and sb:
                concurrency.append("T=%s %+.2f" % (t, sb - pg))
    return [
        "routing's cost, concurrency run's p99 (every query of the mix) "
        "routed minus primary only: %s" % (", ".join(concurrency) or "-"),
        "reads routed to the standby: %d of %d read-only transactions "
        "(%.1f %%)" % (share.get("standby", 0), total,
                       100.0 * share.get("standby", 0) / total
                       if total else 0.0),
        "routing's cost, len p99 routed minus primary only: at most "
        "%+.2f ms (median over the queries %+.2f ms)" % (
            max(worse), sorted(worse)[len(worse) // 2]) if worse else ""]


def format_report(data, parity, failures, skipped, env_info, args):
    lines = []
    lines.append(
        "level1: scales %s | cache-size %d (queries), %d (build) | commit "
        "every %d | %d iterations (+%d warm-up) | %s (%s cores) | "
        "PostgreSQL %s over %s | Python %s" % (
            args.scales, args.cache_size, args.build_cache_size,
            args.commit_every, args.iterations, args.warmup,
            env_info["cpu_model"], env_info["cpu_count"],
            env_info["postgresql"], env_info["connection"],
            env_info["python"]))
    lines.append(load_line(env_info))
    src = env_info.get("source") or {}
    lines.append("plone.pgcatalog source: commit %s%s" % (
        (src.get("commit") or "?")[:12],
        " + uncommitted src changes (sha256 %s)" % src["src_diff_sha256"][:12]
        if src.get("src_diff_sha256") else ""))
    bar = []
    for scale in sorted(data):
        per = data[scale]
        names = [b for b in BACKENDS if b in per and "query" in per[b]]
        if not names:
            continue
        any_q = per[names[0]]["query"]["queries"]
        if not any_q:
            continue
        lines.append("")
        lines.append("== %d entries: ms, median (p95); len = search + "
                     "len(), page = + first %d brains rendered ==" % (
                         scale, RENDER_BRAINS))
        header = ["query", "count"]
        for b in names:
            header += ["%s len" % SHORT_NAMES[b], "%s page" % SHORT_NAMES[b]]
        both = "zcatalog" in names and "pgcatalog" in names
        if both:
            header += ["pg/zc len", "pg/zc page"]
        routed = "pgcatalog" in names and "pgcatalog-standby" in names
        if routed:
            header += ["sb-pg len p99"]
        rows = [header]
        for qid, q in any_q.items():
            cells = ["%s %s" % (qid, q["label"]), "%s%s" % (
                q["count"], "*" if len(q["variants"]) > 1 else "")]
            for b in names:
                for mode in ("len", "render"):
                    m = _q(per, b, qid, mode)
                    p = _q(per, b, qid, mode, "p95_ms")
                    cells.append("%s (%s)" % (fmt(m), fmt(p)))
            if both:
                for mode in ("len", "render"):
                    zc = _q(per, "zcatalog", qid, mode)
                    pg = _q(per, "pgcatalog", qid, mode)
                    cells.append("%.2fx" % (pg / zc) if zc and pg else "-")
            if routed:
                pg = _q(per, "pgcatalog", qid, "len", "p99_ms")
                sb = _q(per, "pgcatalog-standby", qid, "len", "p99_ms")
                cells.append("%+.2f" % (sb - pg) if pg and sb else "-")
            rows.append(cells)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines.append("(* %d variants used in turn: other folders, items, "
                     "UIDs, windows; count shown for the first)" % VARIANTS)
        for k, r in enumerate(rows):
            lines.append("  ".join(c.ljust(widths[i]) if i == 0 else
                                   c.rjust(widths[i])
                                   for i, c in enumerate(r)))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        # the targets (for information)
        if "pgcatalog" in names:
            pgq = per["pgcatalog"]["query"]["queries"]
            slowest = max(pgq, key=lambda k: pgq[k]["render"]["median_ms"])
            lines.append("slowest pgcatalog query (page median): %s %.2f ms"
                         % (slowest, pgq[slowest]["render"]["median_ms"]))
            if both:
                ratios = {qid: _q(per, "pgcatalog", qid) /
                          _q(per, "zcatalog", qid) for qid in pgq
                          if _q(per, "zcatalog", qid)}
                over = sorted((r, qid) for qid, r in ratios.items()
                              if r > 0.2)
                lines.append("queries above 0.2x ZCatalog (page median): %s"
                             % (", ".join("%s %.2fx" % (qid, r)
                                          for r, qid in over) or "none"))
            bar.extend(_bar(scale, pgq, per["pgcatalog"].get("build")))
        if routed:
            lines.extend(_routing(per))
    # build cost
    lines.append("")
    lines.append("== building the catalogs ==")
    header = ["scale", "backend", "build s", "entries/s", "catalog_object s",
              "commit s", "VACUUM ANALYZE s", "DB MB", "ZODB MB",
              "ZODB objects", "pgcatalog MB", "max RSS MB"]
    rows = [header]
    for scale in sorted(data):
        for b in BACKENDS:
            build = data[scale].get(b, {}).get("build")
            if not build:
                continue
            s = build["sizes"]
            reused = ""
            if build.get("built_by_other_source"):
                reused = " (reused, built by %s)" % (
                    (build.get("source") or {}).get("commit", "?")[:7])
            elif build.get("reused"):
                reused = " (reused)"
            rows.append([str(scale), b + reused,
                         fmt(build["build_s"]), fmt(build["entries_per_s"]),
                         fmt(build["catalog_object_s"]),
                         fmt(build["commit_s"]),
                         fmt(build["vacuum_analyze_s"]),
                         fmt(s["database_bytes"] / 1e6),
                         fmt(s["zodb_bytes"] / 1e6), str(s["zodb_objects"]),
                         fmt(s["pgcatalog_bytes"] / 1e6),
                         fmt(build["maxrss_mb"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.extend(_bytes_per_entry(data))
    # concurrency
    conc_rows = []
    for scale in sorted(data):
        for b in BACKENDS:
            c = data[scale].get(b, {}).get("query", {}).get("concurrency")
            if not c:
                continue
            runs = c["runs"]
            conc_rows.append([str(scale), b] + [
                "%s (%s ms)" % (fmt(runs[t]["qps"]),
                                fmt(runs[t]["latency"].get("median_ms")))
                for t in sorted(runs, key=int)])
            threads = sorted(runs, key=int)
            shown = c
    if conc_rows:
        # the mix and durations of the last scale measured (the loop's
        # ``c`` is None when the largest scale had no concurrency run)
        c = shown
        lines.append("")
        lines.append("== concurrency: queries/s (median latency) from T "
                     "threads of one process; mix: %s; %ss per run after "
                     "%ss warm-up ==" % (
                         ",".join(c["mix"]), c["duration_s"], c["warmup_s"]))
        header = ["scale", "backend"] + ["T=%s" % t for t in threads]
        rows = [header] + conc_rows
        widths = [max(len(r[i]) if i < len(r) else 0 for r in rows)
                  for i in range(len(header))]
        for k, r in enumerate(rows):
            lines.append("  ".join(c.rjust(widths[i])
                                   for i, c in enumerate(r)))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
    for scale in sorted(data):
        pg = data[scale].get("pgcatalog", {})
        if pg.get("build") and pg.get("query") and \
                pg["build"].get("source") != pg["query"].get("source"):
            lines.append("WARNING: at %d the pgcatalog catalog was built by "
                         "another plone.pgcatalog source than the one that "
                         "queried it" % scale)
    for s, b, why in skipped:
        lines.append("SKIPPED %s at %d: %s" % (b, s, why))
    for f in failures:
        lines.append("FAILED: %s (see its output above)" % f)
    if bar:
        lines.append("")
        lines.append("targets (for information):")
        lines.extend("  " + line for line in bar)
    seen = {}
    for note in parity["notes"]:
        seen[note] = seen.get(note, 0) + 1
    for note, k in seen.items():
        lines.append("parity note: %s%s" % (note, " (%d variants)" % k
                                            if k > 1 else ""))
    if parity["ok"]:
        lines.append("PARITY: OK (%d checks)" % parity["checks"])
    else:
        lines.append("PARITY: FAILED (%d problems)" % len(parity["problems"]))
        for p in parity["problems"]:
            lines.append("  PARITY FAILURE: " + p)
    return "\n".join(lines)


def _bytes_per_entry(data):
    """The catalog's tables on disk, bytes per entry: heap, TOAST,
    indexes (builds that recorded them)."""
    lines = []
    for scale in sorted(data):
        build = data[scale].get("pgcatalog", {}).get("build") or {}
        relations = build.get("sizes", {}).get("pgcatalog_relations")
        if not relations:
            continue
        lines.append("")
        lines.append("== pgcatalog on disk at %d entries, bytes per entry "
                     "(heap / TOAST / indexes) ==" % scale)
        total = 0
        for name in sorted(relations, key=lambda n: -sum(
                relations[n].values())):
            r = relations[name]
            size = sum(r.values())
            total += size
            lines.append("  %-22s %8.0f  (%.0f / %.0f / %.0f)" % (
                name, size / scale, r["heap"] / scale, r["toast"] / scale,
                r["indexes"] / scale))
        lines.append("  %-22s %8.0f" % ("all", total / scale))
    return lines
