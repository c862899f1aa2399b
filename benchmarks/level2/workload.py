"""The level2 workload, independent of any catalog: the site, the
scenarios (P3-P9, ``SCENARIOS`` below), the deterministic content plan drawn
from ``random.Random(42)`` and the results it predicts (the oracle of the
parity check).  Pure Python: the parent and the backend processes both
import it."""
import random


PGCATALOG_PROFILE = "plone.pgcatalog:default"
DISTRIBUTION = "volto"
SITE_ID = "Plone"
ADMIN = "admin"
SEED = 42

# Pool of 15 subject tags; "Python" is the one P4 asks for.
TAGS = (
    "Python", "Plone", "Zope", "PostgreSQL", "Catalog", "Search",
    "Performance", "Security", "Workflow", "Volto", "React", "Database",
    "Indexing", "Caching", "Testing",
)

# id, label, query (``{site}`` is replaced by the site id), sorted?
SCENARIOS = (
    ("P3", "simple field match",
     {"portal_type": "Document"}, False),
    ("P4", "complex multi-index",
     {"portal_type": "Document", "review_state": "published",
      "Subject": "Python", "sort_on": "modified",
      "sort_order": "descending", "b_size": 20}, True),
    ("P5", "full text",
     {"SearchableText": "benchmark document"}, False),
    ("P6", "navigation",
     {"path": {"query": "/{site}", "depth": 1},
      "sort_on": "getObjPositionInParent"}, True),
    ("P8", "security filtered",
     {"portal_type": "Document", "review_state": "published",
      "allowedRolesAndUsers": ["Anonymous"]}, False),
    ("P9", "date sorted + pagination",
     {"sort_on": "created", "sort_order": "descending", "b_size": 50}, True),
)

def scenario_query(query, site_id):
    """A scenario's query with ``{site}`` replaced by ``site_id``."""
    def fill(value):
        if isinstance(value, str):
            return value.replace("{site}", site_id)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value
    return fill(query)


# ---------------------------------------------------------------------------
# Deterministic content plan (identical for every backend)
# ---------------------------------------------------------------------------

MINUTES_PER_YEAR = 365 * 24 * 60


def make_plan(n_docs, n_mods):
    """Everything random about the content, drawn from random.Random(42).

    Dates are explicit so that the sorted scenarios have no ties at
    ZCatalog's DateIndex resolution (one minute) and do not depend on the
    wall clock: ``created`` = 2024-01-01T00:00Z + a distinct random minute
    of 2024, ``modified`` = created + up to 30 days (distinct minutes too);
    the documents touched by the modification phase get
    2025-01-01T00:00Z + k minutes (k = 1..n_mods).  Titles keep
    "Benchmark Document" so P5 matches every document before and after the
    modification phase.
    """
    rng = random.Random(SEED)
    n_published = round(n_docs * 0.7)
    n_pending = round(n_docs * 0.1)
    states = (["published"] * n_published + ["pending"] * n_pending
              + ["private"] * (n_docs - n_published - n_pending))
    rng.shuffle(states)
    created = rng.sample(range(MINUTES_PER_YEAR), n_docs)
    used_modified = set()
    docs = []
    for i in range(n_docs):
        tag = rng.choice(TAGS)
        tag_a, tag_b = rng.sample(TAGS, 2)
        subjects = rng.sample(TAGS, rng.randint(0, 4))
        modified = created[i] + rng.randint(0, 30 * 24 * 60)
        while modified in used_modified:
            modified += 1
        used_modified.add(modified)
        docs.append({
            "id": "benchmark-document-%d" % i,
            "title": "Benchmark Document %d \u2014 %s" % (i, tag),
            "description": ("A benchmark document about %s and %s."
                            % (tag_a, tag_b)),
            "subjects": subjects,
            "state": states[i],
            "created_min": created[i],
            "modified_min": modified,
        })
    mods = []
    for k, i in enumerate(rng.sample(range(n_docs), min(n_mods, n_docs))):
        mods.append({
            "index": i,
            "title": "Benchmark Document %d \u2014 revised %d" % (i, k + 1),
            "modified_min": MINUTES_PER_YEAR + k + 1,
        })
    return {"docs": docs, "mods": mods}


def expected_results(plan, site_id):
    """Expected counts/ordering computed from the plan alone (an oracle
    independent of both catalogs).  Only documents are considered; the
    parent compares each backend against it (site root excluded)."""
    docs = [dict(d) for d in plan["docs"]]
    for m in plan["mods"]:
        docs[m["index"]]["modified_min"] = m["modified_min"]
        docs[m["index"]]["title"] = m["title"]

    def path(d):
        return "/%s/%s" % (site_id, d["id"])

    published = [d for d in docs if d["state"] == "published"]
    p4 = sorted((d for d in published if "Python" in d["subjects"]),
                key=lambda d: -d["modified_min"])
    p9 = sorted(docs, key=lambda d: -d["created_min"])
    return {
        "P3": {"actual": len(docs), "paths": sorted(map(path, docs))},
        "P4": {"actual": len(p4), "paths": [path(d) for d in p4[:20]]},
        "P5": {"actual": len(docs), "paths": sorted(map(path, docs))},
        "P6": {"actual": len(docs), "paths": [path(d) for d in docs]},
        "P8": {"actual": len(published),
               "paths": sorted(map(path, published))},
        "P9": {"actual": len(docs), "paths": [path(d) for d in p9[:50]]},
    }
