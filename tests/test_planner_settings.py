"""The planner settings of catalog connections (configuration.md).

``parallel-workers`` (default 0), ``random-page-cost`` (default 1.1) and
``jit`` (default off) are set on every pooled connection; ``server`` leaves
the server's value.
"""
import os
import unittest
from unittest import mock

from plone.pgcatalog import config
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.pg import db
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING

WORKERS = "PGCATALOG_PARALLEL_WORKERS"
COST = "PGCATALOG_RANDOM_PAGE_COST"
JIT = "PGCATALOG_JIT"


class TestSettings(unittest.TestCase):

    def test_defaults(self):
        with mock.patch.dict(os.environ):
            os.environ.pop(WORKERS, None)
            os.environ.pop(COST, None)
            os.environ.pop(JIT, None)
            self.assertEqual(config.get_parallel_workers(), 0)
            self.assertEqual(config.get_random_page_cost(), 1.1)
            self.assertEqual(config.get_jit(), "off")

    def test_values(self):
        for raw, value in (("2", 2), (" 0 ", 0), ("server", None)):
            with mock.patch.dict(os.environ, {WORKERS: raw}):
                self.assertEqual(config.get_parallel_workers(), value)
        for raw, value in (("4", 4.0), ("1.5 ", 1.5), ("server", None)):
            with mock.patch.dict(os.environ, {COST: raw}):
                self.assertEqual(config.get_random_page_cost(), value)
        for raw, value in (("on", "on"), (" OFF", "off"), ("server", None)):
            with mock.patch.dict(os.environ, {JIT: raw}):
                self.assertEqual(config.get_jit(), value)
        for env, raw, get in ((JIT, "sometimes", config.get_jit),
                              (WORKERS, "-1", config.get_parallel_workers),
                              (WORKERS, "many", config.get_parallel_workers),
                              (COST, "0", config.get_random_page_cost),
                              (COST, "-1", config.get_random_page_cost),
                              (COST, "nan", config.get_random_page_cost),
                              (COST, "cheap", config.get_random_page_cost)):
            with mock.patch.dict(os.environ, {env: raw}):
                with self.assertRaises(ConfigurationError, msg=raw):
                    get()


class TestConnections(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def settings(self):
        with db.get_pool().connection() as conn:
            return conn.execute(
                "SELECT current_setting('max_parallel_workers_per_gather'), "
                "current_setting('random_page_cost'), "
                "(SELECT boot_val FROM pg_settings WHERE name = "
                "'random_page_cost'), current_setting('jit')").fetchone()

    def test_catalog_connections_have_them(self):
        workers, cost, _, jit = self.settings()
        self.assertEqual((workers, cost, jit), ("0", "1.1", "off"))

    def test_server_keeps_the_servers(self):
        db.close_pools()
        try:
            with mock.patch.dict(os.environ, {WORKERS: "server",
                                              COST: "server",
                                              JIT: "server"}):
                workers, cost, boot, jit = self.settings()
        finally:
            db.close_pools()
        self.assertNotEqual(workers, "0")
        self.assertEqual(cost, boot)
        # (PostgreSQL's default)
        self.assertEqual(jit, "on")
