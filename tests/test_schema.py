"""The catalog tables: creation, and migration of every earlier layout.

tests/old_schemas holds the tables exactly as earlier releases created them
(frozen from the repository's history by tests/old_schemas/freeze.py), with
a few rows: each is loaded into a fresh database and upgraded, and must then
equal a freshly created database (tables, columns with types, collations and
defaults, indexes, constraints, storage options, sequences) and keep its
rows.
"""
import glob
import os
import re

import psycopg
import pytest

from plone.pgcatalog.testing import pgserver
from plone.pgcatalog import schema


OLD_SCHEMAS = sorted(glob.glob(os.path.join(
    os.path.dirname(__file__), "old_schemas", "v*.sql")))


def _database():
    dsn = pgserver.fresh_database("pgcatalog_schema")
    return dsn, psycopg.connect(dsn, autocommit=True)


@pytest.fixture
def database():
    dsn, conn = _database()
    with conn:
        yield dsn, conn
    pgserver.drop_database(dsn)


@pytest.fixture
def conn(database):
    return database[1]


@pytest.fixture(scope="module")
def fresh():
    """The layout of a database created by this version."""
    dsn, conn = _database()
    with conn:
        schema.ensure_schema(conn)
        found = describe(conn)
    pgserver.drop_database(dsn)
    return found


def describe(conn):
    """The catalog tables' layout, as the system catalogs report it
    (independent of column order: columns added by ALTER TABLE come last)."""
    def rows(query):
        return sorted(tuple(r) for r in conn.execute(query).fetchall())
    return {
        "relations": rows(
            "SELECT c.relname, c.relkind::text, "
            "array_to_string(ARRAY(SELECT unnest(c.reloptions) ORDER BY 1), "
            "',') FROM pg_class c WHERE c.relnamespace = current_schema()::"
            "regnamespace AND c.relname LIKE 'pgcatalog%' AND c.relname NOT "
            "LIKE 'pgcatalog\\_x\\_%'"),
        "columns": rows(
            "SELECT table_name, column_name, data_type, udt_name, "
            "coalesce(collation_name, ''), is_nullable, "
            "coalesce(column_default, ''), coalesce(is_identity, '') "
            "FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name LIKE 'pgcatalog%'"),
        "indexes": rows(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE "
            "schemaname = current_schema() AND tablename LIKE 'pgcatalog%' "
            "AND indexname NOT LIKE 'pgcatalog\\_x\\_%'"),
        "constraints": rows(
            "SELECT conrelid::regclass::text, conname, contype::text, "
            "pg_get_constraintdef(oid) FROM pg_constraint WHERE "
            "connamespace = current_schema()::regnamespace AND "
            "conrelid::regclass::text LIKE 'pgcatalog%'"),
        "sequences": rows(
            "SELECT sequence_name, data_type, start_value, increment "
            "FROM information_schema.sequences WHERE sequence_schema = "
            "current_schema()"),
        "owned_sequences": rows(
            "SELECT s.relname, t.relname, a.attname FROM pg_depend d "
            "JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' "
            "JOIN pg_class t ON t.oid = d.refobjid "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND "
            "a.attnum = d.refobjsubid WHERE s.relname LIKE 'pgcatalog%'"),
        "version": rows("SELECT version FROM pgcatalog_schema"),
        "triggers": rows(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE "
            "tgrelid IN ('pgcatalog_entries'::regclass, "
            "'pgcatalog_hot'::regclass, 'pgcatalog_text'::regclass) AND NOT "
            "tgisinternal"),
        "functions": rows(
            "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = "
            "current_schema()::regnamespace AND proname LIKE 'pgcatalog%'"),
    }


def load(conn, path):
    with open(path) as source:
        text = source.read()
    # several statements, no parameters: the simple query protocol
    psycopg.ClientCursor(conn).execute(text)
    return int(re.match(r"v(\d+)-", os.path.basename(path)).group(1))


def _pg_indexes(conn):
    return {r[0] for r in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = "
        "current_schema()").fetchall()}


def _drop_replaced(dsn, conn):
    """``db.ensure_schema`` on ``dsn`` (its pool closed afterwards): the
    indexes a migration replaced are dropped after its commit."""
    from plone.pgcatalog import db
    try:
        db.ensure_schema(dsn)
    finally:
        db._schema_ready.discard(dsn)
        db._pools.pop(dsn).close()
    assert schema.replaced_indexes(conn) == []


def test_fresh_database_gets_current_version(conn):
    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION
    assert conn.execute(
        "SELECT version FROM pgcatalog_schema").fetchall() == [
            (schema.SCHEMA_VERSION,)]
    # idempotent
    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION


def test_fresh_database_is_the_documented_layout(fresh):
    tables = {r[0]: r[2] for r in fresh["relations"] if r[1] == "r"}
    assert sorted(tables) == sorted([
        "pgcatalog_schema", "pgcatalog_catalogs", "pgcatalog_entries",
        "pgcatalog_meta", "pgcatalog_text", "pgcatalog_commits",
        "pgcatalog_indexes", "pgcatalog_lists", "pgcatalog_hot",
        "pgcatalog_hot_names", "pgcatalog_meta_layouts",
        "pgcatalog_hot_sets", "pgcatalog_hot_counts", "pgcatalog_words",
        "pgcatalog_hot_free_sets"])
    assert set(tables["pgcatalog_entries"].split(",")) == {
        "autovacuum_analyze_scale_factor=0.02",
        "autovacuum_vacuum_scale_factor=0.05", "fillfactor=100",
        "toast_tuple_target=8160"}
    assert tables["pgcatalog_text"] == "toast_tuple_target=8160"
    columns = {(r[0], r[1]): r[2:] for r in fresh["columns"]}
    assert columns[("pgcatalog_meta", "meta")][0] == "json"
    assert columns[("pgcatalog_entries", "path")][2] == "C"
    assert columns[("pgcatalog_text", "cid")][3] == "NO"
    assert ("pgcatalog_catalogs", "stamp") in columns
    assert ("pgcatalog_text", "tf") in columns
    assert "pgcatalog_entries_depth" in [r[1] for r in fresh["indexes"]]
    # long keyword lists stored once, found by their values (lists.py)
    assert columns[("pgcatalog_lists", "digest")][2] == "C"
    assert "USING gin (value)" in {r[1]: r[2] for r in fresh["indexes"]}[
        "pgcatalog_lists_value"]
    # the hot keys (hot.py): a narrow row per entry, kept by triggers
    assert "USING gin (keys)" in {r[1]: r[2] for r in fresh["indexes"]}[
        "pgcatalog_hot_keys"]
    assert sorted(r[0] for r in fresh["triggers"]) == [
        "pgcatalog_entries_hot", "pgcatalog_entries_hot_update",
        "pgcatalog_hot_count_delete", "pgcatalog_hot_count_insert",
        "pgcatalog_hot_count_update", "pgcatalog_text_words_insert",
        "pgcatalog_text_words_update"]
    # version 8: the hot keys' codes; metadata layouts (layouts.py)
    assert columns[("pgcatalog_hot_names", "code")][3] == "NO"
    assert columns[("pgcatalog_meta_layouts", "digest")][2] == "C"
    # version 9: counts by key set
    indexes = {r[1]: r[2] for r in fresh["indexes"]}
    assert "(sid, lo, hi, rid)" in indexes["pgcatalog_hot_sid"]
    assert "USING gin (keys)" in indexes["pgcatalog_hot_sets_keys"]
    assert columns[("pgcatalog_hot_names", "in_set")][3] == "NO"
    # version 10: the key sets' counts
    assert "(sid, cls) INCLUDE (n, first)" in indexes[
        "pgcatalog_hot_counts_sid"]
    assert "WHERE ((hi <> '9223372036854775807'::bigint) OR (rng IS NOT " \
        "NULL))" in indexes["pgcatalog_hot_closed"]
    # version 12: the (cid, path) index covers what a subtree reads
    assert "UNIQUE INDEX" in indexes["pgcatalog_entries_path"]
    assert "(cid, path) INCLUDE (depth, rid)" in indexes[
        "pgcatalog_entries_path"]
    # version 13: the hot row's copy of its entry's path, covered
    assert columns[("pgcatalog_hot", "path")][2] == "C"
    assert "(path) INCLUDE (sid, lo, hi, rid, rng)" in indexes[
        "pgcatalog_hot_path"]
    # version 14: the hot rows fill their pages
    assert "fillfactor=100" in tables["pgcatalog_hot"].split(",")
    # version 16: the parent's path computed from the path, not stored
    assert ("pgcatalog_entries", "parent") not in columns
    assert "strpos(reverse(path), '/'::text)" in indexes[
        "pgcatalog_entries_parent"]
    # version 18: the hot row names its free keys' set, under a B-tree
    assert columns[("pgcatalog_hot", "kid")][0] == "integer"
    assert "(kid, rid) WHERE (kid IS NOT NULL)" in indexes[
        "pgcatalog_hot_kid"]
    # version 19: the free keys' sets in a table of their own
    assert "USING gin (keys)" in indexes["pgcatalog_hot_free_sets_keys"]
    assert columns[("pgcatalog_hot_free_sets", "keys")][2] == "C"


def test_every_old_layout_is_kept_as_a_fixture():
    assert {re.match(r"v(\d+)-", os.path.basename(p)).group(1)
            for p in OLD_SCHEMAS} == {
                str(v) for v in range(1, schema.SCHEMA_VERSION)}


@pytest.mark.parametrize("path", OLD_SCHEMAS, ids=os.path.basename)
def test_old_database_upgrades_to_the_fresh_layout(conn, fresh, path):
    version = load(conn, path)
    assert schema.schema_version(conn) == version
    entries = conn.execute(
        "SELECT rid, cid, path, depth, idx FROM pgcatalog_entries "
        "ORDER BY rid").fetchall()
    meta = conn.execute("SELECT rid, meta::text::jsonb FROM pgcatalog_meta "
                        "ORDER BY rid").fetchall()
    text = conn.execute("SELECT rid, name, tsv::text FROM pgcatalog_text "
                        "ORDER BY rid").fetchall()
    counters = conn.execute("SELECT cid, key, counter FROM "
                            "pgcatalog_catalogs ORDER BY cid").fetchall()

    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION

    assert describe(conn) == fresh
    # the rows survived, in the current layout
    assert conn.execute(
        "SELECT rid, cid, path, depth, idx FROM pgcatalog_entries "
        "ORDER BY rid").fetchall() == entries
    assert conn.execute("SELECT rid, meta FROM pgcatalog_meta "
                        "ORDER BY rid").fetchall() == meta
    assert conn.execute("SELECT rid, name, tsv::text FROM pgcatalog_text "
                        "ORDER BY rid").fetchall() == text
    assert conn.execute(
        "SELECT t.rid FROM pgcatalog_text t JOIN pgcatalog_entries e "
        "ON e.rid = t.rid WHERE t.cid <> e.cid").fetchall() == []
    assert conn.execute("SELECT cid, key, counter FROM pgcatalog_catalogs "
                        "ORDER BY cid").fetchall() == counters
    # the shared (cid, depth) index of the ExtendedPathIndex kind is gone
    assert schema.index_name("pgcatalog", "path", "depth").as_string(
        None).strip('"') not in _pg_indexes(conn)
    # and the database works as a fresh one: new rows get new rids
    conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES ('new')")
    rid = conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth) SELECT "
        "cid, '/new', 1 FROM pgcatalog_catalogs WHERE key = 'new' "
        "RETURNING rid").fetchone()[0]
    assert rid > max(r[0] for r in entries)
    # hot rows of an older version name their key set (version 9), which
    # holds their keys but Subject's
    assert conn.execute(
        "SELECT h.rid FROM pgcatalog_hot h LEFT JOIN pgcatalog_hot_sets s "
        "ON s.sid = h.sid AND s.cid = h.cid WHERE s.keys IS DISTINCT FROM "
        "pgcatalog_hot_set_keys(h.cid, h.keys)").fetchall() == []
    if version == 8:
        assert conn.execute(
            "SELECT count(*) FROM pgcatalog_hot WHERE sid IS NOT NULL"
        ).fetchone()[0] == 3
        assert sorted(r[0] for r in conn.execute(
            "SELECT s.keys FROM pgcatalog_hot h JOIN pgcatalog_hot_sets s "
            "ON s.sid = h.sid WHERE h.cid = 1").fetchall()) == [
                ["1\x1fDocument"], ["1\x1fPlone Site"]]
    # hot rows of an older version carry their entry's path (version 13)
    assert conn.execute(
        "SELECT h.rid FROM pgcatalog_hot h LEFT JOIN pgcatalog_entries e "
        "ON e.rid = h.rid WHERE h.path IS DISTINCT FROM e.path"
    ).fetchall() == []
    if version >= 8:
        assert conn.execute("SELECT count(*) FROM pgcatalog_hot WHERE "
                            "path IS NOT NULL").fetchone()[0] >= 3
    # the key sets' counts (version 10) add up to their hot rows
    assert conn.execute(
        "SELECT a.sid, a.cls, a.n, k.n FROM (SELECT sid, "
        "pgcatalog_hot_class(lo, hi, rng) AS cls, count(*) AS n FROM "
        "pgcatalog_hot GROUP BY 1, 2) a FULL JOIN (SELECT sid, cls, sum(n) "
        "AS n FROM pgcatalog_hot_counts GROUP BY 1, 2) k ON k.sid = a.sid "
        "AND k.cls = a.cls WHERE a.n IS DISTINCT FROM k.n").fetchall() == []
    if version >= 8:
        assert conn.execute(
            "SELECT sum(n) FROM pgcatalog_hot_counts").fetchone()[0] == 3
    # the lexicon (version 11) holds the words of the text rows
    assert conn.execute(
        "SELECT word FROM pgcatalog_words ORDER BY 1").fetchall() == \
        conn.execute(
            "SELECT DISTINCT u.w FROM pgcatalog_text CROSS JOIN LATERAL "
            "unnest(tsvector_to_array(tsv)) AS u(w) WHERE u.w <> chr(3) "
            "ORDER BY 1").fetchall() != []
    # idempotent
    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION


def test_text_indexes_built_again_on_their_words(database):
    """Version 15: a text index's GIN index registered in the version 14
    form (``gin (tsv) WHERE name = ...``, shared by the catalogs using the
    name) is built again in the form the text index wants now, registered
    under its new name for every catalog, and the old one dropped after
    the migration's commit (``db.ensure_schema``: concurrently); what is
    not a text index's is left alone."""
    from plone.pgcatalog import ddl
    from plone.pgcatalog.indexes.text import PGZCTextIndex

    dsn, conn = database

    path = [p for p in OLD_SCHEMAS if os.path.basename(p).startswith(
        "v14-")][0]
    load(conn, path)
    old = {}
    for name in ("SearchableText", "it's \\ odd"):
        old[name], stmt = schema.IndexSpec(
            "tsv", "USING gin (tsv)", table=schema.TEXT, where="name = %s"
            % psycopg.sql.Literal(name).as_string(None),
            shared=True).statement(1, name)
        conn.execute(stmt, ())
        conn.execute("INSERT INTO pgcatalog_indexes (cid, name, pg_index) "
                     "VALUES (1, %s, %s), (2, %s, %s)",
                     (name, old[name], name, old[name]))

    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION

    # the old ones, no longer registered, are left to drop after the commit
    assert schema.replaced_indexes(conn) == sorted(old.values())
    assert set(old.values()) <= _pg_indexes(conn)
    _drop_replaced(dsn, conn)

    found = _pg_indexes(conn)
    registered = conn.execute(
        "SELECT cid, name, pg_index FROM pgcatalog_indexes ORDER BY 1, 2"
        ).fetchall()
    expected = []
    for name in sorted(old):
        assert old[name] not in found
        index = PGZCTextIndex.__new__(PGZCTextIndex)
        index.id = name
        (new,) = ddl.wanted(index, 1)
        assert new in found
        expected.append(new)
    assert registered == [
        (1, "SearchableText", expected[0]), (1, "it's \\ odd", expected[1]),
        (1, "portal_type", "pgcatalog_x_0123456789ab"),
        (2, "SearchableText", expected[0]), (2, "it's \\ odd", expected[1])]
    # the text rows are found by their index, estimated from its rows
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT 1 FROM pgcatalog_text t WHERE (CASE WHEN t.name "
            "= 'SearchableText' THEN t.tsv END) @@ 'doc'::tsquery"
        ).fetchall())
    assert expected[0] in plan, plan
    assert conn.execute(
        "SELECT count(*) FROM pg_stats WHERE tablename = %s",
        (expected[0],)).fetchone()[0] == 1


def test_value_b_trees_built_again_deduplicated(database):
    """Version 17: a value index's B-tree registered in the version 16
    form (its first key the ``jsonb`` value, NULL for a string) is built
    again with a text key (``pgcatalog_json_key``), registered under its
    new name for every catalog, the old one dropped after the migration's
    commit; PostgreSQL deduplicates the new one (a repeated value is one
    key), which equality and sorting use; what is not a value index's is
    left alone."""
    from plone.pgcatalog import ddl
    from plone.pgcatalog.indexes.field import PGFieldIndex

    dsn, conn = database
    path = [p for p in OLD_SCHEMAS if os.path.basename(p).startswith(
        "v16-")][0]
    load(conn, path)
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) SELECT 1, "
        "'/plone/n' || i, 1, jsonb_build_object('portal_type', CASE WHEN "
        "i %% 3 = 0 THEN 'Document' ELSE 'Folder' END, 'it''s %% odd', i "
        "%% 7) FROM generate_series(1, 3000) i", ())
    old = {}
    for name in ("portal_type", "it's % odd"):
        old[name], stmt = schema._v16_value_sort(name)
        conn.execute(stmt, ())
        conn.execute("INSERT INTO pgcatalog_indexes (cid, name, pg_index) "
                     "VALUES (1, %s, %s), (2, %s, %s)",
                     (name, old[name], name, old[name]))
    before = {name: conn.execute("SELECT pg_relation_size(%s)", (
        old[name],)).fetchone()[0] for name in old}

    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION

    assert schema.replaced_indexes(conn) == sorted(old.values())
    _drop_replaced(dsn, conn)

    found = _pg_indexes(conn)
    new = {}
    for name in old:
        assert old[name] not in found
        index = PGFieldIndex.__new__(PGFieldIndex)
        index.id = name
        (new[name],) = ddl.wanted(index, 1)
        assert new[name] in found
        # deduplicated: a third of the size or less
        assert conn.execute("SELECT pg_relation_size(%s)", (
            new[name],)).fetchone()[0] * 3 <= before[name], name
    registered = conn.execute(
        "SELECT cid, name, pg_index FROM pgcatalog_indexes WHERE pg_index "
        "<> 'pgcatalog_x_0123456789ab' ORDER BY 1, 2").fetchall()
    assert registered == sorted(
        (cid, name, new[name]) for cid in (1, 2) for name in old)

    index = PGFieldIndex.__new__(PGFieldIndex)
    index.id = "it's % odd"
    for where, order in ((index.pgc_eq_sql([3]), ()),
                         (psycopg_true(), common_sort(index))):
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_bitmapscan = off")
            statement = "SELECT e.rid FROM pgcatalog_entries e WHERE %s" % (
                where.text,)
            if order:
                statement += " ORDER BY %s LIMIT 5" % ", ".join(
                    k.text for k in order)
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN " + statement, where.params).fetchall())
            assert new["it's % odd"] in plan, plan
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_entries e WHERE " +
        index.pgc_eq_sql([3, 4.0]).text, index.pgc_eq_sql([3, 4.0]).params
    ).fetchone()[0] == 858


def test_free_keys_sets_moved_to_their_own_table(database):
    """Version 19: the free keys' sets a hot row names (``kid``, version
    18, then rows of ``pgcatalog_hot_sets``) move to
    ``pgcatalog_hot_free_sets`` with their ids, leave the key sets, and a
    new set gets an id no moved one has."""
    _dsn, conn = database
    path = [p for p in OLD_SCHEMAS if os.path.basename(p).startswith(
        "v18-")][0]
    load(conn, path)
    conn.execute("DELETE FROM pgcatalog_entries")
    conn.execute("DELETE FROM pgcatalog_hot_names")
    conn.execute(
        "INSERT INTO pgcatalog_hot_names (cid, name, multi, code, kind, "
        "in_set) VALUES (1, 'Subject', true, '1', 'keys', false), (1, "
        "'portal_type', false, '2', 'keys', true)")
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/a', 1, '{\"Subject\": [\"x\", \"y\"], "
        "\"portal_type\": \"Document\"}'), (1, '/plone/b', 1, "
        "'{\"Subject\": [\"x\"], \"portal_type\": \"Document\"}'), "
        "(1, '/plone/c', 1, '{\"portal_type\": \"Folder\"}')")
    before = dict((p, (sid, kid)) for p, sid, kid in conn.execute(
        "SELECT e.path, h.sid, h.kid FROM pgcatalog_hot h JOIN "
        "pgcatalog_entries e ON e.rid = h.rid").fetchall())
    assert before["/plone/c"][1] is None
    kids = {before["/plone/a"][1], before["/plone/b"][1]}

    assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION

    assert dict((p, (sid, kid)) for p, sid, kid in conn.execute(
        "SELECT e.path, h.sid, h.kid FROM pgcatalog_hot h JOIN "
        "pgcatalog_entries e ON e.rid = h.rid").fetchall()) == before
    assert sorted(conn.execute(
        "SELECT kid, keys FROM pgcatalog_hot_free_sets ORDER BY kid"
    ).fetchall()) == sorted([
        (before["/plone/a"][1], ["1\x1fx", "1\x1fy"]),
        (before["/plone/b"][1], ["1\x1fx"])])
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_hot_sets WHERE sid = ANY(%s)",
        (list(kids),)).fetchone()[0] == 0
    # the key sets stay
    assert conn.execute(
        "SELECT s.keys FROM pgcatalog_hot_sets s JOIN pgcatalog_hot h ON "
        "h.sid = s.sid JOIN pgcatalog_entries e ON e.rid = h.rid WHERE "
        "e.path = '/plone/a'").fetchone()[0] == ["2\x1fDocument"]
    # a new free keys' set: a new id
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/d', 1, '{\"Subject\": [\"z\"]}')")
    kid = conn.execute(
        "SELECT h.kid FROM pgcatalog_hot h JOIN pgcatalog_entries e ON "
        "e.rid = h.rid WHERE e.path = '/plone/d'").fetchone()[0]
    assert kid not in kids
    assert conn.execute("SELECT keys FROM pgcatalog_hot_free_sets WHERE "
                        "kid = %s", (kid,)).fetchone()[0] == ["1\x1fz"]


def psycopg_true():
    from plone.pgcatalog.fragment import TRUE
    return TRUE


def common_sort(index):
    from plone.pgcatalog.indexes import common
    return common.sort_sql(index)


def test_a_migration_in_progress_is_waited_for(database):
    """A process whose catalog connection waits 200 ms for a lock waits
    for another process's migration (the DDL lock) instead of failing."""
    import threading
    import time

    dsn, conn = database
    schema.ensure_schema(conn)
    held, release = threading.Event(), threading.Event()

    def migrate():
        with psycopg.connect(dsn, autocommit=True) as other:
            with other.transaction():
                other.execute("SELECT pg_advisory_xact_lock(%s)",
                              (schema.DDL_LOCK,))
                held.set()
                release.wait(10)

    thread = threading.Thread(target=migrate)
    thread.start()
    try:
        assert held.wait(10)
        conn.execute("SET lock_timeout = '200ms'")
        threading.Timer(1.0, release.set).start()
        started = time.monotonic()
        assert schema.ensure_schema(conn) == schema.SCHEMA_VERSION
        assert time.monotonic() - started >= 0.9
    finally:
        release.set()
        thread.join()


def test_steps_are_append_only():
    """Version 1 is the DDL the first release ran, verbatim (the frozen
    v1 fixture of that release), whatever the current layout is."""
    first = os.path.join(os.path.dirname(__file__), "old_schemas",
                         "v1-3abbf57.sql")
    with open(first) as source:
        frozen = source.read()
    for stmt in schema._V1:
        assert stmt + ";" in frozen
    assert schema.STEPS[0] is schema._v1
    assert schema.SCHEMA_VERSION == len(schema.STEPS)


def test_newer_schema_is_refused(conn):
    schema.ensure_schema(conn)
    conn.execute("UPDATE pgcatalog_schema SET version = %s",
                 (schema.SCHEMA_VERSION + 1,))
    with pytest.raises(RuntimeError, match="newer"):
        schema.ensure_schema(conn)

