"""The catalog's tables, created and upgraded automatically.

Layout (one set of tables per database, every row scoped by catalog ``cid``):

``pgcatalog_schema``
    one row: the schema version, for migrations.
``pgcatalog_catalogs``
    one row per catalog (a Plone site's portal_catalog), keyed by the random
    key the tool got at creation; holds the transactional change counter
    (``getCounter``).
``pgcatalog_entries``
    the hot row: ``rid``, ``cid``, ``path`` / ``parent`` / ``depth`` (the
    physical path, ``COLLATE "C"`` so ranges and ordering are by code point as
    in ZCatalog), and ``idx``: every index value in one JSONB document.
``pgcatalog_meta``
    the brain metadata (typed codec), read lazily by rid batches.  Stored
    as ``json`` (the text as written), not ``jsonb``: it is never queried
    inside, only sent back whole, and ``json`` goes out as a plain copy where
    ``jsonb`` would be serialised again on every read (measured: 0.44 ->
    0.25 ms for a window of 32 brains).
``pgcatalog_text``
    one ``tsvector`` row per (entry, text index): full text is kept out of
    the hot row; ``dl`` / ``tf`` (word count, term frequencies) feed the
    Okapi score; rows up to 8 KB stay uncompressed (``toast_tuple_target``).

Per-index PostgreSQL indexes (B-tree expression indexes, GIN for keyword
lists, partial GIN for each text index) are created by the index kinds'
``pgc_ddl`` when ``addIndex`` runs; they are shared by every catalog in the
database that uses the same index name.
"""
import hashlib

from psycopg import sql


SCHEMA_VERSION = 3

ENTRIES = "pgcatalog_entries"
META = "pgcatalog_meta"
TEXT = "pgcatalog_text"
CATALOGS = "pgcatalog_catalogs"

# Lock id for pg_advisory_xact_lock while creating/migrating the schema.
_DDL_LOCK = 0x70676361  # "pgca"

BASE_DDL = [
    """CREATE TABLE IF NOT EXISTS pgcatalog_schema (
        version integer NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS pgcatalog_catalogs (
        cid serial PRIMARY KEY,
        key text NOT NULL UNIQUE,
        counter bigint NOT NULL DEFAULT 0,
        stamp bigint NOT NULL DEFAULT 0,
        created timestamptz NOT NULL DEFAULT now()
    )""",
    "CREATE SEQUENCE IF NOT EXISTS pgcatalog_rid_seq",
    """CREATE TABLE IF NOT EXISTS pgcatalog_entries (
        rid bigint PRIMARY KEY DEFAULT nextval('pgcatalog_rid_seq'),
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        path text COLLATE "C" NOT NULL,
        parent text COLLATE "C" NOT NULL,
        depth integer NOT NULL,
        idx jsonb NOT NULL DEFAULT '{}'::jsonb
    ) WITH (toast_tuple_target = 8160, fillfactor = 90,
            autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.02)""",
    """CREATE UNIQUE INDEX IF NOT EXISTS pgcatalog_entries_path
        ON pgcatalog_entries (cid, path)""",
    """CREATE INDEX IF NOT EXISTS pgcatalog_entries_parent
        ON pgcatalog_entries (cid, parent)""",
    """CREATE TABLE IF NOT EXISTS pgcatalog_meta (
        rid bigint PRIMARY KEY REFERENCES pgcatalog_entries ON DELETE CASCADE,
        meta json NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS pgcatalog_text (
        rid bigint NOT NULL REFERENCES pgcatalog_entries ON DELETE CASCADE,
        cid integer NOT NULL,
        name text NOT NULL,
        tsv tsvector NOT NULL,
        dl integer,
        tf jsonb,
        PRIMARY KEY (rid, name)
    ) WITH (toast_tuple_target = 8160)""",
]


def index_name(*parts):
    """A stable, valid PostgreSQL index name for an index kind's DDL."""
    digest = hashlib.sha1("\x00".join(parts).encode("utf-8")).hexdigest()[:12]
    return sql.Identifier(f"pgcatalog_x_{digest}")


def ensure_schema(conn):
    """Create or upgrade the tables (idempotent; safe with concurrent
    processes thanks to an advisory lock).  ``conn`` is in autocommit mode."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
        row = conn.execute(
            "SELECT to_regclass('pgcatalog_schema') IS NOT NULL").fetchone()
        version = 0
        if row[0]:
            found = conn.execute(
                "SELECT max(version) FROM pgcatalog_schema").fetchone()[0]
            version = found or 0
        if version == SCHEMA_VERSION:
            return version
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                "The catalog tables have schema version %s, newer than this "
                "plone.pgcatalog (%s): upgrade the package." % (
                    version, SCHEMA_VERSION))
        for stmt in BASE_DDL:
            conn.execute(stmt)
        for migrate in MIGRATIONS[version:]:
            migrate(conn)
        conn.execute("DELETE FROM pgcatalog_schema")
        conn.execute("INSERT INTO pgcatalog_schema (version) VALUES (%s)",
                     (SCHEMA_VERSION,))
    return SCHEMA_VERSION


def _v1(conn):
    """Version 1: the base tables (created above)."""


def _v2(conn):
    """Version 2: metadata as ``json`` (sent back as stored) instead of
    ``jsonb`` (serialised again on every read); the catalogs' change
    ``stamp``."""
    conn.execute("ALTER TABLE pgcatalog_catalogs ADD COLUMN IF NOT EXISTS "
                 "stamp bigint NOT NULL DEFAULT 0")
    found = conn.execute(
        "SELECT atttypid::regtype::text FROM pg_attribute WHERE attrelid = "
        "'pgcatalog_meta'::regclass AND attname = 'meta'").fetchone()
    if found and found[0] == "jsonb":
        conn.execute("ALTER TABLE pgcatalog_meta ALTER COLUMN meta TYPE json "
                     "USING meta::text::json")


def _v3(conn):
    """Version 3: text rows up to 8 KB stay in line, uncompressed.  The
    score reads each matched row's term frequencies (``tf``); compressed,
    that cost a pglz decompression per row (24 ms -> 8 ms for 2,332 rows
    measured).  Rows written before keep their compression until they are
    rewritten (a reindex, or ``VACUUM FULL pgcatalog_text``)."""
    conn.execute("ALTER TABLE pgcatalog_text SET (toast_tuple_target = 8160)")


#: MIGRATIONS[n] upgrades from version n to n+1.
MIGRATIONS = [_v1, _v2, _v3]


def ensure_index_ddl(conn, statements):
    """Run an index kind's DDL statements (CREATE INDEX IF NOT EXISTS ...)."""
    if not statements:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
        for stmt in statements:
            conn.execute(stmt)
