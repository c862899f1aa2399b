"""The ZMI's "Verify" tab through the real publisher: it renders for a
Manager and refuses Anonymous and Members; its actions are POST only with
plone.protect's authenticator; "Repair" is bounded and says what is left;
a large catalog is sent to the command line."""
import os
import re
import sys
import unittest
from urllib.parse import unquote

import transaction
from AccessControl import Unauthorized
from AccessControl.ZopeGuards import guarded_getattr
from plone.app.testing import logout

from plone.pgcatalog.ops import verify
from plone.pgcatalog.ops import verifyreport
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import snapshot

sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402

PUBLIC = "/plone/" + probe.PUBLIC_ID
PRIVATE = "/plone/" + probe.PRIVATE_ID
TAB = "/plone/portal_catalog/manage_catalogVerify"
ACTIONS = ("manage_verifyCatalog", "manage_repairCatalog")
TOKEN = probe.AUTHENTICATOR


class TestVerifyTab(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.catalog = self.portal.portal_catalog
        self.client = probe.make_client(self.layer["app"])
        self.env = {}
        verifyreport.forget_reports()

    def tearDown(self):
        for name, value in self.env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def setenv(self, name, value):
        self.env.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    def get(self, role="Manager"):
        return probe.request(self.client, "GET", TAB, role)

    def post(self, name, form, role="Manager"):
        return probe.request(self.client, "POST",
                             "/plone/portal_catalog/" + name, role, form)

    def token(self):
        status, _, body = self.get()
        self.assertEqual(status, 200)
        found = TOKEN.findall(body)
        self.assertEqual(len(found), 2, "a token in each form")
        return found[0]

    def message(self, location):
        found = re.search(r"manage_tabs_message=([^&]*)", location)
        self.assertTrue(found, location)
        return unquote(found.group(1))

    def test_tab_renders_for_a_manager_only(self):
        for role in ("Anonymous", "Member"):
            with self.subTest(role=role):
                status, location, body = self.get(role)
                self.assertEqual(probe.classify(status, location), "denied")
                self.assertNotIn("Verify now", body)
        status, _, body = self.get()
        self.assertEqual(status, 200)
        self.assertIn("Verify now", body)
        self.assertIn("No verification in this process yet", body)
        self.assertIn('href="manage_catalogVerify"', body)  # the tab

    def test_catalog_tab_links_the_verify_tab(self):
        status, _, body = probe.request(
            self.client, "GET", "/plone/portal_catalog/manage_catalogStatus",
            "Manager")
        self.assertEqual(status, 200)
        self.assertIn('href="manage_catalogVerify"', body)

    def test_actions_refuse_anonymous_members_and_forged_posts(self):
        token = self.token()
        before = snapshot()
        for name in ACTIONS:
            for role in ("Anonymous", "Member"):
                for form in ({}, {"_authenticator": token}):
                    with self.subTest(name=name, role=role, form=form):
                        status, location, _ = self.post(name, form, role)
                        self.assertEqual(
                            probe.classify(status, location), "denied")
            with self.subTest(name=name, role="Manager", form="no token"):
                status, _, _ = self.post(name, {})
                self.assertEqual(status, 403)
            with self.subTest(name=name, method="GET"):
                status, _, _ = probe.request(
                    self.client, "GET", "/plone/portal_catalog/" + name,
                    "Manager", {"_authenticator": token})
                self.assertEqual(status, 404)
        self.assertTrue(snapshot() == before)
        # nothing was verified either
        self.assertIn("No verification in this process yet", self.get()[2])

    def test_python_api_is_not_published(self):
        for name in ("pgc_verify", "pgc_verify_status"):
            for role in probe.ROLES:
                for method in ("GET", "POST"):
                    with self.subTest(name=name, role=role, method=method):
                        status, _, _ = probe.request(
                            self.client, method,
                            "/plone/portal_catalog/" + name, role)
                        self.assertEqual(status, 404)
        logout()
        for name in ("pgc_verify", "pgc_verify_status",
                     "manage_catalogVerify", "manage_verifyCatalog",
                     "manage_repairCatalog"):
            with self.subTest(restricted=name):
                with self.assertRaises(Unauthorized):
                    guarded_getattr(self.catalog, name)

    def test_verify_now_shows_the_report(self):
        self.catalog.uncatalog_object(PUBLIC)
        transaction.commit()
        before = snapshot()
        status, location, _ = self.post("manage_verifyCatalog",
                                        {"_authenticator": self.token()})
        self.assertEqual(status, 302)
        self.assertEqual(self.message(location), "1 differences found.")
        self.assertTrue(snapshot() == before, "verify wrote")
        status, _, body = self.get()
        self.assertEqual(status, 200)
        self.assertIn("<strong>differences</strong>", body)
        self.assertIn("<code>%s</code>" % PUBLIC, body)
        self.assertRegex(body, r"<td>missing</td>\s*<td>1</td>")

    def test_errors_and_repairs_shown(self):
        report = verify.Report(repair=True)
        report.add("orphan", "/plone/gone", "nothing at this path")
        report.add_error("/plone/broken", "RuntimeError: <b>boom</b>")
        report.repaired = 1
        verifyreport.remember(self.catalog, report.finish())
        status, _, body = self.get()
        self.assertEqual(status, 200)
        text = " ".join(body.split())
        self.assertIn("; 1 objects whose values could not be computed", text)
        self.assertIn("repaired 1, left 0", text)
        self.assertIn("<code>/plone/gone</code>", body)
        self.assertIn("<code>/plone/broken</code>", body)
        self.assertIn("RuntimeError: &lt;b&gt;boom&lt;/b&gt;", body)
        self.assertNotIn("<b>boom</b>", body)  # escaped

    def test_repair_is_bounded_and_says_what_is_left(self):
        self.setenv("PGCATALOG_VERIFY_ZMI_REPAIR_LIMIT", "1")
        self.catalog.uncatalog_object(PUBLIC)
        self.catalog.uncatalog_object(PRIVATE)
        transaction.commit()
        token = self.token()
        status, location, _ = self.post("manage_repairCatalog",
                                        {"_authenticator": token})
        self.assertEqual(status, 302)
        self.assertEqual(self.message(location),
                         "Repaired 1 entries, 1 left (2 differences).")
        transaction.abort()
        self.assertEqual(
            [self.catalog.getrid(p) is None for p in (PUBLIC, PRIVATE)],
            [False, True])
        status, location, _ = self.post("manage_repairCatalog",
                                        {"_authenticator": token})
        self.assertEqual(self.message(location),
                         "Repaired 1 entries, 0 left (1 differences).")
        status, location, _ = self.post("manage_repairCatalog",
                                        {"_authenticator": token})
        self.assertEqual(self.message(location),
                         "Clean: the catalog matches the site.")
        transaction.abort()
        self.assertIsNotNone(self.catalog.getrid(PRIVATE))

    def test_a_large_catalog_goes_to_the_command_line(self):
        self.setenv("PGCATALOG_VERIFY_ZMI_MAX_ENTRIES", "1")
        status, _, body = self.get()
        self.assertEqual(status, 200)
        self.assertIn("pgcatalog-verify --zope-conf", body)
        self.assertNotIn("Verify now", body)
        token = probe.request(self.client, "GET",
                              "/plone/portal_catalog/manage_catalogStatus",
                              "Manager")[2]
        token = TOKEN.findall(token)[0]
        self.catalog.uncatalog_object(PUBLIC)
        transaction.commit()
        status, location, _ = self.post("manage_repairCatalog",
                                        {"_authenticator": token})
        self.assertIn("use the pgcatalog-verify command",
                      self.message(location))
        transaction.abort()
        self.assertIsNone(self.catalog.getrid(PUBLIC))
