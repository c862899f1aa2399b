"""Run another package's unmodified test suite on plone.pgcatalog.

Usage: pgcatalog-testrunner [--stock] [--no-exclusions] [--exclude REGEX]
                            [--list-exclusions] [zope.testrunner options]

``pgcatalog-testrunner`` is zope.testrunner with plone.app.testing's
``PloneFixture`` (``PLONE_FIXTURE``, the base of every Plone test layer)
extended so that the test site's ``portal_catalog`` is plone.pgcatalog's::

    pgcatalog-testrunner --package Products.CMFPlone -t testCatalogTool
    pgcatalog-testrunner --package plone.app.querystring
    python -m plone.pgcatalog.testing.runner --package plone.app.querystring
    pgcatalog-testrunner --stock --package plone.app.querystring  # baseline

What the patched fixture does, on top of what it always did:

* ``setUp`` creates a fresh PostgreSQL database (on ``PGCATALOG_DSN``'s
  server, or on a private embedded one) and points ``PGCATALOG_DSN`` at it;
  ``tearDown`` drops it;
* ``setUpZCML`` also loads plone.pgcatalog's ZCML;
* ``setUpDefaultContent``, once the site exists, applies the
  ``plone.pgcatalog:default`` profile (which swaps the tool and indexes all
  content), so every layer built on the fixture sees the PostgreSQL catalog.

Catalog isolation follows ZODB's: every ``plone.testing.zodb.stackDemoStorage``
(layer set-up, each functional test) also snapshots the catalog rows, and
closing that stacked database (layer tear-down, functional test tear-down)
restores them, so what a layer or a test committed to the catalog goes away
exactly when its ZODB changes do. Integration tests abort their transaction,
and the catalog's PostgreSQL transaction with it.

Options of this runner (everything else goes to zope.testrunner unchanged;
``--test-path`` is added for each ``--package`` unless one is given):

``--stock``           run on stock ZCatalog (no patches): the baseline
``--no-exclusions``   do not skip the tests listed in ``EXCLUSIONS``
``--exclude REGEX``   skip more tests (REGEX is searched in zope.testrunner's
                      test name, "method (package.module.Class.method)")
``--list-exclusions`` print ``EXCLUSIONS`` with their reasons and exit

The exit status is non-zero when a test failed or errored (zope.testrunner's)
and also when no test at all was selected (zope.testrunner's would be 0).

Running tests needs zope.testrunner and plone.app.testing, which a site's
install does not bring: ``pip install 'pgcatalog-plone[testrunner]'`` (the
``test`` extra has them too).
"""
import atexit
import importlib
import importlib.util
import os
import re
import sys
import textwrap

from plone.pgcatalog.testing.exclusions import EXCLUSIONS
from plone.pgcatalog.testing import pgserver


MODE_ENV = "PGCATALOG_TESTRUNNER_MODE"
# What running tests needs besides the package (the ``testrunner`` extra, in
# the ``test`` one too); --help and --list-exclusions need neither.
REQUIRES = ("zope.testrunner", "plone.app.testing")
EXTRA_HINT = "pip install 'pgcatalog-plone[testrunner]'"


def missing_requirements():
    """The names in ``REQUIRES`` that cannot be imported."""
    missing = []
    for name in REQUIRES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # a parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


def _plonefixture():
    # Imported on use, not at the top: it needs plone.app.testing, which a
    # site's install lacks and --help must not (missing_requirements).
    from plone.pgcatalog.testing import plonefixture
    return plonefixture


def install_patches():
    """Make PloneFixture (and every layer on it) use plone.pgcatalog
    (``plone.pgcatalog.testing.plonefixture``).

    Idempotent. Called by ``main``; call it yourself (before layers are set
    up) to get the same behaviour under another test runner.
    """
    _plonefixture().install_patches()


def _drop_leftovers():
    _plonefixture().drop_leftovers()


def id_pattern(test_id):
    """The zope.testrunner ``-t`` regex selecting exactly ``test_id``.

    zope.testrunner matches ``-t`` against ``str(test)``, which is
    ``"method (package.module.Class.method)"`` (Python >= 3.11) or
    ``"method (package.module.Class)"``."""
    module_class, _, method = test_id.rpartition(".")
    return r"^%s \(%s(\.%s)?\)$" % (
        re.escape(method), re.escape(module_class), re.escape(method))


# -- command line -----------------------------------------------------------

def _option_values(args, names):
    """Values of options ``names`` (``-s X``, ``--package X``,
    ``--package=X``) in zope.testrunner arguments."""
    values = []
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif name.startswith("--") and arg.startswith(name + "="):
                values.append(arg[len(name) + 1:])
            elif (not name.startswith("--") and arg.startswith(name)
                  and len(arg) > len(name)):
                values.append(arg[len(name):])
    return values


def package_test_paths(package):
    """The directories to give zope.testrunner as ``--test-path`` so that
    ``package`` (dotted name of an importable package) is found in them:
    the directory each portion of the package is imported from.

    Symlinks are kept, not resolved: zope.testrunner looks for the package's
    ``__path__`` entries as Python imported them (made absolute, symlinks
    kept) under the test paths by string prefix, so a test path with its
    symlinks resolved selects nothing when the package was imported through
    a symlink (e.g. a virtualenv reached through one)."""
    module = importlib.import_module(package)
    portions = getattr(module, "__path__", None)
    if portions is None:
        raise ValueError(
            "--package %s is a module, not a package: zope.testrunner looks "
            "for tests in packages" % package)
    paths = []
    for portion in portions:  # several for a namespace package
        path = os.path.abspath(portion)
        for _ in range(package.count(".") + 1):
            path = os.path.dirname(path)
        if path not in paths:
            paths.append(path)
    return paths


def build_args(args, exclusions=True, extra_excludes=(), stock=False):
    """zope.testrunner arguments for this runner's ``args``."""
    args = list(args)
    out = []
    has_path = any(a in ("--test-path", "--path") or
                   a.startswith(("--test-path=", "--path="))
                   for a in args)
    if not has_path:
        seen = []
        for package in _option_values(args, ("--package", "-s")):
            for path in package_test_paths(package):
                if path not in seen:
                    seen.append(path)
                    out += ["--test-path", path]
    if exclusions:
        for test_id, kind, _reason in EXCLUSIONS:
            if stock and kind != "fails-on-stock":
                continue
            out += ["-t", "!" + id_pattern(test_id)]
    for pattern in extra_excludes:
        out += ["-t", "!" + pattern]
    return out + args


def _print_exclusions(out=None):
    for test_id, kind, reason in EXCLUSIONS:
        print("%s\n  [%s]\n%s" % (test_id, kind, textwrap.fill(
            reason, initial_indent="    ", subsequent_indent="    ")),
            file=out or sys.stdout)


def _run_zope_testrunner(args):
    """Run zope.testrunner with ``args``; return the Runner that ran."""
    # Imported here, not at the top: zope.testrunner is not installed with
    # a site (missing_requirements), and --help must work there.
    from zope.testrunner.runner import Runner
    test_runner = Runner(args=args, cwd=os.getcwd(),
                         script_parts=["-m", "plone.pgcatalog.testing.runner"])
    test_runner.run()
    return test_runner


def _selected(test_runner):
    """How many tests zope.testrunner selected (to run or to list)."""
    return sum(suite.countTestCases()
               for suite in test_runner.tests_by_layer_name.values())


def main(argv=None):
    """Run the tests; return the exit status (non-zero when a test failed
    or errored, or when no test at all was selected)."""
    argv = list(sys.argv if argv is None else argv)

    if len(argv) > 1 and argv[1] == "--resume-layer":
        # A layer zope.testrunner runs in a subprocess (or -j): the arguments
        # are the ones main() built for the parent; run in the same mode.
        if os.environ.get(MODE_ENV) != "stock":
            install_patches()
            atexit.register(_drop_leftovers)
        return int(_run_zope_testrunner(argv).failed)

    args = argv[1:]
    stock = exclusions_off = False
    extra = []
    rest = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--stock":
            stock = True
        elif arg == "--no-exclusions":
            exclusions_off = True
        elif arg == "--exclude" and i + 1 < len(args):
            i += 1
            extra.append(args[i])
        elif arg.startswith("--exclude="):
            extra.append(arg[len("--exclude="):])
        elif arg == "--list-exclusions":
            _print_exclusions()
            return 0
        elif arg in ("-h", "--help"):
            print(__doc__)
            if missing_requirements():
                # zope.testrunner's options cannot be listed without it
                print("zope.testrunner's own options are listed once it is "
                      "installed (%s)." % EXTRA_HINT)
                return 0
            rest.append(arg)
        else:
            rest.append(arg)
        i += 1

    missing = missing_requirements()
    if missing:
        print("pgcatalog-testrunner: running tests needs %s, not installed "
              "here: %s" % (" and ".join(missing), EXTRA_HINT),
              file=sys.stderr)
        return 2
    zargs = build_args(rest, exclusions=not exclusions_off,
                       extra_excludes=extra, stock=stock)
    if stock:
        os.environ[MODE_ENV] = "stock"
        print("pgcatalog-testrunner: stock ZCatalog (no patches)")
    else:
        os.environ[MODE_ENV] = "pgcatalog"
        # Resolve the server once: layers run in subprocesses inherit it.
        os.environ[pgserver.ENV_DSN] = pgserver.server_dsn()
        install_patches()
        atexit.register(_drop_leftovers)
        print("pgcatalog-testrunner: portal_catalog is plone.pgcatalog")
    if not exclusions_off:
        skipped = [e for e in EXCLUSIONS
                   if not stock or e[1] == "fails-on-stock"]
        if skipped:
            print("Skipping %d known test(s) (--list-exclusions for why):"
                  % len(skipped))
            for test_id, kind, _reason in skipped:
                print("  [%s] %s" % (kind, test_id))
    sys.stdout.flush()
    test_runner = _run_zope_testrunner([argv[0]] + zargs)
    if test_runner.failed:
        return 1
    if not _selected(test_runner):
        # zope.testrunner exits 0 then: a run that tested nothing must not
        # pass for one that tested something (a wrong --package, --test-path
        # or -t)
        print("pgcatalog-testrunner: no test selected (package %s, "
              "test path %s)" % (
                  ", ".join(_option_values(rest, ("--package", "-s")))
                  or "(none)",
                  ", ".join(_option_values(zargs, ("--test-path", "--path")))
                  or "(none)"),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
