"""The queries timed on both catalogs (:func:`make_queries`, from the plan) and
the sort key of a result path (:func:`sort_key_value`, for the tie-aware
parity comparison)."""
from .plan import Plan, minutes_to_datetime, sortable_title
from .shape import DAY, SPAN_MINUTES


VARIANTS = 10
# "now" for the queries that need one (effectiveRange, "last year")
QUERY_NOW_MIN = SPAN_MINUTES - 180 * DAY
# what CMFPlone's searchResults puts in allowedRolesAndUsers for a Manager
# (level2 runs its queries as one): every entry matches
MANAGER_ROLES = ("Anonymous", "Authenticated", "Manager", "user:admin")


def make_queries(plan):
    """``[(qid, label, kind, variants, sort_key)]``: ``kind`` is "search"
    (``variants`` are query dicts) or "unique" (index names); ``sort_key``
    names what the results are ordered by (for the tie-aware comparison),
    None for unordered results.

    Queries that address one place or one object (a folder listing, a
    subtree, a navtree, a UID, a date window) come in VARIANTS variants
    (other folders, items, UIDs, years), used in turn: a site serves many
    folders, and a catalog whose data lives in the ZODB must then load what
    its cache does not hold.  The others are the same every time."""
    n = plan.n
    levels = plan.levels
    second = levels[1] if len(levels) > 1 else levels[0]
    first = levels[0]
    deepest = set(levels[-1])
    words = plan.words

    def spread(seq, k=VARIANTS):
        seq = list(seq)
        return [seq[(j * len(seq)) // k] for j in range(min(k, len(seq)))]

    nav_items = []
    step = max(1, (n - plan.n_folders) // (VARIANTS * 4))
    for i in range(plan.n_folders, n, step):
        if plan.parent[i] in deepest:
            nav_items.append(i)
    nav_items = spread(nav_items) or [n - 1]
    uid_entries = [(j * n) // VARIANTS + 7 for j in range(VARIANTS)
                   if (j * n) // VARIANTS + 7 < n] or [0]
    now = minutes_to_datetime(QUERY_NOW_MIN)
    year_ago = minutes_to_datetime(QUERY_NOW_MIN - 365 * DAY)
    windows = []
    for j in range(VARIANTS):
        start = (j * 365 + 40) * DAY
        windows.append([minutes_to_datetime(start),
                        minutes_to_datetime(start + 30 * DAY)])
    n_docs = sum(1 for k in plan.kind if k == 1)
    deep_start = min(1000, max(0, (n_docs // 2) // 20 * 20))
    return [
        ("P3", "portal_type=Document", "search",
         [{"portal_type": "Document"}], None),
        ("P4", "type+state+Subject, modified desc, 20", "search",
         [{"portal_type": "Document", "review_state": "published",
           "Subject": "Python", "sort_on": "modified",
           "sort_order": "descending", "b_size": 20}], "modified"),
        ("P5", "SearchableText, 2 words", "search",
         [{"SearchableText": "%s %s" % (words[29], words[79])}], None),
        ("P6", "folder listing, depth 1, position", "search",
         [{"path": {"query": plan.folder_paths[f], "depth": 1},
           "sort_on": "getObjPositionInParent"} for f in spread(second)],
         "getObjPositionInParent"),
        ("P8", "type+state+allowedRolesAndUsers", "search",
         [{"portal_type": "Document", "review_state": "published",
           "allowedRolesAndUsers": ["Anonymous"]}], None),
        ("P8E", "type+state+roles+effectiveRange (anonymous, unbatched)",
         "search",
         [{"portal_type": "Document", "review_state": "published",
           "allowedRolesAndUsers": ["Anonymous"], "effectiveRange": now}],
         None),
        ("P9", "all (Manager's roles), created desc, 50", "search",
         [{"allowedRolesAndUsers": list(MANAGER_ROLES),
           "sort_on": "created", "sort_order": "descending", "b_size": 50}],
         "created"),
        ("R1", "modified in a 30-day window", "search",
         [{"modified": {"query": w, "range": "min:max"}} for w in windows],
         None),
        ("R2", "News since a year, created desc, 20", "search",
         [{"portal_type": "News Item",
           "created": {"query": year_ago, "range": "min"},
           "sort_on": "created", "sort_order": "descending", "b_size": 20}],
         "created"),
        ("K1", "Subject and (2 tags)", "search",
         [{"Subject": {"query": ["Python", "Plone"], "operator": "and"}}],
         None),
        ("PD2", "path depth 2 (subtree)", "search",
         [{"path": {"query": plan.folder_paths[f], "depth": 2}}
          for f in spread(first)], None),
        ("NAV", "navtree of a deep item, position", "search",
         [{"path": {"query": plan.path(i), "navtree": True},
           "sort_on": "getObjPositionInParent"} for i in nav_items],
         "getObjPositionInParent"),
        ("DEEP", "Documents by title, page b_start=%d" % deep_start,
         "search",
         [{"portal_type": "Document", "sort_on": "sortable_title",
           "b_start": deep_start, "b_size": 20}], "sortable_title"),
        ("FTF", "text + type + state, modified desc, 20", "search",
         [{"SearchableText": words[299], "portal_type": "Document",
           "review_state": "published", "sort_on": "modified",
           "sort_order": "descending", "b_size": 20}], "modified"),
        ("ANON", "anonymous listing: roles+effectiveRange, 20", "search",
         [{"portal_type": ["Document", "News Item"],
           "review_state": "published",
           "allowedRolesAndUsers": ["Anonymous"], "effectiveRange": now,
           "sort_on": "effective", "sort_order": "descending",
           "b_size": 20}], "effective"),
        ("UID", "UID lookup", "search",
         [{"UID": plan.entry(i)["UID"]} for i in uid_entries], None),
        ("UV", "uniqueValuesFor(Subject)", "unique", ["Subject"], None),
    ]


def sort_key_value(plan, key, path):
    """The sort key of ``path`` under ``key``, from the plan (for the
    tie-aware comparison)."""
    i = Plan.index_of(path)
    if key == "getObjPositionInParent":
        return plan.pos[i]
    if key == "created":
        return plan.created[i]
    if key == "modified":
        return plan.modified[i]
    if key == "effective":
        return plan.effective[i]
    if key == "sortable_title":
        return sortable_title(plan.title(i))
    raise KeyError(key)
