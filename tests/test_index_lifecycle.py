"""Index lifecycle, index names and hostile content values.

* ``delIndex`` removes the PostgreSQL indexes ``addIndex`` made for that
  catalog (none left behind after add/delete cycles); re-adding a name with
  another kind works, in one transaction or two; two catalogs of one
  database may use one name for different kinds.
* Index names: anything ZCatalog takes works (``%``, quotes, spaces);
  what PostgreSQL cannot hold is refused at ``addIndex`` with CatalogError.
* Content values ZCatalog indexes are indexed here too: NUL characters and
  lone surrogates (matched exactly), a 3,000-byte title (committed, sorted
  as ZCatalog sorts), through plone.restapi as an editor sends them.
* The security filters cannot be weakened by ``<index>_<option>`` keys.
* ``addIndex`` blocks no other catalog: its PostgreSQL indexes are
  registered in the transaction and built after the commit (``CREATE INDEX
  CONCURRENTLY``); a failed build leaves no invalid index, and an invalid
  one is dropped and built again.
"""
import os
import threading
import time
import unittest

import psycopg
import transaction
from plone.app.testing import SITE_OWNER_NAME
from plone.app.testing import SITE_OWNER_PASSWORD
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles

from plone.pgcatalog.config import get_dsn
from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import ddl
from plone.pgcatalog.schema import planstats
from plone.pgcatalog.search.compiler import compile_search
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_RESTAPI_FUNCTIONAL_TESTING
from plone.pgcatalog.tool import PGCatalogTool


def pg_indexes():
    """Names of the catalog's own PostgreSQL indexes in the database."""
    with db.get_pool().connection() as conn:
        return {row[0] for row in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE indexname LIKE "
            "'pgcatalog\\_x\\_%'").fetchall()}


def statistics():
    """``({name: expressions} the valid expression indexes want, {names}
    of the catalog's statistics objects})``."""
    with db.get_pool().connection() as conn:
        wanted = {planstats.statistics_name(row[1]): row[1]
                  for row in conn.execute(
                      planstats._EXPRESSION_INDEXES_SQL, ()).fetchall()
                  if row[1]}
        made = {row[0] for row in conn.execute(
            planstats._STATISTICS_SQL, ()).fetchall()}
    return wanted, made


def index_state(name):
    """True (valid), False (invalid) or None (no such index)."""
    with db.get_pool().connection() as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = "
            "i.indexrelid WHERE c.relname = %s", (name,)).fetchone()
    return None if row is None else row[0]


def paths(results):
    return sorted(b.getPath() for b in results)


class TestIndexLifecycle(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Document", "doc", title="Lifecycle")
        transaction.commit()

    def tearDown(self):
        for name in ("foo", "bar"):
            if name in self.catalog.indexes():
                self.catalog.delIndex(name)
        transaction.commit()

    def test_add_delete_cycles_leave_no_index_behind(self):
        before = pg_indexes()
        names = ["plain", "with % percent", "it's quoted", "100%%", "a b"]
        kinds = ["FieldIndex", "DateIndex", "KeywordIndex", "BooleanIndex",
                 "UUIDIndex"]
        for name, kind in zip(names, kinds):
            self.catalog.addIndex(name, kind)
        # registered in the transaction, built after the commit
        self.assertEqual(pg_indexes(), before)
        transaction.commit()
        self.assertGreater(len(pg_indexes() - before), 0)
        self.assertTrue(all(index_state(n) for n in pg_indexes() - before))
        for name in names:
            self.catalog.delIndex(name)
        transaction.commit()
        self.assertEqual(pg_indexes(), before)

    def test_a_sync_of_the_hot_indexes_vacuums_their_tables(self):
        # every hot row written again leaves the hot tables' pages without
        # their all-visible mark and their indexes full of dead entries,
        # which the counts beside a search read through: vacuumed after
        # the commit (upkeep.vacuum_hot)
        def vacuums():
            with db.get_pool().connection() as conn:
                return dict(conn.execute(
                    "SELECT relname, vacuum_count FROM pg_stat_user_tables "
                    "WHERE relname IN ('pgcatalog_hot', "
                    "'pgcatalog_hot_counts', 'pgcatalog_postings')"
                ).fetchall())
        before = vacuums()
        self.assertEqual(len(before), 3)
        os.environ["PGCATALOG_HOT_INDEXES"] = "portal_type Creator"
        try:
            self.catalog.pgc_sync_indexes()
            transaction.commit()
        finally:
            del os.environ["PGCATALOG_HOT_INDEXES"]
            self.catalog.pgc_sync_indexes()
            transaction.commit()
        after = vacuums()
        for name, count in before.items():
            self.assertGreaterEqual(after[name], count + 2, name)

    def test_expression_indexes_have_planner_statistics(self):
        # PostgreSQL's planner ignores a partial index's statistics: a
        # DateIndex's B-tree (partial: one catalog's rows) has a statistics
        # object on the same expressions; the indexes no stored value can
        # fail are shared, over every row, with statistics of their own
        # (ANALYZE right after their build), and no object: the planner
        # loads every object of the table for each statement it plans
        kinds = (("foo", "FieldIndex"), ("bar", "KeywordIndex"),
                 ("baz", "DateIndex"), ("qux", "BooleanIndex"))
        for name, kind in kinds:
            self.catalog.addIndex(name, kind)
        transaction.commit()
        self.assertTrue(ddl.wait_for_builds(60))
        wanted, made = statistics()
        self.assertTrue(wanted)
        self.assertEqual(made, set(wanted))
        expressions = " ".join(" ".join(e) for e in wanted.values())
        self.assertIn("'baz'", expressions)
        for name in ("foo", "bar", "qux"):
            self.assertNotIn("'%s'" % name, expressions)
        cid = self.catalog._pgc_cid()
        with db.get_pool().connection() as conn:
            rows = conn.execute(
                "SELECT r.name, r.pg_index, i.indpred IS NOT NULL, "
                "(SELECT count(*) FROM pg_stats s WHERE s.tablename = "
                "r.pg_index) FROM pgcatalog_indexes r JOIN pg_class c ON "
                "c.relname = r.pg_index JOIN pg_index i ON i.indexrelid = "
                "c.oid WHERE r.cid = %s AND r.name = ANY(%s)",
                (cid, [name for name, _kind in kinds])).fetchall()
        partial = {name: is_partial for name, _n, is_partial, _s in rows}
        self.assertEqual(partial, {"foo": False, "bar": False,
                                   "baz": True, "qux": False})
        # the shared B-trees' expressions were analyzed with the build
        for name, pg_index, is_partial, n_stats in rows:
            if name in ("foo", "qux"):
                self.assertGreater(n_stats, 0, name)
        # and the objects go with their indexes
        self.catalog.delIndex("baz")
        transaction.commit()
        wanted_after, made_after = statistics()
        self.assertEqual(made_after, set(wanted_after))
        self.assertLess(len(made_after), len(made))
        # a database whose partial indexes were built without them gets
        # them
        with db.get_pool().connection() as conn:
            conn.execute("DROP STATISTICS %s" % sorted(made_after)[0])
            db.ensure_statistics(conn)
        self.assertEqual(statistics()[1], made_after)
        for name in ("foo", "bar", "qux"):
            self.catalog.delIndex(name)
        transaction.commit()

    def test_statistics_are_made_past_a_short_lock(self):
        # an ANALYZE (autovacuum's) holds the table's SHARE UPDATE
        # EXCLUSIVE lock: making a statistics object waits for it, longer
        # than the catalog connections' lock timeout (200 ms)
        _wanted, made = statistics()
        self.assertTrue(made)         # Plone's DateIndexes' (partial)
        missing = sorted(made)[0]
        with db.get_pool().connection() as conn:
            conn.execute("DROP STATISTICS %s" % missing)
        held, done = threading.Event(), threading.Event()

        def hold():
            with psycopg.connect(get_dsn(), autocommit=True) as other:
                with other.transaction():
                    other.execute("LOCK TABLE pgcatalog_entries IN SHARE "
                                  "UPDATE EXCLUSIVE MODE")
                    held.set()
                    time.sleep(0.8)
                    done.set()      # (released at once)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            self.assertTrue(held.wait(10))
            with db.get_pool().connection() as conn:
                db.ensure_statistics(conn)
            self.assertTrue(done.is_set())
        finally:
            thread.join()
        self.assertIn(missing, statistics()[1])

    def test_value_btrees_are_shared_by_the_catalogs(self):
        # one B-tree for every catalog with a FieldIndex of that name (no
        # stored value can fail its expressions); dropped with the last
        self.catalog.addIndex("shared_field", "FieldIndex",
                              extra={"indexed_attrs": "Title"})
        self.catalog.reindexIndex("shared_field", None)
        other = PGCatalogTool("other_catalog")
        self.portal._setObject("other_catalog", other)
        other = self.portal.other_catalog
        other.addIndex("shared_field", "FieldIndex",
                       extra={"indexed_attrs": "Title"})
        other.catalog_object(self.portal.doc, "/elsewhere/doc")
        transaction.commit()
        self.assertTrue(ddl.wait_for_builds(60))
        with db.get_pool().connection() as conn:
            names = {row[0] for row in conn.execute(
                "SELECT pg_index FROM pgcatalog_indexes WHERE name = "
                "'shared_field' AND cid = ANY(%s)",
                ([self.catalog._pgc_cid(), other._pgc_cid()],)).fetchall()}
        self.assertEqual(len(names), 1)
        name = names.pop()
        self.assertIn(name, pg_indexes())
        # each catalog finds its own entries only
        self.assertEqual(paths(self.catalog.unrestrictedSearchResults(
            shared_field="Lifecycle")), ["/plone/doc"])
        self.assertEqual(paths(other.unrestrictedSearchResults(
            shared_field="Lifecycle")), ["/elsewhere/doc"])
        self.catalog.delIndex("shared_field")
        transaction.commit()
        self.assertTrue(ddl.wait_for_builds(60))
        self.assertIn(name, pg_indexes())       # the other catalog's
        other.delIndex("shared_field")
        self.portal._delObject("other_catalog")
        transaction.commit()
        self.assertNotIn(name, pg_indexes())

    def test_planner_estimates_an_index_value_from_the_whole_table(self):
        for n in range(40):
            self.portal.invokeFactory("Document", "est%d" % n, title="E")
        self.portal.invokeFactory("Folder", "est-folder")
        transaction.commit()
        self.assertTrue(ddl.wait_for_builds(60))
        dsn = get_dsn()
        with db.get_pool(dsn).connection() as conn:
            conn.execute("ANALYZE pgcatalog_entries, pgcatalog_hot")
        store = self.catalog._pgc_store()
        # the count over the hot keys (a count of key sets, hot.where, has
        # one plan, an index-only scan, whatever the estimate)
        index = self.catalog._catalog.getIndex("portal_type")
        sets = index.__dict__.pop("_pgc_hot_sets", None)
        try:
            plan = compile_search(self.catalog._catalog,
                                  {"portal_type": "Document", "b_size": 1},
                                  store)
        finally:
            if sets is not None:
                index._pgc_hot_sets = sets
        self.assertNotIn("pgcatalog_hot_sets", plan.count.text)
        explained = store.session.execute(
            q("EXPLAIN (FORMAT JSON) {}", plan.count)).fetchone()[0]
        # the count's input: the rows the planner expects to match
        node = explained[0]["Plan"]
        while "Scan" not in node["Node Type"] or \
                node["Node Type"] == "Subquery Scan":
            node = node["Plans"][0]
        estimate = node["Plan Rows"]
        actual = len(self.catalog(portal_type="Document"))
        # blind, PostgreSQL guessed 1 row here (0.5 % of each of the
        # field index's two expressions)
        self.assertGreater(actual, 40)
        self.assertGreater(estimate, actual / 2)

    def test_readd_with_another_kind_in_two_transactions(self):
        doc = self.portal.doc
        self.catalog.addIndex("foo", "DateIndex",
                              extra={"indexed_attrs": "modified"})
        self.catalog.reindexIndex("foo", None)
        transaction.commit()
        self.assertIn("/plone/doc", paths(
            self.catalog.unrestrictedSearchResults(
                foo={"query": doc.modified(), "range": "max"})))
        self.catalog.delIndex("foo")
        transaction.commit()
        self.catalog.addIndex("foo", "FieldIndex",
                              extra={"indexed_attrs": "Title"})
        self.catalog.reindexIndex("foo", None)
        transaction.commit()
        doc.setTitle("Edited")
        doc.reindexObject()
        transaction.commit()          # used to fail: cast to bigint
        self.assertEqual(paths(self.catalog.unrestrictedSearchResults(
            foo="Edited")), ["/plone/doc"])

    def test_readd_with_another_kind_in_one_transaction(self):
        self.catalog.addIndex("bar", "DateIndex",
                              extra={"indexed_attrs": "modified"})
        self.catalog.reindexIndex("bar", None)
        transaction.commit()
        self.catalog.delIndex("bar")
        self.catalog.addIndex("bar", "FieldIndex",
                              extra={"indexed_attrs": "Title"})
        self.catalog.reindexIndex("bar", None)
        self.portal.doc.setTitle("Same transaction")
        self.portal.doc.reindexObject()
        transaction.commit()
        self.assertEqual(paths(self.catalog.unrestrictedSearchResults(
            bar="Same transaction")), ["/plone/doc"])

    def test_two_catalogs_one_name_two_kinds(self):
        self.catalog.addIndex("foo", "DateIndex",
                              extra={"indexed_attrs": "modified"})
        self.catalog.reindexIndex("foo", None)
        other = PGCatalogTool("other_catalog")
        self.portal._setObject("other_catalog", other)
        other = self.portal.other_catalog
        other.addIndex("foo", "FieldIndex", extra={"indexed_attrs": "Title"})
        other.catalog_object(self.portal.doc, "/elsewhere/doc")
        transaction.commit()
        self.portal.doc.reindexObject()
        other.catalog_object(self.portal.doc, "/elsewhere/doc")
        transaction.commit()
        self.assertEqual(len(other.unrestrictedSearchResults(
            foo="Lifecycle")), 1)
        self.assertIn("/plone/doc", paths(
            self.catalog.unrestrictedSearchResults(
                foo={"query": self.portal.doc.modified(), "range": "max"})))
        other.delIndex("foo")
        self.portal._delObject("other_catalog")
        transaction.commit()

    def test_percent_in_a_name_works_everywhere(self):
        name = "foo%s%(x)s%%"
        self.catalog.addIndex(name, "FieldIndex",
                              extra={"indexed_attrs": "Title"})
        self.catalog.reindexIndex(name, None)
        transaction.commit()
        self.assertEqual(paths(self.catalog.unrestrictedSearchResults(
            {name: "Lifecycle"})), ["/plone/doc"])
        self.assertEqual(len(self.catalog.unrestrictedSearchResults(
            {name: {"query": ["L", "M"], "range": "min:max"},
             "sort_on": name})), 1)
        self.assertIn("Lifecycle", self.catalog.uniqueValuesFor(name))
        self.catalog.delIndex(name)
        transaction.commit()

    def test_sync_recreates_missing_and_drops_legacy_indexes(self):
        with db.get_pool().connection() as conn:
            name = conn.execute(
                "SELECT pg_index FROM pgcatalog_indexes WHERE cid = %s AND "
                "name = 'review_state'",
                (self.catalog._pgc_cid(),)).fetchone()[0]
            conn.execute('DROP INDEX "%s"' % name)
            conn.execute("CREATE INDEX pgcatalog_x_legacy_test ON "
                         "pgcatalog_entries (cid, (idx -> 'review_state'))")
        self.assertNotIn(name, pg_indexes())
        created, dropped = self.catalog.pgc_sync_indexes()
        transaction.commit()
        self.assertEqual(created, [name])
        self.assertIn("pgcatalog_x_legacy_test", dropped)
        self.assertIn(name, pg_indexes())
        self.assertNotIn("pgcatalog_x_legacy_test", pg_indexes())

    def test_names_postgresql_cannot_hold_are_refused(self):
        for name in ("a\x00b", "x\ud800y", "n" * 100000, 5):
            with self.assertRaises(CatalogError):
                self.catalog.addIndex(name, "FieldIndex")
            self.assertNotIn(name, self.catalog.indexes())
        transaction.commit()


class TestAddIndexBlocksNoOtherCatalog(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog
        self.portal.invokeFactory("Document", "doc", title="Site A")
        other = PGCatalogTool("other_catalog")
        self.portal._setObject("other_catalog", other)
        self.other = self.portal.other_catalog
        self.other.addIndex("id", "FieldIndex")
        self.other.catalog_object(self.portal.doc, "/elsewhere/doc")
        transaction.commit()
        self.created = []

    def tearDown(self):
        transaction.abort()
        if "blocker" in self.catalog.indexes():
            self.catalog.delIndex("blocker")
        self.portal._delObject("other_catalog")
        transaction.commit()
        with db.get_pool().connection() as conn:
            for name in self.created:
                conn.execute('DROP INDEX IF EXISTS "%s"' % name)

    def test_other_catalogs_write_while_an_index_is_added(self):
        other_cid = self.other._pgc_cid()
        # site A's transaction writes catalog rows, then adds an index
        self.portal.doc.setTitle("Edited")
        self.portal.doc.reindexObject()
        self.catalog.unrestrictedSearchResults(portal_type="Document")
        self.assertTrue(self.catalog._pgc_session().in_pg_txn)
        self.catalog.addIndex("blocker", "FieldIndex",
                              extra={"indexed_attrs": "Title"})
        (name,) = ddl.wanted(self.catalog._catalog.getIndex("blocker"),
                             self.catalog._pgc_cid())
        with psycopg.connect(get_dsn(), autocommit=True) as conn:
            # used to wait for site A's commit: CREATE INDEX holds a SHARE
            # lock on pgcatalog_entries to the end of its transaction
            conn.execute("SET lock_timeout = '2s'")
            started = time.monotonic()
            conn.execute("UPDATE pgcatalog_entries SET idx = idx || "
                         "'{\"x\": 1}' WHERE cid = %s", (other_cid,))
            conn.execute("INSERT INTO pgcatalog_entries (cid, path, depth) "
                         "VALUES (%s, '/elsewhere/new', 2)", (other_cid,))
            self.assertLess(time.monotonic() - started, 2)
        # registered, not built (queries are answered without it)
        self.assertIsNone(index_state(name))
        self.assertEqual(paths(self.catalog.unrestrictedSearchResults(
            blocker="Edited")), [])       # not reindexed yet
        transaction.commit()
        self.assertIs(index_state(name), True)
        self.catalog.reindexIndex("blocker", None)
        transaction.commit()
        self.assertEqual(paths(self.catalog.unrestrictedSearchResults(
            blocker="Edited")), ["/plone/doc"])

    def _register(self, name):
        self.created.append(name)
        with db.get_pool().connection() as conn:
            conn.execute("INSERT INTO pgcatalog_indexes (cid, name, pg_index)"
                         " VALUES (%s, 'test', %s)",
                         (self.other._pgc_cid(), name))

    def test_a_failed_build_leaves_no_invalid_index(self):
        name = "pgcatalog_x_failtest"
        self._register(name)
        bad = ("CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON "
               "pgcatalog_entries (((idx ->> 'id')::int))" % name)
        self.assertEqual(ddl.build_now(get_dsn(), {name: bad}), [])
        self.assertIsNone(index_state(name))

    def test_an_invalid_index_is_dropped_and_built_again(self):
        name = "pgcatalog_x_invalidtest"
        self._register(name)
        with psycopg.connect(get_dsn(), autocommit=True) as conn:
            # a concurrent build that failed: PostgreSQL leaves it INVALID
            with self.assertRaises(psycopg.Error):
                conn.execute("CREATE INDEX CONCURRENTLY %s ON "
                             "pgcatalog_entries (((idx ->> 'id')::int))"
                             % name)
        self.assertIs(index_state(name), False)
        good = ("CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON "
                "pgcatalog_entries ((idx ->> 'id'))" % name)
        self.assertEqual(ddl.build_now(get_dsn(), {name: good}), [name])
        self.assertIs(index_state(name), True)
        # unregistered names are not built (a rolled-back addIndex)
        self.assertEqual(ddl.build_now(get_dsn(), {
            "pgcatalog_x_unregistered": good.replace(
                name, "pgcatalog_x_unregistered")}), [])
        self.assertIsNone(index_state("pgcatalog_x_unregistered"))

    def test_sync_builds_an_invalid_index_again(self):
        with db.get_pool().connection() as conn:
            if not conn.execute("SELECT rolsuper FROM pg_roles WHERE "
                                "rolname = current_user").fetchone()[0]:
                self.skipTest("marking an index invalid needs a superuser")
            name = conn.execute(
                "SELECT pg_index FROM pgcatalog_indexes WHERE cid = %s AND "
                "name = 'review_state'",
                (self.catalog._pgc_cid(),)).fetchone()[0]
            conn.execute("UPDATE pg_index SET indisvalid = false WHERE "
                         "indexrelid = %s::regclass", (name,))
        self.assertIs(index_state(name), False)
        created, dropped = self.catalog.pgc_sync_indexes()
        self.assertEqual(created, [name])
        transaction.commit()
        self.assertIs(index_state(name), True)


class TestSecurityFiltersCannotBeWeakened(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def test_option_keys_of_the_security_indexes_are_dropped(self):
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        portal.portal_workflow.setChainForPortalTypes(
            ("Document",), ("simple_publication_workflow",))
        portal.invokeFactory("Document", "private_doc", title="Secret")
        transaction.commit()
        logout()
        self.assertEqual(portal.portal_workflow.getInfoFor(
            portal.private_doc, "review_state"), "private")
        catalog = portal.portal_catalog
        for extra in ({"allowedRolesAndUsers_range": "min"},
                      {"allowedRolesAndUsers_operator": "or",
                       "allowedRolesAndUsers_range": "min:max"},
                      {"effectiveRange_usage": "range:min"},
                      {"allowedRolesAndUsers": {"query": [""],
                                                "range": "min"}}):
            self.assertEqual(
                len(catalog(portal_type="Document", **extra)), 0, extra)
            self.assertEqual(len(catalog.searchResults(
                dict(extra, portal_type="Document"))), 0, extra)
            self.assertEqual(len(catalog.search(
                dict(extra, portal_type="Document"))), 0, extra)


class TestHostileContentValues(unittest.TestCase):
    """What an editor can send through plone.restapi gets indexed."""
    layer = PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

    def setUp(self):
        from plone.restapi.testing import RelativeSession
        self.portal = self.layer["portal"]
        self.api = RelativeSession(self.portal.absolute_url(), test=self)
        self.api.headers.update({"Accept": "application/json"})
        self.api.auth = (SITE_OWNER_NAME, SITE_OWNER_PASSWORD)

    def tearDown(self):
        self.api.close()

    def create(self, **data):
        data.setdefault("@type", "Document")
        response = self.api.post("/", json=data)
        self.assertEqual(response.status_code, 201, response.text[:500])
        return response.json()

    def search(self, **params):
        response = self.api.get("/@search", params=params)
        self.assertEqual(response.status_code, 200, response.text[:500])
        return sorted(item["@id"].rsplit("/", 1)[-1]
                      for item in response.json()["items"])

    def test_visitor_urls_that_used_to_fail(self):
        """Anonymous requests that ended in a 500 with PostgreSQL's message
        (stock: 200)."""
        import requests
        url = self.portal.absolute_url()
        with requests.Session() as anonymous:
            found = anonymous.get(url + "/@@search", params={
                "SearchableText": "zope", "b_start:int": "-5"})
            self.assertEqual(found.status_code, 200)
            for params in ({"getId": "a\x00b"},
                           {"SearchableText": "zope", "b_start": "-5",
                            "b_size": "99999999999999999999"},
                           {"path.depth": str(2 ** 40), "path.query": "/"}):
                found = anonymous.get(url + "/++api++/@search",
                                      params=params,
                                      headers={"Accept": "application/json"})
                self.assertEqual(found.status_code, 200, (params,
                                                          found.text[:300]))
                self.assertNotIn("psycopg", found.text)

    def test_subjects_with_nul_and_lone_surrogates(self):
        self.create(id="nul", title="NUL subject", subjects=["a\x00b", "ok"])
        self.create(id="surrogate", title="Surrogate subject",
                    subjects=["x\ud800y"])
        transaction.commit()
        self.assertEqual(self.search(Subject="a\x00b"), ["nul"])
        self.assertEqual(self.search(Subject="ok"), ["nul"])
        self.assertEqual(self.search(Subject="a"), [])
        catalog = self.portal.portal_catalog
        self.assertEqual(
            [b.getId for b in catalog.unrestrictedSearchResults(
                Subject="x\ud800y")], ["surrogate"])
        self.assertIn("a\x00b", catalog.uniqueValuesFor("Subject"))
        brain = catalog.unrestrictedSearchResults(getId="nul")[0]
        self.assertEqual(sorted(brain.Subject), ["a\x00b", "ok"])

    def test_a_title_beyond_the_btree_row_limit(self):
        # (restapi's schema caps titles; Python code does not)
        long_a = "A" * 2000 + "é" * 1500 + " one"
        long_b = "A" * 2000 + "é" * 1500 + " two"
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        for oid, title in (("long-b", long_b), ("long-a", long_a),
                           ("short", "Zz short")):
            self.portal.invokeFactory("Document", oid, title=title)
        transaction.commit()
        catalog = self.portal.portal_catalog
        found = catalog.unrestrictedSearchResults(
            portal_type="Document", sort_on="sortable_title")
        self.assertEqual([b.getId for b in found],
                         ["long-a", "long-b", "short"])
        from Products.CMFPlone.CatalogTool import sortable_title
        key = sortable_title(self.portal["long-b"])()
        self.assertGreater(len(key.encode("utf-8")), 3000)
        self.assertEqual(
            [b.getId for b in catalog.unrestrictedSearchResults(
                sortable_title=key)], ["long-b"])
        self.assertEqual(
            [b.getId for b in catalog.unrestrictedSearchResults(
                portal_type="Document", sort_on="sortable_title",
                sortable_title={"query": key, "range": "min"})],
            ["long-b", "short"])
        self.assertEqual(self.search(sortable_title=key), ["long-b"])
