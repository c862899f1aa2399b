"""plone.pgcatalog in a real Plone site (profile installed)."""
import unittest
from unittest import mock

import transaction
from Acquisition import aq_base
from DateTime import DateTime
from Missing import MV
from plone.app.testing import SITE_OWNER_NAME
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles
from plone.folder.ordered import OrderedBTreeFolderBase
from Products.CMFCore.interfaces import ICatalogTool
from Products.ZCatalog.interfaces import IZCatalog
from zope.component import getUtility
from ZTUtils.Lazy import LazyMap

from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.tool import PGCatalogTool


def paths(results):
    return [b.getPath() for b in results]


class TestInstall(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog

    def test_tool_replaced_and_registered(self):
        self.assertIsInstance(self.catalog.aq_base, PGCatalogTool)
        self.assertTrue(IZCatalog.providedBy(self.catalog))
        self.assertIs(getUtility(ICatalogTool).aq_base, self.catalog.aq_base)

    def test_definitions_preserved(self):
        indexes = self.catalog.indexes()
        for name in ("portal_type", "Subject", "path", "SearchableText",
                     "effectiveRange", "getObjPositionInParent", "UID",
                     "allowedRolesAndUsers", "modified", "is_folderish"):
            self.assertIn(name, indexes)
        self.assertIn("Title", self.catalog.schema())
        self.assertIn("image_scales", self.catalog._catalog.schema)
        idx = self.catalog._catalog.getIndex("portal_type")
        self.assertEqual(idx.meta_type, "FieldIndex")
        from Products.PluginIndexes.FieldIndex.FieldIndex import FieldIndex
        self.assertIsInstance(idx.aq_base, FieldIndex)

    def test_nothing_catalog_related_in_zodb(self):
        from BTrees.Interfaces import IBTree
        for index in self.catalog._catalog._indexes.values():
            for value in index.__dict__.values():
                self.assertFalse(IBTree.providedBy(value), value)

    def test_site_root_indexed(self):
        self.assertGreaterEqual(len(self.catalog), 1)


class TestSearch(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        # real workflows (pitfalls: transitions must patch, never blank rows)
        self.portal.portal_workflow.setChainForPortalTypes(
            ["Document", "Folder"], "simple_publication_workflow")
        self.portal.invokeFactory("Folder", "folder", title="A Folder")
        self.folder = self.portal.folder
        for i, subj in enumerate([("Python",), ("Plone", "Python"), ()]):
            self.folder.invokeFactory(
                "Document", "doc%d" % i, title="Doc %d café" % i,
                subject=subj, description="about number %d" % i)

    def test_read_your_own_writes(self):
        results = self.catalog(portal_type="Document")
        self.assertEqual(len(results), 3)
        self.assertIsInstance(results, LazyMap)

    def test_keyword_or_and(self):
        self.assertEqual(len(self.catalog(Subject="Python")), 2)
        self.assertEqual(
            len(self.catalog(Subject={"query": ["Python", "Plone"],
                                      "operator": "and"})), 1)

    def test_path_depth_and_gopip(self):
        results = self.catalog(path={"query": "/plone/folder", "depth": 1},
                               sort_on="getObjPositionInParent")
        self.assertEqual([b.getId for b in results], ["doc0", "doc1", "doc2"])
        self.folder.moveObjectsByDelta(["doc2"], -2)
        results = self.catalog(path={"query": "/plone/folder", "depth": 1},
                               sort_on="getObjPositionInParent")
        self.assertEqual([b.getId for b in results], ["doc2", "doc0", "doc1"])

    def test_gopip_asks_each_parents_ordering_once(self):
        # many parents: each child's position as its parent's
        # getObjectPosition answers it, the parent's ordering adapter
        # looked up once (plone.folder's method looks it up per child)
        self.portal.invokeFactory("Folder", "folder3")
        for i in range(3):
            self.portal.folder3.invokeFactory("Document", "c%d" % i)
        self.portal.folder3.moveObjectsByDelta(["c2"], -2)
        asked = []
        original = OrderedBTreeFolderBase.getOrdering

        def counted(folder):
            asked.append(folder.getId())
            return original(folder)

        query = dict(sort_on="getObjPositionInParent", portal_type="Document",
                     path={"query": ["/plone/folder", "/plone/folder3"],
                           "depth": 1})
        with mock.patch.object(OrderedBTreeFolderBase, "getOrdering",
                               counted):
            found = [(b.getId, b.getObject().aq_parent.getObjectPosition(
                b.getId)) for b in self.catalog(**query)]
        positions = [position for _, position in found]
        self.assertEqual(positions, sorted(positions))
        self.assertEqual(dict(found)["c2"], 0)
        self.assertEqual(len(found), 6)
        # (getObjectPosition above asks once per brain, after the search)
        self.assertEqual(sorted(asked[:-6]), ["folder", "folder3"])

    def test_gopip_ties_in_rid_order(self):
        # Positions repeat across folders; ZCatalog orders equal keys by
        # rid.  Reindexing rewrites a row elsewhere in the table, so the
        # order rows are read in is not the rid order.
        self.portal.invokeFactory("Folder", "folder2")
        for i in range(2):
            self.portal.folder2.invokeFactory("Document", "a%d" % i)
        len(self.catalog(portal_type="Document"))  # rows written
        self.folder.doc0.reindexObject()
        self.folder.doc1.reindexObject()
        query = dict(portal_type="Document", sort_on="getObjPositionInParent",
                     path={"query": ["/plone/folder", "/plone/folder2"],
                           "depth": 1})
        results = list(self.catalog(**query))
        self.assertEqual(len(results), 5)
        positions = {b.getPath(): b.getObject().aq_parent.getObjectPosition(
            b.getId) for b in results}
        self.assertEqual(sorted(positions.values()), [0, 0, 1, 1, 2])
        expected = [b.getPath() for b in sorted(
            results, key=lambda b: (positions[b.getPath()], b.getRID()))]
        self.assertEqual([b.getPath() for b in results], expected)
        self.assertEqual(expected[:2], ["/plone/folder/doc0",
                                        "/plone/folder2/a0"])
        reverse = [b.getPath() for b in self.catalog(sort_order="reverse",
                                                     **query)]
        self.assertEqual(reverse, expected[::-1])
        # several sort indexes: stable passes over the rid-ordered matches
        # (ZCatalog's multisort), ties keep rid order in both directions
        query["sort_on"] = ["portal_type", "getObjPositionInParent"]
        multi = [b.getPath() for b in self.catalog(**query)]
        self.assertEqual(multi, expected)
        multi = [b.getPath() for b in self.catalog(sort_order="reverse",
                                                   **query)]
        self.assertEqual(multi, [b.getPath() for b in sorted(
            results, key=lambda b: (-positions[b.getPath()], b.getRID()))])

    def test_full_text(self):
        self.assertEqual(len(self.catalog(SearchableText="cafe")), 3)
        self.assertEqual(len(self.catalog(SearchableText="number 1")), 1)
        self.assertEqual(len(self.catalog(Title="Doc")), 3)

    def test_brains(self):
        brain = self.catalog(id="doc1")[0]
        self.assertEqual(brain.getPath(), "/plone/folder/doc1")
        self.assertEqual(brain.Title, "Doc 1 café")
        self.assertEqual(brain.Subject, ("Plone", "Python"))
        self.assertIsInstance(brain.modified, DateTime)
        self.assertIs(brain.getObject().aq_base, self.folder.doc1.aq_base)
        self.assertIn("Title", brain)
        self.assertEqual(brain.data_record_id_, brain.getRID())
        self.assertEqual(self.catalog.getpath(brain.getRID()),
                         "/plone/folder/doc1")

    def test_sort_and_batch(self):
        results = self.catalog(portal_type="Document", sort_on="sortable_title",
                               sort_order="reverse", b_start=1, b_size=1)
        self.assertEqual(len(results), 1)
        self.assertEqual(results.actual_result_count, 3)
        self.assertEqual(results[0].getId, "doc1")

    def test_security_keys_are_overwritten(self):
        logout()
        # Anonymous sees nothing private, whatever it passes.
        results = self.catalog(portal_type="Document",
                               allowedRolesAndUsers=["Manager"])
        self.assertEqual(len(results), 0)

    def test_unindex_on_delete(self):
        self.folder.manage_delObjects(["doc0"])
        self.assertEqual(len(self.catalog(portal_type="Document")), 2)

    def test_rename_and_move(self):
        transaction.savepoint(optimistic=True)
        self.folder.manage_renameObject("doc0", "renamed")
        self.assertEqual(paths(self.catalog(id="renamed")),
                         ["/plone/folder/renamed"])
        self.assertEqual(len(self.catalog(id="doc0")), 0)

    def test_add_index_after_own_writes(self):
        # A profile re-import reindexes, then adds indexes, in one
        # transaction: the index DDL must not wait for our own row locks.
        self.assertEqual(len(self.catalog(portal_type="Document")), 3)
        self.assertTrue(self.catalog._pgc_session().in_pg_txn)
        self.catalog.addIndex("pgc_probe_title", "FieldIndex",
                              extra={"indexed_attrs": "Title"})
        self.catalog.reindexIndex("pgc_probe_title", None)
        self.assertEqual(paths(self.catalog(pgc_probe_title="Doc 1 café")),
                         ["/plone/folder/doc1"])

    def test_savepoint_rollback(self):
        sp = transaction.savepoint()
        self.folder.invokeFactory("Document", "tmp", title="Temporary")
        self.assertEqual(len(self.catalog(id="tmp")), 1)
        sp.rollback()
        self.assertEqual(len(self.catalog(id="tmp")), 0)

    def test_workflow_transition_keeps_row(self):
        wf = self.portal.portal_workflow
        wf.doActionFor(self.folder.doc1, "publish")
        brain = self.catalog(id="doc1")[0]
        self.assertEqual(brain.review_state, "published")
        self.assertEqual(brain.Title, "Doc 1 café")
        self.assertEqual(len(self.catalog(review_state="published")), 1)

    def test_uuid_lookup(self):
        from plone.app.uuid.utils import uuidToObject
        uid = self.folder.doc1.UID()
        self.assertIs(uuidToObject(uid).aq_base, self.folder.doc1.aq_base)

    def test_counter_increases(self):
        before = self.catalog.getCounter()
        self.folder.doc1.reindexObject()
        self.assertGreater(self.catalog.getCounter(), before)

    def test_empty_query_semantics(self):
        self.assertEqual(len(self.catalog.unrestrictedSearchResults()), 0)
        self.assertEqual(len(self.catalog(portal_type=[])), 0)
        self.assertGreaterEqual(len(self.catalog()), 4)


class TestTransactions(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)

    def test_abort_discards_catalog_writes(self):
        self.portal.invokeFactory("Document", "kept", title="Kept")
        transaction.commit()
        self.portal.invokeFactory("Document", "dropped", title="Dropped")
        self.assertEqual(len(self.catalog(id="dropped")), 1)
        transaction.abort()
        self.assertEqual(len(self.catalog(id="dropped")), 0)
        self.assertEqual(len(self.catalog(id="kept")), 1)

    def test_an_unchanged_reindex_writes_no_row(self):
        # Plone reindexes many objects whose values did not change: the
        # entry, its metadata and its text rows are left as they are (no
        # new row version, no index entries), a changed one is written
        self.portal.invokeFactory("Document", "same", title="Same words",
                                  description="A description")
        transaction.commit()
        doc = self.portal.same
        uid = "/".join(doc.getPhysicalPath())

        def versions():
            store = self.catalog._pgc_store()
            row = store.execute(q(
                "SELECT e.xmin::text, (SELECT m.xmin::text FROM "
                "pgcatalog_meta m WHERE m.rid = e.rid), ARRAY(SELECT "
                "t.name || ':' || t.xmin::text FROM pgcatalog_text t WHERE "
                "t.rid = e.rid ORDER BY t.name) FROM pgcatalog_entries e "
                "WHERE e.path = {}", uid)).fetchone()
            transaction.abort()
            return row

        before = versions()
        self.assertEqual(len(before[2]), 3)  # SearchableText, Title, ...
        self.catalog.catalog_object(doc, uid)
        doc.reindexObject(idxs=["Title", "SearchableText", "Subject"])
        transaction.commit()
        self.assertEqual(versions(), before)
        doc.setTitle("Other words")
        doc.reindexObject(idxs=["Title", "SearchableText",
                                "sortable_title"])
        transaction.commit()
        after = versions()
        self.assertNotEqual(after[0], before[0])
        self.assertNotEqual(after[1], before[1])
        changed = {n.split(":")[0] for n in set(after[2]) - set(before[2])}
        self.assertEqual(changed, {"SearchableText", "Title"})
        self.assertEqual(paths(self.catalog(Title="other")), [uid])
        self.assertEqual(paths(self.catalog(Title="same")), [])
        self.assertEqual(self.catalog(UID=doc.UID())[0].Title,
                         "Other words")

    def test_brain_kept_beyond_its_transaction_asks_the_catalog(self):
        # a brain carries its path for its own transaction only: later,
        # getPath() asks the catalog as ZCatalog's does (KeyError once the
        # entry is gone), where a remembered path would answer
        self.portal.invokeFactory("Document", "gone", title="Gone")
        transaction.commit()
        brain = self.catalog(id="gone")[0]
        self.assertEqual(brain.getPath(), "/plone/gone")
        self.portal.manage_delObjects(["gone"])
        transaction.commit()
        with self.assertRaises(KeyError):
            brain.getPath()
        transaction.abort()

    def test_a_kept_brain_keeps_no_transaction_alive(self):
        # a brain cached beyond its request (plone.memoize) holds only a
        # weak reference to its transaction's store
        import gc
        self.portal.invokeFactory("Document", "kept-brain", title="K")
        transaction.commit()
        results = self.catalog(id="kept-brain")
        brain = results[0]
        store = brain.__data__[-1]
        self.assertIs(store(), self.catalog._pgc_store())
        del results
        transaction.commit()
        gc.collect()
        self.assertIsNone(store())
        self.assertEqual(brain.getPath(), "/plone/kept-brain")

    def test_brain_after_savepoint_rollback_asks_the_catalog(self):
        self.portal.invokeFactory("Document", "kept", title="Kept")
        transaction.commit()
        sp = transaction.savepoint()
        brain = self.catalog(id="kept")[0]
        store = self.catalog._pgc_store()
        sp.rollback()
        self.assertIsNot(self.catalog._pgc_store(), store)
        asked = []
        klass = type(aq_base(self.catalog))
        original = klass.getpath

        def getpath(tool, rid, default=KeyError):
            asked.append(rid)
            return original(tool, rid, default)

        klass.getpath = getpath
        try:
            self.assertEqual(brain.getPath(), "/plone/kept")
        finally:
            klass.getpath = original
        self.assertEqual(asked, [brain.getRID()])

    def test_brain_columns(self):
        self.portal.invokeFactory("Document", "cols", title="Cols")
        transaction.commit()
        brain = self.catalog(id="cols")[0]
        # a column is read from the record, typed values decoded
        self.assertEqual(brain.Title, "Cols")
        self.assertIsInstance(brain.modified, DateTime)
        self.assertEqual(brain["Title"], brain.Title)
        # set on a brain as on a Record (only that brain changes)
        brain.Title = "Changed"
        self.assertEqual(brain.Title, "Changed")
        self.assertEqual(self.catalog(id="cols")[0].Title, "Cols")
        # a name that is no column is acquired, as from ZCatalog's brains
        self.assertIs(aq_base(brain.portal_catalog), aq_base(self.catalog))
        self.assertFalse(hasattr(aq_base(brain), "not_a_column"))

    def test_column_named_like_a_brain_method(self):
        # on ZCatalog the class attribute wins over the Record's column
        self.catalog.addColumn("getURL")
        try:
            self.portal.invokeFactory("Document", "named", title="Named")
            transaction.commit()
            brain = self.catalog(id="named")[0]
            self.assertTrue(callable(brain.getURL))
            self.assertTrue(brain.getURL().endswith("/plone/named"))
            self.assertIn("getURL", brain)
        finally:
            self.catalog.delColumn("getURL")
            transaction.commit()

    def test_get_url_as_zcatalogs(self):
        from Products.ZCatalog.CatalogBrains import AbstractCatalogBrain
        self.portal.invokeFactory("Document", "url", title="URL")
        transaction.commit()
        brain = self.catalog(id="url")[0]
        for relative in (0, 1):
            self.assertEqual(brain.getURL(relative),
                             AbstractCatalogBrain.getURL(brain, relative))
        # unwrapped: the global request, as ZCatalog's
        bare = aq_base(brain)
        self.assertEqual(bare.getURL(), AbstractCatalogBrain.getURL(brain))

    def test_commit_failure_rolls_back_catalog(self):
        class Boom:
            """A resource whose vote fails (sorted before the catalog)."""
            def sortKey(self):
                return "0-boom"

            def tpc_begin(self, txn):
                pass

            def commit(self, txn):
                pass

            def tpc_vote(self, txn):
                raise RuntimeError("boom")

            def tpc_abort(self, txn):
                pass

            abort = tpc_abort

            def tpc_finish(self, txn):
                pass

        self.portal.invokeFactory("Document", "x1", title="x")
        self.assertEqual(len(self.catalog(id="x1")), 1)  # flushed to PG
        transaction.get().join(Boom())
        with self.assertRaises(RuntimeError):
            transaction.commit()
        transaction.abort()
        self.assertEqual(len(self.catalog(id="x1")), 0)
        self.assertNotIn("x1", self.portal.objectIds())

    def test_unpicklable_metadata_fails_the_commit(self):
        # ZCatalog keeps such a value in its metadata BTree and the ZODB
        # fails to pickle it at commit; the transaction's searches work.
        # The value comes from an indexer reading a volatile attribute, so
        # the ZODB itself never sees it.
        import threading

        from plone.indexer import indexer
        from Products.CMFCore.interfaces import IContentish
        from zope.component import getGlobalSiteManager

        @indexer(IContentish)
        def probe(obj):
            return getattr(obj, "_v_probe", None)

        gsm = getGlobalSiteManager()
        gsm.registerAdapter(probe, name="pgc_probe")
        self.addCleanup(gsm.unregisterAdapter, probe, name="pgc_probe")
        self.catalog.addColumn("pgc_probe")
        transaction.commit()

        self.portal.invokeFactory("Document", "lockdoc", title="L")
        doc = self.portal.lockdoc
        doc._v_probe = threading.Lock()
        doc.reindexObject()
        brain = self.catalog(id="lockdoc")[0]
        self.assertIs(brain.pgc_probe, MV)
        with self.assertRaises(TypeError):
            transaction.commit()
        transaction.abort()
        self.assertNotIn("lockdoc", self.portal.objectIds())
        # a later, picklable record replaces the bad one (ZCatalog keeps
        # only an entry's last record)
        self.portal.invokeFactory("Document", "lockdoc", title="L")
        doc = self.portal.lockdoc
        doc._v_probe = threading.Lock()
        doc.reindexObject()
        self.assertEqual(len(self.catalog(id="lockdoc")), 1)
        doc._v_probe = "fine"
        doc.reindexObject()
        transaction.commit()
        self.assertEqual(self.catalog(id="lockdoc")[0].pgc_probe, "fine")
        # so does removing the entry, and rolling back to a savepoint
        doc._v_probe = threading.Lock()
        sp = transaction.savepoint()
        doc.reindexObject()
        self.catalog(id="lockdoc")
        sp.rollback()
        transaction.commit()
        doc.reindexObject()
        self.catalog(id="lockdoc")
        self.portal.manage_delObjects(["lockdoc"])
        transaction.commit()
        self.assertEqual(len(self.catalog(id="lockdoc")), 0)

    def _subjects(self):
        # uniqueValuesFor does not process the indexing queue (ZCatalog's
        # neither); a search does
        from Products.CMFCore.indexing import processQueue
        processQueue()
        return list(self.catalog.uniqueValuesFor("Subject"))

    def test_unique_values_follow_commits(self):
        """uniqueValuesFor is kept per process while what it reads is
        unchanged: own pending writes, own commits and other processes'
        commits are all seen at once."""
        self.portal.invokeFactory("Document", "s1", title="s",
                                  subject=("alpha",))
        self.assertIn("alpha", self._subjects())      # own pending write
        transaction.commit()
        self.assertIn("alpha", self._subjects())
        self.assertEqual(self._subjects(), self._subjects())
        self.portal.s1.setSubject(("beta",))
        self.portal.s1.reindexObject()
        self.assertIn("beta", self._subjects())       # own pending write
        self.assertNotIn("alpha", self._subjects())
        transaction.abort()
        self.assertIn("alpha", self._subjects())      # aborted: as before
        self.assertNotIn("beta", self._subjects())
        self.portal.s1.setSubject(("epsilon",))
        self.portal.s1.reindexObject()
        transaction.commit()
        self.assertEqual(
            [s for s in self._subjects() if s in ("alpha", "epsilon")],
            ["epsilon"])

    def _other_process_writes(self, subjects, counted=True, stamp=True):
        """Write ``subjects`` into s1's entry as another process would:
        its catalog commit adds a row to the commit log (the change
        stamp) and, before it, its ZODB commit bumps the catalog's
        generation and change counters (the tool's before-commit hook),
        here from a ZODB connection of its own.  ``counted=False``: a
        catalog without change counters (the generation still moves with
        the stamp, or the snapshots would disagree)."""
        import json

        import psycopg

        from plone.pgcatalog import config
        from plone.pgcatalog.changes import Changes
        cid = self.catalog._pgc_cid()
        if counted or stamp:
            manager = transaction.TransactionManager()
            conn = aq_base(self.portal)._p_jar.db().open(manager)
            try:
                tool = conn.get(aq_base(self.catalog)._p_oid)
                if counted:
                    changed = Changes()
                    changed.names = {"Subject"}
                    tool._pgc_changes.bump(changed)
                if stamp:
                    tool._pgc_generation.change(1)
                manager.commit()
            finally:
                conn.close()
        with psycopg.connect(config.get_dsn(), autocommit=True) as other:
            with other.transaction():
                other.execute(
                    "UPDATE pgcatalog_entries SET idx = jsonb_set(idx, "
                    "'{Subject}', %s::jsonb) WHERE cid = %s AND path "
                    "LIKE '%%/s1'", (json.dumps(subjects), cid))
                if stamp:
                    other.execute("INSERT INTO pgcatalog_commits (cid, "
                                  "delta) VALUES (%s, 1)", (cid,))

    def test_unique_values_see_other_processes_commits(self):
        """Kept under the catalog's change counters (the ZODB snapshot's,
        as the result cache keys its answers: no statement when found)."""
        from statements import statements
        self.portal.invokeFactory("Document", "s1", title="s",
                                  subject=("alpha",))
        transaction.commit()
        self.assertIn("alpha", self._subjects())
        transaction.abort()
        self.assertIn("alpha", self._subjects())
        found, sent = statements(self.catalog, self._subjects)
        self.assertIn("alpha", found)
        self.assertEqual(sent, [])        # kept: not even a stamp read
        self._other_process_writes(["gamma"])
        # this transaction still reads its snapshots (the ZODB's and
        # PostgreSQL's); the next one sees the change
        self.assertNotIn("gamma", self._subjects())
        transaction.abort()
        self.assertIn("gamma", self._subjects())
        self.assertNotIn("alpha", self._subjects())
        # a change no counter counts (no real writer makes one) is not
        # seen: proof that the kept answer is served
        self._other_process_writes(["delta"], counted=False, stamp=False)
        transaction.abort()
        self.assertIn("gamma", self._subjects())

    def test_unique_values_without_counters_follow_the_stamp(self):
        """A catalog without change counters (none written since they
        came) keeps them under its change stamp, read with a statement."""
        self.portal.invokeFactory("Document", "s1", title="s",
                                  subject=("alpha",))
        transaction.commit()
        del aq_base(self.catalog)._pgc_changes
        transaction.commit()
        self.assertIn("alpha", self._subjects())
        self._other_process_writes(["gamma"], counted=False)
        self.assertNotIn("gamma", self._subjects())   # its snapshot
        transaction.abort()
        self.assertIn("gamma", self._subjects())
        self.assertNotIn("alpha", self._subjects())
        # without a stamp change the kept answer is served
        self._other_process_writes(["delta"], counted=False, stamp=False)
        transaction.abort()
        self.assertIn("gamma", self._subjects())


#: how a window of brains' metadata is read (store.metadata_window)
WINDOW = "SELECT e.rid, e.path, m.meta::text FROM"


class TestPagedResults(unittest.TestCase):
    """A page (b_size / sort_limit) is fetched alone; its total
    (actual_result_count) is counted when first read, or known at once
    when the page is the tail of the answer."""
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        for i in range(12):
            portal.invokeFactory("Document", "d%02d" % i,
                                 title="T %d" % (i % 5))
        self.catalog = portal.portal_catalog
        self.catalog(portal_type="Document")     # flush the indexing queue

    def _statements(self, func):
        """``func()``'s result and the catalog statements it ran.  The
        statistics' number of hot rows, which a page's plan reads once a
        minute per process (store.hot_rows), is read first: a slow run
        may find it older than that."""
        self.catalog._pgc_store().hot_rows()
        session = self.catalog._pgc_session()
        seen = []
        original = session.execute

        def execute(sql, *args, **kw):
            seen.append(getattr(sql, "text", sql))
            return original(sql, *args, **kw)

        session.execute = execute
        try:
            return func(), seen
        finally:
            del session.execute

    def test_pages_and_totals(self):
        catalog = self.catalog
        everything = [b.getPath() for b in catalog(portal_type="Document")]
        by_title = [b.getPath() for b in catalog(portal_type="Document",
                                                  sort_on="sortable_title")]
        cases = [
            (dict(portal_type="Document", b_size=5), everything[:5], 12),
            (dict(portal_type="Document", b_start=5, b_size=5),
             everything[5:10], 12),
            (dict(portal_type="Document", b_start=10, b_size=5),
             everything[10:], 12),
            (dict(portal_type="Document", sort_on="sortable_title",
                  b_start=2, b_size=4), by_title[2:6], 12),
            (dict(portal_type="Document", sort_on="sortable_title",
                  sort_limit=4), by_title[:4], 12),
            (dict(portal_type="Document", b_start=50, b_size=5), [], 12),
            (dict(portal_type="Nothing", b_size=5), [], 0),
        ]
        for query, page, total in cases:
            results = catalog(**query)
            self.assertEqual([b.getPath() for b in results], page, query)
            self.assertEqual(len(results), len(page), query)
            self.assertEqual(results.actual_result_count, total, query)

    def test_unsorted_results_in_rid_order(self):
        # ZCatalog lists an unsorted answer in rid order, and relevance
        # ties by descending rid.  Rewritten rows (a reindex) move within
        # the table, so the order cannot be the order rows are read in.
        portal = self.layer["portal"]
        for name in ("d00", "d03"):
            portal[name].title = "T rewritten"
            portal[name].reindexObject()
        catalog = self.catalog
        for query, reverse in ((dict(portal_type="Document"), False),
                               (dict(SearchableText="T"), True)):
            rids = [b.getRID() for b in catalog(**query)]
            self.assertEqual(len(rids), 12, query)
            self.assertEqual(rids, sorted(rids, reverse=reverse), query)
        paths = [b.getPath() for b in catalog(portal_type="Document")]
        self.assertEqual(paths[0], "/plone/d00")

    def test_small_answers_come_with_their_brains(self):
        # a UID lookup of up to plans.SMALL_WITH_METADATA matches and a
        # listing in folder order of up to sorting.SORTED_WITH_METADATA
        # read their brains' metadata in the search statement, and so do
        # the first brains of a listing sorted in PostgreSQL, of every
        # match (in rid order) and of every match by relevance; others
        # by windows, after it
        from plone.pgcatalog.search import plans
        from plone.pgcatalog.search import sorting
        catalog = self.catalog
        portal = self.layer["portal"]
        uid = portal.d03.UID()
        search = catalog.unrestrictedSearchResults    # as uuidToObject
        for query, windows in (
                (dict(UID=uid), False),
                (dict(path={"query": "/plone", "depth": 1},
                      sort_on="getObjPositionInParent"), False),
                (dict(portal_type="Document"), False),
                (dict(portal_type="Document", sort_on="sortable_title"),
                 False),
                (dict(SearchableText="T"), False)):
            brains, ran = self._statements(lambda: [
                (b.getPath(), b.Title, b.UID, b.getURL())
                for b in search(**query)])
            # a window of metadata read after the search (store.py)
            self.assertEqual(bool([s for s in ran if s.startswith(WINDOW)]),
                             windows, (query, ran))
            self.assertTrue(brains, query)
            self.assertIn((portal.d03.absolute_url_path(), "T 3", uid,
                           portal.d03.absolute_url()), brains, query)
        # a bigger answer reads its brains by windows, as before
        self.addCleanup(setattr, sorting, "SORTED_WITH_METADATA",
                        sorting.SORTED_WITH_METADATA)
        sorting.SORTED_WITH_METADATA = plans.SMALL_WITH_METADATA
        for i in range(12, plans.SMALL_WITH_METADATA + 1):
            portal.invokeFactory("Document", "d%02d" % i, title="T")
        catalog(portal_type="Document")     # flush the indexing queue
        brains, ran = self._statements(lambda: [
            b.Title for b in search(path={"query": "/plone", "depth": 1},
                                    sort_on="getObjPositionInParent",
                                    portal_type="Document")])
        self.assertEqual(len(brains), plans.SMALL_WITH_METADATA + 1)
        self.assertTrue([s for s in ran if s.startswith(WINDOW)])

    def test_total_counted_only_when_read(self):
        catalog = self.catalog
        results, ran = self._statements(
            lambda: catalog(portal_type="Document", sort_on="created",
                            b_size=3))
        self.assertEqual(len(ran), 1)
        self.assertEqual(len(results), 3)
        total, ran = self._statements(lambda: results.actual_result_count)
        self.assertEqual(total, 12)
        self.assertEqual(len(ran), 1)
        self.assertIn("count(*)", ran[0])
        again, ran = self._statements(lambda: results.actual_result_count)
        self.assertEqual((again, ran), (12, []))
        # a short last page: the total is known without counting
        tail, ran = self._statements(
            lambda: catalog(portal_type="Document", b_start=10,
                            b_size=5).actual_result_count)
        self.assertEqual(tail, 12)
        self.assertEqual(len(ran), 1)
