"""A transaction never sees catalog entries of a commit its objects do not
show (consistency.py), on a storage whose snapshot the catalog cannot share
(the test layers' DemoStorage, as FileStorage, ZEO, or RelStorage in
another database).

Another transaction adds a document and commits after this transaction's
ZODB snapshot was taken, but before its first catalog statement: the
catalog's snapshot, taken at that statement, would hold the new entry
while the objects do not hold the document.  The answer must be the
objects' (then nothing is new) or a ``ReadConflictError`` Zope retries,
never a brain without its object.
"""
import threading
import unittest

import transaction
from AccessControl.SecurityManagement import newSecurityManager
from AccessControl.SecurityManagement import noSecurityManager
from Acquisition import aq_base
from plone.app.testing import SITE_OWNER_NAME
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from Testing.makerequest import makerequest
from ZODB.POSException import ReadConflictError
from zope.component.hooks import getSite
from zope.component.hooks import setSite

from plone.pgcatalog.pg import consistency
from plone.pgcatalog.search import cache as result_cache
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


def commit_elsewhere(portal, doc_id, title):
    """Add a document and commit, in a thread with a ZODB connection and
    transaction of its own (as another Zope thread or process would)."""
    failures = []
    db = aq_base(portal)._p_jar.db()
    path = portal.getPhysicalPath()

    def work():
        conn = db.open()
        try:
            app = makerequest(conn.root()["Application"])
            site = app.unrestrictedTraverse(path)
            setSite(site)
            user = app.acl_users.getUser(SITE_OWNER_NAME)
            newSecurityManager(None, user.__of__(app.acl_users))
            site.invokeFactory("Document", doc_id, title=title)
            processQueue()
            transaction.commit()
        except Exception as exc:  # noqa: B902 - reported by the test
            transaction.abort()
            failures.append(exc)
        finally:
            noSecurityManager()
            setSite(None)
            conn.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(120)
    if failures:
        raise failures[0]


class TestObjectsBeforeCatalog(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Document", "first", title="Agreed first")
        processQueue()
        transaction.commit()
        consistency.forget_ahead()

    def tearDown(self):
        transaction.abort()
        consistency.forget_ahead()

    def search_after_a_commit_elsewhere(self, doc_id, cache, begin):
        """This transaction's ZODB snapshot, then a commit elsewhere, then
        this transaction's first catalog statement: (ids found, ids this
        transaction's objects have), or ReadConflictError.  ``begin``: the
        transaction begins as Zope's publisher begins it
        (``transaction.begin()``: synchronizers told), else implicitly."""
        transaction.abort()
        if not cache:
            result_cache.forget()
        if begin:
            transaction.begin()
        # the ZODB snapshot of this transaction: the catalog tool and the
        # site loaded, no catalog statement yet
        site = getSite()
        self.assertIn("first", self.portal.objectIds())
        self.assertIsNotNone(aq_base(self.catalog)._pgc_generation)
        commit_elsewhere(self.portal, doc_id, "Agreed %s" % doc_id)
        self.assertNotIn(doc_id, self.portal.objectIds())
        setSite(site)
        found = [b.getId for b in self.catalog.unrestrictedSearchResults(
            Title="Agreed", portal_type="Document")]
        return sorted(found), sorted(
            i for i in self.portal.objectIds() if i in found or i == doc_id)

    def after(self):
        """The next transaction sees the new document, entry and object."""
        transaction.abort()
        found = sorted(b.getId for b in self.catalog.unrestrictedSearchResults(
            Title="Agreed", portal_type="Document"))
        self.assertEqual(found, ["first", "second"])
        self.assertEqual(
            [b.getObject().getId() for b in
             self.catalog.unrestrictedSearchResults(getId="second")],
            ["second"])

    def warm(self):
        """A transaction of this thread ran a catalog statement in a
        snapshot of its own: the next one begins its snapshot early."""
        transaction.abort()
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(Title="Agreed")
        transaction.abort()

    def test_ahead_of_the_objects_is_retried(self):
        """A snapshot taken at the first catalog statement, after the
        commit: a ReadConflictError (Zope runs the request again)."""
        with self.assertRaises(ReadConflictError):
            self.search_after_a_commit_elsewhere("second", False, False)
        self.after()

    def test_ahead_of_the_objects_is_retried_cached(self):
        # the same question answered (and cached) before the commit
        transaction.abort()
        self.catalog.unrestrictedSearchResults(Title="Agreed",
                                               portal_type="Document")
        try:
            found, objects = self.search_after_a_commit_elsewhere(
                "second", True, False)
        except ReadConflictError:
            pass
        else:
            # from the cache, under this snapshot's generation
            self.assertEqual(found, objects)
            self.assertEqual(found, ["first"])
        self.after()

    def test_early_snapshot_agrees(self):
        """Begun as the publisher begins a request, after a transaction
        that read the catalog: the catalog's snapshot was taken with the
        ZODB's, before the commit, and answers as the objects do."""
        self.warm()
        found, objects = self.search_after_a_commit_elsewhere(
            "second", False, True)
        self.assertEqual(found, objects)
        self.assertEqual(found, ["first"])
        self.after()

    def test_early_snapshot_in_every_thread(self):
        """Zope's request threads begin early too, not only the thread
        that imported the package: a thread of its own, with its own ZODB
        connection, whose last transaction read the catalog."""
        db = aq_base(self.portal)._p_jar.db()
        path = self.portal.getPhysicalPath()
        found, failures = [], []

        def work():
            conn = db.open()
            try:
                app = makerequest(conn.root()["Application"])
                site = app.unrestrictedTraverse(path)
                setSite(site)
                catalog = site.portal_catalog
                result_cache.forget()
                catalog.unrestrictedSearchResults(Title="Agreed")
                transaction.abort()
                transaction.begin()
                found.append(catalog._pgc_store().session.early)
            except Exception as exc:  # noqa: B902 - reported by the test
                failures.append(exc)
            finally:
                transaction.abort()
                setSite(None)
                conn.close()

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(120)
        self.assertEqual(failures, [])
        self.assertEqual(found, [True])

    def test_no_early_snapshot_after_cached_answers(self):
        """A thread whose last transaction asked PostgreSQL nothing (its
        answers came from the result cache) begins the next one as usual:
        no connection, no statement until the catalog needs one."""
        self.warm()             # ran a statement: the next begins early
        transaction.begin()
        session = self.catalog._pgc_store().session
        self.assertTrue(session.early)
        self.catalog.unrestrictedSearchResults(Title="Agreed")  # cached
        transaction.abort()
        transaction.begin()
        session = self.catalog._pgc_store().session
        self.assertFalse(session.early)
        self.assertIsNone(session.conn)

    def test_early_snapshot_takes_the_sites_timeout(self):
        """A snapshot begun before the site's settings are read gets the
        site's statement timeout when they are."""
        from plone.registry.interfaces import IRegistry
        from zope.component import getUtility
        registry = getUtility(IRegistry)
        record = "plone.pgcatalog.statement_timeout_ms"
        saved = registry[record]
        registry[record] = 1234
        transaction.commit()
        try:
            self.warm()
            transaction.begin()
            store = self.catalog._pgc_store()
            self.assertTrue(store.session.early)
            self.assertEqual(store.session.timeout_ms, 1234)
            self.assertEqual(store.session.execute(
                "SHOW statement_timeout").fetchone()[0], "1234ms")
        finally:
            transaction.abort()
            registry[record] = saved
            transaction.commit()

    def test_facts_run_with_a_generic_plan(self):
        """The facts asked with each snapshot (early or at the first
        statement) are prepared and run with a generic plan, never planned
        with their values: their statement has no parameters (so no
        ``plan_cache_mode`` can plan it with values, and no ``SET LOCAL``
        rides with it); the transaction keeps its configured mode."""
        from plone.pgcatalog.pg import consistency
        self.assertEqual(list(consistency.facts_sql([2, 1]).params), [])
        for early in (True, False, True, False):
            self.warm()
            if early:
                transaction.begin()
            else:
                transaction.abort()
            result_cache.forget()
            self.catalog.unrestrictedSearchResults(portal_type="Document")
            session = self.catalog._pgc_store().session
            self.assertEqual(session.execute(
                "SHOW plan_cache_mode").fetchone()[0], "auto")
            plans = session.execute(
                "SELECT generic_plans, custom_plans FROM "
                "pg_prepared_statements WHERE strpos(statement, "
                "'pg_snapshot_xip') > 0").fetchall()
            self.assertTrue(plans)
            self.assertEqual([custom for _generic, custom in plans],
                             [0] * len(plans))
            self.assertGreaterEqual(sum(g for g, _custom in plans), 1)
        # no catalog: a statement all the same, with no row
        self.assertEqual(session.execute(
            consistency.facts_sql([]).text).fetchall(), [])

    def test_a_snapshot_given_up_keeps_the_prepared_facts(self):
        """A snapshot given up (to begin one that agrees) ends with COMMIT:
        after a ROLLBACK psycopg would forget the connection's prepared
        statements, and the facts of the next snapshot would be prepared
        and planned again."""
        def generic_plans(session):
            return sum(n for n, in session.execute(
                "SELECT generic_plans FROM pg_prepared_statements WHERE "
                "strpos(statement, 'pg_snapshot_xip') > 0").fetchall())

        self.warm()
        transaction.abort()
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        session = self.catalog._pgc_store().session
        conn = session.conn
        before = generic_plans(session)
        self.assertGreaterEqual(before, 1)
        session._end_snapshot()
        result_cache.forget()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        self.assertIs(session.conn, conn)
        self.assertGreater(generic_plans(session), before)


def test_guesses_stop_while_most_fail_and_probe_again():
    """A process whose guessed snapshots mostly fail exports at once, and
    guesses again in one transaction of GUESS_PROBE to learn when guessing
    pays again (agreement._may_guess)."""
    from plone.pgcatalog.pg import agreement
    dsn = "host=guesses"
    agreement.forget_guesses()
    try:
        assert agreement._may_guess(dsn)
        for _ in range(40):
            agreement._guessed(dsn, False)
        tries = [agreement._may_guess(dsn)
                 for _ in range(2 * agreement.GUESS_PROBE)]
        assert [i for i, t in enumerate(tries) if t] == [
            agreement.GUESS_PROBE - 1, 2 * agreement.GUESS_PROBE - 1]
        for _ in range(60):
            agreement._guessed(dsn, True)
        assert all(agreement._may_guess(dsn) for _ in range(5))
    finally:
        agreement.forget_guesses()
