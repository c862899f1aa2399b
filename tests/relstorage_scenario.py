"""A Plone site on RelStorage (PostgreSQL) with plone.pgcatalog: create,
edit, publish, move, rename, delete, abort, conflict and retry; after each
step the catalog must agree with the ZODB.

Run by tests/test_relstorage.py in its own process (Zope is started once per
process).  Prints one JSON line with the steps checked.
"""
import json
import os
import sys
import tempfile
import threading

import transaction

SITE = "plone"
ADMIN = "admin"


def catalog_state(site):
    """{path: (Title, review_state)} as the catalog has them."""
    catalog = site.portal_catalog
    brains = catalog.unrestrictedSearchResults(path="/" + SITE)
    return {b.getPath(): (b.Title, b.review_state) for b in brains}


def zodb_state(site):
    """{path: (Title, review_state)} for every catalogued-kind object in the
    ZODB (the site and its content)."""
    wf = site.portal_workflow
    state = {}

    def visit(obj):
        path = "/".join(obj.getPhysicalPath())
        state[path] = (obj.Title(), wf.getInfoFor(obj, "review_state", None))
        for child in obj.objectValues():
            if getattr(child, "portal_type", None) in ("Document", "Folder"):
                visit(child)

    for child in site.objectValues():
        if getattr(child, "portal_type", None) in ("Document", "Folder"):
            visit(child)
    return state


def check(db, step, checks):
    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN) as r:
        cat = {p: v for p, v in catalog_state(r.site).items()
               if p != "/" + SITE}
        zodb = zodb_state(r.site)
        if cat != zodb:
            raise AssertionError("%s: catalog %r != zodb %r" % (
                step, sorted(set(cat.items()) ^ set(zodb.items()))[:10],
                None))
        # also through a fresh search with the security filters on
        visible = len(r.site.portal_catalog(portal_type=["Document",
                                                         "Folder"]))
        if visible != len(zodb):
            raise AssertionError("%s: %d visible to Manager, %d in ZODB" % (
                step, visible, len(zodb)))
    checks.append(step)


def guessed_snapshots(db, checks):
    """A read whose own snapshot holds exactly the objects' commits exports
    no snapshot from RelStorage; one taken after a commit the objects do
    not show is given up for the storage's own (exported): the objects'
    answer, no retry."""
    from plone.pgcatalog.pg import agreement
    from plone.pgcatalog.pg import sharing
    from plone.pgcatalog.search import cache as result_cache
    from plone.pgcatalog.testing.zopeapp import Request
    exports = []
    export = sharing.storage_snapshot

    def counted(dsn, jar):
        found = export(dsn, jar)
        exports.append(found)
        return found

    def documents(site):
        return sorted(b.getId for b in
                      site.portal_catalog.unrestrictedSearchResults(
                          portal_type="Document", path="/plone/folder"))

    sharing.storage_snapshot = counted
    agreement.forget_guesses()
    try:
        for _ in range(3):
            result_cache.forget()
            with Request(db, SITE, ADMIN) as r:
                found = documents(r.site)
                if found != sorted(r.site.folder.objectIds()):
                    raise AssertionError("guessed: %r" % found)
        if exports:
            raise AssertionError("%d snapshots exported for reads in a "
                                 "snapshot that agreed" % len(exports))
        checks.append("a snapshot of its own that agrees, no export")

        result_cache.forget()
        with Request(db, SITE, ADMIN) as r:
            # the ZODB snapshot: the tool and the folder loaded
            r.site.portal_catalog._pgc_generation
            before = sorted(r.site.folder.objectIds())

            def add():
                with Request(db, SITE, ADMIN, commit=True) as w:
                    w.site.folder.invokeFactory("Document", "between",
                                                title="Between")

            writer = threading.Thread(target=add)
            writer.start()
            writer.join(60)
            found = documents(r.site)
            if found != before or "between" in found:
                raise AssertionError("after a commit elsewhere: %r, the "
                                     "objects %r" % (found, before))
        if len(exports) != 1 or exports[0] is None:
            raise AssertionError("the storage's snapshot was not read: "
                                 "%r" % exports)
        checks.append("a snapshot of its own ahead of the objects: the "
                      "storage's instead")
    finally:
        sharing.storage_snapshot = export
    check(db, "guessed snapshots", checks)


def make_site(db):
    """A Manager ``admin`` and a Plone site with plone.pgcatalog."""
    conn = db.open()
    app = conn.root()["Application"]
    app.acl_users._doAddUser(ADMIN, "secret", ["Manager"], [])
    transaction.commit()
    conn.close()

    from Products.CMFPlone.factory import addPloneSite
    from Testing.makerequest import makerequest
    conn = db.open()
    app = makerequest(conn.root()["Application"])
    from zope.globalrequest import setRequest
    setRequest(app.REQUEST)
    from AccessControl.SecurityManagement import newSecurityManager
    newSecurityManager(None, app.acl_users.getUser(ADMIN).__of__(
        app.acl_users))
    addPloneSite(app, SITE, extension_ids=[
        "plone.app.contenttypes:default", "plone.pgcatalog:default"],
        setup_content=False)
    transaction.commit()
    conn.close()
    setRequest(None)


def run():
    from plone.pgcatalog.testing import pgserver
    from plone.pgcatalog.testing.zopeapp import Request
    from plone.pgcatalog.testing.zopeapp import open_relstorage
    from plone.pgcatalog.testing.zopeapp import start_zope

    dsn = pgserver.fresh_database("pgcatalog_relstorage")
    os.environ["PGCATALOG_DSN"] = dsn
    workdir = tempfile.mkdtemp(prefix="pgcatalog-rs-")
    db = open_relstorage(dsn, cache_size=400, workdir=workdir)
    start_zope(db, workdir)
    checks = []

    make_site(db)
    check(db, "site created", checks)

    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", "folder", title="Folder")
        for i in range(5):
            r.site.folder.invokeFactory("Document", "doc%d" % i,
                                        title="Doc %d" % i)
    check(db, "create", checks)

    with Request(db, SITE, ADMIN, commit=True) as r:
        doc = r.site.folder.doc1
        doc.setTitle("Edited title")
        doc.reindexObject()
    check(db, "edit", checks)

    with Request(db, SITE, ADMIN, commit=True) as r:
        wf = r.site.portal_workflow
        wf.doActionFor(r.site.folder, "publish")
        wf.doActionFor(r.site.folder.doc2, "publish")
    check(db, "publish", checks)
    with Request(db, SITE, ADMIN) as r:
        from AccessControl.SecurityManagement import noSecurityManager
        noSecurityManager()
        anonymous = [b.getId for b in r.site.portal_catalog(
            portal_type="Document")]
        if anonymous != ["doc2"]:
            raise AssertionError("anonymous sees %r" % anonymous)
    checks.append("anonymous sees published only")

    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", "target", title="Target")
    with Request(db, SITE, ADMIN, commit=True) as r:
        cp = r.site.folder.manage_cutObjects(["doc3"])
        r.site.target.manage_pasteObjects(cp)
    check(db, "move", checks)

    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.folder.manage_renameObject("doc4", "renamed")
    check(db, "rename", checks)

    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.folder.manage_delObjects(["doc0"])
    check(db, "delete", checks)

    with Request(db, SITE, ADMIN) as r:  # aborted at exit
        r.site.folder.invokeFactory("Document", "aborted", title="Aborted")
        r.site.folder.doc1.setTitle("Not kept")
        r.site.folder.doc1.reindexObject()
        seen = len(r.site.portal_catalog(id="aborted"))
        if seen != 1:
            raise AssertionError("own write not visible before abort")
    check(db, "abort", checks)

    guessed_snapshots(db, checks)

    # Conflict and retry: two requests edit the same document concurrently;
    # the loser gets a ConflictError, retries like the publisher, and both
    # edits' catalog rows end up as the ZODB has them.
    from ZODB.POSException import ConflictError
    barrier = threading.Barrier(2)
    outcome = {}

    def editor(name, title):
        attempts = 0
        while True:
            attempts += 1
            try:
                with Request(db, SITE, ADMIN, commit=True) as r:
                    doc = r.site.folder.doc1
                    doc.setTitle(title)
                    doc.reindexObject()
                    if attempts == 1:
                        # both have changed doc1; now both commit
                        barrier.wait(timeout=30)
                outcome[name] = attempts
                return
            except ConflictError:
                if attempts > 5:
                    raise
                continue

    threads = [threading.Thread(target=editor, args=("a", "Title A")),
               threading.Thread(target=editor, args=("b", "Title B"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if sorted(outcome) != ["a", "b"]:
        raise AssertionError("editors did not finish: %r" % outcome)
    if max(outcome.values()) < 2:
        raise AssertionError("no conflict happened: %r" % outcome)
    check(db, "conflict and retry", checks)

    # A transaction that searched after writing holds its catalog rows
    # until it ends; another writer of the same row waits at most
    # lock_timeout, then gets a ConflictError (retried by Zope).
    from plone.pgcatalog.errors import CatalogConflictError
    os.environ["PGCATALOG_LOCK_TIMEOUT_MS"] = "500"
    from plone.pgcatalog.pg import db as pgc_db
    pgc_db.close_pools()
    holding = threading.Event()
    release = threading.Event()

    def holder():
        with Request(db, SITE, ADMIN, commit=True) as r:
            r.site.folder.doc2.reindexObject()
            r.site.portal_catalog(id="doc2")  # flush: row locked
            holding.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    holding.wait(30)
    try:
        with Request(db, SITE, ADMIN, commit=True) as r:
            r.site.folder.doc2.reindexObject(idxs=["Title"])
            r.site.portal_catalog(id="doc2")
        raise AssertionError("the second writer was not stopped")
    except CatalogConflictError:
        pass
    finally:
        release.set()
        t.join(60)
    check(db, "lock wait bounded, conflict raised", checks)

    db.close()
    pgc_db.close_pools()
    pgserver.drop_database(dsn)     # a throwaway: do not leave it behind
    print(json.dumps({"ok": True, "checks": checks}))


if __name__ == "__main__":
    try:
        run()
    except Exception:
        import traceback
        traceback.print_exc()
        sys.exit(1)
    sys.exit(0)
