"""Site Setup's "PostgreSQL catalog" control panel, through the publisher:
Managers see the catalog's status and save validated settings (POST with
plone.protect's authenticator) into plone.registry, which the site's
catalog then uses; Anonymous and Members are refused.  The same records
through plone.restapi's ``@controlpanels`` (Volto's Site Setup), in a
GenericSetup export, and moved there from the catalog tool by the upgrade
step."""
import io
import os
import re
import sys
import tarfile
import unittest
from unittest import mock

import transaction
from plone.registry.interfaces import IRegistry
from zope.component import getUtility

from plone.pgcatalog import config
from plone.pgcatalog import settings as site_settings
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

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
        self.portal._p_jar.sync()
        return site_settings.site_settings(self.portal)

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
            __import__("plone.pgcatalog.pg.fragment", fromlist=["q"]).q(
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

    def test_verify_limits_follow_the_site(self):
        status = self.catalog.pgc_verify_status()
        self.assertEqual((status["max_entries"], status["repair_limit"]),
                         (config.DEFAULT_VERIFY_ZMI_MAX_ENTRIES,
                          config.DEFAULT_VERIFY_ZMI_REPAIR_LIMIT))
        registry = getUtility(IRegistry, context=self.portal)
        registry["plone.pgcatalog.verify_zmi_max_entries"] = 1
        registry["plone.pgcatalog.verify_zmi_repair_limit"] = 7
        status = self.catalog.pgc_verify_status()
        self.assertEqual((status["max_entries"], status["repair_limit"]),
                         (1, 7))
        self.assertTrue(status["too_large"])
        transaction.abort()

    def test_upgrade_step_moves_the_tool_settings(self):
        """A site whose control panel kept its values on the catalog tool
        (profile version 1007) gets the registry records, with those
        values, and its configlet."""
        setup = self.portal.portal_setup
        registry = getUtility(IRegistry, context=self.portal)
        for field in site_settings.FIELDS:
            del registry.records["plone.pgcatalog." + field]
        self.portal.portal_controlpanel.unregisterConfiglet("pgcatalog")
        self.catalog._pgc_settings = {"statement-timeout-ms": 750,
                                      "slow-query-ms": 0}
        setup.setLastVersionForProfile("plone.pgcatalog:default", "1007")
        self.assertIn("1008", [step["dest"][0] for step in setup.listUpgrades(
            "plone.pgcatalog:default")])
        setup.upgradeProfile("plone.pgcatalog:default")
        self.assertEqual(setup.getLastVersionForProfile(
            "plone.pgcatalog:default"), ("1008",))
        self.assertEqual(site_settings.site_settings(self.portal), {
            "statement-timeout-ms": 750, "slow-query-ms": 0})
        self.assertIsNone(registry["plone.pgcatalog.verify_zmi_max_entries"])
        self.assertNotIn("_pgc_settings", self.catalog.__dict__)
        self.assertIn("pgcatalog", [
            a.getId() for a in self.portal.portal_controlpanel.listActions()])
        # the catalog uses them
        transaction.commit()
        session = self.catalog._pgc_store().session
        self.assertEqual((session.timeout_ms, session.slow_ms), (750, 0))
        transaction.abort()

    def test_generic_setup_export_and_import(self):
        """portal_setup's registry export holds the site's settings, and an
        import of an edited export sets them."""
        from plone.app.registry.exportimport.handler import importRegistry
        from Products.GenericSetup.context import TarballImportContext
        registry = getUtility(IRegistry, context=self.portal)
        registry["plone.pgcatalog.slow_query_ms"] = 250
        setup = self.portal.portal_setup
        exported = setup.runExportStep("plone.app.registry")["tarball"]
        with tarfile.open(fileobj=io.BytesIO(exported)) as archive:
            body = archive.extractfile("registry.xml").read().decode()
        record = re.search(
            r'<record name="plone.pgcatalog.slow_query_ms"[^>]*>.*?</record>',
            body, re.S).group(0)
        self.assertIn("<value>250</value>", record)
        # our records, as exported, into another site's import (the whole
        # export would also import Plone's own records again)
        ours = re.findall(r'<record name="plone.pgcatalog\.[^>]*>.*?</record>',
                          body, re.S)
        self.assertEqual(len(ours), len(site_settings.FIELDS))
        edited = ('<?xml version="1.0"?>\n<registry>%s</registry>' % "".join(
            ours).replace("<value>250</value>", "<value>75</value>")
        ).encode()
        archive_bytes = io.BytesIO()
        with tarfile.open(fileobj=archive_bytes, mode="w:gz") as archive:
            info = tarfile.TarInfo("registry.xml")
            info.size = len(edited)
            archive.addfile(info, io.BytesIO(edited))
        importRegistry(TarballImportContext(
            setup, archive_bytes.getvalue(), should_purge=False))
        self.assertEqual(registry["plone.pgcatalog.slow_query_ms"], 75)
        self.assertIsNone(registry["plone.pgcatalog.statement_timeout_ms"])
        transaction.abort()


class TestVoltoControlPanel(unittest.TestCase):
    """The same settings through plone.restapi (Volto's Site Setup)."""

    layer = PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

    def setUp(self):
        import requests
        from plone.app.testing import SITE_OWNER_NAME
        from plone.app.testing import SITE_OWNER_PASSWORD
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.url = self.portal.absolute_url()
        self.manager = requests.Session()
        self.manager.headers["Accept"] = "application/json"
        self.manager.auth = (SITE_OWNER_NAME, SITE_OWNER_PASSWORD)
        self.addCleanup(self.manager.close)

    def committed(self):
        """The site's settings as a new ZODB connection reads them (what
        the server committed)."""
        conn = self.layer["zodbDB"].open()
        try:
            registry = conn.root()["Application"][
                self.portal.getId()].portal_registry
            return {name: registry["plone.pgcatalog." + field]
                    for field, name in site_settings.FIELDS.items()
                    if registry["plone.pgcatalog." + field] is not None}
        finally:
            conn.close()

    def test_listed_read_and_patched(self):
        listed = self.manager.get(self.url + "/@controlpanels").json()
        panel = [p for p in listed if p["@id"].endswith("/pgcatalog")]
        self.assertEqual(len(panel), 1, listed)
        self.assertEqual(panel[0]["group"], "Advanced")
        answer = self.manager.get(self.url + "/@controlpanels/pgcatalog")
        self.assertEqual(answer.status_code, 200, answer.text[:500])
        data = answer.json()
        self.assertEqual(sorted(data["schema"]["properties"]),
                         sorted(site_settings.FIELDS))
        self.assertEqual(data["data"]["slow_query_ms"], None)
        answer = self.manager.patch(self.url + "/@controlpanels/pgcatalog",
                                    json={"slow_query_ms": 40,
                                          "statement_timeout_ms": 900})
        self.assertEqual(answer.status_code, 204, answer.text[:500])
        self.assertEqual(self.committed(), {
            "slow-query-ms": 40, "statement-timeout-ms": 900})
        answer = self.manager.patch(self.url + "/@controlpanels/pgcatalog",
                                    json={"slow_query_ms": -3})
        self.assertEqual(answer.status_code, 400, answer.text[:500])

    def test_refused_to_anonymous_and_members(self):
        import requests
        for auth in (None, probe.MEMBER):
            with requests.Session() as other:
                other.headers["Accept"] = "application/json"
                other.auth = auth
                answer = other.get(self.url + "/@controlpanels/pgcatalog")
                self.assertIn(answer.status_code, (401, 403), auth)
                answer = other.patch(self.url + "/@controlpanels/pgcatalog",
                                     json={"slow_query_ms": 1})
                self.assertIn(answer.status_code, (401, 403), auth)
        self.assertEqual(self.committed(), {})
