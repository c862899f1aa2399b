"""The catalog tables: the baseline, the steps after it, and who may apply
them (``plone.pgcatalog.schema.migrations``, ``db.check_schema``).

tests/old_schemas holds the tables of every released schema version
(frozen by tests/old_schemas/freeze.py) with a few rows: each is loaded into
a fresh database and upgraded, and must then equal a freshly created
database (tables, columns with types, collations and defaults, indexes,
constraints, storage options, sequences, triggers, functions) and keep its
rows.  Steps after the baseline are exercised here with steps made for the
test (the product has none yet).
"""
import glob
import os
import re
import threading
import time

import psycopg
import pytest

from plone.pgcatalog import __version__
from plone.pgcatalog.errors import SchemaError
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg import upkeep
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.testing import pgserver

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
        migrations.apply(conn)
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
            "'pgcatalog_hot'::regclass, 'pgcatalog_text'::regclass, "
            "'pgcatalog_langtext'::regclass) AND NOT "
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
    return int(re.match(r"v(\d+)\.sql$", os.path.basename(path)).group(1))


def test_fresh_database_gets_current_version(conn):
    state = migrations.read_state(conn)
    assert state.empty and state.version is None
    assert state.pending() == [migrations.CREATE] + list(migrations.STEPS)
    assert migrations.apply(conn) == [migrations.CREATE] + list(
        migrations.STEPS)
    assert conn.execute(
        "SELECT version, compatible, release FROM pgcatalog_schema"
    ).fetchall() == [(migrations.SCHEMA_VERSION, migrations.BASELINE,
                      __version__)]
    state = migrations.read_state(conn)
    assert state.runs() and state.pending() == []
    # idempotent
    assert migrations.apply(conn) == []


def test_fresh_database_is_the_documented_layout(fresh):
    tables = {r[0]: r[2] for r in fresh["relations"] if r[1] == "r"}
    assert sorted(tables) == sorted([
        "pgcatalog_schema", "pgcatalog_catalogs", "pgcatalog_entries",
        "pgcatalog_meta", "pgcatalog_text", "pgcatalog_commits",
        "pgcatalog_indexes", "pgcatalog_lists", "pgcatalog_hot",
        "pgcatalog_hot_names", "pgcatalog_meta_layouts",
        "pgcatalog_hot_sets", "pgcatalog_hot_counts", "pgcatalog_words",
        "pgcatalog_hot_free_sets", "pgcatalog_langtext",
        "pgcatalog_hot_key_counts", "pgcatalog_text_totals",
        "pgcatalog_text_df", "pgcatalog_postings",
        "pgcatalog_postings_names", "pgcatalog_langpostings"])
    assert set(tables["pgcatalog_entries"].split(",")) == {
        "autovacuum_analyze_scale_factor=0.02",
        "autovacuum_vacuum_scale_factor=0.05", "fillfactor=100",
        "toast_tuple_target=8160"}
    assert tables["pgcatalog_text"] == "toast_tuple_target=8160"
    # language-aware text (schema version 2)
    assert tables["pgcatalog_langtext"] == "toast_tuple_target=8160"
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
        "pgcatalog_hot_count_update", "pgcatalog_hot_langpostings_delete",
        "pgcatalog_hot_langpostings_insert",
        "pgcatalog_hot_langpostings_update",
        "pgcatalog_hot_postings_delete",
        "pgcatalog_hot_postings_insert", "pgcatalog_hot_postings_update",
        "pgcatalog_langtext_postings_delete",
        "pgcatalog_langtext_postings_insert",
        "pgcatalog_langtext_postings_update",
        "pgcatalog_text_postings_delete", "pgcatalog_text_postings_insert",
        "pgcatalog_text_postings_update", "pgcatalog_text_totals_delete",
        "pgcatalog_text_totals_insert", "pgcatalog_text_totals_update",
        "pgcatalog_text_words_insert", "pgcatalog_text_words_update"]
    # the hot keys' codes; metadata layouts (layouts.py)
    assert columns[("pgcatalog_hot_names", "code")][3] == "NO"
    assert columns[("pgcatalog_meta_layouts", "digest")][2] == "C"
    # counts by key set
    indexes = {r[1]: r[2] for r in fresh["indexes"]}
    assert "(sid, lo, hi, rid)" in indexes["pgcatalog_hot_sid"]
    assert "USING gin (keys)" in indexes["pgcatalog_hot_sets_keys"]
    assert columns[("pgcatalog_hot_names", "in_set")][3] == "NO"
    # the key sets' counts
    assert "(sid, cls) INCLUDE (n, first)" in indexes[
        "pgcatalog_hot_counts_sid"]
    assert "WHERE ((hi <> '9223372036854775807'::bigint) OR (rng IS NOT " \
        "NULL))" in indexes["pgcatalog_hot_closed"]
    # the (cid, path) index covers what a subtree reads
    assert "UNIQUE INDEX" in indexes["pgcatalog_entries_path"]
    assert "(cid, path) INCLUDE (depth, rid)" in indexes[
        "pgcatalog_entries_path"]
    # the hot row's copy of its entry's path, covered
    assert columns[("pgcatalog_hot", "path")][2] == "C"
    assert "(path) INCLUDE (sid, lo, hi, rid, rng)" in indexes[
        "pgcatalog_hot_path"]
    # the hot rows fill their pages
    assert "fillfactor=100" in tables["pgcatalog_hot"].split(",")
    # the parent's path computed from the path, not stored
    assert ("pgcatalog_entries", "parent") not in columns
    assert "strpos(reverse(path), '/'::text)" in indexes[
        "pgcatalog_entries_parent"]
    # the hot row names its free keys' set, under a B-tree
    assert columns[("pgcatalog_hot", "kid")][0] == "integer"
    assert "(kid, rid) WHERE (kid IS NOT NULL)" in indexes[
        "pgcatalog_hot_kid"]
    # the free keys' sets in a table of their own
    assert "USING gin (keys)" in indexes["pgcatalog_hot_free_sets_keys"]
    # the free keys counted per set (schema version 4)
    assert "(sid, cls) INCLUDE (key, n)" in indexes[
        "pgcatalog_hot_key_counts_sid"]
    assert columns[("pgcatalog_hot_key_counts", "key")][2] == "C"
    assert columns[("pgcatalog_hot_free_sets", "keys")][2] == "C"


def test_every_schema_version_is_kept_as_a_fixture():
    assert [load_version(p) for p in OLD_SCHEMAS] == list(range(
        migrations.BASELINE, migrations.SCHEMA_VERSION + 1))


def load_version(path):
    return int(re.match(r"v(\d+)\.sql$", os.path.basename(path)).group(1))


@pytest.mark.parametrize("path", OLD_SCHEMAS, ids=os.path.basename)
def test_released_database_upgrades_to_the_fresh_layout(conn, fresh, path):
    version = load(conn, path)
    rows = {table: conn.execute("SELECT * FROM %s ORDER BY 1" % table
                                ).fetchall()
            for table in ("pgcatalog_entries", "pgcatalog_meta",
                          "pgcatalog_catalogs", "pgcatalog_hot_names")}
    text = conn.execute("SELECT rid, name, tsv::text FROM pgcatalog_text "
                        "ORDER BY rid").fetchall()
    state = migrations.read_state(conn)
    assert state.version == version
    assert [s.version for s in state.pending()] == list(range(
        version + 1, migrations.SCHEMA_VERSION + 1))
    migrations.apply(conn)
    assert describe(conn) == fresh
    for table, before in rows.items():
        assert conn.execute("SELECT * FROM %s ORDER BY 1" % table
                            ).fetchall() == before
    assert conn.execute("SELECT rid, name, tsv::text FROM pgcatalog_text "
                        "ORDER BY rid").fetchall() == text
    # the triggers work on the upgraded tables: hot rows, their key sets
    # and counts, the lexicon
    assert conn.execute(
        "SELECT h.rid FROM pgcatalog_hot h LEFT JOIN pgcatalog_entries e "
        "ON e.rid = h.rid WHERE h.path IS DISTINCT FROM e.path"
    ).fetchall() == []
    assert conn.execute("SELECT count(*) FROM pgcatalog_hot").fetchone()[0] \
        == 3
    assert conn.execute(
        "SELECT a.sid, a.cls, a.n, k.n FROM (SELECT sid, "
        "pgcatalog_hot_class(lo, hi, rng) AS cls, count(*) AS n FROM "
        "pgcatalog_hot GROUP BY 1, 2) a FULL JOIN (SELECT sid, cls, sum(n) "
        "AS n FROM pgcatalog_hot_counts GROUP BY 1, 2) k ON k.sid = a.sid "
        "AND k.cls = a.cls WHERE a.n IS DISTINCT FROM k.n").fetchall() == []
    assert conn.execute(
        "SELECT word FROM pgcatalog_words ORDER BY 1").fetchall() == \
        conn.execute(
            "SELECT DISTINCT u.w FROM pgcatalog_text CROSS JOIN LATERAL "
            "unnest(tsvector_to_array(tsv)) AS u(w) WHERE u.w <> chr(3) "
            "ORDER BY 1").fetchall() != []
    # and the database works as a fresh one: new rows get new rids
    conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES ('new')")
    rid = conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth) SELECT "
        "cid, '/new', 1 FROM pgcatalog_catalogs WHERE key = 'new' "
        "RETURNING rid").fetchone()[0]
    assert rid > max(r[0] for r in rows["pgcatalog_entries"])


def test_baseline_in_another_schema(conn):
    """The tables go to the connection's current schema, and the sort key
    function an index expression calls names itself by that schema."""
    conn.execute('CREATE SCHEMA "cat alog"')
    conn.execute('SET search_path = "cat alog"')
    migrations.apply(conn)
    assert conn.execute(
        "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE c.relname = 'pgcatalog_entries'"
    ).fetchall() == [("cat alog",)]
    assert conn.execute(
        "SELECT pgcatalog_json_key('[1, \"a\"]'::jsonb)").fetchone()[0] == \
        "FD3" + "0500000" + "1!C" + "a\x01\x01A"
    # with only pg_catalog on the search path, as an index build runs
    conn.execute("SET search_path = pg_catalog")
    assert conn.execute(
        'SELECT "cat alog".pgcatalog_json_key(\'[[2]]\'::jsonb)'
    ).fetchone()[0].startswith("FF")


# -- steps after the baseline -------------------------------------------------

def test_steps_apply_in_order_with_progress(conn, later_release):
    additive, breaking = later_release
    a, b = additive.version, breaking.version
    # this release's schema, then the test steps after it
    migrations.apply(conn, steps=migrations.STEPS[:-2])
    state = migrations.read_state(conn)
    assert state.version == a - 1 and not state.runs()
    assert state.pending() == [additive, breaking]
    seen = []
    done = migrations.apply(conn, progress=lambda step, event, seconds: (
        seen.append((step.version, event))))
    assert done == [additive, breaking]
    assert seen == [(a, "start"), (a, "done"), (b, "start"), (b, "done")]
    assert conn.execute("SELECT id, n FROM pgcatalog_test_step ORDER BY 1"
                        ).fetchall() == [(1, 0), (2, 0)]
    # the breaking step raised the oldest schema version that runs on it
    assert conn.execute("SELECT version, compatible FROM pgcatalog_schema"
                        ).fetchone() == (b, b)


def test_additive_step_keeps_the_oldest_compatible_version(conn,
                                                           later_release):
    migrations.apply(conn, steps=migrations.STEPS[:-1])
    # every step up to the test's additive one only added
    assert conn.execute("SELECT version, compatible FROM pgcatalog_schema"
                        ).fetchone() == (later_release[0].version,
                                         migrations.BASELINE)
    state = migrations.read_state(conn)
    # a process of the baseline's release runs on it, one of this release
    # not yet
    assert state.runs(migrations.BASELINE)
    assert not state.runs()


def test_a_step_that_fails_leaves_the_version_before(conn, later_release):
    migrations.apply(conn, steps=())
    bad = migrations.Step(2, "fails", ["CREATE TABLE pgcatalog_x_ok (a int)",
                                       "SELECT 1/0"])
    with pytest.raises(psycopg.errors.DivisionByZero):
        migrations.apply(conn, steps=(bad,))
    assert migrations.read_state(conn).version == migrations.BASELINE
    assert conn.execute("SELECT to_regclass('pgcatalog_x_ok')").fetchone() \
        == (None,)


def test_a_migration_in_progress_is_waited_for(database):
    """A process whose catalog connection waits 200 ms for a lock waits
    for another process's migration (the schema lock) instead of failing,
    and finds its work done."""
    dsn, conn = database
    held, release = threading.Event(), threading.Event()

    def migrate():
        with psycopg.connect(dsn, autocommit=True) as other:
            with other.transaction():
                other.execute("SELECT pg_advisory_xact_lock(%s)",
                              (migrations.LOCK,))
                migrations.apply(other)
                held.set()
                release.wait(10)

    thread = threading.Thread(target=migrate)
    thread.start()
    try:
        assert held.wait(10)
        conn.execute("SET lock_timeout = '200ms'")
        threading.Timer(1.0, release.set).start()
        started = time.monotonic()
        assert db.check_schema(conn, "create").version == \
            migrations.SCHEMA_VERSION
        assert time.monotonic() - started >= 0.9
    finally:
        release.set()
        thread.join()
    assert conn.execute("SELECT count(*) FROM pgcatalog_schema").fetchone() \
        == (1,)


# -- who may migrate (schema-migration) --------------------------------------

def test_empty_database_is_created_unless_off(conn):
    with pytest.raises(SchemaError, match=r"no catalog tables.*"
                       r"schema-migration off.*pgcatalog-migrate --apply"):
        db.check_schema(conn, "off")
    assert migrations.read_state(conn).empty
    assert db.check_schema(conn, "create").runs()
    assert db.check_schema(conn, "off").runs()


def test_older_schema_is_refused_unless_upgrade(conn, later_release):
    additive, breaking = later_release
    migrations.apply(conn, steps=())
    for policy in ("create", "off"):
        with pytest.raises(SchemaError) as raised:
            db.check_schema(conn, policy)
        message = str(raised.value)
        assert "schema version 1" in message and \
            "needs version %d" % breaking.version in message
        assert "pgcatalog-migrate --apply" in message
        assert "%d: a table for the test; %d: a column for the test" % (
            additive.version, breaking.version) in message
        assert migrations.read_state(conn).version == 1
    assert db.check_schema(conn, "upgrade").version == breaking.version


def test_newer_schema_is_refused_unless_compatible(conn, test_steps):
    migrations.apply(conn, steps=test_steps)
    newer = test_steps[-1].version
    # this process is of this release: the database's version is made for
    # releases of that version and later
    with pytest.raises(SchemaError, match=r"schema version %d .*cannot work "
                       r"on: upgrade pgcatalog-plone in this process" % newer):
        db.check_schema(conn, "upgrade")
    assert migrations.read_state(conn).version == newer
    # a database only additive steps ahead: it runs (a rolling deploy)
    conn.execute("UPDATE pgcatalog_schema SET compatible = 1")
    assert db.check_schema(conn, "create").version == newer


def test_prerelease_tables_are_refused(conn):
    """Tables of a development version from before the first release have
    no way forward: the message says so, and what to do."""
    conn.execute("CREATE TABLE pgcatalog_schema (version integer NOT NULL)")
    conn.execute("INSERT INTO pgcatalog_schema VALUES (21)")
    conn.execute("CREATE TABLE pgcatalog_entries (rid bigint)")
    state = migrations.read_state(conn)
    assert state.prerelease == 21 and state.pending() == []
    for policy in ("create", "upgrade", "off"):
        with pytest.raises(SchemaError, match=r"development version.*"
                           r"schema version 21.*new database"):
            db.check_schema(conn, policy)
    conn.execute("DROP TABLE pgcatalog_schema")
    assert migrations.read_state(conn).prerelease == 0
    with pytest.raises(SchemaError, match="development version"):
        db.check_schema(conn, "create")


def test_a_process_checks_once_and_caches(database, monkeypatch):
    """``db.ensure_schema`` (every transaction's first catalog use) reads
    the schema once per process and DSN; a refusal is not cached."""
    dsn, conn = database
    monkeypatch.setenv("PGCATALOG_SCHEMA_MIGRATION", "off")
    try:
        with pytest.raises(SchemaError):
            db.ensure_schema(dsn)
        assert dsn not in db._schema_ready
        migrations.apply(conn)
        db.ensure_schema(dsn)
        assert dsn in db._schema_ready
    finally:
        db._schema_ready.discard(dsn)
        pool = db._pools.pop(dsn, None)
        if pool is not None:
            pool.close()


def test_upgrade_marks_hot_values_without_key(conn):
    """Schema version 3: a hot value without key (not a string, too long)
    leaves a mark in its entry's hot row (the index's code and chr(28)),
    for the entries of before the upgrade and after it; the key sets and
    their counts follow."""
    load(conn, os.path.join(os.path.dirname(__file__), "old_schemas",
                            "v2.sql"))
    long_word = "x" * 401
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/n', 2, '{\"portal_type\": 5}'), "
        "(1, '/plone/s', 2, %s), "
        "(1, '/plone/k', 2, '{\"portal_type\": \"News\", \"Subject\": []}')",
        (psycopg.types.json.Jsonb({"portal_type": "Page",
                                   "Subject": ["a", long_word]}),))

    def keys():
        return dict(conn.execute(
            "SELECT e.path, array_to_string(h.keys, ',') FROM "
            "pgcatalog_entries e LEFT JOIN pgcatalog_hot h ON h.rid = e.rid "
            "WHERE e.path IN ('/plone/n', '/plone/s', '/plone/k', "
            "'/plone/later')").fetchall())

    # version 2: nothing says a value was left out
    assert keys() == {"/plone/n": None, "/plone/s": "1\x1fPage,2\x1fa",
                      "/plone/k": "1\x1fNews"}
    migrations.apply(conn)
    assert keys() == {"/plone/n": "1\x1c",
                      "/plone/s": "1\x1fPage,2\x1c,2\x1fa",
                      "/plone/k": "1\x1fNews"}
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/later', 2, '{\"portal_type\": [\"a\"]}')")
    assert keys()["/plone/later"] == "1\x1c"
    # the key sets hold the marks; their counts add up
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_hot h JOIN pgcatalog_hot_sets s ON "
        "s.sid = h.sid WHERE s.keys <> pgcatalog_hot_set_keys(h.cid, h.keys)"
    ).fetchone()[0] == 0
    assert conn.execute(
        "SELECT a.sid, a.n, k.n FROM (SELECT sid, count(*) AS n FROM "
        "pgcatalog_hot GROUP BY 1) a FULL JOIN (SELECT sid, sum(n) AS n FROM "
        "pgcatalog_hot_counts GROUP BY 1) k ON k.sid = a.sid WHERE "
        "coalesce(a.n, 0) <> coalesce(k.n, 0)").fetchall() == []


#: the free keys' counts per set that do not add up to the hot rows
KEY_COUNTS_OFF = """
SELECT coalesce(a.sid, k.sid), coalesce(a.cls, k.cls), coalesce(a.key, k.key),
       coalesce(a.n, 0), coalesce(k.n, 0)
FROM (SELECT h.sid, pgcatalog_hot_class(h.lo, h.hi, h.rng) AS cls, fk.k AS key,
             count(*) AS n
      FROM pgcatalog_hot h JOIN pgcatalog_hot_free_sets f ON f.kid = h.kid,
           unnest(f.keys) AS fk(k) GROUP BY 1, 2, 3) a
FULL JOIN (SELECT sid, cls, key, sum(n) AS n FROM pgcatalog_hot_key_counts
           GROUP BY 1, 2, 3) k
  ON k.sid = a.sid AND k.cls = a.cls AND k.key = a.key
WHERE coalesce(a.n, 0) <> coalesce(k.n, 0)"""


def test_upgrade_counts_free_keys_per_set(conn):
    """Schema version 4: the free keys (Subject's) counted per key set and
    range class, filled by the step and kept by the hot rows' trigger as
    entries come, change their tags, their type or their range, and go."""
    load(conn, os.path.join(os.path.dirname(__file__), "old_schemas",
                            "v3.sql"))
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/t1', 2, '{\"portal_type\": \"Document\", "
        "\"Subject\": [\"a\", \"c\"]}')")
    migrations.apply(conn)
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_hot_key_counts").fetchone()[0] > 0
    assert conn.execute(KEY_COUNTS_OFF).fetchall() == []
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/t2', 2, '{\"portal_type\": \"News\", "
        "\"Subject\": [\"b\"]}')")
    conn.execute(
        "UPDATE pgcatalog_entries SET idx = '{\"portal_type\": \"Document\", "
        "\"Subject\": [\"c\", \"d\"]}' WHERE path = '/plone/t1'")
    assert conn.execute(KEY_COUNTS_OFF).fetchall() == []
    # another type (another key set), the same tags
    conn.execute(
        "UPDATE pgcatalog_entries SET idx = '{\"portal_type\": \"Page\", "
        "\"Subject\": [\"c\", \"d\"]}' WHERE path = '/plone/t1'")
    assert conn.execute(KEY_COUNTS_OFF).fetchall() == []
    conn.execute("DELETE FROM pgcatalog_entries WHERE path = '/plone/t2'")
    assert conn.execute(KEY_COUNTS_OFF).fetchall() == []
    sums = dict(conn.execute(
        "SELECT key, sum(n) FROM pgcatalog_hot_key_counts GROUP BY 1 "
        "HAVING sum(n) <> 0").fetchall())
    assert sums == {"2\x1fa": 1, "2\x1fb": 1, "2\x1fc": 1, "2\x1fd": 1}


TOTALS_OFF = """
SELECT coalesce(a.cid, k.cid), coalesce(a.name, k.name),
       a.docs, a.words, k.docs, k.words
FROM (SELECT t.cid, t.name, count(*) AS docs,
             sum(coalesce(t.dl, (SELECT (u.positions[1] - 1) * 8191
                                        + (u.positions[2] - 8192)
                                 FROM unnest(ts_filter(setweight(
                                     t.tsv, 'A', ARRAY[chr(3)]), '{a}')) u)))
             AS words
      FROM pgcatalog_text t GROUP BY 1, 2) a
FULL JOIN (SELECT cid, name, sum(docs) AS docs, sum(words) AS words
           FROM pgcatalog_text_totals GROUP BY 1, 2
           HAVING sum(docs) <> 0 OR sum(words) <> 0) k
  ON k.cid = a.cid AND k.name = a.name
WHERE (a.docs, a.words) IS DISTINCT FROM (k.docs, k.words)"""


def _text_row(conn, path, name, words, dl=True):
    """Write ``path``'s text row of ``name`` holding ``words`` (the
    marker lexeme carries the count; ``dl``: stored beside it too)."""
    n = len(words)
    tsv = "'\x03':%d,%d " % (n // 8191 + 1, 8192 + n % 8191) + " ".join(
        "'%s':%d" % (w, i + 1) for i, w in enumerate(words))
    conn.execute(
        "INSERT INTO pgcatalog_text AS t (rid, cid, name, tsv, dl) SELECT "
        "e.rid, e.cid, %s, %s::tsvector, %s FROM pgcatalog_entries e WHERE "
        "e.path = %s ON CONFLICT (rid, name) DO UPDATE SET tsv = "
        "EXCLUDED.tsv, dl = EXCLUDED.dl WHERE (t.tsv, t.dl) IS DISTINCT FROM "
        "(EXCLUDED.tsv, EXCLUDED.dl)", (name, tsv, n if dl else None, path))


def test_upgrade_keeps_text_totals(conn):
    """Schema version 5: the text indexes' documents and words per
    catalog, filled by the step (a row without a stored length counted
    from its marker) and kept by the text rows' triggers as rows come,
    change, stay as they are, go with their entry, and are rolled back."""
    load(conn, os.path.join(os.path.dirname(__file__), "old_schemas",
                            "v4.sql"))
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/x1', 2, '{}'), (1, '/plone/x2', 2, '{}'), "
        "(2, '/other/x3', 2, '{}')")
    _text_row(conn, "/plone/x1", "Title", ["a", "b", "c"], dl=False)
    _text_row(conn, "/plone/x1", "SearchableText", ["a", "b", "c", "d"])
    migrations.apply(conn)
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_text_totals").fetchone()[0] > 0
    assert conn.execute(TOTALS_OFF).fetchall() == []
    title = ("SELECT sum(docs), sum(words) FROM pgcatalog_text_totals "
             "WHERE cid = 1 AND name = 'Title'")
    assert conn.execute(title).fetchone() == (1, 3)
    _text_row(conn, "/plone/x2", "Title", ["a"] * 9000)
    _text_row(conn, "/other/x3", "Title", ["z"])
    assert conn.execute(TOTALS_OFF).fetchall() == []
    assert conn.execute(title).fetchone() == (2, 9003)
    # a changed text: its words, not another document
    _text_row(conn, "/plone/x1", "Title", ["a", "b"])
    assert conn.execute(title).fetchone() == (2, 9002)
    before = conn.execute(
        "SELECT count(*) FROM pgcatalog_text_totals").fetchone()[0]
    # the same words again: no row changes, nothing is added
    _text_row(conn, "/plone/x1", "Title", ["a", "b"])
    # a new text of the same length: the sums stay, nothing is added
    _text_row(conn, "/plone/x1", "Title", ["e", "f"])
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_text_totals").fetchone()[0] == before
    with pytest.raises(psycopg.errors.DivisionByZero):
        with conn.transaction():
            _text_row(conn, "/plone/x2", "Title", ["b"])
            conn.execute("SELECT 1 / 0")
    assert conn.execute(title).fetchone() == (2, 9002)
    conn.execute("DELETE FROM pgcatalog_entries WHERE path = '/plone/x2'")
    conn.execute("DELETE FROM pgcatalog_text WHERE name = 'SearchableText'")
    assert conn.execute(TOTALS_OFF).fetchall() == []
    assert conn.execute(title).fetchone() == (1, 2)
    # folded: one row per catalog and index, none for what adds up to 0
    upkeep.fold_hot_counts(conn.info.dsn)
    rows = conn.execute(
        "SELECT cid, name, docs, words FROM pgcatalog_text_totals "
        "ORDER BY 1, 2").fetchall()
    assert conn.execute(TOTALS_OFF).fetchall() == []
    assert [r[:2] for r in rows] == sorted(set(r[:2] for r in rows))
    assert all(r[2] or r[3] for r in rows)


DF_OFF = """
SELECT coalesce(a.cid, k.cid), coalesce(a.name, k.name),
       coalesce(a.word, k.word), a.n, k.n
FROM (SELECT t.cid, t.name, u.word, count(*) AS n FROM pgcatalog_text t,
             unnest(tsvector_to_array(t.tsv)) AS u(word)
      WHERE u.word <> chr(3) GROUP BY 1, 2, 3) a
FULL JOIN (SELECT cid, name, word, sum(n) AS n FROM pgcatalog_text_df
           GROUP BY 1, 2, 3 HAVING sum(n) <> 0) k
  ON k.cid = a.cid AND k.name = a.name AND k.word = a.word
WHERE a.n IS DISTINCT FROM k.n"""


def test_upgrade_keeps_word_frequencies(conn):
    """Schema version 6: the words' document frequencies per catalog and
    text index, filled by the step and kept by the text rows' triggers as
    rows come, change (only the words added or taken off), go with their
    entry, and are rolled back."""
    load(conn, os.path.join(os.path.dirname(__file__), "old_schemas",
                            "v5.sql"))
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/x1', 2, '{}'), (1, '/plone/x2', 2, '{}'), "
        "(2, '/other/x3', 2, '{}')")
    _text_row(conn, "/plone/x1", "Title", ["a", "b", "a"], dl=False)
    migrations.apply(conn)
    assert conn.execute(DF_OFF).fetchall() == []
    df = ("SELECT word, sum(n) FROM pgcatalog_text_df WHERE cid = 1 AND "
          "name = 'Title' GROUP BY 1 HAVING sum(n) <> 0")
    assert dict(conn.execute(df).fetchall()) == {"a": 1, "b": 1}
    _text_row(conn, "/plone/x2", "Title", ["a", "c"])
    _text_row(conn, "/other/x3", "Title", ["a"])
    assert conn.execute(DF_OFF).fetchall() == []
    assert dict(conn.execute(df).fetchall()) == {"a": 2, "b": 1, "c": 1}
    before = conn.execute(
        "SELECT count(*) FROM pgcatalog_text_df").fetchone()[0]
    # a changed text: rows for the words it adds or takes off only
    _text_row(conn, "/plone/x1", "Title", ["a", "d", "a"])
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_text_df").fetchone()[0] == before + 2
    assert dict(conn.execute(df).fetchall()) == {"a": 2, "c": 1, "d": 1}
    with pytest.raises(psycopg.errors.DivisionByZero):
        with conn.transaction():
            _text_row(conn, "/plone/x2", "Title", ["e"])
            conn.execute("SELECT 1 / 0")
    assert conn.execute(DF_OFF).fetchall() == []
    conn.execute("DELETE FROM pgcatalog_entries WHERE path = '/plone/x2'")
    assert conn.execute(DF_OFF).fetchall() == []
    assert dict(conn.execute(df).fetchall()) == {"a": 1, "d": 1}
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_text_df WHERE NOT folded"
    ).fetchone()[0] > 0
    upkeep.fold_hot_counts(conn.info.dsn)
    rows = conn.execute(
        "SELECT cid, name, word, n, folded FROM pgcatalog_text_df"
    ).fetchall()
    assert conn.execute(DF_OFF).fetchall() == []
    assert len(rows) == len(set(r[:3] for r in rows))
    assert all(r[3] and r[4] for r in rows)


#: the postings the text rows of the named indexes and their hot rows give,
#: and those kept, where they differ
POSTINGS_OFF = """
WITH a AS (
    SELECT t.cid, t.name, u.lexeme AS word, t.rid,
           coalesce((t.tf ->> u.lexeme)::float8,
                    CASE WHEN t.tf IS NULL
                         THEN cardinality(u.positions)::float8
                         ELSE 1 END) AS tf,
           t.dl, h.sid, h.lo, h.hi, h.rng
    FROM pgcatalog_text t
    JOIN pgcatalog_postings_names k ON k.name = t.name
    CROSS JOIN LATERAL unnest(t.tsv) u
    LEFT JOIN pgcatalog_hot h ON h.rid = t.rid
    WHERE u.lexeme <> chr(3)),
p AS (SELECT cid, name, word, rid, tf, dl, sid, lo, hi, rng
      FROM pgcatalog_postings)
(SELECT 'missing', * FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM p) m)
UNION ALL
(SELECT 'extra', * FROM (SELECT * FROM p EXCEPT ALL SELECT * FROM a) x)"""


def test_upgrade_keeps_postings(conn):
    """Schema version 7: the postings of the named text indexes (Title by
    default), filled by the step and kept by the triggers as text rows
    come, change and go, as the hot rows' key sets change, and rolled
    back; naming an index writes its postings, taking it off deletes
    them (ops/postings.py)."""
    from plone.pgcatalog.ops import postings
    load(conn, os.path.join(os.path.dirname(__file__), "old_schemas",
                            "v6.sql"))
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/x1', 2, '{\"portal_type\": \"Document\"}'), "
        "(1, '/plone/x2', 2, '{\"portal_type\": \"News Item\"}'), "
        "(2, '/other/x3', 2, '{}')")
    _text_row(conn, "/plone/x1", "Title", ["a", "b", "a"], dl=False)
    _text_row(conn, "/plone/x1", "SearchableText", ["a", "b", "c"])
    migrations.apply(conn)
    assert postings.kept(conn) == ["Title"]
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    title = ("SELECT p.word, p.tf, p.sid IS NOT NULL FROM pgcatalog_postings "
             "p JOIN pgcatalog_entries e ON e.rid = p.rid WHERE e.path = %s "
             "ORDER BY 1")
    assert conn.execute(title, ("/plone/x1",)).fetchall() == [
        ("a", 2.0, True), ("b", 1.0, True)]
    _text_row(conn, "/plone/x2", "Title", ["a", "c"])
    _text_row(conn, "/other/x3", "Title", ["a"])
    _text_row(conn, "/plone/x1", "Title", ["d"])
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    assert conn.execute(title, ("/plone/x1",)).fetchall() == [
        ("d", 1.0, True)]
    # a key set changed, a hot row gone (no key left), and back
    sid = conn.execute(
        "SELECT sid FROM pgcatalog_hot h JOIN pgcatalog_entries e ON "
        "e.rid = h.rid WHERE e.path = '/plone/x2'").fetchone()[0]
    conn.execute("UPDATE pgcatalog_entries SET idx = '{\"portal_type\": "
                 "\"Document\"}' WHERE path = '/plone/x2'")
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    assert conn.execute(
        "SELECT DISTINCT p.sid FROM pgcatalog_postings p JOIN "
        "pgcatalog_entries e ON e.rid = p.rid WHERE e.path = '/plone/x2'"
    ).fetchall() != [(sid,)]
    conn.execute("UPDATE pgcatalog_entries SET idx = '{}' WHERE path = "
                 "'/plone/x2'")
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    conn.execute("UPDATE pgcatalog_entries SET idx = '{\"portal_type\": "
                 "\"Event\"}' WHERE path = '/plone/x2'")
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    with pytest.raises(psycopg.errors.DivisionByZero):
        with conn.transaction():
            _text_row(conn, "/plone/x2", "Title", ["e"])
            conn.execute("UPDATE pgcatalog_entries SET idx = '{}' WHERE "
                         "path = '/plone/x1'")
            conn.execute("SELECT 1 / 0")
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    conn.execute("DELETE FROM pgcatalog_entries WHERE path = '/plone/x2'")
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    # another index named, then Title taken off
    assert postings.keep(conn, ["Title", "SearchableText"]) == (
        ["SearchableText"], [])
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_postings WHERE name = "
        "'SearchableText'").fetchone()[0] > 3
    assert postings.keep(conn, ["SearchableText"]) == ([], ["Title"])
    assert conn.execute(POSTINGS_OFF).fetchall() == []
    assert conn.execute(
        "SELECT DISTINCT name FROM pgcatalog_postings").fetchall() == [
        ("SearchableText",)]
    with pytest.raises(ValueError):
        postings.keep_statements([""])


#: the language postings that differ from their language rows (schema
#: version 9): none when the triggers kept them
LANGPOSTINGS_OFF = """
WITH a AS (
    SELECT l.cid, l.name, l.config, u.lexeme AS word, l.rid,
           coalesce((SELECT sum(CASE w WHEN 'A' THEN 10 WHEN 'B' THEN 4
                                  WHEN 'C' THEN 2 ELSE 1 END)
                     FROM unnest(u.weights) w), 1)::integer AS tf,
           length(l.tsv) AS dl, h.sid, h.lo, h.hi, h.rng
    FROM pgcatalog_langtext l
    CROSS JOIN LATERAL unnest(l.tsv) u
    LEFT JOIN pgcatalog_hot h ON h.rid = l.rid),
p AS (SELECT cid, name, config, word, rid, tf, dl, sid, lo, hi, rng
      FROM pgcatalog_langpostings)
(SELECT 'missing', * FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM p) m)
UNION ALL
(SELECT 'extra', * FROM (SELECT * FROM p EXCEPT ALL SELECT * FROM a) x)"""


def test_upgrade_keeps_language_postings(conn):
    """Schema version 9: the postings of the language rows, filled by the
    step and kept by the triggers as language rows come, change and go and
    as the hot rows' key sets change, and rolled back."""
    load(conn, os.path.join(os.path.dirname(__file__), "old_schemas",
                            "v8.sql"))
    languages = conn.execute(
        "SELECT count(*) FROM pgcatalog_langtext").fetchone()[0]
    assert languages > 0
    migrations.apply(conn)
    assert conn.execute(LANGPOSTINGS_OFF).fetchall() == []
    assert conn.execute(
        "SELECT count(*) FROM pgcatalog_langpostings").fetchone()[0] > 0
    conn.execute(
        "INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES "
        "(1, '/plone/x1', 2, '{\"portal_type\": \"Document\"}')")
    words = ("SELECT p.word, p.tf, p.dl, p.sid IS NOT NULL FROM "
             "pgcatalog_langpostings p JOIN pgcatalog_entries e ON e.rid = "
             "p.rid WHERE e.path = '/plone/x1' ORDER BY 1")
    conn.execute(
        "INSERT INTO pgcatalog_langtext (rid, cid, name, config, tsv) "
        "SELECT rid, 1, 'SearchableText', 'pgcatalog_english', "
        "setweight(to_tsvector('simple', 'oak'), 'A') || "
        "to_tsvector('simple', 'oak elm') FROM pgcatalog_entries WHERE "
        "path = '/plone/x1'")
    assert conn.execute(LANGPOSTINGS_OFF).fetchall() == []
    # oak: A 10 and D 1 (no weight given: D); elm: D 1; two words
    assert conn.execute(words).fetchall() == [
        ("elm", 1, 2, True), ("oak", 11, 2, True)]
    conn.execute("UPDATE pgcatalog_langtext SET tsv = to_tsvector('simple', "
                 "'ash') WHERE rid = (SELECT rid FROM pgcatalog_entries "
                 "WHERE path = '/plone/x1')")
    assert conn.execute(words).fetchall() == [("ash", 1, 1, True)]
    # a key set changed, the hot row gone (no key left)
    conn.execute("UPDATE pgcatalog_entries SET idx = '{\"portal_type\": "
                 "\"Event\"}' WHERE path = '/plone/x1'")
    assert conn.execute(LANGPOSTINGS_OFF).fetchall() == []
    conn.execute("UPDATE pgcatalog_entries SET idx = '{}' WHERE path = "
                 "'/plone/x1'")
    assert conn.execute(LANGPOSTINGS_OFF).fetchall() == []
    with pytest.raises(psycopg.errors.DivisionByZero):
        with conn.transaction():
            conn.execute("DELETE FROM pgcatalog_langtext")
            conn.execute("SELECT 1 / 0")
    assert conn.execute(LANGPOSTINGS_OFF).fetchall() == []
    conn.execute("DELETE FROM pgcatalog_entries WHERE path = '/plone/x1'")
    assert conn.execute(LANGPOSTINGS_OFF).fetchall() == []
    assert conn.execute(words).fetchall() == []
