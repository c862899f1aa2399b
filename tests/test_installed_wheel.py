"""What a user installs, installed: the wheel and the sdist built from this
repository, and a Plone site running on an installed copy of the wheel.

Nothing here imports the package from the checkout into the site's processes:

* the sdist and the wheel are built with ``python -m build`` from the
  repository root; the wheel holds every file of ``src/plone/pgcatalog``
  that git tracks (modules, ZCML, profiles, templates, SQL...) and nothing
  else, the sdist the same sources, and a wheel built again from the sdist
  the same files as the first;
* a fresh virtualenv (this interpreter) gets ``pip install -c
  constraints-plone-<6.x>.txt Plone <wheel>`` (the Plone line this suite
  runs on), the way a site is installed:
  there the package is imported from site-packages, every module imports
  (the test layers apart: they need the test extra), the distribution's
  metadata has pyproject.toml's version, every console script it declares
  answers ``--help``, and a Zope instance's ZCML loads its configuration;
* a Zope instance made by ``mkwsgiinstance`` and served by ``runwsgi``
  (real processes, real HTTP on 127.0.0.1) creates a Plone site through
  plone.distribution's ``@sites``, installs ``plone.pgcatalog:default``
  through plone.restapi's ``@addons``, finds a new document with ``@search``
  and in the PostgreSQL tables, uninstalls, and finds it again in the
  ZCatalog put back.

PostgreSQL is the private server of ``plone.pgcatalog.testing.pgserver``
(or ``PGCATALOG_DSN``'s), reached from this process; the instance is only
given a DSN in its zope.conf.  The virtualenv takes a minute or two with a
warm pip cache, and needs the package index otherwise; ``-m "not install"``
leaves this module out.
"""
import email.parser
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import psycopg
import pytest

import zopeprocess
from plone.pgcatalog.testing import pgserver


pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "src" / "plone" / "pgcatalog"

def _constraints():
    """The constraints file of the Plone this suite runs on (6.1 or 6.2):
    the wheel is installed on the same Plone line."""
    import importlib.metadata
    version = importlib.metadata.version("Products.CMFPlone")
    line = ".".join(version.split(".")[:2])
    found = ROOT / ("constraints-plone-%s.txt" % line)
    return found if found.exists() else ROOT / "constraints-plone-6.2.txt"


CONSTRAINTS = _constraints()
DIST_NAME = "pgcatalog-plone"
SITE_ID = "Plone"

BUILD_TIMEOUT = 300
INSTALL_TIMEOUT = 900
SCRIPT_TIMEOUT = 120

#: modules that need what only the test extra brings (plone.app.testing)
TEST_ONLY_MODULES = {
    "plone.pgcatalog.testing.layers",
    "plone.pgcatalog.testing.plonefixture",
}


def project_version():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def run(argv, timeout, log=None, **kw):
    """Run ``argv``; fail the test with its output unless it exits 0."""
    try:
        done = subprocess.run([str(a) for a in argv], capture_output=True,
                              text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as exc:
        pytest.fail("%s: no answer in %d s\n%s\n%s" % (
            " ".join(map(str, argv)), timeout, exc.stdout or "",
            exc.stderr or ""))
    if log is not None:
        with open(log, "a") as f:
            f.write("$ %s\n%s\n%s\n" % (" ".join(map(str, argv)),
                                        done.stdout, done.stderr))
    if done.returncode != 0:
        pytest.fail("%s exited %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
            " ".join(map(str, argv)), done.returncode, done.stdout[-6000:],
            done.stderr[-6000:]))
    return done


def tracked_package_files():
    """Paths (relative to src/) of the package's files git tracks; without
    git (an unpacked sdist), the package's files on disk."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--",
             "src/plone/pgcatalog"],
            capture_output=True, text=True, timeout=60, check=True).stdout
        files = [p[len("src/"):] for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
    return sorted(files) or sorted(disk_package_files())


def disk_package_files():
    """Paths (relative to src/) of the package's files on disk, bytecode
    caches left out."""
    return {
        str(path.relative_to(ROOT / "src"))
        for path in PACKAGE_DIR.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
        and path.suffix not in (".pyc", ".pyo")}


def wheel_names(path):
    with zipfile.ZipFile(path) as whl:
        return sorted(whl.namelist())


def wheel_package_files(path):
    return sorted(n for n in wheel_names(path)
                  if n.startswith("plone/pgcatalog/"))


# -- building -----------------------------------------------------------------

def scratch_root():
    """Where the virtualenv goes: TMPDIR when it is set, else a tmpfs with
    room that may run programs (/dev/shm), else the default temporary
    directory.  A Plone virtualenv is some 30,000 files: on a busy disk
    deleting them alone takes about a minute, on a tmpfs a second."""
    if os.environ.get("TMPDIR"):
        return None
    shm = "/dev/shm"
    try:
        stat = os.statvfs(shm)
    except OSError:
        return None
    if (stat.f_flag & (os.ST_NOEXEC | os.ST_RDONLY)
            or stat.f_bavail * stat.f_frsize < 4 * 2 ** 30
            or not os.access(shm, os.W_OK | os.X_OK)):
        return None
    return shm


@pytest.fixture(scope="module")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="pgcatalog-wheel-",
                                 dir=scratch_root()))
    yield path
    shutil.rmtree(path, True)


@pytest.fixture(scope="module")
def built(workdir):
    """(sdist, wheel, wheel built from the sdist), built by ``python -m
    build`` as a release is."""
    build_dir = ROOT / "build"
    had_build_dir = build_dir.exists()
    tree_out = workdir / "dist"
    try:
        run([sys.executable, "-m", "build", "--sdist", "--wheel",
             "--outdir", tree_out, ROOT], BUILD_TIMEOUT, cwd=ROOT)
    finally:
        # setuptools' scratch directory, which a later build would take
        # files from: leave the checkout as it was
        if not had_build_dir:
            shutil.rmtree(build_dir, True)
    (sdist,) = tree_out.glob("*.tar.gz")
    (wheel,) = tree_out.glob("*.whl")
    unpacked = workdir / "sdist"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    (sdist_root,) = unpacked.iterdir()
    sdist_out = workdir / "dist-from-sdist"
    run([sys.executable, "-m", "build", "--wheel", "--outdir", sdist_out,
         sdist_root], BUILD_TIMEOUT, cwd=sdist_root)
    (wheel_again,) = sdist_out.glob("*.whl")
    return sdist, wheel, wheel_again


def test_wheel_holds_every_tracked_file(built):
    _sdist, wheel, _again = built
    tracked = tracked_package_files()
    in_wheel = set(wheel_package_files(wheel))
    # the data files are what a build forgets: make sure there are some
    suffixes = {Path(p).suffix for p in tracked}
    assert {".py", ".zcml", ".xml", ".pt", ".zpt", ".sql"} <= suffixes
    missing_data = [p for p in tracked
                    if not p.endswith(".py") and p not in in_wheel]
    missing_modules = [p for p in tracked
                       if p.endswith(".py") and p not in in_wheel]
    assert missing_data == [], "data files missing from the wheel"
    assert missing_modules == [], "modules missing from the wheel"
    # nothing that is not in the source tree (a stale build directory's)
    assert sorted(in_wheel - disk_package_files()) == []


def test_wheel_layout(built):
    _sdist, wheel, _again = built
    names = wheel_names(wheel)
    dist_info = "pgcatalog_plone-%s.dist-info/" % project_version()
    tops = {n.split("/")[0] + "/" for n in names}
    assert tops == {"plone/", dist_info}
    # "plone" is a namespace package shared with Plone's own: an
    # __init__.py of ours there would hide every other plone.* package
    assert "plone/__init__.py" not in names
    assert "plone/pgcatalog/__init__.py" in names
    assert dist_info + "licenses/LICENSE.txt" in names
    assert not [n for n in names if n.endswith((".pyc", ".pyo"))
                or "__pycache__" in n]
    with zipfile.ZipFile(wheel) as whl:
        metadata = email.parser.Parser().parsestr(
            whl.read(dist_info + "METADATA").decode())
    assert metadata["Name"] == DIST_NAME
    assert metadata["Version"] == project_version()


def test_sdist_holds_the_sources(built):
    sdist, wheel, _again = built
    with tarfile.open(sdist) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
    prefix = "pgcatalog_plone-%s/" % project_version()
    assert [n for n in names if not n.startswith(prefix)] == []
    inside = {n[len(prefix):] for n in names}
    for needed in ("pyproject.toml", "MANIFEST.in", "README.md",
                   "LICENSE.txt", "PKG-INFO", CONSTRAINTS.name):
        assert needed in inside
    tracked = tracked_package_files()
    assert [p for p in tracked if "src/" + p not in inside] == []
    sdist_package = sorted(n[len("src/"):] for n in inside
                           if n.startswith("src/plone/pgcatalog/"))
    assert sdist_package == wheel_package_files(wheel)


def test_wheel_from_sdist_is_the_same(built):
    _sdist, wheel, again = built
    assert wheel_names(again) == wheel_names(wheel)
    with zipfile.ZipFile(wheel) as first, zipfile.ZipFile(again) as second:
        differ = [n for n in wheel_package_files(wheel)
                  if first.read(n) != second.read(n)]
    assert differ == []


# -- an installed copy --------------------------------------------------------

def clean_env(venv):
    """The environment of a process of the virtualenv: nothing of this
    test run's (its virtualenv, PYTHONPATH, the catalog's settings: the
    instance reads its DSN from its zope.conf)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
                        "PYTHONSTARTUP")
           and not k.startswith("PGCATALOG_")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = str(venv / "bin") + os.pathsep + os.environ.get("PATH", "")
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


class Venv:

    def __init__(self, path):
        self.path = path
        self.bin = path / "bin"
        self.python = self.bin / "python"
        self.env = clean_env(path)
        self.cwd = path.parent

    def run(self, argv, timeout=SCRIPT_TIMEOUT, **kw):
        return run(argv, timeout, env=self.env, cwd=self.cwd, **kw)

    def python_json(self, code, *args, timeout=SCRIPT_TIMEOUT):
        """Run ``code`` in the virtualenv's python; its last output line,
        read as JSON."""
        done = self.run([self.python, "-c", textwrap.dedent(code)] +
                        list(args), timeout=timeout)
        return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def venv(built, workdir):
    """A fresh virtualenv with Plone and the wheel installed (not
    editable), under the repository's constraints."""
    _sdist, wheel, _again = built
    path = workdir / "venv"
    log = workdir / "pip.log"
    run([sys.executable, "-m", "venv", path], SCRIPT_TIMEOUT)
    env = Venv(path)
    env.run([env.python, "-m", "pip", "install", "-q", "-U", "pip"],
            timeout=INSTALL_TIMEOUT, log=log)
    env.run([env.python, "-m", "pip", "install", "-c", CONSTRAINTS,
             "Plone", wheel], timeout=INSTALL_TIMEOUT, log=log)
    return env


def test_imported_from_site_packages(venv):
    found = venv.python_json("""
        import json, sysconfig
        import plone.pgcatalog
        print(json.dumps({"file": plone.pgcatalog.__file__,
                          "purelib": sysconfig.get_paths()["purelib"]}))
        """)
    purelib = Path(found["purelib"]).resolve()
    module = Path(found["file"]).resolve()
    assert purelib.is_relative_to(venv.path.resolve())
    assert module.is_relative_to(purelib), found
    assert not module.is_relative_to(ROOT)
    assert "/src/" not in found["file"]


def test_every_module_imports(venv):
    """Runtime code imports nothing of the test extra: every module imports
    on a site's install except the test layers."""
    failed = venv.python_json("""
        import importlib, json, pkgutil, traceback
        import plone.pgcatalog
        failed = {}
        for info in pkgutil.walk_packages(plone.pgcatalog.__path__,
                                          "plone.pgcatalog."):
            try:
                importlib.import_module(info.name)
            except Exception as exc:
                failed[info.name] = "%s: %s" % (type(exc).__name__, exc)
        print(json.dumps(failed))
        """)
    assert set(failed) <= TEST_ONLY_MODULES, failed
    for name, error in failed.items():
        assert "plone.app.testing" in error, (name, error)


def test_distribution_metadata(venv):
    found = venv.python_json("""
        import json
        from importlib.metadata import distribution
        dist = distribution("pgcatalog-plone")
        print(json.dumps({
            "name": dist.metadata["Name"],
            "version": dist.version,
            "origin": dist.read_text("direct_url.json"),
            "autoinclude": [(ep.name, ep.value) for ep in dist.entry_points
                            if ep.group == "plone.autoinclude.plugin"],
        }))
        """)
    assert found["name"] == DIST_NAME
    assert found["version"] == project_version()
    # installed from the wheel file, not from the checkout (-e)
    origin = json.loads(found["origin"])
    assert "archive_info" in origin, origin
    assert origin["url"].endswith(".whl"), origin
    assert sorted(found["autoinclude"]) == [
        ["module", "plone.pgcatalog"], ["target", "plone"]]


def test_console_scripts_answer_help(venv):
    scripts = venv.python_json("""
        import json
        from importlib.metadata import distribution
        print(json.dumps(sorted(
            ep.name for ep in distribution("pgcatalog-plone").entry_points
            if ep.group == "console_scripts")))
        """)
    assert scripts, "the distribution declares no console script"
    for name in scripts:
        script = venv.bin / name
        assert script.exists(), name
        done = venv.run([script, "--help"])
        assert "usage" in done.stdout.lower(), (name, done.stdout)
        assert name in done.stdout, (name, done.stdout)


# -- a Zope instance ----------------------------------------------------------

@pytest.fixture(scope="module")
def catalog_dsn():
    dsn = pgserver.fresh_database("pgcatalog_wheel")
    yield dsn
    pgserver.drop_database(dsn)


@pytest.fixture(scope="module")
def instance(venv, workdir, catalog_dsn):
    """A Zope instance of the virtualenv: (home, password, port)."""
    return zopeprocess.make_instance(venv.run, venv.bin, workdir / "instance",
                                     catalog_dsn)


def test_zcml_loads(venv, instance, catalog_dsn):
    """The instance's site.zcml (Products.CMFPlone's, and plone.autoinclude
    finding the add-on) loads the package's ZCML from site-packages and
    registers its profiles; its zope.conf gives the catalog the DSN."""
    home, _password, _port = instance
    found = venv.python_json("""
        import json, os, sys
        from Zope2.Startup.run import configure_wsgi
        configure_wsgi(sys.argv[1])
        # what Zope2.App.startup.startup() does before the ZCML
        import OFS.Application
        OFS.Application.import_products()
        from Zope2.App import zcml
        zcml.load_site()
        from Products.GenericSetup.registry import _profile_registry
        import plone.pgcatalog
        from plone.pgcatalog import config
        package = os.path.dirname(plone.pgcatalog.__file__)
        print(json.dumps({
            "package": package,
            "zcml": sorted(os.path.relpath(f, package)
                           for f in zcml._context._seen_files
                           if f.startswith(package + os.sep)),
            "profiles": sorted(p for p in _profile_registry.listProfiles()
                               if p.startswith("plone.pgcatalog:")),
            "dsn": config.get_dsn(),
        }))
        """, home / "etc" / "zope.conf", timeout=SCRIPT_TIMEOUT)
    assert "configure.zcml" in found["zcml"]
    assert "browser.zcml" in found["zcml"]
    assert found["profiles"] == ["plone.pgcatalog:default",
                                 "plone.pgcatalog:uninstall"]
    assert found["dsn"] == catalog_dsn


@pytest.fixture(scope="module")
def server(venv, instance):
    home, password, port = instance
    server = zopeprocess.Server(venv.bin, venv.env, home, password, port)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def catalog_rows(dsn, sql, *params):
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def search(server, word):
    found = server.expect(200, "GET", "/%s/@search?SearchableText=%s" % (
        SITE_ID, word), json_api=True)
    return [item["@id"] for item in found["items"]]


def is_pgcatalog(server):
    """Whether the site's portal_catalog is plone.pgcatalog's (its ZMI has
    the Catalog status tab; a ZCatalog has the Advanced one instead)."""
    tool = "/%s/portal_catalog/" % SITE_ID
    status, body = server.request("GET", tool + "manage_catalogStatus")
    advanced, _ = server.request("GET", tool + "manage_catalogAdvanced")
    if status == 200 and advanced == 404:
        assert "keeps its entries in PostgreSQL (plone.pgcatalog)" in body
        return True
    if status == 404 and advanced == 200:
        return False
    server.fail("portal_catalog is neither: manage_catalogStatus %d, "
                "manage_catalogAdvanced %d" % (status, advanced))


def test_site_on_the_installed_wheel(server, catalog_dsn):
    """A Plone site on the installed wheel, through the web: create it,
    install the add-on, add and find a document, uninstall."""
    try:
        exercise_site(server, catalog_dsn)
    except pytest.fail.Exception:
        raise  # Server.fail's: the log is in its message
    except BaseException:
        print(server.log())  # shown with the failure
        raise


def exercise_site(server, catalog_dsn):
    site = server.expect(200, "POST", "/@sites", json_api=True, data={
        "distribution": "classic", "site_id": SITE_ID,
        "title": "Installed wheel", "description": "",
        "default_language": "en", "portal_timezone": "UTC",
        "setup_content": True})
    assert site["id"] == SITE_ID
    addon = "/%s/@addons/plone.pgcatalog" % SITE_ID
    assert server.expect(200, "GET", addon, json_api=True)[
        "is_installed"] is False
    assert not is_pgcatalog(server)

    server.expect((200, 204), "POST", addon + "/install", json_api=True)
    assert server.expect(200, "GET", addon, json_api=True)[
        "is_installed"] is True
    assert is_pgcatalog(server)
    # the existing content, indexed by the install
    installed_entries = catalog_rows(
        catalog_dsn, "SELECT count(*) FROM pgcatalog_entries")[0][0]
    assert installed_entries >= 1

    word = "wheel" + "".join(random.choice(string.ascii_lowercase)
                             for _ in range(10))
    document = server.expect(201, "POST", "/" + SITE_ID, json_api=True, data={
        "@type": "Document", "title": "The installed %s" % word,
        "text": {"content-type": "text/html",
                 "data": "<p>Found by its %s.</p>" % word}})
    doc_url = document["@id"]
    doc_path = "/%s/%s" % (SITE_ID, document["id"])
    assert search(server, word) == [doc_url]
    rows = catalog_rows(
        catalog_dsn,
        "SELECT e.path FROM pgcatalog_entries e JOIN pgcatalog_text t "
        "USING (rid) WHERE t.name = 'SearchableText' AND t.tsv::text LIKE %s",
        "%%'%s'%%" % word)
    assert rows == [(doc_path,)]
    assert catalog_rows(
        catalog_dsn, "SELECT count(*) FROM pgcatalog_entries")[0][0] == \
        installed_entries + 1

    server.expect((200, 204), "POST", addon + "/uninstall", json_api=True)
    assert server.expect(200, "GET", addon, json_api=True)[
        "is_installed"] is False
    assert not is_pgcatalog(server)
    assert search(server, word) == [doc_url]
    # the site's rows are gone from PostgreSQL, the tables stay
    assert catalog_rows(
        catalog_dsn, "SELECT count(*) FROM pgcatalog_entries") == [(0,)]

    status = server.stop()
    assert status is not None, "runwsgi had to be killed"
    log = server.log()
    assert "Traceback" not in log, "the instance logged a traceback"
    assert " ERROR [" not in log, "the instance logged an error"
