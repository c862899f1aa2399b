"""The status page's online build: its facts and buttons, through the
publisher (Managers only; POST with plone.protect's authenticator)."""
import os
import sys
import unittest

import transaction

from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402


TOKEN = probe.AUTHENTICATOR
STATUS = "/plone/portal_catalog/manage_catalogStatus"
REBUILD = "/plone/portal_catalog/manage_catalogRebuild"


class TestOnlineBuildOnTheStatusPage(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.client = probe.make_client(self.layer["app"])

    def page(self, role="Manager"):
        return probe.request(self.client, "GET", STATUS, role)

    def token(self):
        status, _, body = self.page()
        self.assertEqual(status, 200)
        return TOKEN.findall(body)[0]

    def key(self):
        transaction.begin()
        return self.portal.portal_catalog._pgc_key

    def test_managers_only(self):
        for role in ("Anonymous", "Member"):
            self.assertIn(self.page(role)[0], (401, 403, 302))
        token = self.token()
        key = self.key()
        for role in ("Anonymous", "Member"):
            status, location, _ = probe.request(
                self.client, "POST", REBUILD, role,
                {"online": "rebuild", "_authenticator": token})
            self.assertEqual(probe.classify(status, location), "denied")
        # a Manager without the token: refused, nothing started
        status, _, _ = probe.request(self.client, "POST", REBUILD, "Manager",
                                     {"online": "rebuild"})
        self.assertEqual(status, 403)
        # GET is not published
        status, _, _ = probe.request(self.client, "GET", REBUILD, "Manager",
                                     {"online": "rebuild"})
        self.assertEqual(status, 404)
        self.assertEqual(self.key(), key)
        self.assertIn("No online build yet", self.page()[2])

    def test_rebuild_online_and_its_status(self):
        key = self.key()
        total = len(self.portal.portal_catalog)
        status, location, _ = probe.request(
            self.client, "POST", REBUILD, "Manager",
            {"online": "rebuild", "_authenticator": self.token()})
        self.assertEqual(status, 302)
        self.assertTrue(location.endswith("/manage_catalogStatus"))
        self.assertNotEqual(self.key(), key)
        self.assertEqual(len(self.portal.portal_catalog), total)
        body = self.page()[2]
        self.assertIn("rebuild: done, %d of about %d entries" % (total, total),
                      body)
        # nothing to resume or cancel now: a clear error, not a traceback
        for action in ("resume", "cancel", "sideways"):
            status, _, _ = probe.request(
                self.client, "POST", REBUILD, "Manager",
                {"online": action, "_authenticator": self.token()})
            self.assertEqual(status, 400, action)
