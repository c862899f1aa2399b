"""Index names holding SQL's own characters, for every value kind.

Names with ``%``, ``(``, ``)``, ``,``, ``e.idx``, quotes, ``{}`` and spaces
are added to portal_catalog (``addIndex``: its PostgreSQL indexes), filled,
queried (query, range, not), sorted (one and several sort indexes, both
directions), asked for their unique values and deleted again (``delIndex``:
no PostgreSQL index left behind).  Every answer is compared with a stock
ZCatalog holding the same indexes (stock classes) and the same documents.

The name reaches SQL only as a literal (``fragment.literal``); sort keys
travel as separate Fragments, so a ``,`` or an unbalanced ``(`` in a name
cannot cut an ORDER BY list in the wrong place (it used to: the compiler
split ORDER BY text on commas, and a descending sort by such a FieldIndex
came out ascending).
"""
import types
import unittest

import transaction
from DateTime import DateTime
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import setRoles
from Products.DateRecurringIndex.index import DateRecurringIndex
from Products.PluginIndexes.BooleanIndex.BooleanIndex import BooleanIndex
from Products.PluginIndexes.DateIndex.DateIndex import DateIndex
from Products.PluginIndexes.DateRangeIndex.DateRangeIndex import DateRangeIndex
from Products.PluginIndexes.FieldIndex.FieldIndex import FieldIndex
from Products.PluginIndexes.KeywordIndex.KeywordIndex import KeywordIndex
from Products.PluginIndexes.UUIDIndex.UUIDIndex import UUIDIndex
from Products.ZCatalog.ZCatalog import ZCatalog

from plone.pgcatalog.pg import db
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING

#: the hostile parts of the names (each kind gets all of them)
HOSTILE = (
    "a%b(c,d",                # unbalanced "(" and a "," inside it
    "x) DESC, e.idx ->> 'y'",  # closes a parenthesis, "e.idx", a quote
    "q\"{}{{}}%s%(k)s %% z",  # double quote, braces, placeholders, spaces
)

D = DateTime("2024/03/04 10:00 UTC")

#: per document: field, keywords, boolean, uuid, date, range, start
DOCS = {
    "n1": ("alpha", ["k1", "k2", "ä"], True, "u-1", D, (D - 10, D + 10),
           D - 3),
    "n2": ("beta", ["k2"], False, "u-2", D + 1, (None, D - 5), D + 2),
    "n3": ("Gamma", ["k3", "k1"], False, "u-3", D - 7, (D + 3, None),
           D - 1),
    "n4": ("delta", ["k4", "K1", "k2", "zz"], True, "u-4", D + 30,
           (None, None), D + 40),
    "n5": ("épsilon", ["k5"], False, "u-5", D - 2, (D - 1, D + 1), D + 5),
}

KINDS = {
    "FieldIndex": (FieldIndex, "fv"),
    "KeywordIndex": (KeywordIndex, "kw"),
    "BooleanIndex": (BooleanIndex, "bv"),
    "UUIDIndex": (UUIDIndex, "uv"),
    "DateIndex": (DateIndex, "dv"),
    "DateRangeIndex": (DateRangeIndex, None),
    "DateRecurringIndex": (DateRecurringIndex, None),
}


def extra_for(kind):
    attr = KINDS[kind][1]
    if kind == "DateRangeIndex":
        return types.SimpleNamespace(since_field="r_since",
                                     until_field="r_until")
    if kind == "DateRecurringIndex":
        return types.SimpleNamespace(recurdef="rec_rule", until="rec_until")
    return types.SimpleNamespace(indexed_attrs=attr)


def pg_indexes():
    with db.get_pool().connection() as conn:
        return {row[0] for row in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE indexname LIKE "
            "'pgcatalog\\_x\\_%'").fetchall()}


class TestHostileIndexNames(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        self.catalog = portal.portal_catalog
        self.before = pg_indexes()
        self.names = {kind: ["%s %s" % (kind, part) for part in HOSTILE]
                      for kind in KINDS}
        ref = ZCatalog("names_ref")
        for kind, names in self.names.items():
            for name in names:
                self.catalog.addIndex(name, kind, extra=extra_for(kind))
                klass = KINDS[kind][0]
                ZCatalog.addIndex(ref, name,
                                  klass(name, extra=extra_for(kind)))
        portal.invokeFactory("Folder", "names")
        folder = portal.names
        for oid, (fv, kw, bv, uv, dv, rng, start) in DOCS.items():
            folder.invokeFactory("Document", oid, title=oid)
            doc = folder[oid]
            doc.fv, doc.kw, doc.bv, doc.uv, doc.dv = fv, kw, bv, uv, dv
            doc.r_since, doc.r_until = rng
            doc.rec_rule = "RRULE:FREQ=DAILY;COUNT=3" if oid == "n2" else ""
            doc.rec_until = None
            for name in self.names["DateRecurringIndex"]:
                setattr(doc, name, start)
            doc.reindexObject()
        self.ref = ref.__of__(portal)
        self.paths = {"/".join(folder[oid].getPhysicalPath())
                      for oid in DOCS}
        for path in sorted(self.paths):
            self.ref.catalog_object(portal.unrestrictedTraverse(path), path)
        transaction.commit()

    def tearDown(self):
        for names in self.names.values():
            for name in names:
                if name in self.catalog.indexes():
                    self.catalog.delIndex(name)
        transaction.commit()

    # -- comparing -----------------------------------------------------------
    def answer(self, query):
        """(ours, reference's) paths, ours restricted to the documents
        of this test (a ``not`` query finds the site's other content)."""
        ours = [b.getPath() for b in
                self.catalog.unrestrictedSearchResults(dict(query))]
        ref = [b.getPath() for b in self.ref.searchResults(dict(query))]
        return [p for p in ours if p in self.paths], ref

    def key(self, path, names):
        rid = self.ref.getrid(path)
        return tuple(self.ref._catalog.getIndex(name).getEntryForObject(rid)
                     for name in names)

    def check(self, query):
        ours, ref = self.answer(query)
        self.assertEqual(sorted(ours), sorted(ref), query)
        return ours

    def check_sorted(self, query):
        ours, ref = self.answer(query)
        names = query["sort_on"]
        names = [names] if isinstance(names, str) else names
        self.assertEqual([self.key(p, names) for p in ours],
                         [self.key(p, names) for p in ref], query)
        if "b_size" in query:
            # a page may cut a run of equal keys: which of its members
            # it holds follows each catalog's rids (ZCatalog's are
            # random), so the page's keys are compared, and its paths
            # must be matches
            whole, _ref = self.answer({k: v for k, v in query.items()
                                       if k not in ("b_size", "b_start")})
            self.assertLessEqual(set(ours), set(whole), query)
        else:
            self.assertEqual(sorted(ours), sorted(ref), query)
        self.assertGreater(len(ours), 1, query)

    # -- the test ------------------------------------------------------------
    def test_hostile_names_everywhere(self):
        created = pg_indexes() - self.before
        self.assertGreaterEqual(len(created), len(HOSTILE) * len(KINDS))
        for kind, names in self.names.items():
            for name in names:
                with self.subTest(kind=kind, name=name):
                    self.check_kind(kind, name)
        # several sort indexes, with hostile names, in both directions
        field = self.names["FieldIndex"]
        date = self.names["DateIndex"]
        boolean = self.names["BooleanIndex"]
        for sort_on in ([field[0], date[1]], [boolean[2], field[1]],
                        [boolean[0], date[2], field[2]]):
            for order in ("ascending", "descending",
                          ["descending", "ascending"]):
                self.check_sorted({"sort_on": sort_on, "sort_order": order,
                                   field[2]: {"query": "a",
                                              "range": "min"}})
        for names in self.names.values():
            for name in names:
                self.catalog.delIndex(name)
        transaction.commit()
        self.assertEqual(pg_indexes(), self.before)

    def check_kind(self, kind, name):
        catalog = self.catalog
        if kind in ("FieldIndex", "UUIDIndex"):
            first = "alpha" if kind == "FieldIndex" else "u-1"
            values = sorted(v[0 if kind == "FieldIndex" else 3]
                            for v in DOCS.values())
            self.assertEqual(len(self.check({name: first})), 1)
            self.check({name: values[1:3]})
            self.check({name: {"query": values[1], "range": "min"}})
            self.check({name: {"query": values[2], "range": "max"}})
            self.check({name: {"query": values[1:3], "range": "min:max"}})
            self.check({name: {"not": first}})
            self.check({name: {"query": values, "not": [values[0]]}})
        elif kind == "KeywordIndex":
            self.check({name: "k1"})
            self.check({name: ["k1", "k2"]})
            self.check({name: {"query": ["k1", "k2"], "operator": "and"}})
            self.check({name: {"query": "k2", "range": "min"}})
            self.check({name: {"not": "k2"}})
            self.check({name: {"query": ["k1", "k2"], "not": ["k3"]}})
        elif kind == "BooleanIndex":
            self.check({name: True})
            self.check({name: False})
        elif kind in ("DateIndex", "DateRecurringIndex"):
            self.check({name: {"query": D, "range": "min"}})
            self.check({name: {"query": D, "range": "max"}})
            self.check({name: {"query": [D - 2, D + 3], "range": "min:max"}})
            self.check({name: D + 1 if kind == "DateIndex" else D + 3})
            self.check({name: {"not": D + 1}})
        elif kind == "DateRangeIndex":
            for when in (D, D - 8, D + 5, D + 20):
                self.check({name: when})
        # sorting (ZCatalog cannot sort by a DateRangeIndex; keyword lists
        # sort in Python set order there: single keywords compared only)
        if kind != "DateRangeIndex":
            # (a query without conditions finds nothing, in both)
            query = {"sort_on": name,
                     self.names["FieldIndex"][0]: {"query": "",
                                                   "range": "min"}}
            if kind == "KeywordIndex":
                query[name] = ["k2", "k3", "k5"]
                query["path"] = {"query": ["/plone/names/n2",
                                           "/plone/names/n5"], "depth": 0}
            for order in ("ascending", "descending"):
                query["sort_order"] = order
                if kind == "KeywordIndex":
                    # the reference has no path index
                    ours = [b.getPath() for b in
                            catalog.unrestrictedSearchResults(dict(query))]
                    self.assertEqual(
                        ours, sorted(ours, reverse=order == "descending"))
                    continue
                self.check_sorted(dict(query))
                self.check_sorted(dict(query, b_size=2, b_start=1))
        # unique values
        ours = catalog.uniqueValuesFor(name)
        ref = self.ref.uniqueValuesFor(name)
        self.assertEqual(list(ours), list(ref))
