"""``pgcatalog-rebuild`` (cli/rebuild.py) in-process on a Plone site, and
the installation that leaves indexing to it (``install-index later``)."""
import io
import json
import os
import subprocess
import sys
import unittest

import transaction
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog import setuphandlers
from plone.pgcatalog.cli.rebuild import run
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


class TestCommand(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.app = self.layer["app"]
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        for n in range(12):
            self.portal.invokeFactory("Document", "c%d" % n,
                                      title="Doc %d" % n)
        processQueue()
        transaction.commit()
        self.total = len(self.portal.portal_catalog)

    def tearDown(self):
        transaction.abort()
        os.environ.pop("PGCATALOG_INSTALL_INDEX", None)

    def command(self, *argv):
        out = io.StringIO()
        status = run(self.app, ["--site", "plone", "--grace", "0"]
                     + list(argv), out=out)
        transaction.begin()
        return status, out.getvalue()

    def status(self):
        code, out = self.command("--status")
        self.assertEqual(code, 0)
        return json.loads(out)

    def test_rebuild_stopped_resumed_status(self):
        self.assertIsNone(self.status())
        key = self.portal.portal_catalog._pgc_key
        code, out = self.command("--batch", "4", "--max-batches", "2")
        self.assertEqual((code, out.strip()),
                         (0, "stopped; go on with --resume"))
        status = self.status()
        self.assertEqual((status["phase"], status["done"], status["mode"]),
                         ("building", 8, "rebuild"))
        self.assertEqual(status["total"], self.total)
        # a second start is refused while one is in progress
        self.assertEqual(self.command()[0], 1)
        code, out = self.command("--resume", "--batch", "5")
        self.assertEqual(code, 0)
        done = json.loads(out)
        self.assertEqual((done["phase"], done["done"], done["dropped"]),
                         ("done", self.total, True))
        catalog = self.portal.portal_catalog
        self.assertNotEqual(catalog._pgc_key, key)
        self.assertEqual(len(catalog), self.total)
        self.assertEqual(len(catalog.unrestrictedSearchResults(
            portal_type="Document")), 12)

    def test_cancel_and_refusals(self):
        self.assertEqual(self.command("--cancel")[0], 1)
        self.assertEqual(self.command("--resume")[0], 1)
        self.assertEqual(self.command("--index", "nosuchindex")[0], 1)
        self.assertEqual(self.command("--batch", "0")[0], 2)
        self.assertEqual(run(self.app, ["--site", "nosite"],
                             out=io.StringIO()), 1)
        self.command("--batch", "3", "--max-batches", "1")
        self.assertEqual(self.command("--cancel")[0], 0)
        status = self.status()
        self.assertEqual((status["phase"], status["dropped"]),
                         ("cancelled", True))
        self.assertEqual(len(self.portal.portal_catalog), self.total)

    def test_reindex_index(self):
        self.portal.c3.subject = ("cli",)
        transaction.commit()
        code, out = self.command("--index", "Subject", "--batch", "5")
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(out)["mode"], "reindex")
        self.assertEqual(
            [b.getId for b in self.portal.portal_catalog(Subject="cli")],
            ["c3"])

    def test_install_later_then_online_build(self):
        catalog = self.portal.portal_catalog
        os.environ["PGCATALOG_INSTALL_INDEX"] = "sometime"
        with self.assertRaises(ConfigurationError):
            setuphandlers.install(self.portal)
        transaction.abort()
        os.environ["PGCATALOG_INSTALL_INDEX"] = "later"
        catalog.manage_catalogClear()
        setuphandlers.install(self.portal)
        processQueue()
        transaction.commit()
        self.assertEqual(len(catalog), 0)
        code, _ = self.command("--batch", "7")
        self.assertEqual(code, 0)
        self.assertEqual(len(catalog), self.total)
        # the default: indexed in the transaction, as before
        os.environ.pop("PGCATALOG_INSTALL_INDEX")
        catalog.manage_catalogClear()
        setuphandlers.install(self.portal)
        processQueue()
        self.assertEqual(len(catalog), self.total)


class TestScript(unittest.TestCase):

    def script(self, *argv):
        exe = os.path.join(os.path.dirname(sys.executable),
                           "pgcatalog-rebuild")
        return subprocess.run([exe] + list(argv), capture_output=True,
                              text=True, timeout=120)

    def test_help_and_usage_errors(self):
        done = self.script("--help")
        self.assertEqual(done.returncode, 0)
        self.assertIn("--resume", done.stdout)
        done = self.script("--site", "Plone")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--zope-conf is required", done.stderr)
        done = self.script("--site", "Plone", "--resume", "--cancel")
        self.assertEqual(done.returncode, 2)
