"""The ZMI admin tabs, through the real publisher: they render their
figures for a Manager and refuse Anonymous and Members; the actions are
POST-only and want plone.protect's authenticator."""
import html
import os
import re
import sys
import unittest
from unittest import mock

import transaction

from plone.pgcatalog.search import slowlog
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import snapshot

sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402
from slow_helpers import slow_searches  # noqa: E402

BASE = "/plone/portal_catalog/"
TABS = ("manage_catalogIndexes", "manage_catalogSchema",
        "manage_catalogView", "manage_catalogReport")
TOKEN = probe.AUTHENTICATOR


def rows_of(body, table_id):
    """The rows of table ``table_id`` as lists of cell texts."""
    table = re.search(r'<table[^>]*id="%s"[^>]*>(.*?)</table>' % table_id,
                      body, re.S)
    if table is None:
        return None
    rows = []
    for row in re.findall(r"<tr\b[^>]*>(.*?)</tr>", table.group(1), re.S):
        cells = re.findall(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", row, re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", " ", c)).split()
                     for c in cells])
    return rows


class TestAdminViews(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.catalog = self.portal.portal_catalog
        self.client = probe.make_client(self.layer["app"])
        slowlog.clear()
        self.addCleanup(slowlog.clear)

    def get(self, name, role="Manager", params=None):
        return probe.request(self.client, "GET", BASE + name, role, params)

    def post(self, name, form, role="Manager"):
        return probe.request(self.client, "POST", BASE + name, role, form)

    def page(self, name, params=None):
        status, _, body = self.get(name, params=params)
        self.assertEqual(status, 200, body[:2000])
        return body

    def token(self):
        found = TOKEN.findall(self.page("manage_catalogStatus"))
        self.assertTrue(found)
        return found[0]

    # -- who may see them ---------------------------------------------------
    def test_refused_to_anonymous_and_members(self):
        rid = self.catalog.getrid("/plone/" + probe.PUBLIC_ID)
        names = TABS + ("manage_objectInformation?rid=%d" % rid,)
        for name in names:
            for role in ("Anonymous", "Member"):
                for method in ("GET", "POST"):
                    with self.subTest(name=name, role=role, method=method):
                        status, location, body = probe.request(
                            self.client, method, BASE + name, role)
                        self.assertEqual(probe.classify(status, location),
                                         "denied", status)
                        self.assertNotIn(probe.PUBLIC_ID, body)
            with self.subTest(name=name, role="Manager"):
                self.assertEqual(self.get(name)[0], 200)

    def test_tabs_are_listed(self):
        body = self.page("manage_catalogStatus")
        for name in TABS:
            self.assertIn(name, body)

    # -- Indexes ------------------------------------------------------------
    def test_indexes_tab(self):
        body = self.page("manage_catalogIndexes")
        rows = {r[0][0]: r for r in rows_of(body, "pgc-indexes")[1:]}
        self.assertEqual(set(rows), set(self.catalog.indexes()))
        entries = len(self.catalog)
        # entries with a value: every entry has a path and a portal_type;
        # only the private document has a Subject
        self.assertEqual(rows["path"][2], [str(entries)])
        self.assertEqual(rows["portal_type"][2], [str(entries)])
        self.assertEqual(rows["Subject"][2], ["1"])
        self.assertEqual(rows["portal_type"][1], ["FieldIndex"])
        # the PostgreSQL indexes each uses, with size and state
        registered = self.catalog._pgc_store().rows(
            __import__("plone.pgcatalog.schema.ddl", fromlist=["x"])
            .select_registered(self.catalog._pgc_cid(), "portal_type"))
        transaction.abort()
        self.assertTrue(registered)
        cell = " ".join(rows["portal_type"][3])
        for (name,) in registered:
            self.assertIn(name, cell)
        self.assertIn("valid", cell)
        self.assertRegex(cell, r"\d+ (bytes|kB)")
        self.assertGreater(int(rows["portal_type"][4][0]), 0)
        # a Reindex button per index, with the authenticator
        forms = re.findall(r'<form action="manage_reindexIndex" '
                           r'method="post">(.*?)</form>', body, re.S)
        self.assertEqual(len(forms), len(rows))
        for form in forms:
            self.assertRegex(form, TOKEN)

    def test_reindex_button(self):
        doc = self.portal[probe.PUBLIC_ID]
        doc.setSubject(["Freshword"])  # not reindexed
        transaction.commit()
        form = {"ids:list": "Subject"}
        status, _, _ = self.post("manage_reindexIndex", form)
        self.assertEqual(status, 403)
        self.assertEqual(len(self.catalog(Subject="Freshword")), 0)
        form["_authenticator"] = self.token()
        status, location, _ = self.post("manage_reindexIndex", form)
        self.assertEqual(status, 302)
        self.assertIn("/portal_catalog/manage_catalogIndexes?", location)
        self.assertEqual(len(self.catalog(Subject="Freshword")), 1)

    # -- Metadata -----------------------------------------------------------
    def test_metadata_tab(self):
        body = self.page("manage_catalogSchema")
        columns = [r[0][0] for r in rows_of(body, "pgc-columns")[1:]]
        self.assertEqual(columns, list(self.catalog.schema()))
        self.assertIn("Title", columns)
        tables = {r[0][0]: r[1] for r in rows_of(body, "pgc-tables")}
        self.assertEqual(set(tables), {"pgcatalog_entries", "pgcatalog_meta",
                                       "pgcatalog_text", "pgcatalog_lists",
                                       "pgcatalog_hot", "pgcatalog_hot_sets",
                                       "pgcatalog_hot_counts",
                                       "pgcatalog_hot_free_sets",
                                       "pgcatalog_hot_key_counts",
                                       "pgcatalog_words",
                                       "pgcatalog_langtext",
                                       "pgcatalog_text_totals",
                                       "pgcatalog_text_df",
                                       "pgcatalog_postings",
                                       "pgcatalog_langpostings"})
        self.assertRegex(" ".join(tables["pgcatalog_entries"]),
                         r"\d+ (bytes|kB|MB)")

    # -- Entries ------------------------------------------------------------
    def test_entries_tab(self):
        body = self.page("manage_catalogView")
        paths = [r[0][0] for r in rows_of(body, "pgc-entries")[1:]]
        expected = sorted(p for _, p in self.catalog._pgc_store().all_paths())
        transaction.abort()
        self.assertEqual(paths, expected)
        self.assertIn("%d entries" % len(expected),
                      " ".join(re.sub(r"<[^>]+>", " ", body).split()))

    def test_entries_prefix_and_pages(self):
        body = self.page("manage_catalogView",
                         {"prefix": "/plone/" + probe.PUBLIC_ID})
        paths = [r[0][0] for r in rows_of(body, "pgc-entries")[1:]]
        self.assertEqual(paths, ["/plone/" + probe.PUBLIC_ID])
        body = self.page("manage_catalogView", {"b_size": "1"})
        first = [r[0][0] for r in rows_of(body, "pgc-entries")[1:]]
        self.assertEqual(len(first), 1)
        self.assertIn('id="pgc-next"', body)
        self.assertNotIn('id="pgc-previous"', body)
        body = self.page("manage_catalogView", {"b_size": "1",
                                                "b_start": "1"})
        second = [r[0][0] for r in rows_of(body, "pgc-entries")[1:]]
        self.assertEqual(len(second), 1)
        self.assertNotEqual(first, second)
        self.assertIn('id="pgc-previous"', body)
        # a prefix matching nothing, a % in it (no pattern)
        body = self.page("manage_catalogView", {"prefix": "/plone/%"})
        self.assertEqual(rows_of(body, "pgc-entries")[1:], [])

    def test_entries_bad_input(self):
        for params in ({"b_start": "-1"}, {"b_start": "x"},
                       {"b_size": "100000"}, {"prefix": "/plone\x00"}):
            with self.subTest(params=params):
                status, _, body = self.get("manage_catalogView",
                                           params=params)
                self.assertEqual(status, 400, body[:500])
                self.assertNotIn("psycopg", body)
        status, _, _ = self.get("manage_objectInformation",
                                params={"rid": "nope"})
        self.assertEqual(status, 400)

    def test_entry_information(self):
        path = "/plone/" + probe.PUBLIC_ID
        rid = self.catalog.getrid(path)
        transaction.abort()
        body = self.page("manage_objectInformation", {"rid": str(rid)})
        self.assertIn(path, body)
        values = {r[0][0]: " ".join(r[1])
                  for r in rows_of(body, "pgc-index-values")}
        self.assertEqual(values["portal_type"], "'Document'")
        self.assertEqual(values["id"], repr(probe.PUBLIC_ID))
        meta = {r[0][0]: " ".join(r[1]) for r in rows_of(body, "pgc-metadata")}
        self.assertEqual(meta["Title"], "'Open Document'")
        body = self.page("manage_objectInformation", {"rid": "999999999"})
        self.assertIn("No entry has this rid", body)

    # -- Query Report (slow queries) ------------------------------------------
    def test_query_report_and_explain(self):
        body = self.page("manage_catalogReport")
        self.assertIn('id="pgc-no-slow"', body)
        with mock.patch.dict(os.environ, {"PGCATALOG_SLOW_QUERY_MS": "100"}):
            transaction.abort()
            with slow_searches(0.2):
                self.assertEqual(len(self.catalog.unrestrictedSearchResults(
                    portal_type="Document", Subject="Hushhush")), 1)
            transaction.abort()
            body = self.page("manage_catalogReport")
        rows = rows_of(body, "pgc-slow")[1:]
        self.assertEqual(len(rows), 1)
        self.assertIn("EveryMatch", rows[0][5])
        shape = " ".join(rows[0][6])
        self.assertIn("Subject=<str>", shape)
        self.assertNotIn("Hushhush", body)
        self.assertGreaterEqual(float(rows[0][2][0]), 200)
        entry = rows[0][0][0]
        form = re.search(r'<form action="manage_explainSlowQuery" '
                         r'method="post">(.*?)</form>', body, re.S).group(1)
        self.assertRegex(form, TOKEN)
        # EXPLAIN: POST with the authenticator only
        status, _, _ = self.get("manage_explainSlowQuery",
                                params={"entry:int": entry,
                                        "_authenticator": self.token()})
        self.assertEqual(status, 404)
        status, _, _ = self.post("manage_explainSlowQuery",
                                 {"entry:int": entry})
        self.assertEqual(status, 403)
        for role in ("Anonymous", "Member"):
            status, location, _ = self.post(
                "manage_explainSlowQuery", {"entry:int": entry}, role)
            self.assertEqual(probe.classify(status, location), "denied")
        before = snapshot()
        status, _, body = self.post("manage_explainSlowQuery",
                                    {"entry:int": entry,
                                     "_authenticator": self.token()})
        self.assertEqual(status, 200, body[:2000])
        plan = html.unescape(re.search(r'<pre id="pgc-explain">(.*?)</pre>',
                                       body, re.S).group(1))
        self.assertIn("pgcatalog_entries", plan)
        self.assertIn("pg_sleep", plan)
        self.assertNotIn("actual time", plan)
        self.assertEqual(snapshot(), before)
        # an entry no longer in the log
        status, _, body = self.post("manage_explainSlowQuery",
                                    {"entry:int": "987654",
                                     "_authenticator": self.token()})
        self.assertEqual(status, 200)
        self.assertIn("no longer in the log", body)
