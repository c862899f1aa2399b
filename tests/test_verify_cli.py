"""``pgcatalog-verify``: the command's ``run(app, args)`` in-process on the
test layer's site, and the installed command in a subprocess on a real
zope.conf (a FileStorage instance with a Plone site made for the test)."""
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

import psycopg
import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue

from plone.pgcatalog.cli import verify as cli
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import pgserver

HERE = os.path.dirname(__file__)


class TestRun(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.app = self.layer["app"]
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        for n in range(5):
            self.portal.invokeFactory("Document", "c%d" % n,
                                      title="Doc %d" % n)
        processQueue()
        transaction.commit()

    def run_cli(self, *argv):
        args = cli.parser().parse_args(
            ["--zope-conf", "unused", "--site", "plone", "--batch", "2"]
            + list(argv))
        out, err = io.StringIO(), io.StringIO()
        status = cli.run(self.app, args, out, err)
        transaction.abort()  # see what the command committed
        return status, out.getvalue()

    def test_clean(self):
        status, out = self.run_cli()
        self.assertEqual(status, cli.CLEAN)
        self.assertTrue(out.startswith("clean: 6 catalog entries checked, "
                                       "6 site objects walked"), out)

    def test_differences_json_list_and_repair(self):
        self.catalog.uncatalog_object("/plone/c1")
        self.portal._delObject("c2", suppress_events=True)
        transaction.commit()
        status, out = self.run_cli("--json")
        self.assertEqual(status, cli.DIFFERENCES)
        report = json.loads(out)
        self.assertEqual(report["counts"]["missing"], 1)
        self.assertEqual(report["counts"]["orphan"], 1)
        self.assertEqual(report["samples"]["missing"], [["/plone/c1", ""]])
        self.assertFalse(report["clean"])
        status, out = self.run_cli("--list")
        self.assertIn("orphan\t/plone/c2\tnothing at this path\n", out)
        self.assertIn("missing\t/plone/c1\t\n", out)
        # nothing was repaired
        self.assertIsNone(self.catalog.getrid("/plone/c1"))
        status, out = self.run_cli("--repair")
        self.assertEqual(status, cli.DIFFERENCES)
        self.assertIn("repaired 2, left 0", out)
        # committed by the command
        self.assertIsNotNone(self.catalog.getrid("/plone/c1"))
        self.assertIsNone(self.catalog.getrid("/plone/c2"))
        self.assertEqual(self.run_cli()[0], cli.CLEAN)

    def test_quick(self):
        self.portal.c3.title = "Changed behind the catalog's back"
        self.catalog.uncatalog_object("/plone/c4")
        transaction.commit()
        status, out = self.run_cli("--quick", "--list")
        self.assertEqual(status, cli.DIFFERENCES)
        self.assertEqual(out.splitlines()[0], "missing\t/plone/c4\t")
        self.assertIn("stale_value     0", out)
        status, out = self.run_cli("--list")
        self.assertIn("stale_value\t/plone/c3\t", out)

    def test_repair_conflicts_with_a_concurrent_edit(self):
        from ZODB.POSException import ConflictError

        from plone.pgcatalog.ops import verify
        self.portal.c1.title = "Changed behind the catalog's back"
        transaction.commit()
        report = verify.verify(self.catalog, repair=True)
        self.assertEqual(report.repaired, 1)
        # meanwhile another transaction edits the object: the repair wrote
        # the catalog from the state it read, so its commit must fail
        tm = transaction.TransactionManager()
        conn = self.app._p_jar.db().open(transaction_manager=tm)
        try:
            conn.root()["Application"].plone.c1.title = "Edited meanwhile"
            tm.commit()
        finally:
            conn.close()
        with self.assertRaises(ConflictError):
            transaction.commit()
        transaction.abort()
        # the retry repairs from the new state
        report = verify.verify(self.catalog, repair=True)
        transaction.commit()
        self.assertEqual(
            self.catalog.unrestrictedSearchResults(path="/plone/c1")[0].Title,
            "Edited meanwhile")
        self.assertTrue(verify.verify(self.catalog).clean)

    def test_a_conflicting_batch_is_undone_and_reported(self):
        from plone.pgcatalog.ops import verify
        self.portal.c1.title = "Changed behind the catalog's back"
        transaction.commit()
        original = verify.read_current

        def and_edit_meanwhile(obj):
            original(obj)
            tm = transaction.TransactionManager()
            conn = self.app._p_jar.db().open(transaction_manager=tm)
            try:
                conn.root()["Application"].plone.c1.title = "Edited meanwhile"
                tm.commit()
            finally:
                conn.close()

        with unittest.mock.patch.object(verify, "read_current",
                                        and_edit_meanwhile):
            status, out = self.run_cli("--repair")
        self.assertEqual(status, cli.DIFFERENCES)
        self.assertIn("1 batches conflicted with concurrent changes", out)
        self.assertEqual(self.catalog.unrestrictedSearchResults(
            path="/plone/c1")[0].Title, "Doc 1")
        status, out = self.run_cli("--repair")
        self.assertIn("repaired 1, left 0", out)
        self.assertEqual(self.catalog.unrestrictedSearchResults(
            path="/plone/c1")[0].Title, "Edited meanwhile")
        self.assertEqual(self.run_cli()[0], cli.CLEAN)

    def test_no_such_site(self):
        args = cli.parser().parse_args(["--zope-conf", "x", "--site", "nope"])
        with self.assertRaises(cli.CommandError):
            cli.run(self.app, args, io.StringIO(), io.StringIO())
        args = cli.parser().parse_args(["--zope-conf", "x", "--site",
                                        "plone/c0"])
        with self.assertRaises(cli.CommandError):
            cli.run(self.app, args, io.StringIO(), io.StringIO())

    def test_bad_arguments(self):
        for argv in (["--site", "plone"], ["--zope-conf", "x"],
                     ["--zope-conf", "x", "--site", "plone", "--batch", "0"],
                     ["--zope-conf", "x", "--site", "plone", "--batch",
                      "many"]):
            with self.subTest(argv=argv):
                with self.assertRaises(SystemExit) as raised:
                    with unittest.mock.patch("sys.stderr", io.StringIO()):
                        cli.parser().parse_args(argv)
                self.assertEqual(raised.exception.code, 2)


ZOPE_CONF = """\
%define INSTANCEHOME {home}
instancehome $INSTANCEHOME
%define CLIENTHOME {home}
clienthome $CLIENTHOME
debug-mode off
security-policy-implementation C
verbose-security off
<zodb_db main>
    <filestorage>
      path {home}/Data.fs
    </filestorage>
    mount-point /
</zodb_db>
<product-config plone.pgcatalog>
    dsn {dsn}
</product-config>
"""


@unittest.skipIf(shutil.which("pgcatalog-verify") is None
                 and not os.path.exists(os.path.join(
                     os.path.dirname(sys.executable), "pgcatalog-verify")),
                 "pgcatalog-verify is not installed")
class TestCommand(unittest.TestCase):
    """The installed command on a real instance (two Zope start-ups: about
    a minute)."""

    @classmethod
    def setUpClass(cls):
        cls.home = tempfile.mkdtemp(prefix="pgcatalog-cli-")
        cls.dsn = pgserver.fresh_database("pgcatalog_cli")
        cls.conf = os.path.join(cls.home, "zope.conf")
        with open(cls.conf, "w") as f:
            f.write(ZOPE_CONF.format(home=cls.home, dsn=cls.dsn))
        subprocess.run([sys.executable, os.path.join(HERE, "cli_site.py"),
                        cls.conf], check=True, capture_output=True,
                       timeout=600)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.home, True)
        try:
            pgserver.drop_database(cls.dsn)
        except Exception:  # pragma: no cover - best effort
            pass

    def command(self, *argv):
        exe = os.path.join(os.path.dirname(sys.executable),
                           "pgcatalog-verify")
        if not os.path.exists(exe):
            exe = shutil.which("pgcatalog-verify")
        done = subprocess.run([exe, "--zope-conf", self.conf] + list(argv),
                              capture_output=True, text=True, timeout=600)
        return done.returncode, done.stdout, done.stderr

    def test_command(self):
        status, out, err = self.command("--site", "plone", "--json")
        self.assertEqual(status, 0, out + err)
        report = json.loads(out)
        self.assertTrue(report["clean"])
        self.assertEqual(report["entries"], 4)   # the site and 3 documents
        # a restored catalog database that lost an entry
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM pgcatalog_entries WHERE path = "
                         "'/plone/doc1'")
        status, out, err = self.command("--site", "plone", "--repair")
        self.assertEqual(status, 1, err)
        self.assertIn("missing         1", out)
        self.assertIn("repaired 1, left 0", out)
        status, out, err = self.command("--site", "plone")
        self.assertEqual(status, 0, out + err)
        status, out, err = self.command("--site", "nowhere")
        self.assertEqual(status, 2)
        self.assertIn("no site 'nowhere'", err)
