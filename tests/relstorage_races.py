"""Races and faults on a Plone site on RelStorage with plone.pgcatalog in the
same PostgreSQL database: every case must end as ZCatalog would (one side
retries, both end right), with the catalog equal to the ZODB afterwards.

Run by tests/test_relstorage.py in its own process (Zope starts once per
process).  Prints one JSON line: the cases checked and their figures.

Cases (deterministic: two requests in two threads, interleaved by events):

* publish a folder (reindexing its subtree's security) while another
  request deletes, or moves, a grandchild and commits first;
* reindex vs uncatalog, rename vs reindex, edit vs edit of one document;
* two requests writing different documents: both commit, no retry;
* registering the hot keys (hot.py) beside a writer creating a document,
  in both orders: the second retries, the hot rows hold the document;
* a request that began before another one committed sees the catalog of
  its own ZODB snapshot (the storage's snapshot, imported);
* faults at each commit phase: a storage failing in tpc_vote and in
  tpc_finish (the catalog must not keep the rows), the catalog's backend
  killed between its vote and its finish (the prepared transaction is
  committed on a fresh connection), every pooled backend killed while idle
  (a server restart: the next requests work), a backend killed during a
  request with catalog writes (retryable error, nothing half-written);
* a prepared catalog transaction left by a crashed process is resolved;
* the catalog's rows deleted behind its back: a clear error, not an empty
  catalog;
* K concurrent editors (random documents) with retries: the catalog equals
  the ZODB, and figures (transactions, retries, p99 latency).
"""
import json
import os
import random
import sys
import tempfile
import threading
import time

import psycopg
import transaction

SITE = "plone"
ADMIN = "admin"
EDITORS = int(os.environ.get("PGCATALOG_RACE_EDITORS", "4"))
EDITS = int(os.environ.get("PGCATALOG_RACE_EDITS", "15"))
DOCS = 40
#: a request is retried up to this many times (Zope's default is 3; the
#: editors work one folder, whose own object conflicts in the ZODB too)
WRITES_FOR_CACHE = int(os.environ.get("PGCATALOG_RACE_CACHE_WRITES", "60"))
RETRIES = 10


def catalog_state(site):
    catalog = site.portal_catalog
    return {b.getPath(): (b.Title, b.review_state)
            for b in catalog.unrestrictedSearchResults(path="/" + SITE)
            if b.getPath() != "/" + SITE}


def zodb_state(site):
    wf = site.portal_workflow
    state = {}

    def visit(obj):
        for child in obj.objectValues():
            if getattr(child, "portal_type", None) in ("Document", "Folder"):
                path = "/".join(child.getPhysicalPath())
                state[path] = (child.Title(),
                               wf.getInfoFor(child, "review_state", None))
                visit(child)

    visit(site)
    return state


def agree(db, case):
    """The catalog holds exactly the ZODB's objects, with their titles and
    states, and their security (anonymous sees what is published)."""
    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN) as r:
        cat, zodb = catalog_state(r.site), zodb_state(r.site)
        if cat != zodb:
            diff = sorted(set(cat.items()) ^ set(zodb.items()))[:10]
            raise AssertionError("%s: catalog and ZODB differ: %r" % (
                case, diff))
        from AccessControl.SecurityManagement import noSecurityManager
        noSecurityManager()
        seen = {b.getPath() for b in r.site.portal_catalog(
            portal_type=["Document", "Folder"])}
        published = {p for p, v in zodb.items() if v[1] == "published"}
        if seen != published:
            raise AssertionError("%s: anonymous sees %r, published %r" % (
                case, sorted(seen ^ published)[:10], None))
        for brain in r.site.portal_catalog.unrestrictedSearchResults(
                path="/" + SITE):
            brain._unrestrictedGetObject()     # every entry resolves
        # the hot rows (every-match answers on hot indexes alone) agree
        search = r.site.portal_catalog.unrestrictedSearchResults
        hot = {b.getPath() for b in search(
            portal_type=["Document", "Folder"], review_state="published",
            allowedRolesAndUsers=["Anonymous"])}
        if hot != published:
            raise AssertionError("%s: the hot rows find %r, published %r" % (
                case, sorted(hot ^ published)[:10], None))
        docs = {b.getPath() for b in search(portal_type="Document")}
        # a path condition: answered from the entries
        entries = {b.getPath() for b in search(portal_type="Document",
                                               path="/")}
        if docs != entries:
            raise AssertionError("%s: the hot rows find documents %r" % (
                case, sorted(docs ^ entries)[:10]))


class Editor(threading.Thread):
    """A request in a thread: ``step(name)`` runs the named callable of the
    script in the request, in order, waiting on events in between."""

    def __init__(self, db, script, retries=5):
        super().__init__(daemon=True)
        self.db = db
        self.script = script
        self.retries = retries
        self.attempts = 0
        self.error = None
        self.traceback = None
        self.conflicts = 0

    def run(self):
        from transaction.interfaces import TransientError
        from ZODB.POSException import ConflictError

        from plone.pgcatalog.testing.zopeapp import Request
        while True:
            self.attempts += 1
            try:
                with Request(self.db, SITE, ADMIN, commit=True) as r:
                    self.script(r, self.attempts)
                return
            except (ConflictError, TransientError):
                self.conflicts += 1
                if self.attempts > self.retries:
                    self.error = sys.exc_info()[1]
                    return
            except Exception as exc:  # noqa: B902 - reported
                import traceback
                self.error = exc
                self.traceback = traceback.format_exc()
                return


def run_pair(first, second, case, db, checks, figures):
    """Two requests; ``first`` waits inside (``first_ready`` set, then
    ``go``) while ``second`` runs to its commit; then ``first`` commits.
    The first must conflict once (its catalog write rests on a row the
    second changed) and succeed on retry; the catalog ends equal to the
    ZODB."""
    ready, go = threading.Event(), threading.Event()

    def script_first(r, attempt):
        first(r, attempt, ready, go)

    a = Editor(db, script_first)
    a.start()
    if not ready.wait(60):
        raise AssertionError("%s: first request did not get ready" % case)
    b = Editor(db, lambda r, attempt: second(r))
    b.start()
    b.join(60)
    go.set()
    a.join(120)
    for editor in (a, b):
        if editor.error is not None:
            raise AssertionError("%s: %r" % (case, editor.error))
    if a.conflicts < 1:
        raise AssertionError("%s: the first request did not conflict" % case)
    agree(db, case)
    figures[case] = {"retries": a.conflicts + b.conflicts}
    checks.append(case)


def wait_first(r, attempt, ready, go):
    """In the first request: start its catalog snapshot, then wait."""
    r.site.portal_catalog.unrestrictedSearchResults(portal_type="Folder")
    if attempt == 1:
        ready.set()
        go.wait(60)


def setup_tree(db, name):
    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", name, title=name)
        folder = r.site[name]
        folder.invokeFactory("Folder", "sub", title="sub")
        for i in range(3):
            folder.sub.invokeFactory("Document", "gc%d" % i,
                                     title="grandchild %d" % i)
        folder.invokeFactory("Document", "doc", title="doc")


def races(db, checks, figures):
    # publish vs delete a grandchild
    setup_tree(db, "f1")

    def publish(r, attempt, ready, go):
        folder = r.site.f1
        list(folder.sub.objectIds())     # the grandchild is in our snapshot
        wait_first(r, attempt, ready, go)
        r.site.portal_workflow.doActionFor(folder, "publish")
        r.site.portal_workflow.doActionFor(folder.sub, "publish")

    def delete(r):
        r.site.f1.sub.manage_delObjects(["gc1"])

    run_pair(publish, delete, "publish vs delete grandchild", db, checks,
             figures)

    # publish vs move a grandchild
    setup_tree(db, "f2")

    def publish2(r, attempt, ready, go):
        folder = r.site.f2
        list(folder.sub.objectIds())
        wait_first(r, attempt, ready, go)
        r.site.portal_workflow.doActionFor(folder, "publish")
        r.site.portal_workflow.doActionFor(folder.sub, "publish")

    def move(r):
        cp = r.site.f2.sub.manage_cutObjects(["gc2"])
        r.site.f2.manage_pasteObjects(cp)

    run_pair(publish2, move, "publish vs move grandchild", db, checks,
             figures)

    # reindex vs uncatalog (catalog-only writes)
    setup_tree(db, "f3")

    def reindex(r, attempt, ready, go):
        doc = r.site.f3._getOb("doc", None)   # loaded in our snapshot
        wait_first(r, attempt, ready, go)
        if doc is not None:
            r.site.portal_catalog.catalog_object(doc)

    def uncatalog(r):
        r.site.f3.manage_delObjects(["doc"])

    run_pair(reindex, uncatalog, "reindex vs uncatalog", db, checks, figures)

    # rename vs reindex
    setup_tree(db, "f4")

    def reindex4(r, attempt, ready, go):
        doc = r.site.f4._getOb("doc", None)
        wait_first(r, attempt, ready, go)
        if doc is not None:
            doc.setTitle("edited")
            r.site.portal_catalog.catalog_object(doc)

    def rename(r):
        r.site.f4.manage_renameObject("doc", "renamed")

    run_pair(reindex4, rename, "rename vs reindex", db, checks, figures)

    # edit vs edit (the ZODB conflicts too; the catalog must not differ)
    setup_tree(db, "f5")

    def edit_a(r, attempt, ready, go):
        wait_first(r, attempt, ready, go)
        r.site.f5.doc.setTitle("A")
        r.site.f5.doc.reindexObject()

    def edit_b(r):
        r.site.f5.doc.setTitle("B")
        r.site.f5.doc.reindexObject()

    run_pair(edit_a, edit_b, "edit vs edit", db, checks, figures)


def hot_registration(db, checks, figures):
    """A transaction registering the hot keys (an upgrade's
    ``pgc_sync_indexes`` on a catalog without them) fills the hot rows from
    its snapshot while a writer creates and publishes a document: they must
    not both commit (the change counters' hot_epoch), in either order."""
    from plone.pgcatalog.pg import hot
    from plone.pgcatalog.pg.fragment import ident
    from plone.pgcatalog.pg.fragment import q
    from plone.pgcatalog.testing.zopeapp import Request

    def forget(r):
        tool = r.site.portal_catalog
        store = tool._pgc_store()
        for table in ("pgcatalog_hot_names", "pgcatalog_hot"):
            store.write(q("DELETE FROM {} WHERE cid = {}", ident(table),
                          store.cid))
        for name in hot.DEFAULT_NAMES:
            index = tool._catalog.getIndex(name)
            if "_pgc_hot_codes" in index.__dict__:
                del index._pgc_hot_codes

    for order, label in ((0, "registration waits, writer first"),
                         (1, "writer waits, registration first")):
        with Request(db, SITE, ADMIN, commit=True) as r:
            forget(r)
        name = "hotnew%d" % order

        def register(r, attempt=None, ready=None, go=None):
            if ready is not None:
                wait_first(r, attempt, ready, go)
            r.site.portal_catalog.pgc_sync_indexes()

        def create(r, attempt=None, ready=None, go=None):
            if ready is not None:
                wait_first(r, attempt, ready, go)
            r.site.invokeFactory("Document", name, title=name)
            r.site.portal_workflow.doActionFor(r.site[name], "publish")

        first, second = (register, create) if order == 0 else \
            (create, register)
        run_pair(first, second, "hot keys: " + label, db, checks, figures)
        with Request(db, SITE, ADMIN) as r:
            found = [b.getPath() for b in
                     r.site.portal_catalog.unrestrictedSearchResults(
                         portal_type="Document", review_state="published")
                     if b.getPath().endswith("/" + name)]
            if found != ["/%s/%s" % (SITE, name)]:
                raise AssertionError("hot keys: %s: %r" % (label, found))


def no_conflict_on_different_entries(db, checks):
    """Writers of different entries never conflict (the change counter is
    an insert-only log)."""
    setup_tree(db, "f6")
    ready, go = threading.Event(), threading.Event()

    def first(r, attempt):
        wait_first(r, attempt, ready, go)
        r.site.portal_catalog.catalog_object(r.site.f6.sub.gc0)

    a = Editor(db, first)
    a.start()
    ready.wait(60)
    b = Editor(db, lambda r, attempt: r.site.portal_catalog.catalog_object(
        r.site.f6.sub.gc1))
    b.start()
    b.join(60)
    go.set()
    a.join(60)
    if a.error or b.error or a.conflicts or b.conflicts:
        raise AssertionError("different entries conflicted: %r %r" % (
            a.error or a.conflicts, b.error or b.conflicts))
    checks.append("different entries: no conflict")


def snapshot(db, checks):
    """A request that began before another committed sees its own ZODB
    snapshot's catalog: not the new entry, still the deleted one."""
    from plone.pgcatalog.testing.zopeapp import Request
    setup_tree(db, "f7")
    ready, go, done = threading.Event(), threading.Event(), {}

    def reader():
        with Request(db, SITE, ADMIN) as r:
            list(r.site.f7.objectIds())   # the ZODB snapshot starts here
            ready.set()
            go.wait(60)
            found = {b.getId for b in r.site.portal_catalog.
                     unrestrictedSearchResults(path="/plone/f7")}
            for brain in r.site.portal_catalog.unrestrictedSearchResults(
                    path="/plone/f7"):
                brain._unrestrictedGetObject()
            done["found"] = found

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    ready.wait(60)
    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.f7.invokeFactory("Document", "newer", title="newer")
        r.site.f7.manage_delObjects(["doc"])
    go.set()
    t.join(60)
    found = done.get("found")
    if found is None or "newer" in found or "doc" not in found:
        raise AssertionError("snapshot: the early request saw %r" % found)
    checks.append("one snapshot: the ZODB's")


class FailingResource:
    """A resource that fails at a chosen commit phase, sorted before the
    catalog (as a storage is)."""

    def __init__(self, phase, sort="!0-failing"):
        self.phase = phase
        self.sort = sort
        self.transaction_manager = transaction.manager

    def sortKey(self):
        return self.sort

    def abort(self, txn):
        pass

    tpc_begin = commit = tpc_abort = abort

    def tpc_vote(self, txn):
        if self.phase == "vote":
            raise RuntimeError("storage failed in tpc_vote (injected)")

    def tpc_finish(self, txn):
        if self.phase == "finish":
            raise RuntimeError("storage failed in tpc_finish (injected)")


def kill_catalog_backends(dsn, only_idle=False):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'plone.pgcatalog' AND datname = "
            "current_database() AND pid <> pg_backend_pid()"
            + (" AND state = 'idle'" if only_idle else "")).fetchone()[0]


def prepared_left(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_prepared_xacts WHERE "
                            "gid LIKE 'pgcatalog:%'").fetchone()[0]


def two_phase_faults(db, dsn, checks):
    from plone.pgcatalog.pg import db as pgc_db
    from plone.pgcatalog.testing.zopeapp import Request

    if not pgc_db.two_phase(dsn):
        # a server without prepared transactions (max_prepared_transactions
        # = 0, Debian's default): the catalog commits in its vote, the
        # documented fallback; the two-phase cases do not apply
        checks.append("no two-phase commit on this server: its cases "
                      "skipped")
        return

    # A storage fails in tpc_vote, then one in tpc_finish: the catalog
    # keeps nothing of the transaction.
    for phase in ("vote", "finish"):
        failed = {}
        try:
            with Request(db, SITE, ADMIN, commit=True) as r:
                r.site.invokeFactory("Document", "fail-" + phase,
                                     title="never")
                transaction.get().join(FailingResource(phase))
                failed.update(txn=transaction.get(), conn=r.conn)
            raise AssertionError("the injected failure did not happen")
        except RuntimeError:
            if phase == "finish":
                # After a failed tpc_finish the transaction package calls
                # no resource's tpc_abort: the ZODB connection went back to
                # the pool with its storage still in its commit, and a
                # later request given it failed in tpc_begin
                # (StorageTransactionError, seen with 8 editors).  A real
                # process restarts after such a failure; end that commit
                # as the restart would.
                failed["conn"]._storage.tpc_abort(failed["txn"])
        with Request(db, SITE, ADMIN) as r:
            if r.site.portal_catalog.unrestrictedSearchResults(
                    getId="fail-" + phase) or "fail-" + phase in r.site:
                raise AssertionError("storage failed in tpc_%s: the catalog "
                                     "(or the ZODB) kept the object" % phase)
        if prepared_left(dsn):
            raise AssertionError("a prepared catalog transaction is left")
        checks.append("storage fails in tpc_%s: catalog not ahead" % phase)

    # The catalog's backend is killed after it prepared (its vote), before
    # its finish: the prepared transaction is committed on a new connection.
    class Killer(FailingResource):
        def tpc_vote(self, txn):
            kill_catalog_backends(dsn)

    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Document", "survivor", title="survivor")
        transaction.get().join(Killer(None, sort="~~after-the-catalog"))
    agree(db, "backend killed between the catalog's vote and finish")
    with Request(db, SITE, ADMIN) as r:
        if not r.site.portal_catalog.unrestrictedSearchResults(
                getId="survivor"):
            raise AssertionError("the prepared transaction was lost")
    if prepared_left(dsn):
        raise AssertionError("a prepared catalog transaction is left")
    checks.append("backend killed after the catalog's vote: committed")

    checks.append("two-phase commit cases run")


def connection_faults(db, dsn, checks, figures):
    from plone.pgcatalog.errors import DatabaseUnavailable
    from plone.pgcatalog.testing.zopeapp import Request

    # A server restart: every pooled backend dies while idle.  The next
    # requests work (dead connections are replaced, nothing fails).
    with Request(db, SITE, ADMIN) as r:
        r.site.portal_catalog(portal_type="Document")
    killed = kill_catalog_backends(dsn, only_idle=True)
    started = time.perf_counter()
    for i in range(4):
        with Request(db, SITE, ADMIN, commit=True) as r:
            if not r.site.portal_catalog.unrestrictedSearchResults(
                    portal_type="Document"):
                raise AssertionError("no answer after the restart")
    figures["restart: 4 requests after killing idle backends (ms)"] = round(
        (time.perf_counter() - started) * 1000, 1)
    figures["idle backends killed"] = killed
    checks.append("idle backends killed: next requests work")

    # A backend killed during a request that wrote catalog rows: a
    # retryable error, nothing half-written, the retry works.
    attempts = []

    def script(r, attempt):
        attempts.append(attempt)
        r.site.invokeFactory("Document", "killed-%d" % attempt,
                             title="killed")
        r.site.portal_catalog(id="killed-%d" % attempt)   # flushed
        if attempt == 1:
            kill_catalog_backends(dsn)
            r.site.portal_catalog(id="whatever")

    editor = Editor(db, script)
    editor.start()
    editor.join(60)
    if editor.error is not None or attempts != [1, 2]:
        raise AssertionError("killed during a write: %r %r" % (
            editor.error, attempts))
    with Request(db, SITE, ADMIN) as r:
        ids = {b.getId for b in r.site.portal_catalog.
               unrestrictedSearchResults(portal_type="Document")}
        if "killed-1" in ids or "killed-2" not in ids \
                or "killed-1" in r.site:
            raise AssertionError("killed during a write: %r" % sorted(ids))
    agree(db, "backend killed during a write")
    checks.append("backend killed during a write: retried, nothing "
                  "half-written")
    if not issubclass(DatabaseUnavailable, transaction.interfaces.
                      TransientError):
        raise AssertionError("DatabaseUnavailable is not retried")


def in_doubt(db, dsn, checks):
    from plone.pgcatalog.pg import db as pgc_db
    if not pgc_db.two_phase(dsn):
        return
    # A prepared catalog transaction left behind by a crash is resolved.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO pgcatalog_commits (cid, delta) SELECT "
                     "min(cid), 0 FROM pgcatalog_catalogs")
        conn.execute("PREPARE TRANSACTION 'pgcatalog:crashed-test'")
    resolved = pgc_db.resolve_in_doubt(dsn, older_than=0)
    if resolved != [("pgcatalog:crashed-test", "COMMIT PREPARED")] \
            or prepared_left(dsn):
        raise AssertionError("in-doubt transaction: %r" % resolved)
    checks.append("in-doubt prepared transaction resolved")


def vanished(db, dsn, checks):
    from plone.pgcatalog.errors import CatalogMissing
    from plone.pgcatalog.pg import store as store_module
    from plone.pgcatalog.testing.zopeapp import Request
    with psycopg.connect(dsn, autocommit=True) as conn:
        saved = conn.execute("SELECT key FROM pgcatalog_catalogs").fetchall()
        conn.execute("DELETE FROM pgcatalog_catalogs")
    for fresh in (False, True):
        if fresh:
            store_module._cids.clear()      # as a new process would start
        try:
            with Request(db, SITE, ADMIN, commit=True) as r:
                r.site.invokeFactory("Document", "after-loss", title="x")
                r.site.portal_catalog(portal_type="Document")
            raise AssertionError("a vanished catalog was not noticed")
        except CatalogMissing as exc:
            if "pgc_recreate_catalog" not in str(exc):
                raise AssertionError("unclear error: %s" % exc)
    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.portal_catalog.pgc_recreate_catalog()
    agree(db, "catalog recreated")
    checks.append("vanished catalog: CatalogMissing, then recreated (%d "
                  "catalog rows were deleted)" % len(saved))


def editors(db, checks, figures):
    """K editors, random documents of one folder, random actions."""
    from transaction.interfaces import TransientError

    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", "busy", title="busy")
        for i in range(DOCS):
            r.site.busy.invokeFactory("Document", "d%d" % i, title="d%d" % i)
    latencies, lock = [], threading.Lock()
    stats = {"transactions": 0, "retries": 0, "gave up": 0, "errors": []}

    def work(n):
        rng = random.Random(n)
        for i in range(EDITS):
            action = rng.choice(["edit"] * 6 + ["publish"] * 2 + [
                "create", "delete", "rename"])
            target = "d%d" % rng.randrange(DOCS)
            started = time.perf_counter()

            def script(r, attempt):
                folder = r.site.busy
                doc = getattr(folder, target, None)
                wf = r.site.portal_workflow
                if action == "create":
                    folder.invokeFactory("Document", "n%d-%d" % (n, i),
                                         title="new")
                elif doc is None:
                    return
                elif action == "edit":
                    doc.setTitle("t%d-%d" % (n, i))
                    doc.reindexObject()
                elif action == "publish":
                    if wf.getInfoFor(doc, "review_state") == "private":
                        wf.doActionFor(doc, "publish")
                elif action == "delete":
                    folder.manage_delObjects([target])
                elif action == "rename":
                    folder.manage_renameObject(target, "r%d-%d" % (n, i))

            editor = Editor(db, script, retries=RETRIES)
            editor.run()        # in this thread
            with lock:
                latencies.append(time.perf_counter() - started)
                stats["transactions"] += 1
                stats["retries"] += editor.conflicts
                if isinstance(editor.error, TransientError):
                    # still conflicting after RETRIES attempts (mostly the
                    # ZODB's own hot spots: the folder, CMFUid's counter)
                    stats["gave up"] += 1
                elif editor.error is not None:
                    stats["errors"].append("%s: %s (attempt %d)\n%s" % (
                        type(editor.error).__name__, editor.error,
                        editor.attempts, editor.traceback))

    threads = [threading.Thread(target=work, args=(n,), daemon=True)
               for n in range(EDITORS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    if stats["errors"]:
        raise AssertionError("editors failed:\n%s" % "\n".join(
            stats["errors"][:5]))
    agree(db, "%d concurrent editors" % EDITORS)
    latencies.sort()
    figures["%d editors" % EDITORS] = {
        "transactions": stats["transactions"], "retries": stats["retries"],
        "gave up": stats["gave up"], "divergences": 0,
        "p50 ms": round(latencies[len(latencies) // 2] * 1000, 1),
        "p99 ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1),
        "seconds": round(time.perf_counter() - started, 1)}
    checks.append("%d concurrent editors: catalog equals ZODB" % EDITORS)


def cache_exactness(db, checks, figures):
    """The result cache on RelStorage: a reader transaction begun after a
    writer's commit never gets an answer from before that commit (two
    readers in a loop, a writer adding one document per transaction)."""
    from plone.pgcatalog.search import cache as result_cache
    from plone.pgcatalog.testing.zopeapp import Request
    setup_tree(db, "f9")
    query = {"path": "/plone/f9", "portal_type": "Document"}
    with Request(db, SITE, ADMIN) as r:
        base = len(r.site.portal_catalog.unrestrictedSearchResults(**query))
    committed = [base]
    done = threading.Event()
    problems, reads, gens = [], [0], []
    before = result_cache.stats() or {}

    def reader():
        while not done.is_set():
            floor = committed[0]        # read before the transaction begins
            with Request(db, SITE, ADMIN) as r:
                found = len(r.site.portal_catalog.unrestrictedSearchResults(
                    **query))
                gen = result_cache.generation(r.site.portal_catalog)
            reads[0] += 1
            if found < floor:
                problems.append((floor, found, gen))

    threads = [threading.Thread(target=reader, daemon=True)
               for _ in range(2)]
    for t in threads:
        t.start()
    for n in range(WRITES_FOR_CACHE):
        with Request(db, SITE, ADMIN, commit=True) as r:
            r.site.f9.invokeFactory("Document", "c%d" % n, title="c")
        committed[0] = base + n + 1
        with Request(db, SITE, ADMIN) as r:
            gens.append((committed[0], result_cache.generation(
                r.site.portal_catalog), len(r.site.portal_catalog.
                unrestrictedSearchResults(**query))))
        time.sleep(0.005)
    done.set()
    for t in threads:
        t.join(60)
    after = result_cache.stats() or {}
    if problems:
        raise AssertionError("cache: stale answers %r; writer saw %r"
                             % (problems[:5], gens[:12]))
    hits = after.get("hits", 0) - before.get("hits", 0)
    if result_cache.get_cache() is not None and not hits:
        raise AssertionError("cache: no hit in %d reads" % reads[0])
    figures["cache exactness"] = {"reads": reads[0], "writes":
                                  WRITES_FOR_CACHE, "hits": hits,
                                  "stale": 0}
    checks.append("result cache: %d reads after %d commits, none stale"
                  % (reads[0], WRITES_FOR_CACHE))


def cache_edit_exactness(db, checks, figures):
    """The result cache's change counters on RelStorage: a writer edits
    documents (a new title, a tag added to Subject) one per transaction;
    two readers ask, in transactions begun after a known commit, for the
    tag it added (an index the edit changed: never an answer from before)
    and for the folder's documents by type (an index it did not change:
    the answer stays cached, its brains' titles never older than the
    commit)."""
    from plone.pgcatalog.search import cache as result_cache
    from plone.pgcatalog.testing.zopeapp import Request
    docs = 5
    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", "f10", title="f10")
        for i in range(docs):
            r.site.f10.invokeFactory("Document", "e%d" % i, title="t-1")
    committed = [-1]
    done = threading.Event()
    problems, reads = [], [0]
    before = result_cache.stats() or {}
    listing = {"path": "/plone/f10", "portal_type": "Document"}

    def reader():
        while not done.is_set():
            floor = committed[0]        # read before the transaction begins
            with Request(db, SITE, ADMIN) as r:
                catalog = r.site.portal_catalog
                tagged = len(catalog.unrestrictedSearchResults(
                    path="/plone/f10", Subject="v%d" % floor)) \
                    if floor >= 0 else 1
                titles = {b.getId: int(b.Title[1:]) for b in
                          catalog.unrestrictedSearchResults(**listing)}
            reads[0] += 1
            last = floor % docs         # written at step ``floor``
            if tagged != 1 or (floor >= 0 and
                               titles.get("e%d" % last, -2) < floor):
                problems.append((floor, tagged, titles))

    threads = [threading.Thread(target=reader, daemon=True)
               for _ in range(2)]
    for t in threads:
        t.start()
    for n in range(WRITES_FOR_CACHE):
        with Request(db, SITE, ADMIN, commit=True) as r:
            doc = r.site.f10["e%d" % (n % docs)]
            doc.setTitle("t%d" % n)
            doc.setSubject(list(doc.Subject()) + ["v%d" % n])
            doc.reindexObject()
        committed[0] = n
        time.sleep(0.005)
    done.set()
    for t in threads:
        t.join(60)
    after = result_cache.stats() or {}
    if problems:
        raise AssertionError("cache (edits): stale answers %r"
                             % problems[:5])
    hits = after.get("hits", 0) - before.get("hits", 0)
    if result_cache.get_cache() is not None and not hits:
        raise AssertionError("cache (edits): no hit in %d reads" % reads[0])
    figures["cache exactness (edits)"] = {
        "reads": reads[0], "writes": WRITES_FOR_CACHE, "hits": hits,
        "stale": 0}
    checks.append("result cache: %d reads after %d edits, none stale"
                  % (reads[0], WRITES_FOR_CACHE))


def cache_exclusion_exactness(db, checks, figures):
    """Answers kept after writes they cannot see (search/exclusion.py) on
    RelStorage: a writer adds, retitles and removes documents in folder
    ``f11a``, one change per transaction; two readers ask for f11a's
    children (the writes' folder: always the objects the same transaction
    sees) and for f11b's children and the site's folders (which no write
    can change: answered from the cache, always the same)."""
    from plone.pgcatalog.search import cache as result_cache
    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN, commit=True) as r:
        for name in ("f11a", "f11b"):
            r.site.invokeFactory("Folder", name, title=name)
            for i in range(3):
                r.site[name].invokeFactory("Document", "x%d" % i,
                                           title="x")
        r.site.f11b.invokeFactory("Folder", "sub", title="sub")
    here = {"path": {"query": "/plone/f11a", "depth": 1}}
    there = {"path": {"query": "/plone/f11b", "depth": 1},
             "sort_on": "getObjPositionInParent"}
    folders = {"portal_type": "Folder", "sort_on": "getId"}
    expected_there = ["x0", "x1", "x2", "sub"]
    with Request(db, SITE, ADMIN) as r:
        expected_folders = [b.getPath() for b in r.site.portal_catalog.
                            unrestrictedSearchResults(**folders)]
    state = {"step": -1}
    done = threading.Event()
    problems, reads = [], [0]
    before = result_cache.stats() or {}

    def reader():
        while not done.is_set():
            step = state["step"]        # read before the transaction begins
            with Request(db, SITE, ADMIN) as r:
                catalog = r.site.portal_catalog
                found = sorted(b.getId for b in
                               catalog.unrestrictedSearchResults(**here))
                other = [b.getId for b in
                         catalog.unrestrictedSearchResults(**there)]
                items = [b.getPath() for b in
                         catalog.unrestrictedSearchResults(**folders)]
                # the objects of the same transaction
                truth = sorted(r.site.f11a.objectIds())
            reads[0] += 1
            if found != truth:
                problems.append(("here", step, truth, found))
            if other != expected_there or items != expected_folders:
                problems.append(("there", step, other, items))

    threads = [threading.Thread(target=reader, daemon=True)
               for _ in range(2)]
    for t in threads:
        t.start()
    for n in range(WRITES_FOR_CACHE):
        with Request(db, SITE, ADMIN, commit=True) as r:
            folder = r.site.f11a
            if n % 3 == 0:
                folder.invokeFactory("Document", "n%d" % n, title="n")
            elif n % 3 == 1:
                # the document of the step before, retitled as itself
                doc = folder["n%d" % (n - 1)]
                folder.manage_renameObject(doc.getId(), "n%d" % n)
            else:
                folder.manage_delObjects(["n%d" % (n - 1)])
        state["step"] = n
        time.sleep(0.005)
    done.set()
    for t in threads:
        t.join(60)
    after = result_cache.stats() or {}
    if problems:
        raise AssertionError("cache (writes elsewhere): wrong answers %r"
                             % problems[:5])
    kept = after.get("kept_after_writes", 0) - \
        before.get("kept_after_writes", 0)
    if result_cache.get_cache() is not None and not kept:
        raise AssertionError("cache (writes elsewhere): no answer kept "
                             "after a write in %d reads" % reads[0])
    figures["cache exactness (writes elsewhere)"] = {
        "reads": reads[0], "writes": WRITES_FOR_CACHE,
        "kept after writes": kept, "wrong": 0}
    checks.append("result cache: %d reads after %d writes elsewhere, "
                  "none stale" % (reads[0], WRITES_FOR_CACHE))


def run():
    from relstorage_scenario import make_site

    from plone.pgcatalog.testing import pgserver
    from plone.pgcatalog.testing.zopeapp import open_relstorage
    from plone.pgcatalog.testing.zopeapp import start_zope

    dsn = pgserver.fresh_database("pgcatalog_races")
    os.environ["PGCATALOG_DSN"] = dsn
    workdir = tempfile.mkdtemp(prefix="pgcatalog-races-")
    db = open_relstorage(dsn, cache_size=400, workdir=workdir)
    start_zope(db, workdir)
    make_site(db)
    checks, figures = [], {}
    races(db, checks, figures)
    hot_registration(db, checks, figures)
    no_conflict_on_different_entries(db, checks)
    snapshot(db, checks)
    cache_exactness(db, checks, figures)
    cache_edit_exactness(db, checks, figures)
    cache_exclusion_exactness(db, checks, figures)
    two_phase_faults(db, dsn, checks)
    connection_faults(db, dsn, checks, figures)
    in_doubt(db, dsn, checks)
    editors(db, checks, figures)
    vanished(db, dsn, checks)
    db.close()
    from plone.pgcatalog.pg import db as pgc_db
    pgc_db.close_pools()
    pgserver.drop_database(dsn)
    print(json.dumps({"ok": True, "checks": checks, "figures": figures}))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    try:
        run()
    except Exception:
        import traceback
        traceback.print_exc()
        sys.exit(1)
    sys.exit(0)
