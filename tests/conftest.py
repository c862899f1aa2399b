"""Fixtures shared by the test modules, and the ``pg`` marker.

A test needs a PostgreSQL server (``pg``) when it runs in a Plone test
layer or its module talks to PostgreSQL, starts processes or reads the
catalog's configuration of a server; the others form the fast tier:
``pytest -m "not pg"`` runs them without a server in seconds.
"""
import pytest

from plone.pgcatalog.schema import migrations


@pytest.fixture
def test_steps():
    """Two schema steps after this release's, made for the tests: one a
    process of the version before keeps running on (it only adds), and one
    it does not."""
    additive = migrations.Step(
        migrations.SCHEMA_VERSION + 1, "a table for the test",
        ["CREATE TABLE pgcatalog_test_step (id integer)",
         "INSERT INTO pgcatalog_test_step VALUES (1), (2)"],
        blocks_writes=False, seconds_per_100k=1.5, compatible=True)
    breaking = migrations.Step(
        migrations.SCHEMA_VERSION + 2, "a column for the test",
        ["ALTER TABLE pgcatalog_test_step ADD COLUMN n integer NOT NULL "
         "DEFAULT 0"], blocks_writes=True, seconds_per_100k=40.0)
    return additive, breaking


@pytest.fixture
def later_release(monkeypatch, test_steps):
    """This process as a release whose schema is the test steps past this
    release's; the test steps."""
    monkeypatch.setattr(migrations, "STEPS", migrations.STEPS + test_steps)
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", test_steps[-1].version)
    return test_steps


#: module globals that mean "this module's tests reach a server" (a driver,
#: the catalog's connections, processes, the test layers and servers)
_SERVER_NAMES = ("psycopg", "db", "subprocess", "zopeprocess", "pgserver",
                 "layers", "PGCATALOG_TESTING", "PGCATALOG_FUNCTIONAL_TESTING",
                 "PGCATALOG_INTEGRATION_TESTING", "config")


def _needs_server(item):
    if getattr(getattr(item, "cls", None), "layer", None) is not None:
        return True
    names = vars(item.module)
    return any(name in names for name in _SERVER_NAMES)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _needs_server(item):
            item.add_marker(pytest.mark.pg)
