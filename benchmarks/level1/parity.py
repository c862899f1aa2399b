"""The parity check: both engines must give the same counts, the same result
sets, the same order (ties aside) and the same unique values."""
from shared import BACKENDS


def _compare_ordered(pa, pb, ka, kb, truncated):
    """Ordered results: the sort keys must be the same sequence, and each
    run of equal keys the same set of paths (the order of ties is the
    engines' business: ZCatalog's record ids are random).  A run cut by
    the batch end may hold different members.  Returns a problem or None."""
    if pa == pb:
        return None
    if ka != kb:
        first = next((i for i, (x, y) in enumerate(zip(ka, kb)) if x != y),
                     min(len(ka), len(kb)))
        return ("ordered results differ at #%d: %r (key %r) vs %r (key %r)"
                % (first, pa[first] if first < len(pa) else None,
                   ka[first] if first < len(ka) else None,
                   pb[first] if first < len(pb) else None,
                   kb[first] if first < len(kb) else None))
    i = 0
    while i < len(ka):
        j = i
        while j < len(ka) and ka[j] == ka[i]:
            j += 1
        last_run = j == len(ka)
        if set(pa[i:j]) != set(pb[i:j]) and not (last_run and truncated):
            return "members of the tie run #%d..%d (key %r) differ" % (
                i, j - 1, ka[i])
        i = j
    return None


def check_parity(data, args):
    problems, checks, notes = [], 0, []
    for scale, per in data.items():
        have = [b for b in BACKENDS if b in per and "query" in per[b]]
        for b in have:
            for qid, q in per[b]["query"]["queries"].items():
                checks += 1
                if q["lengths_varied"]:
                    problems.append("%d %s %s: len() varied between runs "
                                    "(variants %s)" % (scale, b, qid,
                                                       q["lengths_varied"]))
        if len(have) < 2:
            continue
        # every backend's answers against the first's
        a = per[have[0]]["query"]["queries"]
        for other in have[1:]:
            b = per[other]["query"]["queries"]
            for qid in a:
                if qid not in b:
                    continue
                for v, (qa, qb) in enumerate(zip(a[qid]["results"],
                                                 b[qid]["results"])):
                    where = "%d %s%s" % (scale, qid, "[%d]" % v
                                         if len(a[qid]["results"]) > 1
                                         else "")
                    problems.extend(_compare_results(
                        where, [have[0], other], qa, qb, a[qid]["sort_key"],
                        a[qid]["variants"][v], notes))
                    checks += 1
    return {"ok": not problems, "checks": checks, "problems": problems,
            "notes": notes}


def _compare_results(where, have, qa, qb, sort_key, query, notes):
    problems = []
    for key in ("count", "actual_result_count"):
        if qa[key] != qb[key]:
            problems.append("%s: %s %s=%s, %s=%s" % (
                where, key, have[0], qa[key], have[1], qb[key]))
    if qa.get("values") is not None:
        if qa["values"] != qb["values"]:
            only_a = [x for x in qa["values"] if x not in qb["values"]][:3]
            only_b = [x for x in qb["values"] if x not in qa["values"]][:3]
            problems.append("%s: unique values differ (only %s: %s; only "
                            "%s: %s)" % (where, have[0], only_a, have[1],
                                         only_b))
        return problems
    if qa["paths"] is None or qb["paths"] is None:
        notes.append("%s: %s results, compared by count only (more than "
                     "--parity-max-paths)" % (where, qa["count"]))
        return problems
    if sort_key is not None:
        why = _compare_ordered(qa["paths"], qb["paths"], qa["keys"],
                               qb["keys"], qa.get("paths_truncated")
                               or isinstance(query, dict) and
                               "b_size" in query)
        if why:
            problems.append("%s: %s" % (where, why))
        elif qa["paths"] != qb["paths"]:
            notes.append("%s: ties ordered differently (same keys, same "
                         "members per tie)" % where.split("[")[0])
    elif qa["paths"] != qb["paths"]:
        only_a = sorted(set(qa["paths"]) - set(qb["paths"]))[:3]
        only_b = sorted(set(qb["paths"]) - set(qa["paths"]))[:3]
        problems.append("%s: result sets differ (only %s: %s; only %s: %s)"
                        % (where, have[0], only_a, have[1], only_b))
    return problems
