"""pgcatalog-testrunner on a tiny throwaway package of plain unit tests.

No Plone site is built: the package's tests use no layer, so the runner
starts no PostgreSQL either (``PGCATALOG_DSN`` is set to a database nothing
connects to). The package is reached through a symlinked directory on
``sys.path``, as site-packages is in a virtualenv reached through a symlink:
the runner must find its tests there, and a run that selects no test must
fail rather than pass with nothing run.
"""
import importlib
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest
from importlib.metadata import entry_points

from plone.pgcatalog.testing import runner


PACKAGE = "pgcrunnerprobe"
TIMEOUT = 300

PROBE_TESTS = '''
import unittest


class TestProbe(unittest.TestCase):

    def test_one(self):
        pass

    def test_two(self):
        pass

    def test_broken(self):
        self.fail("fails on purpose")
'''


def _write_probe(site):
    """``PACKAGE`` with a ``tests`` package in directory ``site``."""
    tests = os.path.join(site, PACKAGE, "tests")
    os.makedirs(tests)
    for path in (os.path.join(site, PACKAGE, "__init__.py"),
                 os.path.join(tests, "__init__.py")):
        open(path, "w").close()
    with open(os.path.join(tests, "test_probe.py"), "w") as f:
        f.write(textwrap.dedent(PROBE_TESTS))


def _ran(out):
    """(tests, failures, errors) of zope.testrunner's last summary line."""
    found = re.findall(
        r"Ran (\d+) tests with (\d+) failures, (\d+) errors", out)
    return tuple(int(n) for n in found[-1]) if found else None


class SymlinkedSite(unittest.TestCase):
    """A temporary site directory reached through a symlink."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pgcatalog-runner-")
        real = os.path.join(cls.tmp.name, "real")
        _write_probe(os.path.join(real, "site"))
        link = os.path.join(cls.tmp.name, "link")
        os.symlink(real, link)
        # the directory on sys.path, as Python imports the package from it
        cls.site = os.path.join(link, "site")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()


class TestPackageTestPaths(SymlinkedSite):

    def setUp(self):
        sys.path.insert(0, self.site)
        importlib.invalidate_caches()
        self.addCleanup(sys.path.remove, self.site)
        self.addCleanup(self._forget_probe)

    def _forget_probe(self):
        for name in list(sys.modules):
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                del sys.modules[name]

    def test_symlinks_kept(self):
        # zope.testrunner matches the test path against the package's
        # __path__ as imported (os.path.abspath, no symlink resolved)
        self.assertEqual(runner.package_test_paths(PACKAGE), [self.site])
        self.assertNotEqual(os.path.realpath(self.site), self.site)

    def test_build_args_adds_the_symlinked_path(self):
        args = runner.build_args(["--package", PACKAGE], exclusions=False)
        self.assertEqual(args, ["--test-path", self.site,
                                "--package", PACKAGE])


class TestRuns(SymlinkedSite):
    """The runner in its own processes (all at once), as
    ``python -m plone.pgcatalog.testing.runner``."""

    RUNS = {
        "symlinked": ["--package", PACKAGE, "-t", "!test_broken"],
        "stock": ["--stock", "--package", PACKAGE, "-t", "!test_broken"],
        "nothing": ["--package", PACKAGE, "-t", "no_such_test"],
        "nothing_stock": ["--stock", "--package", PACKAGE,
                          "-t", "no_such_test"],
        "failing": ["--package", PACKAGE, "-t", "test_broken"],
    }

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [cls.site] + [p for p in [env.get("PYTHONPATH")] if p])
        # no layer here needs a database: nothing connects to this one
        env["PGCATALOG_DSN"] = "dbname=pgcatalog_runner_unused"
        procs = {
            name: subprocess.Popen(
                [sys.executable, "-m", "plone.pgcatalog.testing.runner"]
                + args, env=env, cwd=cls.tmp.name, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True)
            for name, args in cls.RUNS.items()}
        cls.results = {}
        for name, proc in procs.items():
            try:
                out, _ = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                out, _ = proc.communicate()
                out += "\n[timed out after %ds]" % TIMEOUT
            cls.results[name] = (proc.returncode, out)

    def assertRanOk(self, name, tests):
        rc, out = self.results[name]
        self.assertEqual(_ran(out), (tests, 0, 0), out[-3000:])
        self.assertEqual(rc, 0, out[-3000:])

    def assertNothingSelected(self, name):
        rc, out = self.results[name]
        self.assertNotEqual(rc, 0, out[-3000:])
        self.assertIn("pgcatalog-testrunner: no test selected (package %s, "
                      "test path %s)" % (PACKAGE, self.site), out)

    def test_tests_found_through_symlink(self):
        self.assertRanOk("symlinked", 2)
        self.assertIn("portal_catalog is plone.pgcatalog",
                      self.results["symlinked"][1])

    def test_tests_found_through_symlink_stock(self):
        self.assertRanOk("stock", 2)

    def test_no_test_selected_exits_non_zero(self):
        self.assertNothingSelected("nothing")

    def test_no_test_selected_exits_non_zero_stock(self):
        self.assertNothingSelected("nothing_stock")

    def test_failure_exits_non_zero(self):
        rc, out = self.results["failing"]
        self.assertEqual(_ran(out), (1, 1, 0), out[-3000:])
        self.assertNotEqual(rc, 0)
        self.assertNotIn("no test selected", out)


class TestConsoleScript(unittest.TestCase):

    def test_entry_point(self):
        (script,) = entry_points(group="console_scripts",
                                 name="pgcatalog-testrunner")
        self.assertEqual(script.value, "plone.pgcatalog.testing.runner:main")
