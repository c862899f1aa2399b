"""Site Setup's "PostgreSQL catalog" control panel, through the publisher:
Managers see the catalog's status and save validated settings (POST with
plone.protect's authenticator), which the site's catalog then uses;
Anonymous and Members are refused."""
import os
import re
import sys
import unittest
from unittest import mock

import transaction

from plone.pgcatalog import config
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402


URL = "/plone/@@pgcatalog-controlpanel"
TOKEN = probe.AUTHENTICATOR
TIMEOUT = "form.widgets.statement_timeout_ms"
SLOW = "form.widgets.slow_query_ms"


class TestControlPanel(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.catalog = self.portal.portal_catalog
        self.client = probe.make_client(self.layer["app"])
        patcher = mock.patch.dict(os.environ, {
            "PGCATALOG_STATEMENT_TIMEOUT_MS": "0",
            "PGCATALOG_SLOW_QUERY_MS": "1000"})
        patcher.start()
        self.addCleanup(patcher.stop)

    def get(self, role="Manager"):
        return probe.request(self.client, "GET", URL, role)

    def token(self):
        status, _, body = probe.request(
            self.client, "GET", "/plone/portal_catalog/manage_catalogStatus",
            "Manager")
        return TOKEN.findall(body)[0]

    def save(self, timeout, slow, token=True, role="Manager"):
        form = {TIMEOUT: timeout, SLOW: slow, "form.buttons.save": "Save"}
        if token:
            form["_authenticator"] = self.token()
        return probe.request(self.client, "POST", URL, role, form)

    def settings(self):
        self.catalog._p_jar.sync()
        return dict(getattr(self.catalog, "_pgc_settings", None) or {})

    def test_status_for_a_manager(self):
        status, _, body = self.get()
        self.assertEqual(status, 200, body[:2000])
        table = re.search(r'id="pgc-controlpanel-status">(.*?)</table>',
                          body, re.S).group(1)
        text = " ".join(re.sub(r"<[^>]+>", " ", table).split())
        self.assertIn("Entries %d" % len(self.catalog), text)
        server = self.catalog._pgc_store().server_facts()[1]
        transaction.abort()
        self.assertIn("PostgreSQL %s" % server, text)
        self.assertIn("Statement timeout in force none", text)
        self.assertIn("Slow-query threshold in force 1000 ms", text)
        self.assertIn(TIMEOUT, body)
        self.assertIn(SLOW, body)

    def test_refused_to_anonymous_and_members(self):
        for role in ("Anonymous", "Member"):
            with self.subTest(role=role):
                status, location, body = self.get(role)
                self.assertEqual(probe.classify(status, location), "denied")
                self.assertNotIn("pgc-controlpanel-status", body)
                status, location, _ = self.save("5", "5", token=False,
                                                role=role)
                self.assertEqual(probe.classify(status, location), "denied")
        self.assertEqual(self.settings(), {})

    def test_configlet_is_registered(self):
        actions = {a.getId(): a for a in
                   self.portal.portal_controlpanel.listActions()}
        self.assertIn("pgcatalog", actions)
        self.assertIn("@@pgcatalog-controlpanel",
                      actions["pgcatalog"].getActionExpression())
        self.assertEqual(actions["pgcatalog"].getPermissions(),
                         ("Manage portal",))

    def test_save_and_use(self):
        status, location, body = self.save("750", "20")
        self.assertEqual(status, 302, body[:2000])
        self.assertEqual(self.settings(), {"statement-timeout-ms": 750,
                                           "slow-query-ms": 20})
        # the site's catalog uses them in its next transactions
        transaction.abort()
        session = self.catalog._pgc_store().session
        self.assertEqual((session.timeout_ms, session.slow_ms), (750, 20))
        self.assertEqual(self.catalog._pgc_store().value(
            __import__("plone.pgcatalog.fragment", fromlist=["q"]).q(
                "SELECT current_setting('statement_timeout')")), "750ms")
        transaction.abort()
        status, _, body = self.get()
        self.assertIn('value="750"', body)
        text = " ".join(re.sub(r"<[^>]+>", " ", body).split())
        self.assertIn("Statement timeout in force 750 ms", text)
        # empty: back to the process's setting
        status, _, _ = self.save("", "")
        self.assertEqual(status, 302)
        self.assertEqual(self.settings(), {})
        transaction.abort()
        session = self.catalog._pgc_store().session
        self.assertEqual((session.timeout_ms, session.slow_ms), (0, 1000))

    def test_validation(self):
        for timeout, slow in (("-1", "5"), ("abc", "5"), ("5", "-20"),
                              ("1.5", "5"), ("5", str(10 ** 12))):
            with self.subTest(timeout=timeout, slow=slow):
                status, _, body = self.save(timeout, slow)
                self.assertEqual(status, 200)
                self.assertIn("There were some errors", body)
                self.assertEqual(self.settings(), {})
        # the process's own settings are validated too
        with self.assertRaises(config.ConfigurationError):
            config.get_slow_query_ms({"slow-query-ms": -1})

    def test_save_needs_the_authenticator(self):
        status, _, _ = self.save("750", "20", token=False)
        self.assertEqual(status, 403)
        self.assertEqual(self.settings(), {})

    def test_upgrade_step_registers_the_configlet(self):
        from plone.pgcatalog.setuphandlers import register_controlpanel
        controlpanel = self.portal.portal_controlpanel
        controlpanel.unregisterConfiglet("pgcatalog")
        self.assertNotIn("pgcatalog",
                         [a.getId() for a in controlpanel.listActions()])
        register_controlpanel(self.portal.portal_setup)
        self.assertIn("pgcatalog",
                      [a.getId() for a in controlpanel.listActions()])
        steps = self.portal.portal_setup.listUpgrades(
            "plone.pgcatalog:default", show_old=True)
        self.assertIn(("1000",), [tuple(s["source"]) for s in steps])
        transaction.abort()
