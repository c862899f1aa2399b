"""Query generation and comparison for the differential suite.

The queries are built from the reference catalog's own data (index values,
paths, UIDs, dates), so that most of them match something, plus values that
match nothing, boundary values and invalid options.  Generation is seeded:
the same content gives the same queries.
"""
import copy
import datetime
import itertools
import random

from Acquisition import aq_base
from DateTime import DateTime


FIELD_INDEXES = ["portal_type", "review_state", "id", "getId", "Creator",
                 "sortable_title", "Type", "sync_uid", "cmf_uid",
                 "in_reply_to"]
KEYWORD_INDEXES = ["Subject", "object_provides", "allowedRolesAndUsers",
                   "getRawRelatedItems"]
DATE_INDEXES = ["created", "modified", "effective", "expires", "Date"]
BOOLEAN_INDEXES = ["is_folderish", "exclude_from_nav", "is_default_page"]
RECURRING_INDEXES = ["start", "end"]
TEXT_INDEXES = ["SearchableText", "Title", "Description"]
SORT_INDEXES = [
    "sortable_title", "modified", "created", "effective", "expires", "Date",
    "getObjPositionInParent", "path", "id", "getId", "portal_type",
    "review_state", "UID", "is_folderish", "exclude_from_nav", "start",
    "end", "effectiveRange", "Subject", "Type", "Creator", "sync_uid",
    "is_default_page"]
SORT_ORDERS = [None, "", "ascending", "reverse", "descending", "DESCENDING",
               "Reverse", "desc", "asc"]
TEXT_QUERIES_FIXED = [
    "plone", "Plone", "PLONE", "python zope", "café", "cafe", "CAFE",
    "élève", "eleve", "naïve", "uber", "über", "straße", "garçon",
    "brown*", "brow*", "bro?n", "b*e", "q*", "qu?ck", "x_ray", "x_r*",
    "e-mail", "email", "3d", "2024", "v1.2", "v1", "foo-bar", "foo bar",
    "\"foo bar\"", "\"bar foo\"", "don't", "rock&roll", "c++", "a/b",
    "日本語", "日本", "本語", "alpha AND beta", "alpha OR omega",
    "alpha NOT beta", "alpha -beta", "(alpha OR beta) AND gamma",
    "alpha and beta", "alpha or beta", "alpha not beta", "not alpha",
    "NOT alpha", "-alpha", "*alpha", "?lpha", "and", "or", "AND", "",
    "   ", "alpha*", "alpha* AND beta*", "\"quick brown\"",
    "\"brown fox\" OR dog", "lazy dog", "\"lazy dog\"", "zzzznotthere",
    "plone zzzznotthere", "plone OR zzzznotthere", "árvíztűrő",
    "arvizturo", "tükörfúrógép", "Ünïcödé", "unicode", "año", "ano",
    "niño", "(alpha", "alpha)", "\"alpha", "alpha AND", "OR beta",
    "alpha NOT", "sigma* OR delta*", "d*", "1", "2*", "doc", "page",
    "item", "n1*", "renamed*", "renamed_*", "upper", "Upper", "paren",
    "(paren)", "tilde~", "hash#1", "dollar$",
]


class Facts:
    """What the reference catalog holds (used to build queries)."""

    def __init__(self, portal, ref):
        self.ref = ref
        catalog = ref._catalog
        self.paths = sorted(catalog.uids.keys())
        self.values = {}
        for name in FIELD_INDEXES + KEYWORD_INDEXES + ["UID"]:
            self.values[name] = sorted(
                catalog.getIndex(name).uniqueValues())
        self.uids = self.values["UID"]
        self.dates = {}
        self.metadata = {}
        names = catalog.names
        for path, rid in catalog.uids.items():
            self.metadata[path] = dict(zip(names, catalog.data[rid]))
        for name in ["created", "modified", "effective", "expires"]:
            self.dates[name] = sorted(
                {m[name] for m in self.metadata.values()
                 if isinstance(m.get(name), DateTime)},
                key=lambda d: d.timeTime())
        self.dates["Date"] = sorted(
            {_as_datetime(m.get("Date")) for m in self.metadata.values()
             if _as_datetime(m.get("Date")) is not None},
            key=lambda d: d.timeTime())
        self.events = []
        for m in self.metadata.values():
            start = m.get("start")
            end = m.get("end")
            if isinstance(start, datetime.datetime):
                self.events.append((start, end))
        self.events.sort(key=lambda e: (e[0].timestamp(), e[1].timestamp()))
        self.words = sorted({w for m in self.metadata.values()
                             for w in str(m.get("Title") or "").split()})


class QueryGenerator:
    """Deterministic queries, by category."""

    def __init__(self, facts, seed):
        self.f = facts
        self.rng = random.Random(seed)

    # -- helpers -----------------------------------------------------------
    def pick(self, seq, k=1):
        seq = list(seq)
        if not seq:
            return [] if k != 1 else None
        if k == 1:
            return self.rng.choice(seq)
        return self.rng.sample(seq, min(k, len(seq)))

    def some_path(self):
        r = self.rng.random()
        if r < 0.8:
            return self.pick(self.f.paths)
        return self.pick([
            "/plone/nothere", "/plone/folder/nothere", "/plone/xay",
            "/plone/x_y", "/plone/folder", "/plone/folder2", "/plone",
            "/plone/Archiv 2023", "/plone/x%y", "/plone/x_", "/plone/fold",
            "/plone/folder-2", "/", "", "/plone/news"])

    def some_date(self, name):
        dates = self.f.dates.get(name) or self.f.dates["created"]
        d = self.pick(dates)
        r = self.rng.random()
        if r < 0.35:
            return d
        if r < 0.5:
            return d + self.rng.choice([1, -1, 30, -30]) / 1440.0
        if r < 0.6:
            return d + self.rng.randint(1, 59) / 86400.0  # same minute?
        if r < 0.7:
            return DateTime(self.rng.choice([
                "1969/12/31", "1970/01/01", "2000/01/01", "2024/03/15",
                "2025/01/01 00:00 UTC", "2499/12/31", "2500/01/01",
                "2099/06/01 12:00 UTC", "1000/01/02"]))
        if r < 0.8:
            return d.asdatetime()  # aware datetime
        if r < 0.85:
            return d.asdatetime().replace(tzinfo=None)  # naive: local time
        if r < 0.9:
            return d.ISO8601()
        if r < 0.95:
            return d.timeTime()  # epoch float
        return datetime.date(d.year(), d.month(), d.day())

    def some_event_date(self):
        if not self.f.events:
            return DateTime()
        start, end = self.pick(self.f.events)
        base = self.pick([start, end])
        r = self.rng.random()
        if r < 0.3:
            return base
        if r < 0.5:
            return base + datetime.timedelta(
                days=self.rng.choice([7, 14, 1, 2, 3, 30, 31]))
        if r < 0.7:
            return DateTime(base.isoformat())
        if r < 0.8:
            return base + datetime.timedelta(minutes=self.rng.randint(-90, 90))
        if r < 0.9:
            return base.replace(tzinfo=None)
        return DateTime(base.isoformat()) + self.rng.randint(-20, 20)

    # -- value index clauses -----------------------------------------------
    def field_clause(self, name):
        values = self.f.values.get(name) or ["x"]
        v = self.pick(values)
        v2 = self.pick(values)
        v3 = self.pick(values)
        missing = self.pick(["nothere", "Document ", "document", "",
                             "ZZZ", "a", "Ü"])
        strs = [x for x in values if isinstance(x, str)]
        lo = self.pick(strs + ["", "a", "M", "f", "x_", "z", "ü"]) \
            if strs else "a"
        hi = self.pick(strs + ["", "a", "M", "f", "x_", "z", "ü"]) \
            if strs else "z"
        forms = [
            lambda: v,
            lambda: missing,
            lambda: [v, v2],
            lambda: (v, missing),
            lambda: str(v) if isinstance(v, str) else v,  # Message -> str
            lambda: {"query": v},
            lambda: {"query": [v, v2, v3]},
            lambda: {"not": v},
            lambda: {"not": [v, v2]},
            lambda: {"query": [v, v2, v3], "not": v2},
            lambda: {"query": lo, "range": "min"},
            lambda: {"query": hi, "range": "max"},
            lambda: {"query": [lo, hi], "range": "min:max"},
            lambda: {"query": [lo, hi], "range": "minmax"},
            lambda: {"query": [hi, lo, v], "range": "min:max"},
            lambda: {"query": [lo, hi], "range": "min:max", "not": v},
            lambda: {"query": "", "range": "max"},
            lambda: {"query": lo, "range": "min", "not": [v, v2]},
            lambda: [],
            lambda: {"query": []},
            lambda: None,
            lambda: [None, v],
            lambda: {"query": v, "operator": "and"},
            lambda: {"query": v, "depth": 1},
            lambda: 5,
            lambda: {"query": 5, "range": "min"},
            lambda: {"not": []},
            lambda: {"query": v, "range": "maximum"},
            lambda: {"query": v, "range": ""},
        ]
        weights = [6, 2, 4, 2, 2, 3, 3, 3, 2, 2, 2, 2, 3, 1, 1, 1, 1, 1,
                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
        return self.rng.choices(forms, weights)[0]()

    def keyword_clause(self, name):
        values = self.f.values.get(name) or ["x"]
        v, v2, v3 = (self.pick(values) for _ in range(3))
        missing = self.pick(["nothere", "PYTHON", "Cafe", "x y", ""])
        strs = [x for x in values if isinstance(x, str)]
        lo = self.pick(strs + ["A", "P", "p", "Z", "ü"])
        hi = self.pick(strs + ["A", "P", "p", "Z", "ü"])
        forms = [
            lambda: v,
            lambda: missing,
            lambda: [v, v2],
            lambda: {"query": [v, v2], "operator": "and"},
            lambda: {"query": [v, v2, v3], "operator": "and"},
            lambda: {"query": [v, v2], "operator": "or"},
            lambda: {"query": [v, v2], "operator": "AND"},
            lambda: {"query": [v, v2], "operator": "xor"},
            lambda: {"query": [v], "operator": "and"},
            lambda: {"not": v},
            lambda: {"not": [v, v2]},
            lambda: {"query": [v, v2], "not": v3},
            lambda: {"query": [v, v2], "operator": "and", "not": v3},
            lambda: {"query": lo, "range": "min"},
            lambda: {"query": [lo, hi], "range": "min:max"},
            lambda: {"query": hi, "range": "max"},
            lambda: [],
            lambda: {"query": []},
            lambda: {"query": v, "depth": 2},
            lambda: (v, missing),
            lambda: [missing, v, None],
        ]
        weights = [6, 2, 4, 3, 2, 2, 1, 1, 1, 3, 2, 2, 2, 1, 1, 1,
                   1, 1, 1, 1, 1]
        return self.rng.choices(forms, weights)[0]()

    def date_clause(self, name):
        d = self.some_date(name)
        d2 = self.some_date(name)
        forms = [
            lambda: d,
            lambda: {"query": d},
            lambda: [d, d2],
            lambda: {"query": d, "range": "min"},
            lambda: {"query": d, "range": "max"},
            lambda: {"query": [d, d2], "range": "min:max"},
            lambda: {"query": [d, d2], "range": "minmax"},
            lambda: {"query": [d, d2], "range": "min"},
            lambda: {"query": [d, d2], "range": "max"},
            lambda: {"not": d},
            lambda: {"query": d, "range": "min", "not": d2},
            lambda: {"query": [d, d2], "operator": "and"},
            lambda: {"query": []},
        ]
        weights = [3, 2, 1, 4, 4, 5, 1, 1, 1, 1, 1, 1, 1]
        try:
            return self.rng.choices(forms, weights)[0]()
        except TypeError:
            return d

    def daterange_clause(self):
        d = self.some_date(self.pick(["effective", "expires", "created"]))
        r = self.rng.random()
        if r < 0.55:
            return d
        if r < 0.7:
            return {"query": d}
        if r < 0.8:
            return [d, self.some_date("effective")]
        if r < 0.85:
            return {"query": d, "range": "min"}
        if r < 0.9:
            return DateTime()
        return self.pick([DateTime("1969/12/31 23:59 UTC"),
                          DateTime("2500/01/01"), DateTime("2499/12/31"),
                          DateTime("1000/01/01"), FAR_PAST])

    def boolean_clause(self, name):
        return self.pick([True, False, 1, 0, [False, True], [True, False],
                          {"query": True}, {"query": False},
                          {"query": [True, False]}, (True,), [True],
                          {"query": True, "not": False}, "", "yes",
                          {"query": True, "range": "min"}])

    def uuid_clause(self):
        uids = self.f.uids
        u, u2, u3 = (self.pick(uids) for _ in range(3))
        return self.pick([
            u, [u, u2], {"query": u}, {"query": [u, u2, u3]},
            {"not": u}, {"not": [u, u2]}, {"query": [u, u2], "not": u2},
            "nothere", u.upper(), {"query": [u, u2], "range": "min:max"},
            {"query": u, "range": "max"}, [], {"query": u,
                                                "operator": "and"}])

    def path_clause(self):
        p = self.some_path()
        p2 = self.some_path()
        comps = [c for c in p.split("/") if c]
        rel = "/".join(comps[1:]) if len(comps) > 1 else "folder"
        tail = comps[-1] if comps else "plone"
        forms = [
            lambda: p,
            lambda: {"query": p},
            lambda: {"query": p, "depth": 0},
            lambda: {"query": p, "depth": 1},
            lambda: {"query": p, "depth": 2},
            lambda: {"query": p, "depth": 3},
            lambda: {"query": p, "depth": -1},
            lambda: {"query": p + "/", "depth": 1},
            lambda: {"query": p + "/"},
            lambda: {"query": p, "navtree": 1},
            lambda: {"query": p, "navtree": 1, "navtree_start":
                     self.rng.randint(0, 4)},
            lambda: {"query": p, "navtree": 1, "depth": 0},
            lambda: {"query": p, "navtree": True, "depth": 2},
            lambda: {"query": p, "navtree": 1, "depth": 0,
                     "navtree_start": self.rng.randint(0, 3)},
            lambda: [p, p2],
            lambda: {"query": [p, p2], "depth": 1},
            lambda: {"query": [p, p2], "depth": 0},
            lambda: {"query": [p, p2], "operator": "and"},
            lambda: {"query": [p, p2], "navtree": 1},
            lambda: {"query": rel, "level": 1},
            lambda: {"query": "/" + rel, "level": 1},
            lambda: {"query": tail, "level": -1},
            lambda: {"query": tail, "level": self.rng.randint(1, 4)},
            lambda: {"query": tail, "level": -1, "depth": 0},
            lambda: {"query": tail, "level": -1, "depth": 1},
            lambda: {"query": rel, "level": 1, "depth": 1},
            lambda: {"query": p, "level": 0, "depth": 2},
            lambda: {"query": p.lstrip("/"), "depth": 0},
            lambda: {"query": p.lstrip("/"), "depth": 1},
            lambda: rel,
            lambda: "",
            lambda: {"query": ""},
            lambda: "/",
            lambda: {"query": "/", "depth": 1},
            lambda: {"query": "/plone", "depth": 1},
            lambda: {"query": p, "depth": 1, "operator": "and"},
            lambda: {"query": p, "unknown": 1},
        ]
        weights = [4, 2, 3, 4, 2, 1, 1, 1, 1, 3, 2, 2, 1, 1, 2, 2, 1, 1, 1,
                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
        return self.rng.choices(forms, weights)[0]()

    def recurring_clause(self, name):
        d = self.some_event_date()
        d2 = self.some_event_date()
        forms = [
            lambda: {"query": d, "range": "min"},
            lambda: {"query": d, "range": "max"},
            lambda: {"query": sorted([d, d2], key=_ts), "range": "min:max"},
            lambda: {"query": [d, d2], "range": "minmax"},
            lambda: d,
            lambda: {"query": [d, d2]},
            lambda: {"not": d},
            lambda: {"query": d, "range": "min", "not": d2},
        ]
        weights = [4, 4, 4, 1, 2, 1, 1, 1]
        try:
            return self.rng.choices(forms, weights)[0]()
        except TypeError:
            return {"query": d, "range": "min"}

    def text_clause(self, name):
        r = self.rng.random()
        words = self.f.words or ["plone"]
        if r < 0.45:
            return self.pick(TEXT_QUERIES_FIXED)
        if r < 0.65:
            return self.pick(words)
        if r < 0.75:
            return "%s %s" % (self.pick(words), self.pick(words))
        if r < 0.8:
            return " AND ".join(
                w.rstrip("!?:.,-") + "*" for w in self.pick(words, 2)
                if w.rstrip("!?:.,-"))
        if r < 0.85:
            return "\"%s\"" % " ".join(
                self.pick(self.f.words or ["a"], 2))
        if r < 0.9:
            return [self.pick(words), self.pick(words)]
        if r < 0.95:
            return {"query": self.pick(TEXT_QUERIES_FIXED)}
        return "%s OR %s" % (self.pick(words), self.pick(TEXT_QUERIES_FIXED))

    # -- whole queries -------------------------------------------------------
    def clause(self, kind=None):
        kind = kind or self.pick(["field", "field", "keyword", "date",
                                  "daterange", "boolean", "uuid", "path",
                                  "path", "recurring", "text"])
        if kind == "field":
            name = self.pick(FIELD_INDEXES)
            return name, self.field_clause(name)
        if kind == "keyword":
            name = self.pick(["Subject", "Subject", "object_provides",
                              "allowedRolesAndUsers", "getRawRelatedItems"])
            return name, self.keyword_clause(name)
        if kind == "date":
            name = self.pick(DATE_INDEXES)
            return name, self.date_clause(name)
        if kind == "daterange":
            return "effectiveRange", self.daterange_clause()
        if kind == "boolean":
            name = self.pick(BOOLEAN_INDEXES)
            return name, self.boolean_clause(name)
        if kind == "uuid":
            return "UID", self.uuid_clause()
        if kind == "path":
            return "path", self.path_clause()
        if kind == "recurring":
            name = self.pick(RECURRING_INDEXES)
            return name, self.recurring_clause(name)
        if kind == "text":
            name = self.pick(TEXT_INDEXES)
            return name, self.text_clause(name)
        raise ValueError(kind)

    def single(self, kind, n):
        out = []
        for _ in range(n):
            name, value = self.clause(kind)
            out.append({name: value})
        return out

    def anchored(self):
        """A combination built around one document, so that it usually
        matches something."""
        path = self.pick(self.f.paths)
        m = self.f.metadata[path]
        q = {}
        options = []
        if m.get("portal_type"):
            options.append(("portal_type", self.pick(
                [m["portal_type"], [m["portal_type"], "Folder"],
                 {"not": "Folder"}])))
        if m.get("review_state"):
            options.append(("review_state", self.pick(
                [m["review_state"], {"query": [m["review_state"],
                                               "private"]}])))
        parent = path.rsplit("/", 1)[0] or "/"
        options.append(("path", self.pick(
            [parent, {"query": parent, "depth": 1}, {"query": path,
                                                      "depth": 0},
             {"query": "/".join(path.split("/")[:3]), "depth": -1},
             {"query": path, "navtree": 1}])))
        if m.get("Subject"):
            options.append(("Subject", self.pick(
                [list(m["Subject"]), {"query": list(m["Subject"]),
                                      "operator": "and"}])))
        if m.get("Title"):
            words = [w for w in str(m["Title"]).split() if w.isalpha()]
            if words:
                options.append(("SearchableText", self.pick(words)))
        options.append(("is_folderish", bool(m.get("is_folderish"))))
        if m.get("exclude_from_nav") is not None:
            options.append(("exclude_from_nav", m["exclude_from_nav"]))
        if isinstance(m.get("created"), DateTime):
            options.append(("created", {"query": m["created"] - 1,
                                        "range": "min"}))
        if isinstance(m.get("effective"), DateTime):
            options.append(("effectiveRange", m["effective"] + 0.5))
        if isinstance(m.get("start"), datetime.datetime):
            options.append(("start", {"query": m["start"],
                                      "range": "max"}))
        for name, value in self.pick(options, self.rng.randint(2, 4)):
            q[name] = value
        return q

    def combos(self, n):
        out = []
        for _ in range(n):
            if self.rng.random() < 0.5:
                out.append(self.anchored())
                continue
            q = {}
            for _ in range(self.rng.randint(2, 4)):
                name, value = self.clause()
                q[name] = value
            if self.rng.random() < 0.1:
                q["Language"] = "en"  # unknown keys are ignored
            if self.rng.random() < 0.05:
                q["show_inactive"] = True
            out.append(q)
        return out

    def sort_spec(self):
        r = self.rng.random()
        if r < 0.65:
            on = self.pick(SORT_INDEXES)
        elif r < 0.9:
            on = self.pick(SORT_INDEXES, self.rng.randint(2, 3))
        else:
            on = tuple(self.pick(SORT_INDEXES, 2))
        spec = {"sort_on": on}
        r = self.rng.random()
        if r < 0.55:
            order = self.pick(SORT_ORDERS)
            if order is not None:
                spec["sort_order"] = order
        elif isinstance(on, (list, tuple)):
            spec["sort_order"] = [self.pick(["", "reverse", "descending",
                                             "ascending"])
                                  for _ in range(len(on))]
        else:
            spec["sort_order"] = self.pick(["reverse", "ascending"])
        return spec

    def base_for_sort(self):
        r = self.rng.random()
        if r < 0.3:
            return {"path": {"query": self.some_path(),
                             "depth": self.pick([1, -1, 2])}}
        if r < 0.45:
            return {"portal_type": self.pick(
                [self.f.values["portal_type"]] + [
                    [v] for v in self.f.values["portal_type"]])}
        if r < 0.55:
            return {"path": "/plone"}
        if r < 0.65:
            return {"review_state": self.field_clause("review_state")}
        if r < 0.75:
            return {"Subject": self.keyword_clause("Subject")}
        if r < 0.85:
            name, value = self.clause()
            return {name: value}
        return self.combos(1)[0]

    def sorted_queries(self, n):
        out = []
        for _ in range(n):
            q = self.base_for_sort()
            q.update(self.sort_spec())
            r = self.rng.random()
            if r < 0.25:
                q["sort_limit"] = self.rng.choice([1, 2, 3, 5, 10, 50])
            elif r < 0.45:
                q["b_start"] = self.rng.choice([0, 0, 1, 3, 10, 20, 40, 200])
                q["b_size"] = self.rng.choice([1, 2, 5, 10, 30])
            elif r < 0.5:
                q["sort_limit"] = self.rng.choice([1, 5, 10])
                q["b_start"] = self.rng.choice([0, 2, 7])
                q["b_size"] = self.rng.choice([3, 5])
            out.append(q)
        return out

    def batched_queries(self, n):
        """No sort_on: len / actual_result_count / subset are compared."""
        out = []
        for _ in range(n):
            q = self.base_for_sort()
            r = self.rng.random()
            if r < 0.4:
                q["sort_limit"] = self.rng.choice([1, 2, 5, 10])
            else:
                q["b_start"] = self.rng.choice([0, 1, 5, 30, 500])
                q["b_size"] = self.rng.choice([1, 3, 10, 50])
            out.append(q)
        return out

    def secured_queries(self, n):
        """For searchResults as several users: mostly plain queries (the
        tool adds allowedRolesAndUsers and effectiveRange), some passing
        those keys themselves (they must be overridden), show_inactive."""
        out = []
        for _ in range(n):
            q = self.base_for_sort()
            r = self.rng.random()
            if r < 0.15:
                q["allowedRolesAndUsers"] = ["Manager", "Anonymous"]
            elif r < 0.25:
                q["effectiveRange"] = DateTime("2000/01/01")
            elif r < 0.35:
                q["show_inactive"] = self.pick([True, False])
            if self.rng.random() < 0.3:
                q.update(self.sort_spec())
            out.append(q)
        return out

    def special_queries(self):
        """Fixed edge cases: errors, empty queries, dashed keys."""
        p = "/plone/folder"
        return [
            {},
            {"Language": "en"},
            {"show_inactive": True},
            {"sort_on": "sortable_title"},
            {"path": p, "sort_on": "nothere"},
            {"path": p, "sort_on": "SearchableText"},
            {"path": p, "sort_on": ["sortable_title", "nothere"]},
            {"path": p, "sort_on": "Title"},
            {"path": p, "sort-on": "sortable_title",
             "sort-order": "reverse"},
            {"path": p, "sort-on": "sortable_title", "sort_on": "id"},
            {"path": p, "sort_on": "id", "sort-limit": 3},
            {"path": p, "sort_on": "id", "sort_limit": 0},
            {"path": p, "sort_on": "id", "b_size": 0},
            {"path": p, "b_start": "2", "b_size": "3", "sort_on": "id"},
            {"path": p, "sort_on": ["id"], "sort_order": ["reverse",
                                                          "ascending"]},
            {"path": p, "sort_on": ["id", "portal_type"],
             "sort_order": ["reverse"]},
            {"path": p, "sort_on": ["portal_type", "id"],
             "sort_order": ["reverse", "ascending", "reverse"]},
            {"path": p, "sort_on": []},
            {"path": p, "sort_on": "getObjPositionInParent",
             "sort_limit": 3},
            {"path": {"query": p, "depth": 1},
             "sort_on": "getObjPositionInParent"},
            {"path": {"query": p, "depth": 1},
             "sort_on": "getObjPositionInParent", "sort_order": "reverse",
             "b_start": 2, "b_size": 3},
            {"path": {"query": "/plone", "depth": 0},
             "sort_on": "getObjPositionInParent"},
            {"path": {"query": ["/plone", "/plone/folder"], "depth": 0},
             "sort_on": "getObjPositionInParent"},
            {"SearchableText": "plone", "sort_on": "sortable_title"},
            {"SearchableText": "plone", "b_size": 3},
            {"SearchableText": ["plone", "NOT"]},
            {"SearchableText": {"query": "plone", "range": "min"}},
            {"Title": {"query": "plone", "operator": "and"}},
            {"portal_type": "Document", "sort_on": "sortable_title",
             "b_start": 1000, "b_size": 10},
            {"portal_type": "Document", "sort_on": "sortable_title",
             "b_start": 5, "b_size": 1000},
            {"portal_type": "Document", "b_start": 1000, "b_size": 10},
            {"portal_type": "Document", "sort_on": "sortable_title",
             "sort_limit": 1000},
            {"portal_type": ["Document", 5]},
            {"path": "/plone", "effectiveRange": None},
            {"path": "/plone", "is_folderish": None},
            {"path": "/plone", "UID": None},
            {"path": "/plone", "start": None},
            {"path": "/plone", "SearchableText": None},
            {"path": None},
            {"getObjPositionInParent": 1},
            {"getObjPositionInParent": 1, "path": "/plone"},
            # plain str against the Message values of the Type index
            {"Type": "Page"},
            {"Type": ["Page", "Folder"], "path": p},
            {"Type": {"query": "Page", "range": "max"}},
            {"Type": {"not": "Page"}},
            # fewer directions than sort indexes: the rest take the first
            {"path": p, "sort_on": ["portal_type", "review_state", "id"],
             "sort_order": ["reverse", "ascending"]},
            {"path": p, "sort_on": ["portal_type", "review_state", "id"],
             "sort_order": ["reverse", "ascending"], "b_size": 50},
            {"path": p, "sort_on": ["review_state", "getObjPositionInParent",
                                    "id"],
             "sort_order": ["reverse", "ascending"], "b_size": 50},
            # 'not' alone on indexes without any value
            {"in_reply_to": {"not": "x"}},
            {"getRawRelatedItems": {"not": ["x"]}},
            {"sync_uid": {"not": "nothere"}},
            {"review_state": {"not": "nothere"}},
            {"review_state": {"not": "nothere", "range": "min"}},
            {"Subject": {"not": "nothere"}},
            {"Subject": {"not": "Python", "range": "min:max"}},
        ]

    def all_queries(self):
        """``[(category, query)]`` in a fixed order."""
        plan = [
            ("field", self.single("field", 450)),
            ("keyword", self.single("keyword", 380)),
            ("date", self.single("date", 380)),
            ("daterange", self.single("daterange", 120)),
            ("boolean", self.single("boolean", 80)),
            ("uuid", self.single("uuid", 120)),
            ("path", self.single("path", 500)),
            ("recurring", self.single("recurring", 240)),
            ("text", self.single("text", 450)),
            ("combo", self.combos(500)),
            ("sorted", self.sorted_queries(800)),
            ("batched", self.batched_queries(200)),
            ("special", self.special_queries()),
            ("secured", self.secured_queries(120)),
        ]
        return [(cat, q) for cat, qs in plan for q in qs]


FAR_PAST = DateTime("1000/01/01 00:00 UTC") - 400


def _as_datetime(value):
    if isinstance(value, DateTime):
        return value
    if isinstance(value, str) and value not in ("", "None"):
        try:
            return DateTime(value)
        except Exception:  # noqa: B902
            return None
    return None


def _ts(value):
    if isinstance(value, DateTime):
        return value.timeTime()
    return value.timestamp()


# -- running and comparing ---------------------------------------------------

class Answer:
    __slots__ = ("paths", "length", "actual", "error", "scores")

    def __init__(self, paths=None, length=None, actual=None, error=None,
                 scores=None):
        self.paths = paths
        self.length = length
        self.actual = actual
        self.error = error
        self.scores = scores

    def describe(self, limit=12):
        if self.error is not None:
            return "raised %s: %s" % (type(self.error).__name__,
                                      str(self.error)[:200])
        shown = self.paths[:limit]
        more = " ..." if len(self.paths) > limit else ""
        return "len=%s actual_result_count=%s %s%s" % (
            self.length, self.actual, shown, more)


def run(catalog, query, method="unrestrictedSearchResults"):
    request = getattr(catalog, "REQUEST", None)
    other = getattr(request, "other", None)
    if isinstance(other, dict):
        # ZCatalog's indexes cache interim results per request; a cached
        # answer can differ from a fresh one (UnIndex converts 'not' values
        # only on the cached path): every query runs as in a new request
        other.pop("__catalog_cache__", None)
    try:
        results = getattr(catalog, method)(copy.deepcopy(query))
        brains = list(results)
        return Answer(
            [b.getPath() for b in brains], len(results),
            getattr(results, "actual_result_count", None),
            scores=[getattr(b, "data_record_score_", None) for b in brains])
    except Exception as exc:  # noqa: B902 - exceptions are compared
        return Answer(error=exc)


def _key_value(name, value, index):
    """A documentToKeyMap value as a comparable, hashable key."""
    if value is None:
        return None
    if hasattr(value, "keys") and not isinstance(value, dict):
        value = tuple(value.keys())
    if isinstance(value, list):
        value = tuple(value)
    if getattr(index, "meta_type", None) == "KeywordIndex":
        # ZCatalog's key is the keyword list in the order of a Python set
        # (hash-seed dependent): the documented key is the sorted list
        value = tuple(sorted(value))
    return value


def _sortable(value):
    """Order of the documented sort contract: None first (the open ends
    of an effectiveRange pair), tuples element-wise."""
    if value is None:
        return (0,)
    if isinstance(value, tuple):
        return (1, tuple(_sortable(v) for v in value))
    return (1, value)


class SortKeys:
    """The sort key of a path for each sort index, from the reference
    ZCatalog's own ``documentToKeyMap`` (GopipIndex: computed over the
    whole result set, as ZCatalog does)."""

    def __init__(self, ref):
        self.catalog = ref._catalog
        self.maps = {}

    def keymap(self, name):
        m = self.maps.get(name)
        if m is None:
            index = aq_base(self.catalog.getIndex(name))
            m = self.maps[name] = (index.documentToKeyMap(), index)
        return m

    def gopip(self, rids):
        rs = list(rids)  # noqa: F841 - GopipIndex reads the caller's ``rs``
        return self.catalog.getIndex(
            "getObjPositionInParent").documentToKeyMap()

    def keys_for(self, names, paths, result_paths):
        """``{path: key tuple}``; a component is None when the document
        has no value in that index.  ``result_paths``: the whole result
        (GopipIndex positions depend on it)."""
        uids = self.catalog.uids
        keyed = {}
        gopip = None
        if "getObjPositionInParent" in names:
            gopip = self.gopip([uids[p] for p in
                                set(result_paths) | set(paths)
                                if p in uids])
        for path in paths:
            rid = uids.get(path)
            key = []
            for name in names:
                if name == "getObjPositionInParent":
                    key.append(gopip.get(rid))
                else:
                    keymap, index = self.keymap(name)
                    key.append(_key_value(name, keymap.get(rid), index))
            keyed[path] = tuple(key)
        return keyed


def sort_names(query):
    on = query.get("sort-on", None)
    if on is None:
        on = query.get("sort_on", None)
    if on is None:
        return None
    if isinstance(on, (list, tuple)):
        return list(on)
    return [on]


def sort_reverse(query, count):
    """Directions per sort index, as ZCatalog's searchResults/multisort
    apply them (one direction: for all; missing ones: the first)."""
    order = query.get("sort-order", None)
    if order is None:
        order = query.get("sort_order", None)
    if order is None:
        order = [""]
    elif isinstance(order, str):
        order = [order]
    reverse = [o.lower() in ("reverse", "descending") for o in order]
    reverse = reverse[:count]
    return reverse + [reverse[0]] * (count - len(reverse))


def batch_args(query):
    try:
        b_start = int(query.get("b_start", 0))
        b_size = query.get("b_size", None)
        if b_size is not None:
            b_size = int(b_size)
    except Exception:  # noqa: B902 - hostile batching (test_hostile)
        return 0, None
    limit = query.get("sort-limit", None) or query.get("sort_limit", None)
    if b_size is None and limit:
        b_size = limit
    return b_start, b_size


def is_limited(query):
    return batch_args(query)[1] is not None


def unlimited(query):
    """``query`` without batching, limit and sorting (sorting only drops
    documents without a sort key; the key sequence is compared apart)."""
    q = dict(query)
    for k in ("b_start", "b_size", "sort_limit", "sort-limit", "sort_on",
              "sort-on", "sort_order", "sort-order"):
        q.pop(k, None)
    return q


def has_text(query):
    return any(name in query for name in TEXT_INDEXES)


def _groups(paths, keys):
    return [set(p for p, _ in g) for _, g in itertools.groupby(
        zip(paths, keys), key=lambda x: x[1])]


def compare(query, expected, pg, keys, full_ref, strict_ties=True):
    """``None`` if ``pg`` answers ``query`` as ``expected`` does, else a
    reason.  ``full_ref()`` answers the unlimited, unsorted query on the
    reference (only called when needed)."""
    if expected.error is not None or pg.error is not None:
        if expected.error is None or pg.error is None:
            return "exception on one side only"
        if not isinstance(pg.error, type(expected.error)):
            return "different exception classes"
        return None
    if expected.length != pg.length:
        return "len differs"
    if expected.actual != pg.actual:
        return "actual_result_count differs"
    if len(pg.paths) != len(set(pg.paths)):
        return "duplicate paths in pgcatalog's answer"
    if len(expected.paths) != len(pg.paths):
        return "len() and iteration disagree"
    names = sort_names(query)
    limited = is_limited(query)
    full = None
    if limited:
        full = full_ref()
        if full.error is not None:
            return "reference failed on the unlimited query"
        full = full.paths
    if not names:
        if not limited:
            if set(expected.paths) != set(pg.paths):
                return "result sets differ"
            return None
        # Without sort_on, which documents a truncated result holds is
        # arbitrary in ZCatalog (rid order, or relevance for text queries):
        # only membership in the full result is comparable.
        if not set(pg.paths) <= set(full):
            return "truncated result holds documents outside the result"
        return None
    # Sorted: the sequence of sort keys must be identical; documents with
    # equal keys (ties) have no defined order in ZCatalog, so they are
    # compared as sets, and only partially at the edges of a truncated
    # result (which of the tied documents make it into the page is
    # arbitrary as well).
    keyed = keys.keys_for(names, expected.paths + pg.paths,
                          full if limited else expected.paths)
    zk = [keyed[p] for p in expected.paths]
    pk = [keyed[p] for p in pg.paths]
    if zk != pk:
        return "sort order differs"
    groups_z, groups_p = _groups(expected.paths, zk), _groups(pg.paths, pk)
    for n, (gz, gp) in enumerate(zip(groups_z, groups_p)):
        if limited and n in (0, len(groups_z) - 1):
            if not gp <= set(full):
                return "truncated result holds documents outside the result"
        elif gz != gp:
            return "documents with equal sort keys differ"
    if strict_ties and not limited and expected.paths != pg.paths:
        # both catalogs number entries in indexing order (ZCatalog's rids
        # restart at a random number only every 4,000 entries), so ties
        # come in the same order when ZCatalog's algorithm orders them
        return "ties ordered differently"
    return None


def model_sorted(query, keys, full):
    """The answer of the documented sort contract (§9), computed from the
    reference's unsorted result ``full`` and its own index data: documents
    without a key in a sort index are dropped (and not counted), keys
    compare as Python values (KeywordIndex: the sorted keyword list;
    None first inside effectiveRange pairs), one direction per index,
    then b_start/b_size (or sort_limit) slice the sorted sequence."""
    if full.error is not None:
        return None
    names = sort_names(query)
    paths = list(full.paths)
    if names:
        keyed = keys.keys_for(names, paths, paths)
        paths = [p for p in paths if None not in keyed[p]]
        for n, rev in reversed(list(enumerate(
                sort_reverse(query, len(names))))):
            paths.sort(key=lambda p: _sortable(keyed[p][n]), reverse=rev)
    b_start, b_size = batch_args(query)
    try:
        page = paths[b_start:b_start + b_size] if b_size is not None else \
            paths
    except TypeError:  # a sort_limit that is no integer (test_hostile)
        return None
    return Answer(page, len(page), len(paths))


#: ZCatalog TypeErrors that are BTree comparisons of incomparable values
TYPE_ERRORS = ("not supported between instances of",
               "unsupported operand type(s) for -: 'NoneType' and 'int'")
#: ZCatalog TypeErrors that end a search before its other indexes are read:
#: those above, and DateRangeIndex given a ``datetime.date`` (pgcatalog
#: raises it too, but may meet another index's invalid option first)
STOPPING_ERRORS = TYPE_ERRORS + (
    "int() argument must be a string, a bytes-like object or a real "
    "number, not 'datetime.date'",)


def documented(query, zc, pg, keys, ref_run):
    """If the mismatch between ``zc`` and ``pg`` is a documented
    difference, its label (else None).  Each label is a case where
    ZCatalog's answer depends on its internal algorithm choice or where
    ZCatalog crashes; see the module docstring of test_differential."""
    if pg.error is None and isinstance(zc.error, TypeError) and \
            any(t in str(zc.error) for t in TYPE_ERRORS) and \
            isinstance(ref_run(unlimited(query)).error, TypeError):
        # ZCatalog compares the query value with the BTree's keys and
        # crashes (range bound or 'not' value of another type, an
        # effectiveRange date it cannot convert met after another index);
        # pgcatalog: such a value matches nothing.
        return "ZCatalog TypeError on incomparable query values"
    zc_stopped = (zc.error is None and not zc.paths) or (
        isinstance(zc.error, TypeError)
        and any(t in str(zc.error) for t in STOPPING_ERRORS))
    if pg.error is not None and zc_stopped:
        # pgcatalog checks every index's options; ZCatalog stops at the
        # first empty intermediate result (or crashes on an earlier index,
        # see above) and never parses the rest.  The offending index alone
        # must raise in ZCatalog as well.
        for name, value in query.items():
            alone = ref_run({name: value})
            if alone.error is not None and isinstance(
                    pg.error, type(alone.error)):
                return "ZCatalog short-circuits before an invalid option"
        return None
    if sort_names(query) is not None:
        full = ref_run(unlimited(query))
        model = model_sorted(query, keys, full)
        if model is not None and compare(
                query, model, pg, keys, lambda: full,
                strict_ties=False) is None:
            return sort_quirk(query, zc, keys)
    return None


def sort_quirk(query, zc, keys):
    """Why ZCatalog's sorted answer departs from its documented sort
    contract (which pgcatalog implements and the model computes)."""
    names = sort_names(query)
    kinds = [keys.catalog.getIndex(n).meta_type for n in names
             if n in keys.catalog.indexes]
    b_start, b_size = batch_args(query)
    if zc.error is not None:
        if not names:
            why = "sort_on=[]"
        elif "DateRangeIndex" in kinds:
            why = "sort on a DateRangeIndex"
        elif b_size == 0 or query.get("sort_limit", None) == 0:
            why = "b_size/sort_limit 0"
        elif len(names) == 1 and not isinstance(
                query.get("sort_order", ""), str):
            why = "sort_order list for one sort index"
        elif "KeywordIndex" in kinds[1:]:
            why = "KeywordIndex as secondary sort index"
        else:
            why = "other"
        return "ZCatalog sort crashes (%s: %s)" % (
            type(zc.error).__name__, why)
    if "KeywordIndex" in kinds:
        return ("sort on a KeywordIndex (ZCatalog: one entry per keyword "
                "for large results, else the keyword list in set order)")
    if b_size and b_start and zc.length == 0:
        return ("batch past the end (ZCatalog's reverse-batch bail-out "
                "counts documents without a sort key)")
    if b_size is None and len(names) == 1 and kinds and kinds[0] in (
            "FieldIndex", "DateIndex", "UUIDIndex"):
        # pgcatalog mirrors ZCatalog's walk of one UnIndex-kind sort index
        # (ties in ascending rid order both ways, keyless documents
        # counted): no departure left to accept
        return None
    if b_size is None:
        return ("ZCatalog's iterate-index sort (large results): documents "
                "lacking a secondary key are kept; BooleanIndex walked one-"
                "sidedly")
    return "ZCatalog's reverse-batch optimisation (b_start past half)"
