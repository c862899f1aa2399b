"""Catalog reads on a real streaming standby (pg/standby.py,
docs/standbys.md): a Plone site whose catalog database has a hot standby
(testing/replication.py); read-only transactions read there, every answer
the objects' own; a standby behind (replay paused), stopped, or a
transaction that writes: the primary, with nothing stale."""
import os
import sys
import time
import unittest
from unittest import mock

import transaction
from plone.app.testing import PLONE_FIXTURE
from plone.app.testing import TEST_USER_ID
from plone.app.testing import PloneSandboxLayer
from plone.app.testing import applyProfile
from plone.app.testing import setRoles
from plone.testing import Layer

import plone.pgcatalog
from plone.pgcatalog import config
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import standby
from plone.pgcatalog.testing.layers import CatalogStateLayerMixin
from plone.pgcatalog.testing.layers import PGCatalogFunctionalTesting
from plone.pgcatalog.testing.replication import ReplicatedServers

sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402

_ENV = ("PGCATALOG_DSN", "PGCATALOG_STANDBY_DSNS", "PGCATALOG_CACHE")


class ReplicatedDatabaseLayer(Layer):
    """A catalog database on a primary with one streaming standby, set as
    PGCATALOG_DSN and PGCATALOG_STANDBY_DSNS; the result cache off (each
    search a statement)."""

    def setUp(self):
        self._old = {name: os.environ.get(name) for name in _ENV}
        self.servers = ReplicatedServers(standbys=1)
        primary, standbys = self.servers.fresh_database("pgcatalog_standby")
        os.environ["PGCATALOG_DSN"] = primary
        os.environ["PGCATALOG_STANDBY_DSNS"] = ";".join(standbys)
        os.environ["PGCATALOG_CACHE"] = "off"
        db.close_pools()
        db.ensure_schema(primary)
        self["replication"] = self.servers

    def tearDown(self):
        db.close_pools()
        standby.forget()
        for name, value in self._old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.servers.close()
        del self["replication"]


REPLICATED_DATABASE = ReplicatedDatabaseLayer()


class StandbyFixture(CatalogStateLayerMixin, PloneSandboxLayer):

    defaultBases = (REPLICATED_DATABASE, PLONE_FIXTURE)

    def setUpZope(self, app, configurationContext):
        self.loadZCML(package=plone.pgcatalog)

    def setUpPloneSite(self, portal):
        applyProfile(portal, "plone.pgcatalog:default")


STANDBY_FUNCTIONAL_TESTING = PGCatalogFunctionalTesting(
    bases=(StandbyFixture(),), name="PGCatalog:Standby")


class TestStandbyReads(unittest.TestCase):
    layer = STANDBY_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.servers = self.layer["replication"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        standby.forget()
        self.addCleanup(standby.forget)

    def create(self, name):
        transaction.begin()
        self.portal.invokeFactory("Document", name, title="Standby " + name)
        transaction.commit()

    def found(self):
        """The ids of the Documents a new read-only transaction finds."""
        transaction.begin()
        try:
            return sorted(b.getId for b in self.catalog.unrestrictedSearchResults(
                portal_type="Document", SearchableText="Standby"))
        finally:
            transaction.commit()

    def counts(self):
        found = standby.status(config.get_dsn())
        return found["primary_served"], found["standbys"][0]

    def test_reads_go_to_the_standby(self):
        self.create("a")
        self.servers.wait_for_replay()
        standby.forget()
        for _ in range(20):
            self.assertEqual(self.found(), ["a"])
        primary, on_standby = self.counts()
        self.assertGreaterEqual(on_standby["served"], 19)
        self.assertLessEqual(primary, 1)
        self.assertGreaterEqual(on_standby["share"], 0.9)

    def test_own_write_seen_while_the_standby_lags(self):
        self.create("before")
        self.servers.wait_for_replay()
        self.servers.pause_replay(0)
        try:
            for n in range(5):
                self.create("lag%d" % n)
                # the next transaction counts the commit: the standby's
                # snapshot lacks it, the primary answers
                self.assertIn("lag%d" % n, self.found())
            primary, on_standby = self.counts()
            self.assertGreaterEqual(on_standby["behind"], 1)
            self.assertGreaterEqual(primary, 5)
        finally:
            self.servers.resume_replay(0)
        self.servers.wait_for_replay()
        time.sleep(standby.BEHIND_PAUSE)
        standby.forget()
        self.assertEqual(self.found(), ["before"] + [
            "lag%d" % n for n in range(5)])
        self.assertEqual(self.counts()[1]["served"], 1)

    def test_a_standby_past_the_lag_bound_is_not_tried(self):
        self.create("before")
        self.servers.wait_for_replay()
        os.environ["PGCATALOG_STANDBY_MAX_LAG"] = "0.5"
        self.addCleanup(os.environ.pop, "PGCATALOG_STANDBY_MAX_LAG", None)
        self.servers.pause_replay(0)
        try:
            self.create("after")
            # received, not replayed: the lag grows past the bound
            time.sleep(1.2)
            standby.forget()
            self.assertEqual(self.found(), ["after", "before"])
            primary, on_standby = self.counts()
            # not tried at all (not found behind: left before a snapshot)
            self.assertEqual((on_standby["served"], on_standby["behind"]),
                             (0, 0))
            self.assertEqual(on_standby["lagging"], 1)
            self.assertGreater(on_standby["lag"], 0.5)
            self.assertEqual(primary, 1)
        finally:
            self.servers.resume_replay(0)
        self.servers.wait_for_replay()
        standby.forget()
        self.assertEqual(self.found(), ["after", "before"])
        _primary, on_standby = self.counts()
        self.assertEqual((on_standby["served"], on_standby["lag"]), (1, 0.0))

    def test_a_stopped_standby_is_left_for_the_primary(self):
        self.create("s1")
        self.servers.wait_for_replay()
        self.servers.stop_standby(0)
        try:
            standby.forget()
            for _ in range(3):
                self.assertEqual(self.found(), ["s1"])
            primary, on_standby = self.counts()
            self.assertEqual(primary, 3)
            self.assertEqual(on_standby["served"], 0)
            self.assertGreaterEqual(on_standby["failed"], 1)
            self.assertTrue(on_standby["paused"])
        finally:
            self.servers.start_standby(0)
        self.servers.wait_for_replay()
        # back in use once its pool reconnected (in the background) and its
        # pause ended; every answer right meanwhile
        standby.FAILED_PAUSE, pause = 0.2, standby.FAILED_PAUSE
        self.addCleanup(setattr, standby, "FAILED_PAUSE", pause)
        deadline = time.monotonic() + 30
        while not self.counts()[1]["served"]:
            self.assertLess(time.monotonic(), deadline)
            self.assertEqual(self.found(), ["s1"])
            time.sleep(0.1)

    def test_a_transaction_that_reads_then_writes(self):
        self.create("r1")
        self.servers.wait_for_replay()
        transaction.begin()
        found = [b.getId for b in self.catalog.unrestrictedSearchResults(
            portal_type="Document", SearchableText="Standby")]
        self.assertEqual(found, ["r1"])
        self.portal.invokeFactory("Document", "r2", title="Standby r2")
        # its own write seen (the primary's snapshot now)
        self.assertEqual(sorted(
            b.getId for b in self.catalog.unrestrictedSearchResults(
                portal_type="Document", SearchableText="Standby")),
            ["r1", "r2"])
        transaction.commit()
        self.assertEqual(self.found(), ["r1", "r2"])
        self.servers.wait_for_replay()
        # and on the standby once replayed
        self.assertEqual(self.found(), ["r1", "r2"])


class TestLagSetting(unittest.TestCase):

    def test_standby_max_lag(self):
        name = "PGCATALOG_STANDBY_MAX_LAG"
        with mock.patch.dict(os.environ):
            os.environ.pop(name, None)
            self.assertEqual(config.get_standby_max_lag(), 10.0)
        for raw, value in (("2.5", 2.5), (" 0 ", 0.0)):
            with mock.patch.dict(os.environ, {name: raw}):
                self.assertEqual(config.get_standby_max_lag(), value)
        for raw in ("-1", "soon", "inf", "nan"):
            with mock.patch.dict(os.environ, {name: raw}):
                with self.assertRaises(ConfigurationError, msg=raw):
                    config.get_standby_max_lag()


class TestStandbyOnly(unittest.TestCase):
    """A standby's connections reach a server in hot standby only: a
    standby promoted to a primary (a failover) is refused, and its reads
    go to the primary."""

    layer = REPLICATED_DATABASE

    def test_a_primary_is_refused_as_a_standby(self):
        import psycopg
        servers = self.layer["replication"]
        with psycopg.connect(standby._standby_only(
                servers.standby_dsns[0])) as conn:
            self.assertTrue(conn.execute(
                "SELECT pg_is_in_recovery()").fetchone()[0])
        with self.assertRaises(psycopg.OperationalError):
            psycopg.connect(standby._standby_only(servers.primary_dsn))
        # a DSN that says what it wants is left as it is
        dsn = servers.primary_dsn + " target_session_attrs=any"
        self.assertEqual(standby._standby_only(dsn), dsn)


class TestStandbyStatus(unittest.TestCase):
    """The status page and the control panel show the standby and what it
    served (the password of its DSN left out)."""

    layer = STANDBY_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.layer["replication"].wait_for_replay()
        standby.forget()
        self.addCleanup(standby.forget)

    def test_status_lists_the_standby(self):
        catalog = self.portal.portal_catalog
        for _ in range(3):
            transaction.begin()
            len(catalog.unrestrictedSearchResults(portal_type="Document"))
            transaction.commit()
        found = catalog.pgc_status()["standbys"]
        self.assertEqual(len(found["standbys"]), 1)
        self.assertEqual(found["standbys"][0]["served"], 3)
        self.assertNotIn("password", found["standbys"][0]["dsn"])
        client = probe.make_client(self.layer["app"])
        for path, text in (
                ("/plone/portal_catalog/manage_catalogStatus",
                 "Read-only transactions served"),
                ("/plone/@@pgcatalog-controlpanel", "read-only")):
            with self.subTest(path=path):
                status, _, body = probe.request(client, "GET", path,
                                                "Manager")
                self.assertEqual(status, 200, body[:1000])
                self.assertIn(text, body)
                self.assertIn(found["standbys"][0]["dsn"], body)
