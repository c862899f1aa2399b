"""Shadow mode: the site's old ZCatalog kept beside the
PostgreSQL catalog, written in sync, one of them answering searches, a
sample of searches compared; a planted difference is found.

A real Plone site is installed with ``PGCATALOG_SHADOW=1`` after content
was created (and indexed by the stock catalog); differences are planted by
writing to one side only.
"""
import logging
import os
import sys
import unittest

import transaction
from AccessControl import Unauthorized
from AccessControl.ZopeGuards import guarded_getattr
from plone.app.testing import PLONE_FIXTURE
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import PloneSandboxLayer
from plone.app.testing import applyProfile
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from Products.CMFPlone.CatalogTool import CatalogTool
from Products.ZCatalog.ZCatalog import ZCatalog

import plone.pgcatalog
from plone.pgcatalog.ops import shadow
from plone.pgcatalog.pg.writer import DELETE
from plone.pgcatalog.setuphandlers import uninstall
from plone.pgcatalog.testing import CatalogStateLayerMixin
from plone.pgcatalog.testing.layers import PGCATALOG_DATABASE
from plone.pgcatalog.testing.layers import PGCatalogFunctionalTesting
from plone.pgcatalog.tool import PGCatalogTool

sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402

BEFORE = tuple("before-%d" % n for n in range(6))
TOKEN = probe.AUTHENTICATOR


class ShadowFixture(CatalogStateLayerMixin, PloneSandboxLayer):
    """Content indexed by the stock catalog, then plone.pgcatalog installed
    in shadow mode."""

    defaultBases = (PGCATALOG_DATABASE, PLONE_FIXTURE)

    def setUpZope(self, app, configurationContext):
        self.loadZCML(package=plone.pgcatalog)

    def setUpPloneSite(self, portal):
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        for n, name in enumerate(BEFORE):
            portal.invokeFactory("Document", name, title="Before %d" % n,
                                 subject=("old", "k%d" % (n % 2)))
        processQueue()
        assert not isinstance(portal.portal_catalog, PGCatalogTool)
        portal._shadow_test_counter = portal.portal_catalog.getCounter()
        os.environ["PGCATALOG_SHADOW"] = "1"
        try:
            applyProfile(portal, "plone.pgcatalog:default")
        finally:
            del os.environ["PGCATALOG_SHADOW"]
        setRoles(portal, TEST_USER_ID, ["Member"])
        logout()


SHADOW_FIXTURE = ShadowFixture()
SHADOW_TESTING = PGCatalogFunctionalTesting(
    bases=(SHADOW_FIXTURE,), name="PGCatalog:Shadow")


def pg_paths(catalog, **query):
    """What PostgreSQL holds (bypassing shadow mode)."""
    return sorted(b.getPath() for b in catalog._pgc_search_pg(query))


def zc_paths(zcatalog, **query):
    """What the ZCatalog holds (its own search)."""
    return sorted(b.getPath() for b in ZCatalog.searchResults(zcatalog,
                                                                query))


class ShadowCase(unittest.TestCase):
    layer = SHADOW_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        self.zcatalog = self.portal[shadow.SHADOW_ID]
        shadow.clear()
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)

    def tearDown(self):
        transaction.abort()
        shadow.clear()

    def documents(self, **extra):
        """Document paths as the tool answers (either catalog)."""
        return [b.getPath() for b in self.catalog.unrestrictedSearchResults(
            portal_type="Document", sort_on="id", **extra)]


class TestInstallAndWrites(ShadowCase):

    def test_install_keeps_the_old_zcatalog_indexed(self):
        self.assertIsInstance(self.catalog.aq_base, PGCatalogTool)
        self.assertIsInstance(self.zcatalog.aq_base, CatalogTool)
        self.assertEqual(self.catalog._pgc_shadow,
                         {"id": shadow.SHADOW_ID, "primary": "zcatalog",
                          "rate": shadow.DEFAULT_RATE})
        expected = ["/plone/%s" % name for name in
                    ("before-%d" % n for n in range(6))]
        self.assertEqual(zc_paths(self.zcatalog, portal_type="Document"),
                         expected)
        self.assertEqual(pg_paths(self.catalog, portal_type="Document"),
                         expected)
        # the same entries on both sides (the site and its documents)
        self.assertEqual(len(self.zcatalog), len(self.catalog))
        self.assertEqual(self.zcatalog.getId(), shadow.SHADOW_ID)
        # the install did not write the old catalog (nor catalog it)
        self.assertEqual(self.zcatalog.getCounter(),
                         self.portal._shadow_test_counter)
        self.assertIsNone(self.catalog.getrid(
            "/plone/" + shadow.SHADOW_ID))

    def test_writes_go_to_both(self):
        self.portal.invokeFactory("Document", "fresh", title="Fresh",
                                  subject=("new",))
        processQueue()
        transaction.commit()
        for paths in (pg_paths(self.catalog, Subject="new"),
                      zc_paths(self.zcatalog, Subject="new")):
            self.assertEqual(paths, ["/plone/fresh"])
        doc = self.portal.fresh
        doc.setSubject(["edited"])
        doc.reindexObject()
        processQueue()
        transaction.commit()
        for paths in (pg_paths(self.catalog, Subject="edited"),
                      zc_paths(self.zcatalog, Subject="edited")):
            self.assertEqual(paths, ["/plone/fresh"])
        self.assertEqual(zc_paths(self.zcatalog, Subject="new"), [])
        self.portal.manage_delObjects(["fresh"])
        processQueue()
        transaction.commit()
        self.assertEqual(pg_paths(self.catalog, portal_type="Document"),
                         zc_paths(self.zcatalog, portal_type="Document"))
        self.assertNotIn("/plone/fresh",
                         zc_paths(self.zcatalog, portal_type="Document"))

    def test_writes_paused_go_to_postgresql_only(self):
        self.portal.invokeFactory("Document", "fresh", subject=("new",))
        processQueue()
        doc = self.portal.fresh
        doc.setSubject(["paused"])
        with shadow.writes_paused():
            self.catalog.catalog_object(doc)
        self.assertEqual(pg_paths(self.catalog, Subject="paused"),
                         ["/plone/fresh"])
        self.assertEqual(zc_paths(self.zcatalog, Subject="paused"), [])
        self.assertEqual(zc_paths(self.zcatalog, Subject="new"),
                         ["/plone/fresh"])
        self.catalog.catalog_object(doc)     # not paused any more
        self.assertEqual(zc_paths(self.zcatalog, Subject="paused"),
                         ["/plone/fresh"])

    def test_definitions_follow(self):
        self.catalog.addIndex("shadow_field", "FieldIndex")
        self.catalog.addColumn("shadow_column")
        self.assertIn("shadow_field", self.zcatalog.indexes())
        self.assertIn("shadow_column", self.zcatalog.schema())
        self.catalog.delIndex("shadow_field")
        self.catalog.delColumn("shadow_column")
        self.assertNotIn("shadow_field", self.zcatalog.indexes())
        self.assertNotIn("shadow_column", self.zcatalog.schema())

    def test_clear_and_rebuild_keep_both(self):
        self.catalog.manage_catalogClear()
        self.assertEqual(len(self.zcatalog), 0)
        self.assertEqual(len(self.catalog), 0)
        self.catalog.clearFindAndRebuild()
        processQueue()
        self.assertEqual(zc_paths(self.zcatalog, portal_type="Document"),
                         pg_paths(self.catalog, portal_type="Document"))
        self.assertEqual(len(zc_paths(self.zcatalog, portal_type="Document")),
                         6)
        self.assertIsNone(self.catalog.getrid(
            "/plone/" + shadow.SHADOW_ID))
        self.assertEqual(len(self.zcatalog), len(self.catalog))

    def test_shadow_write_error_contained_while_pgcatalog_is_primary(self):
        self.catalog.pgc_shadow_configure(primary="pgcatalog")
        # the shadow's own index breaks (an index it cannot write)
        self.zcatalog._catalog.indexes["Subject"] = object()
        self.portal.invokeFactory("Document", "fresh", subject=("new",))
        processQueue()
        self.assertEqual(pg_paths(self.catalog, Subject="new"),
                         ["/plone/fresh"])
        self.assertGreaterEqual(
            shadow.counters(self.catalog._pgc_key)["write_errors"], 1)
        kinds = {d["kind"] for d in
                 shadow.differences(self.catalog._pgc_key)}
        self.assertEqual(kinds, {"write error"})

    def test_shadow_write_error_raised_while_zcatalog_is_primary(self):
        self.zcatalog._catalog.indexes["Subject"] = object()
        with self.assertRaises(Exception):
            self.portal.invokeFactory("Document", "fresh", subject=("new",))
            processQueue()


    def test_a_copy_of_the_tool_has_no_shadow(self):
        # what OFS does to a pasted copy (the site refuses to paste a tool)
        copy = PGCatalogTool("copied_catalog")
        copy._pgc_shadow = dict(self.catalog._pgc_shadow)
        self.portal._setObject("copied_catalog", copy)
        copy = self.portal["copied_catalog"]
        copy.manage_afterClone(copy)
        self.assertIsNone(shadow.settings(copy))
        self.assertIsNotNone(shadow.settings(self.catalog))


class TestReads(ShadowCase):

    def plant_zcatalog_only_loss(self):
        """/plone/before-2 gone from the ZCatalog only."""
        self.zcatalog.uncatalog_object("/plone/before-2")
        transaction.commit()

    def test_primary_zcatalog_answers_from_the_zcatalog(self):
        self.catalog.pgc_shadow_configure(rate=0.0)
        self.plant_zcatalog_only_loss()
        found = self.catalog.unrestrictedSearchResults(portal_type="Document")
        self.assertNotIn("/plone/before-2", [b.getPath() for b in found])
        self.assertTrue(all(b.aq_parent.aq_base is self.zcatalog.aq_base
                            for b in found))
        # searchResults too (security additions made once, by the tool)
        logout()
        found = self.catalog(portal_type="Document")
        self.assertEqual(len(found), 5)
        self.assertNotIn("/plone/before-2", [b.getPath() for b in found])
        self.assertEqual(shadow.counters(self.catalog._pgc_key)["compared"],
                         0)

    def test_primary_pgcatalog_answers_from_postgresql(self):
        self.catalog.pgc_shadow_configure(primary="pgcatalog", rate=0.0)
        self.plant_zcatalog_only_loss()
        found = self.catalog.unrestrictedSearchResults(portal_type="Document")
        self.assertIn("/plone/before-2", [b.getPath() for b in found])
        self.assertTrue(all(b.aq_parent.aq_base is self.catalog.aq_base
                            for b in found))

    def test_planted_difference_is_found(self):
        self.catalog.pgc_shadow_configure(rate=1.0)
        self.plant_zcatalog_only_loss()
        with self.assertLogs("plone.pgcatalog.shadow", logging.WARNING) as log:
            paths = self.documents()
        self.assertNotIn("/plone/before-2", paths)       # the ZCatalog's
        (found,) = shadow.differences(self.catalog._pgc_key)
        self.assertEqual(found["kind"], "members")
        self.assertEqual(found["only_primary"], [])
        self.assertEqual(found["only_secondary"], ["/plone/before-2"])
        self.assertIn("portal_type=<str>", found["shape"])
        self.assertIn("/plone/before-2", log.output[0])
        counters = shadow.counters(self.catalog._pgc_key)
        self.assertEqual((counters["compared"], counters["differing"]),
                         (1, 1))
        # equal answers record nothing
        self.documents(Subject="k1")
        self.assertEqual(len(shadow.differences(self.catalog._pgc_key)), 1)
        self.assertEqual(shadow.counters(self.catalog._pgc_key)["compared"],
                         2)

    def test_planted_difference_in_postgresql_is_found(self):
        self.catalog.pgc_shadow_configure(primary="pgcatalog", rate=1.0)
        store = self.catalog._pgc_store()
        store.add("/plone/before-4", DELETE)    # PostgreSQL only
        transaction.commit()
        self.assertNotIn("/plone/before-4", self.documents())
        (found,) = shadow.differences(self.catalog._pgc_key)
        self.assertEqual(found["only_secondary"], ["/plone/before-4"])
        self.assertEqual(found["primary"], "pgcatalog")

    def test_order_difference(self):
        self.catalog.pgc_shadow_configure(rate=1.0)
        doc = self.portal["before-0"]
        doc.title = "Zzz last"
        # reindexed in the ZCatalog only
        self.zcatalog.catalog_object(doc, "/plone/before-0")
        transaction.commit()
        self.catalog.unrestrictedSearchResults(portal_type="Document",
                                               sort_on="sortable_title")
        (found,) = shadow.differences(self.catalog._pgc_key)
        self.assertEqual(found["kind"], "order")
        self.assertEqual(found["position"], 0)
        self.assertEqual(found["only_primary"][0], "/plone/before-1")
        self.assertEqual(found["only_secondary"][0], "/plone/before-0")

    def test_sampling(self):
        self.catalog.pgc_shadow_configure(rate=0.25)
        for _ in range(8):
            self.documents()
        counters = shadow.counters(self.catalog._pgc_key)
        self.assertEqual((counters["searches"], counters["compared"]),
                         (8, 2))

    def test_error_of_the_secondary_is_contained(self):
        self.catalog.pgc_shadow_configure(primary="pgcatalog", rate=1.0)
        # the shadow lost its sort index: ZCatalog raises CatalogError
        ZCatalog.delIndex(self.zcatalog, "sortable_title")
        found = self.catalog.searchResults(
            {"portal_type": "Document", "sort_on": "sortable_title"})
        self.assertEqual(len(found), 6)
        counters = shadow.counters(self.catalog._pgc_key)
        self.assertEqual((counters["errors"], counters["compared"]), (1, 0))
        (difference,) = shadow.differences(self.catalog._pgc_key)
        self.assertEqual(difference["kind"], "error")
        self.assertIn("CatalogError", difference["error"])
        # and the transaction goes on
        self.assertEqual(len(self.documents()), 6)

    def test_index_data_of_a_result_comes_from_the_primary(self):
        self.catalog.pgc_shadow_configure(rate=0.0)
        (brain,) = self.catalog.unrestrictedSearchResults(id="before-1")
        data = self.catalog.getIndexDataForRID(brain.getRID())
        self.assertEqual(data["id"], "before-1")


class TestDifference(unittest.TestCase):
    """The comparison itself (no catalog)."""

    def test_kinds(self):
        diff = shadow.difference
        self.assertIsNone(diff({}, ["/a", "/b"], ["/b", "/a"], (2, 2),
                               (2, 2)))
        self.assertEqual(diff({"sort_on": "x"}, ["/a", "/b"], ["/b", "/a"],
                              (2, 2), (2, 2)),
                         ("order", ["/a", "/b"], ["/b", "/a"], 0))
        self.assertEqual(diff({}, ["/a"], ["/b"], (1, 1), (1, 1)),
                         ("members", ["/a"], ["/b"], None))
        # an unsorted batch: members may legitimately differ, counts only
        self.assertIsNone(diff({"b_size": 1}, ["/a"], ["/b"], (1, 2),
                               (1, 2)))
        self.assertEqual(diff({"b_size": 1}, ["/a"], ["/b"], (1, 2),
                              (1, 3)), ("count", [], [], None))

    def test_rates(self):
        for bad in ("x", -0.1, 1.5, "nan", None):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    shadow.check_rate(bad)
        self.assertEqual(shadow.check_rate("0.5"), 0.5)
        with self.assertRaises(ValueError):
            shadow.check_primary("both")


class TestShadowTab(ShadowCase):

    def setUp(self):
        super().setUp()
        probe.setup_content(self.portal)
        self.client = probe.make_client(self.layer["app"])

    def get(self, role, name="manage_catalogShadow"):
        return probe.request(self.client, "GET",
                             "/plone/portal_catalog/" + name, role)

    def post(self, name, form, role="Manager"):
        return probe.request(self.client, "POST",
                             "/plone/portal_catalog/" + name, role, form)

    def token(self):
        status, _, body = self.get("Manager")
        self.assertEqual(status, 200)
        return TOKEN.findall(body)[0]

    def settings(self):
        return dict(self.portal.portal_catalog._pgc_shadow)

    def test_tab_renders_for_managers_only(self):
        self.catalog.pgc_shadow_configure(rate=1.0)
        self.zcatalog.uncatalog_object("/plone/before-3")
        transaction.commit()
        self.documents()
        status, _, body = self.get("Manager")
        self.assertEqual(status, 200)
        self.assertIn('id="pgc-shadow-primary">zcatalog<', body)
        self.assertIn("/plone/before-3", body)   # the difference listed
        self.assertIn("manage_catalogShadow", body)   # the tab
        for role in ("Anonymous", "Member"):
            with self.subTest(role=role):
                status, location, body = self.get(role)
                self.assertEqual(probe.classify(status, location), "denied")
                self.assertNotIn("/plone/before-3", body)
        for name in ("pgc_shadow_report", "pgc_shadow_configure",
                     "pgc_end_shadow"):
            with self.subTest(name=name):
                self.assertEqual(self.get("Manager", name)[0], 404)

    def test_restricted_code_cannot_reach_the_names(self):
        logout()
        catalog = self.portal.portal_catalog
        for name in ("manage_catalogShadow", "pgc_shadow_report",
                     "pgc_shadow_configure", "pgc_end_shadow",
                     "manage_shadowSettings", "manage_endShadow"):
            with self.subTest(name=name):
                with self.assertRaises(Unauthorized):
                    guarded_getattr(catalog, name)

    def test_settings_form_wants_post_and_authenticator(self):
        before = self.settings()
        form = {"primary": "pgcatalog", "rate": "0.5"}
        status, _, _ = self.get("Manager", "manage_shadowSettings")
        self.assertEqual(status, 404)
        self.assertEqual(self.post("manage_shadowSettings", form)[0], 403)
        for role in ("Anonymous", "Member"):
            status, location, _ = self.post(
                "manage_shadowSettings", dict(form, _authenticator="x"),
                role)
            self.assertEqual(probe.classify(status, location), "denied")
        self.assertEqual(self.settings(), before)
        token = self.token()
        status, _, _ = self.post("manage_shadowSettings",
                                 {"rate": "2", "_authenticator": token})
        self.assertEqual(status, 400)
        self.assertEqual(self.settings(), before)
        status, _, body = self.post("manage_shadowSettings",
                                    dict(form, _authenticator=token))
        self.assertEqual(status, 200)
        self.assertEqual(self.settings()["primary"], "pgcatalog")
        self.assertEqual(self.settings()["rate"], 0.5)

    def test_end_shadow_mode(self):
        token = self.token()
        self.assertEqual(self.get("Manager", "manage_endShadow")[0], 404)
        for role in ("Anonymous", "Member"):
            status, location, _ = self.post(
                "manage_endShadow", {"confirm": "end",
                                     "_authenticator": token}, role)
            self.assertEqual(probe.classify(status, location), "denied")
        # not without the token, not while the ZCatalog is the primary,
        # not without confirming
        self.assertEqual(self.post("manage_endShadow", {"confirm": "end"})[0],
                         403)
        self.assertEqual(self.post("manage_endShadow",
                                   {"confirm": "end",
                                    "_authenticator": token})[0], 400)
        self.catalog.pgc_shadow_configure(primary="pgcatalog")
        transaction.commit()
        self.assertEqual(self.post("manage_endShadow",
                                   {"_authenticator": token})[0], 400)
        self.assertIn(shadow.SHADOW_ID, self.portal.objectIds())
        status, _, body = self.post("manage_endShadow",
                                    {"confirm": "end",
                                     "_authenticator": token})
        self.assertEqual(status, 200)
        self.assertIn("pgc-shadow-off", body)
        self.assertNotIn(shadow.SHADOW_ID, self.portal.objectIds())
        catalog = self.portal.portal_catalog
        self.assertIsNone(shadow.settings(catalog))
        # no more dual writes; searches from PostgreSQL
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.portal.invokeFactory("Document", "after", subject=("late",))
        processQueue()
        transaction.commit()
        self.assertEqual([b.getPath() for b in
                          catalog.unrestrictedSearchResults(Subject="late")],
                         ["/plone/after"])


class TestRollback(ShadowCase):

    def test_uninstall_puts_the_shadow_back(self):
        zcatalog = self.zcatalog.aq_base
        self.portal.invokeFactory("Document", "fresh", subject=("new",))
        processQueue()
        tool = uninstall(self.portal)
        self.assertIs(tool.aq_base, zcatalog)
        self.assertIs(self.portal.portal_catalog.aq_base, zcatalog)
        self.assertNotIn(shadow.SHADOW_ID, self.portal.objectIds())
        self.assertEqual(
            [b.getPath() for b in tool.unrestrictedSearchResults(
                Subject="new")], ["/plone/fresh"])

