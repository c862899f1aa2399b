"""A least-privilege role for the running processes (docs/upgrade.md).

The tables belong to their owner (who runs ``pgcatalog-migrate``); the
processes' role gets, with ``pgcatalog-migrate --grant ROLE``, rows to read
and write and nothing else.  A site then searches, writes, reindexes and
commits (two-phase) as that role; adding a catalog index registers it, and
its PostgreSQL index is built by ``pgc_sync_indexes()`` run as the owner
(the role may not build one: logged, the queries stay right)."""
import io
import logging
import os
import unittest
import uuid

import psycopg
import transaction
from plone.app.testing import TEST_USER_ID
from plone.app.testing import setRoles
from Products.PluginIndexes.FieldIndex.FieldIndex import FieldIndex
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo

from plone.pgcatalog.cli import migrate
from plone.pgcatalog.errors import SchemaError
from plone.pgcatalog.pg import db
from plone.pgcatalog.schema import ddl
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


class TestLeastPrivilegeRole(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        self.owner_dsn = os.environ["PGCATALOG_DSN"]
        self.role = "pgc_app_%s" % uuid.uuid4().hex[:8]
        password = uuid.uuid4().hex
        with psycopg.connect(self.owner_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL(
                "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB "
                "NOCREATEROLE").format(sql.Identifier(self.role),
                                       sql.Literal(password)))
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(conninfo_to_dict(self.owner_dsn)["dbname"]),
                sql.Identifier(self.role)))
        self.addCleanup(self.drop_role)
        params = conninfo_to_dict(self.owner_dsn)
        params.update(user=self.role, password=password)
        self.app_dsn = make_conninfo(**params)
        setRoles(self.portal, TEST_USER_ID, ["Manager"])

    def drop_role(self):
        self.use(self.owner_dsn)
        with psycopg.connect(self.owner_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(
                sql.Identifier(self.role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(
                sql.Identifier(self.role)))

    def use(self, dsn):
        """The processes' DSN from now on (the next transaction's)."""
        transaction.abort()
        os.environ["PGCATALOG_DSN"] = dsn

    def grant(self):
        out, err = io.StringIO(), io.StringIO()
        status = migrate.main(["--dsn", self.owner_dsn, "--grant",
                               self.role], out=out, err=err)
        self.assertEqual(status, migrate.CURRENT, err.getvalue())
        self.assertIn("granted %s what running processes need" % self.role,
                      out.getvalue())

    def test_without_the_grants_nothing_works(self):
        self.use(self.app_dsn)
        try:
            with self.assertRaises(SchemaError) as raised:
                len(self.catalog(portal_type="Document"))
            self.assertIn("pgcatalog-migrate --grant %s" % self.role,
                          str(raised.exception))
        finally:
            self.use(self.owner_dsn)

    def test_the_granted_role_runs_a_site(self):
        self.grant()
        with psycopg.connect(self.app_dsn, autocommit=True) as conn:
            self.assertFalse(db.owns_tables(conn))
        self.use(self.app_dsn)
        try:
            # writes, a search, a reindex, a move, a delete; committed with
            # two-phase commit
            self.portal.invokeFactory("Document", "least", title="Leastrole")
            transaction.commit()
            self.assertEqual([b.getId for b in self.catalog(
                SearchableText="Leastrole")], ["least"])
            self.portal.least.setTitle("Leastrole again")
            self.portal.least.reindexObject()
            transaction.commit()
            self.assertEqual(self.catalog(
                SearchableText="again")[0].Title, "Leastrole again")
            # a new catalog index: registered, its PostgreSQL index not
            # built by this role (logged), queries right without it
            with self.assertLogs("plone.pgcatalog", logging.WARNING) as logs:
                self.catalog.addIndex("leastidx", FieldIndex("leastidx"))
                transaction.commit()
                ddl.wait_for_builds(60)
            self.assertIn("does not own the catalog tables",
                          "\n".join(logs.output))
            self.assertEqual(self.built(), [])
            self.assertEqual(len(self.catalog(leastidx="nothing")), 0)
            self.portal.manage_delObjects(["least"])
            transaction.commit()
            self.assertEqual(len(self.catalog(SearchableText="Leastrole")), 0)
        finally:
            self.use(self.owner_dsn)
        # the owner builds what is missing
        self.catalog.pgc_sync_indexes()
        transaction.commit()
        ddl.wait_for_builds(60)
        self.assertNotEqual(self.built(), [])
        self.catalog.delIndex("leastidx")
        transaction.commit()

    def built(self):
        """The valid PostgreSQL indexes registered for ``leastidx``."""
        with psycopg.connect(self.owner_dsn, autocommit=True) as conn:
            return [row[0] for row in conn.execute(
                "SELECT r.pg_index FROM pgcatalog_indexes r JOIN pg_class c "
                "ON c.relname = r.pg_index JOIN pg_index i ON i.indexrelid "
                "= c.oid WHERE r.name = 'leastidx' AND i.indisvalid"
            ).fetchall()]
