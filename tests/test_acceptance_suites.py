"""Other packages' unmodified test suites, run on plone.pgcatalog.

``pgcatalog-testrunner`` (plone.pgcatalog.testing.runner) runs zope.testrunner
with plone.app.testing's PloneFixture extended to install plone.pgcatalog;
here it runs, each in its own process and all at once:

* Products.CMFPlone: testCatalogTool, testSearch, testNavigationView,
  test_nogopip (the catalog-heavy part of Plone's own tests);
* plone.app.querystring, whole (collections' query parsing and building);
* plone.restapi's search, catalog serializer, querystring-search and
  blocks' SearchableText tests (@search sorts, batches and filters);
* a probe package made here: portal_catalog really is plone.pgcatalog's,
  what a functional test commits to the catalog is gone in the next test,
  and a failing test makes the runner exit non-zero.

A suite passes when zope.testrunner reports no failure and no error; the
runner skips only its documented EXCLUSIONS.  Takes a minute or two.
"""
import os
import re
import subprocess
import sys
import textwrap
import unittest

from plone.pgcatalog.testing import pgserver


TIMEOUT = 1200

SUITES = {
    "cmfplone": ["--package", "Products.CMFPlone",
                 "-t", "testCatalogTool", "-t", "testSearch",
                 "-t", "testNavigationView", "-t", "test_nogopip"],
    "querystring": ["--package", "plone.app.querystring"],
    "restapi": ["--package", "plone.restapi",
                "-m", "test_search", "-m", "test_serializer_catalog",
                "-m", "test_services_querystringsearch",
                "-m", "test_blocks_searchable_text"],
}
#: lower bounds of the tests run (Plone 6.2.2: 145 and 87), so that a suite
#: that silently ran nothing does not pass
MINIMUM = {"cmfplone": 140, "querystring": 80, "restapi": 60, "probe": 3}

PROBE = '''
import transaction
import unittest

from Acquisition import aq_base
from plone.app.testing import PLONE_FUNCTIONAL_TESTING
from plone.app.testing import PLONE_INTEGRATION_TESTING
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID


class TestCatalogIsPG(unittest.TestCase):
    layer = PLONE_INTEGRATION_TESTING

    def test_portal_catalog_is_pgcatalog(self):
        from plone.pgcatalog.tool import PGCatalogTool
        catalog = self.layer["portal"].portal_catalog
        self.assertIsInstance(aq_base(catalog), PGCatalogTool)
        self.assertTrue(len(catalog) >= 1)


class TestIsolation(unittest.TestCase):
    layer = PLONE_FUNCTIONAL_TESTING

    def test_1_commit(self):
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        portal.invokeFactory("Document", "committed-doc")
        transaction.commit()
        catalog = portal.portal_catalog
        self.assertEqual(
            len(catalog.unrestrictedSearchResults(id="committed-doc")), 1)

    def test_2_gone(self):
        portal = self.layer["portal"]
        self.assertNotIn("committed-doc", portal.objectIds())
        catalog = portal.portal_catalog
        self.assertEqual(
            len(catalog.unrestrictedSearchResults(id="committed-doc")), 0)
'''

FAILING = '''
import unittest


class TestFails(unittest.TestCase):
    def test_fails(self):
        self.assertEqual(1, 2)
'''

_TOTAL = re.compile(r"Total: (\d+) tests, (\d+) failures, (\d+) errors")
_RAN = re.compile(r"Ran (\d+) tests with (\d+) failures, (\d+) errors")


def summary(output):
    """(tests, failures, errors) of zope.testrunner's output."""
    found = _TOTAL.findall(output) or _RAN.findall(output)
    if not found:
        return None
    return tuple(int(n) for n in found[-1])


def _write_package(root, name, modules):
    package = os.path.join(root, name)
    os.makedirs(os.path.join(package, "tests"))
    for path in (os.path.join(package, "__init__.py"),
                 os.path.join(package, "tests", "__init__.py")):
        open(path, "w").close()
    for module, text in modules.items():
        with open(os.path.join(package, "tests", module + ".py"), "w") as f:
            f.write(textwrap.dedent(text))


class TestAcceptanceSuites(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tmp = tempfile.TemporaryDirectory(prefix="pgcatalog-accept-")
        _write_package(cls.tmp.name, "pgcprobe",
                       {"test_probe": PROBE, "test_zfails": FAILING})
        env = dict(os.environ)
        # one PostgreSQL server for all runs (each makes its own databases)
        env[pgserver.ENV_DSN] = pgserver.server_dsn()
        runner = [sys.executable, "-m", "plone.pgcatalog.testing.runner"]
        runs = dict(SUITES)
        runs["probe"] = ["--path", cls.tmp.name, "-s", "pgcprobe",
                         "-m", "test_probe"]
        runs["failing"] = ["--path", cls.tmp.name, "-s", "pgcprobe",
                           "-m", "test_zfails"]
        procs = {
            name: subprocess.Popen(
                runner + args, env=env, cwd=cls.tmp.name,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for name, args in runs.items()}
        cls.results = {}
        for name, proc in procs.items():
            try:
                out, _ = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                out, _ = proc.communicate()
                out += "\n[timed out after %ds]" % TIMEOUT
            cls.results[name] = (proc.returncode, out)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assertSuitePassed(self, name):
        rc, out = self.results[name]
        counts = summary(out)
        tail = out[-6000:]
        self.assertIsNotNone(counts, "no zope.testrunner summary:\n" + tail)
        tests, failures, errors = counts
        self.assertEqual((failures, errors), (0, 0), tail)
        self.assertEqual(rc, 0, tail)
        self.assertGreaterEqual(tests, MINIMUM[name], tail)
        self.assertIn("portal_catalog is plone.pgcatalog", out)

    def test_cmfplone_catalog_tests(self):
        self.assertSuitePassed("cmfplone")

    def test_plone_app_querystring(self):
        self.assertSuitePassed("querystring")

    def test_plone_restapi_search(self):
        self.assertSuitePassed("restapi")

    def test_probe(self):
        self.assertSuitePassed("probe")

    def test_failure_exits_non_zero(self):
        rc, out = self.results["failing"]
        self.assertEqual(summary(out), (1, 1, 0), out[-3000:])
        self.assertNotEqual(rc, 0)


class TestArguments(unittest.TestCase):
    """The runner's own argument handling (no tests run)."""

    def test_test_path_added_for_package(self):
        from plone.pgcatalog.testing import runner as testrunner
        args = testrunner.build_args(["--package", "plone.app.querystring"],
                                     exclusions=False)
        import plone.app.querystring
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(plone.app.querystring.__file__)))))
        self.assertEqual(args[:2], ["--test-path", root])
        self.assertEqual(args[2:], ["--package", "plone.app.querystring"])

    def test_given_test_path_kept(self):
        from plone.pgcatalog.testing import runner as testrunner
        args = testrunner.build_args(
            ["--test-path", "/x", "-s", "Products.CMFPlone"],
            exclusions=False)
        self.assertEqual(args, ["--test-path", "/x", "-s",
                                "Products.CMFPlone"])

    def test_exclusions_match_exactly_one_test(self):
        from plone.pgcatalog.testing import runner as testrunner
        pattern = re.compile(testrunner.id_pattern(
            "Products.CMFPlone.tests.testCatalogTool.TestCatalogSetup."
            "testDateIsDateIndex"))
        self.assertTrue(pattern.search(
            "testDateIsDateIndex (Products.CMFPlone.tests.testCatalogTool."
            "TestCatalogSetup.testDateIsDateIndex)"))
        self.assertTrue(pattern.search(
            "testDateIsDateIndex (Products.CMFPlone.tests.testCatalogTool."
            "TestCatalogSetup)"))
        self.assertFalse(pattern.search(
            "testDateIsDateIndexToo (Products.CMFPlone.tests.testCatalogTool."
            "TestCatalogSetup.testDateIsDateIndexToo)"))
        for test_id, kind, reason in testrunner.EXCLUSIONS:
            self.assertIn(kind, ("zcatalog-internals", "fails-on-stock",
                                 "runner"))
            self.assertTrue(reason)
        args = testrunner.build_args(["-s", "x", "--test-path", "/x"])
        self.assertEqual(args.count("-t"), len(testrunner.EXCLUSIONS))
        stock = testrunner.build_args(["-s", "x", "--test-path", "/x"],
                                      stock=True)
        self.assertEqual(stock.count("-t"), len(
            [e for e in testrunner.EXCLUSIONS if e[1] == "fails-on-stock"]))
