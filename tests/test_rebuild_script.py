"""``pgcatalog-rebuild`` as a deployment step runs it: a process of its
own, Zope started from a zope.conf (FileStorage), a Plone site made by
``zconsole run`` in another process."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import psycopg

from plone.pgcatalog.testing import pgserver
from plone.pgcatalog.testing.zopeapp import SITE_ZCML


MAKE_SITE = """
import transaction
from plone.distribution.api import site as site_api
from zope.component.hooks import setSite

site_api.create(app, "volto", {
    "site_id": "Plone", "title": "CLI", "description": "",
    "default_language": "en", "portal_timezone": "UTC",
    "setup_content": False})
site = app["Plone"]
setSite(site)
site.portal_setup.runAllImportStepsFromProfile(
    "profile-plone.pgcatalog:default")
for n in range(15):
    site.invokeFactory("Document", "d%02d" % n, title="Doc %d" % n)
transaction.commit()
print("ENTRIES", len(site.portal_catalog))
"""


class TestScriptOnAnInstance(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dsn = pgserver.fresh_database("pgcatalog_cli")
        cls.home = tempfile.mkdtemp(prefix="pgcatalog-cli-")
        os.makedirs(os.path.join(cls.home, "etc"))
        with open(os.path.join(cls.home, "etc", "site.zcml"), "w") as f:
            f.write(SITE_ZCML)
        cls.conf = os.path.join(cls.home, "etc", "zope.conf")
        with open(cls.conf, "w") as f:
            f.write(textwrap.dedent("""\
                %%define INSTANCE %s
                instancehome $INSTANCE
                <zodb_db main>
                    <filestorage>
                      path $INSTANCE/Data.fs
                    </filestorage>
                    mount-point /
                </zodb_db>
                <product-config plone.pgcatalog>
                    dsn %s
                </product-config>
                """ % (cls.home, cls.dsn)))
        script = os.path.join(cls.home, "make_site.py")
        with open(script, "w") as f:
            f.write(MAKE_SITE)
        done = cls.run_([cls.bin("zconsole"), "run", cls.conf, script])
        assert done.returncode == 0, done.stderr[-3000:]
        cls.entries = int(done.stdout.split("ENTRIES")[-1].split()[0])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.home, True)
        pgserver.drop_database(cls.dsn)

    @staticmethod
    def bin(name):
        return os.path.join(os.path.dirname(sys.executable), name)

    @staticmethod
    def run_(argv):
        env = dict(os.environ)
        env.pop("PGCATALOG_DSN", None)   # zope.conf's
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=600, env=env)

    def rebuild(self, *argv):
        return self.run_([self.bin("pgcatalog-rebuild"), "--zope-conf",
                          self.conf, "--site", "Plone", "--grace", "0"]
                         + list(argv))

    def test_stop_resume_status(self):
        done = self.rebuild("--batch", "4", "--max-batches", "2")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertIn("go on with --resume", done.stdout)
        done = self.rebuild("--resume", "--batch", "5")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        status = json.loads(done.stdout)
        self.assertEqual((status["phase"], status["done"], status["total"],
                          status["dropped"]),
                         ("done", self.entries, self.entries, True))
        self.assertIn("online build of /Plone/portal_catalog", done.stderr)
        done = self.rebuild("--status")
        self.assertEqual(json.loads(done.stdout)["key"], status["key"])
        with psycopg.connect(self.dsn) as conn:
            registered, valid = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE i.indisvalid) FROM "
                "pgcatalog_indexes r JOIN pgcatalog_catalogs k ON k.cid = "
                "r.cid LEFT JOIN pg_class c ON c.relname = r.pg_index LEFT "
                "JOIN pg_index i ON i.indexrelid = c.oid WHERE k.key = %s",
                (status["key"],)).fetchone()
            old = conn.execute("SELECT count(*) FROM pgcatalog_catalogs "
                               "WHERE key = %s",
                               (status["old_key"],)).fetchone()[0]
        # the new catalog's PostgreSQL indexes were built before the
        # command ended; the old catalog is gone
        self.assertGreater(registered, 10)
        self.assertEqual(valid, registered)
        self.assertEqual(old, 0)
        self.assertEqual(self.rebuild("--resume").returncode, 1)

    def test_zconsole_run(self):
        from plone.pgcatalog.cli import rebuild as cli
        done = self.run_([self.bin("zconsole"), "run", self.conf,
                          cli.__file__, "--site", "Plone", "--status"])
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        # the script reads its options after its own path
        status = json.loads(done.stdout)
        self.assertTrue(status is None or status["mode"] == "rebuild")
