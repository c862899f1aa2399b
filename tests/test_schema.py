"""The catalog tables: creation and migration of older schema versions."""
import re

import psycopg
import pytest

from plone.pgcatalog.testing import pgserver
from plone.pgcatalog import schema


@pytest.fixture
def conn():
    dsn = pgserver.fresh_database("pgcatalog_schema")
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn
    pgserver.drop_database(dsn)


def _meta_type(conn):
    return conn.execute(
        "SELECT atttypid::regtype::text FROM pg_attribute WHERE attrelid = "
        "'pgcatalog_meta'::regclass AND attname = 'meta'").fetchone()[0]


def _text_options(conn):
    return conn.execute("SELECT reloptions FROM pg_class WHERE oid = "
                        "'pgcatalog_text'::regclass").fetchone()[0]


def _has_stamp(conn):
    return conn.execute(
        "SELECT count(*) FROM pg_attribute WHERE attrelid = "
        "'pgcatalog_catalogs'::regclass AND attname = 'stamp'").fetchone()[
            0] == 1


def test_fresh_database_gets_current_version(conn):
    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION
    assert conn.execute(
        "SELECT version FROM pgcatalog_schema").fetchall() == [
            (schema.SCHEMA_VERSION,)]
    assert _meta_type(conn) == "json"
    assert _text_options(conn) == ["toast_tuple_target=8160"]
    # idempotent
    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION


def test_version_1_metadata_migrated_to_json(conn):
    # the version 1 layout: metadata as jsonb
    for stmt in schema.BASE_DDL:
        stmt = stmt.replace("meta json NOT NULL", "meta jsonb NOT NULL")
        stmt = stmt.replace(") WITH (toast_tuple_target = 8160)", ")")
        conn.execute(re.sub(r"\n\s*stamp bigint[^,]*,", "", stmt))
    assert not _has_stamp(conn)
    assert _text_options(conn) is None
    conn.execute("INSERT INTO pgcatalog_schema VALUES (1)")
    assert _meta_type(conn) == "jsonb"
    conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES ('k')")
    conn.execute("INSERT INTO pgcatalog_entries (cid, path, parent, depth) "
                 "VALUES (1, '/p/a', '/p', 2)")
    conn.execute("INSERT INTO pgcatalog_meta SELECT rid, "
                 "'{\"Title\": \"A\", \"n\": [1, 2]}'::jsonb "
                 "FROM pgcatalog_entries")
    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION
    assert _meta_type(conn) == "json"
    assert _has_stamp(conn)
    assert _text_options(conn) == ["toast_tuple_target=8160"]
    assert conn.execute("SELECT meta FROM pgcatalog_meta").fetchone()[0] == {
        "Title": "A", "n": [1, 2]}
    assert conn.execute("SELECT version FROM pgcatalog_schema").fetchone()[
        0] == schema.SCHEMA_VERSION


def test_newer_schema_is_refused(conn):
    schema.ensure_schema(conn)
    conn.execute("UPDATE pgcatalog_schema SET version = %s",
                 (schema.SCHEMA_VERSION + 1,))
    with pytest.raises(RuntimeError, match="newer"):
        schema.ensure_schema(conn)
