"""The level2 parity check: every backend against the plan-derived
oracle, and the backends against each other (counts, result sets, the order
of the sorted scenarios, the content fingerprint)."""
from .workload import SCENARIOS
from .workload import SITE_ID


def check_parity(results):
    """Counts, result sets and (for P4/P6/P9) the ordered paths must agree
    between the backends; each backend is also checked against the
    plan-derived oracle (documents only)."""
    problems, checks = [], 0
    names = list(results)
    for name, res in results.items():
        expected = res.get("expected", {})
        for sid, exp in expected.items():
            got = res["queries"][sid]
            doc_paths = [p for p in got["paths"]
                         if p.startswith("/%s/" % SITE_ID)]
            checks += 1
            if sid in ("P4", "P9"):
                ok = doc_paths[:len(exp["paths"])] == exp["paths"][
                    :len(doc_paths)]
            else:
                ok = doc_paths == exp["paths"]
            if not ok:
                problems.append("%s %s: result paths differ from the "
                                "plan-derived expectation" % (name, sid))
            if len(got["counts_seen"]) != 1:
                problems.append("%s %s: len() varied between iterations: %s"
                                % (name, sid, got["counts_seen"]))
    if len(names) >= 2:
        ref = names[0]
        for other in names[1:]:
            a, b = results[ref], results[other]
            checks += 1
            if a.get("content_sha256") != b.get("content_sha256"):
                problems.append("content fingerprint differs: %s vs %s"
                                % (ref, other))
            for sid, _label, _q, is_sorted in SCENARIOS:
                qa, qb = a["queries"][sid], b["queries"][sid]
                for key in ("count", "actual_result_count"):
                    checks += 1
                    if qa[key] != qb[key]:
                        problems.append("%s %s: %s=%s, %s=%s" % (
                            sid, key, ref, qa[key], other, qb[key]))
                checks += 1
                if qa["paths"] != qb["paths"]:
                    what = "ordered paths" if is_sorted else "result set"
                    first = next((i for i, (x, y) in enumerate(
                        zip(qa["paths"], qb["paths"])) if x != y),
                        min(len(qa["paths"]), len(qb["paths"])))
                    problems.append(
                        "%s: %s differ (first difference at #%d: %s=%r, "
                        "%s=%r)" % (
                            sid, what, first, ref,
                            qa["paths"][first] if first < len(qa["paths"])
                            else None, other,
                            qb["paths"][first] if first < len(qb["paths"])
                            else None))
    return {"ok": not problems, "checks": checks, "problems": problems,
            "compared": names}
