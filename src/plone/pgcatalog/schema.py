"""The catalog's tables, created and upgraded automatically.

Layout (one set of tables per database, every row scoped by catalog ``cid``):

``pgcatalog_schema``
    one row: the schema version, for migrations.
``pgcatalog_catalogs``
    one row per catalog (a Plone site's portal_catalog), keyed by the random
    key the tool got at creation; holds the transactional change counter
    (``getCounter``).
``pgcatalog_entries``
    the hot row: ``rid``, ``cid``, ``path`` / ``depth`` (the physical path,
    ``COLLATE "C"`` so ranges and ordering are by code point as in
    ZCatalog; its parent's path is computed from it, :func:`parent_sql`),
    and ``idx``: every index value in one JSONB document.
``pgcatalog_meta`` / ``pgcatalog_meta_layouts``
    the brain metadata (typed codec), read lazily by rid batches; each
    record an array of values naming its layout, the column names stored
    once per layout (:mod:`plone.pgcatalog.layouts`).  Stored
    as ``json`` (the text as written), not ``jsonb``: it is never queried
    inside, only sent back whole, and ``json`` goes out as a plain copy where
    ``jsonb`` would be serialised again on every read (measured: 0.44 ->
    0.25 ms for a window of 32 brains).
``pgcatalog_text``
    one ``tsvector`` row per (entry, text index): full text is kept out of
    the hot row; ``dl`` / ``tf`` (word count, term frequencies) feed the
    Okapi score; rows up to 8 KB stay uncompressed (``toast_tuple_target``).

``pgcatalog_commits``
    one row per committed writing transaction of a catalog (its change
    count): insert-only, so concurrent writers never conflict on a shared
    counter row; folded into ``pgcatalog_catalogs`` from time to time
    (``db.compact_commit_log``).  ``getCounter`` and the change stamp read both.
``pgcatalog_indexes``
    which PostgreSQL indexes each catalog's index uses (the registry:
    ``delIndex`` drops what ``addIndex`` created, a shared index when its
    last user goes).
``pgcatalog_lists``
    long keyword lists stored once, by digest (an entry's ``idx`` holds
    the digest): shared by the catalogs, never updated
    (:mod:`plone.pgcatalog.lists`).
``pgcatalog_hot`` / ``pgcatalog_hot_names``
    the hot keys: one narrow row per entry holding the string values of a
    few hot field and keyword indexes (``portal_type``, ``review_state``,
    ``allowedRolesAndUsers``, ``Subject`` by default) as ``name<US>value``
    texts under
    one GIN index, kept by a trigger on ``pgcatalog_entries``; counts and
    every-match answers on those indexes alone are read there, never from
    the wide row (:mod:`plone.pgcatalog.hot`); with a subtree too, from
    the row's copy of its entry's path (version 13).
``pgcatalog_hot_sets`` / ``pgcatalog_hot_counts``
    the hot rows' key sets (their keys but ``Subject``'s), which each hot
    row names, and the number of hot rows of each set, kept by a trigger
    as insert-only +1 / -1 rows folded from time to time: a count of many
    matches reads a few rows per set (:mod:`plone.pgcatalog.hot`).
``pgcatalog_hot_free_sets``
    the hot rows' keys outside the key sets (``Subject``'s) as sets of
    their own, which the hot row names (``kid``, version 18; a table of
    their own since version 19) under a B-tree of ``(kid, rid)``: a search
    on tags alone is read from that index alone.

Per-index PostgreSQL indexes are described by the index kinds
(``pgc_indexes``: :class:`IndexSpec`), registered when ``addIndex`` runs and
built once its transaction committed (:mod:`plone.pgcatalog.ddl`).  An index
whose expressions cannot fail on any stored value (a FieldIndex's, a
BooleanIndex's, DateRecurringIndex's B-trees; GIN indexes of keyword lists
and text) is shared by the catalogs using the same name and kind, over
every row: PostgreSQL keeps statistics of its expressions, which its
planner reads as a column's.  A DateIndex's B-tree casts the value to
``bigint``, which another catalog's value under the same name (another
kind) could fail: it is partial, one per catalog (``WHERE cid = N``), and
has a statistics object of its own (:func:`ensure_statistics`).

Migrations (the end of this module) are append-only: ``STEPS[0]`` is the
DDL version 1 created, verbatim, and every later step only alters what the
steps before it made.  A fresh database runs them all; a database of
version ``n`` runs those after ``n``.  To change the schema, append a step
and bump nothing else; never edit a step (databases made by it exist).
"""
import hashlib

from psycopg import sql


ENTRIES = "pgcatalog_entries"
META = "pgcatalog_meta"
TEXT = "pgcatalog_text"
CATALOGS = "pgcatalog_catalogs"
COMMITS = "pgcatalog_commits"
INDEXES = "pgcatalog_indexes"
LISTS = "pgcatalog_lists"
HOT = "pgcatalog_hot"
HOT_NAMES = "pgcatalog_hot_names"
HOT_SETS = "pgcatalog_hot_sets"
HOT_COUNTS = "pgcatalog_hot_counts"
HOT_FREE_SETS = "pgcatalog_hot_free_sets"
WORDS = "pgcatalog_words"
META_LAYOUTS = "pgcatalog_meta_layouts"

# Lock id for pg_advisory_xact_lock while creating/migrating the schema.
DDL_LOCK = 0x70676361  # "pgca"
#: (this, hashtext(name)): one process at a time builds or drops a
#: PostgreSQL index of the catalog (plone.pgcatalog.ddl)
INDEX_LOCK = 0x70676369  # "pgci"
#: (this, cid): one process at a time folds a catalog's commit log
COMPACT_LOCK = 0x70676363  # "pgcc"
#: one process at a time folds the key sets' counts (db.fold_hot_counts)
FOLD_LOCK = 0x70676366  # "pgcf"

class IndexSpec:
    """A PostgreSQL index an index kind wants.

    ``table``: the table (``ENTRIES`` or ``TEXT``); ``body``: what follows
    ``ON <table>``: ``"((idx -> 'x'))"``, ``"USING gin ((idx -> 'x'))"``,
    written over the table's columns (no alias); ``where``: an extra
    predicate or None; ``shared``: one index for every catalog using the
    same name and kind, over every row (its expressions cannot fail on
    another catalog's values), else a partial index on one catalog's rows
    (``WHERE cid = N``)."""

    __slots__ = ("tag", "table", "body", "where", "shared")

    def __init__(self, tag, body, table=ENTRIES, where=None, shared=False):
        self.tag = tag
        self.table = table
        self.body = body
        self.where = where
        self.shared = shared

    def statement(self, cid, index_id, concurrently=False):
        """``(PostgreSQL index name, CREATE INDEX statement)`` for catalog
        ``cid``'s index ``index_id`` (``CREATE INDEX CONCURRENTLY`` with
        ``concurrently``: outside a transaction block only)."""
        parts = [self.tag, index_id, self.body, self.where or ""]
        where = [self.where] if self.where else []
        if not self.shared:
            parts.append(str(int(cid)))
            where.insert(0, sql.SQL("cid = {}").format(
                sql.Literal(int(cid))).as_string(None))
        name = index_name(*parts)
        stmt = sql.SQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} {}{}"
            if concurrently else
            "CREATE INDEX IF NOT EXISTS {} ON {} {}{}").format(
            name, sql.Identifier(self.table), sql.SQL(self.body),
            sql.SQL(" WHERE " + " AND ".join(where) if where else ""))
        return name.as_string(None).strip('"'), stmt


def index_name(*parts):
    """A stable, valid PostgreSQL index name for an index kind's DDL."""
    digest = hashlib.sha1("\x00".join(parts).encode("utf-8")).hexdigest()[:12]
    return sql.Identifier(f"pgcatalog_x_{digest}")


def index_statements(index, cid):
    """The CREATE INDEX statements of an index object for catalog ``cid``
    (tests and tools; the tool registers them too: plone.pgcatalog.ddl)."""
    return [spec.statement(cid, index.getId())[1]
            for spec in index.pgc_indexes()]


def ensure_index_ddl(conn, statements):
    """Run CREATE INDEX statements (under the DDL lock; with an empty
    parameter tuple, as their literals double ``%``)."""
    if not statements:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
        for stmt in statements:
            conn.execute(stmt, ())


# -- migrations (append-only) -----------------------------------------------
#
# Each step upgrades a database of version ``n - 1`` to version ``n``.  A
# version number stood, in past releases, for more than one layout: the base
# DDL was edited without a new version (text rows' ``cid``, ``dl`` and
# ``tf``, the entries' storage options at version 1; the catalogs' ``stamp``
# at version 2), and upgrades ran the edited base DDL, whose ``CREATE ...
# IF NOT EXISTS`` left existing tables as they were.  Step 5 brings every
# such layout to one; tests/test_schema.py loads each layout (frozen from the
# repository's history, tests/old_schemas) and compares the result with a
# fresh database.

#: Version 1: the tables as plone.pgcatalog first created them.  Frozen.
_V1 = [
    """CREATE TABLE IF NOT EXISTS pgcatalog_schema (
        version integer NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS pgcatalog_catalogs (
        cid serial PRIMARY KEY,
        key text NOT NULL UNIQUE,
        counter bigint NOT NULL DEFAULT 0,
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
    )""",
    """CREATE UNIQUE INDEX IF NOT EXISTS pgcatalog_entries_path
        ON pgcatalog_entries (cid, path)""",
    """CREATE INDEX IF NOT EXISTS pgcatalog_entries_parent
        ON pgcatalog_entries (cid, parent)""",
    """CREATE TABLE IF NOT EXISTS pgcatalog_meta (
        rid bigint PRIMARY KEY REFERENCES pgcatalog_entries ON DELETE CASCADE,
        meta jsonb NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS pgcatalog_text (
        rid bigint NOT NULL REFERENCES pgcatalog_entries ON DELETE CASCADE,
        name text NOT NULL,
        tsv tsvector NOT NULL,
        PRIMARY KEY (rid, name)
    )""",
]


def _v1(conn):
    """Version 1: the base tables."""
    for stmt in _V1:
        conn.execute(stmt)


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


def _v4(conn):
    """Version 4: the commit log (a change counter writers never conflict
    on), the registry of the PostgreSQL indexes each catalog uses, the
    (cid, depth) index in the base schema.  The shared expression indexes
    of earlier versions stay until ``pgc_sync_indexes`` (or
    ``reindexIndex``) replaces them with per-catalog ones; the counter moves
    as it is."""
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_entries_depth
        ON pgcatalog_entries (cid, depth)""")
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_commits (
        id bigserial PRIMARY KEY,
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        delta bigint NOT NULL
    )""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_commits_cid
        ON pgcatalog_commits (cid)""")
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_indexes (
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        name text NOT NULL,
        pg_index text NOT NULL,
        PRIMARY KEY (cid, name, pg_index)
    )""")
    # the ExtendedPathIndex kind's shared (cid, depth) index, replaced by
    # pgcatalog_entries_depth
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(
        index_name("pgcatalog", "path", "depth")))


def _v5(conn):
    """Version 5: what earlier releases changed in the base DDL without a
    migration, for databases created before the change: text rows'
    catalog id (filled from their entries), word count and term
    frequencies (empty until a row is written again: reindex the text
    indexes of a catalog made before they existed); the entries' storage
    options
    (rows in line and uncompressed, eager autovacuum); the catalogs'
    ``stamp`` (a version 2 database made before it was added)."""
    conn.execute("ALTER TABLE pgcatalog_catalogs ADD COLUMN IF NOT EXISTS "
                 "stamp bigint NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE pgcatalog_entries SET ("
                 "toast_tuple_target = 8160, fillfactor = 90, "
                 "autovacuum_vacuum_scale_factor = 0.05, "
                 "autovacuum_analyze_scale_factor = 0.02)")
    conn.execute("ALTER TABLE pgcatalog_text ADD COLUMN IF NOT EXISTS "
                 "cid integer")
    conn.execute("UPDATE pgcatalog_text t SET cid = e.cid FROM "
                 "pgcatalog_entries e WHERE t.cid IS NULL AND e.rid = t.rid")
    conn.execute("ALTER TABLE pgcatalog_text ALTER COLUMN cid SET NOT NULL")
    conn.execute("ALTER TABLE pgcatalog_text ADD COLUMN IF NOT EXISTS "
                 "dl integer")
    conn.execute("ALTER TABLE pgcatalog_text ADD COLUMN IF NOT EXISTS "
                 "tf jsonb")


def _v6(conn):
    """Version 6: long keyword lists stored once (``pgcatalog_lists``, see
    :mod:`plone.pgcatalog.lists`), so that the entries' hot row stays
    narrow.  Entries written before keep their lists in line (both forms
    are read alike) until they are written again, or until
    ``portal_catalog.pgc_store_long_lists()`` moves them."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_lists (
        digest text COLLATE "C" PRIMARY KEY,
        value jsonb NOT NULL
    )""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_lists_value
        ON pgcatalog_lists USING gin (value)""")


_V7_KEYS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_keys(p_cid integer, p_idx jsonb)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT n.name || chr(31) || (v.x #>> '{}')),
                    '{}'::text[])
    FROM pgcatalog_hot_names n
    CROSS JOIN LATERAL jsonb_array_elements(CASE
        WHEN NOT n.multi THEN jsonb_build_array(p_idx -> n.name)
        WHEN jsonb_typeof(p_idx -> n.name) = 'array' THEN p_idx -> n.name
        WHEN jsonb_typeof(p_idx -> n.name) = 'string' THEN (
            SELECT l.value FROM pgcatalog_lists l
            WHERE l.digest = (p_idx ->> n.name))
        END) AS v(x)
    WHERE n.cid = p_cid AND jsonb_typeof(v.x) = 'string'
      AND length(v.x #>> '{}') <= 400
$$"""

_V7_SYNC = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        INSERT INTO pgcatalog_hot (rid, cid, keys)
        VALUES (NEW.rid, NEW.cid, found)
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys
        WHERE pgcatalog_hot.keys IS DISTINCT FROM EXCLUDED.keys;
    END IF;
    RETURN NULL;
END
$$"""


def _v7(conn):
    """Version 7: the hot keys (:mod:`plone.pgcatalog.hot`): a narrow row
    per entry with the string values of the catalog's hot indexes, kept by
    a trigger on ``pgcatalog_entries``.  Empty until a catalog registers
    its hot indexes (``addIndex``, ``pgc_sync_indexes``)."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_hot_names (
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        name text NOT NULL,
        multi boolean NOT NULL,
        PRIMARY KEY (cid, name)
    )""")
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_hot (
        rid bigint PRIMARY KEY,
        cid integer NOT NULL,
        keys text[] COLLATE "C" NOT NULL
    ) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.02)""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_keys
        ON pgcatalog_hot USING gin (keys)""")
    conn.execute(_V7_KEYS)
    conn.execute(_V7_SYNC)
    for name in ("pgcatalog_entries_hot", "pgcatalog_entries_hot_update"):
        conn.execute("DROP TRIGGER IF EXISTS %s ON pgcatalog_entries" % name)
    conn.execute("""CREATE TRIGGER pgcatalog_entries_hot
        AFTER INSERT OR DELETE ON pgcatalog_entries
        FOR EACH ROW EXECUTE FUNCTION pgcatalog_hot_sync()""")
    # an update that leaves the index values as they were costs no call
    conn.execute("""CREATE TRIGGER pgcatalog_entries_hot_update
        AFTER UPDATE OF idx ON pgcatalog_entries FOR EACH ROW
        WHEN (OLD.idx IS DISTINCT FROM NEW.idx)
        EXECUTE FUNCTION pgcatalog_hot_sync()""")


_V8_KEYS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_keys(p_cid integer, p_idx jsonb)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT s.k), '{}'::text[]) FROM (
        SELECT n.code || chr(31) || (v.x #>> '{}') AS k
        FROM pgcatalog_hot_names n
        CROSS JOIN LATERAL jsonb_array_elements(CASE
            WHEN NOT n.multi THEN jsonb_build_array(p_idx -> n.name)
            WHEN jsonb_typeof(p_idx -> n.name) = 'array' THEN p_idx -> n.name
            WHEN jsonb_typeof(p_idx -> n.name) = 'string' THEN (
                SELECT l.value FROM pgcatalog_lists l
                WHERE l.digest = (p_idx ->> n.name))
            END) AS v(x)
        WHERE n.cid = p_cid AND n.kind = 'keys'
          AND jsonb_typeof(v.x) = 'string' AND length(v.x #>> '{}') <= 400
        UNION ALL
        SELECT n.code || chr(30) || (p_idx ->> n.name)
        FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND n.kind = 'bool'
          AND jsonb_typeof(p_idx -> n.name) = 'boolean'
    ) s
$$"""

_V8_RANGE = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_range(p_cid integer, p_idx jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT p_idx -> n.name FROM pgcatalog_hot_names n
    WHERE n.cid = p_cid AND n.kind = 'range' ORDER BY n.name LIMIT 1
$$"""

# The range index's value in the hot row: [since, until] of integers or
# nulls (what DateRangeIndex stores) as two bigints, an open end as the
# type's bound; any other value as it is (rng), compared as the entry is.
_V8_BOUNDS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_bounds(
    p_cid integer, p_idx jsonb, OUT lo bigint, OUT hi bigint, OUT rng jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v jsonb;
    a jsonb;
    b jsonb;
BEGIN
    v := pgcatalog_hot_range(p_cid, p_idx);
    IF v IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(v) = 'array' THEN
        IF jsonb_array_length(v) = 2 THEN
            a := v -> 0;
            b := v -> 1;
            IF (jsonb_typeof(a) = 'null' OR (jsonb_typeof(a) = 'number'
                    AND (a #>> '{}') ~ '^-?[0-9]{1,18}$'))
               AND (jsonb_typeof(b) = 'null' OR (jsonb_typeof(b) = 'number'
                    AND (b #>> '{}') ~ '^-?[0-9]{1,18}$')) THEN
                lo := coalesce((a #>> '{}')::bigint, -9223372036854775808);
                hi := coalesce((b #>> '{}')::bigint, 9223372036854775807);
                RETURN;
            END IF;
        END IF;
    END IF;
    rng := v;
END
$$"""

_V8_SYNC = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng)
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng) IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng);
    END IF;
    RETURN NULL;
END
$$"""


def _v8(conn):
    """Version 8: metadata layouts (:mod:`plone.pgcatalog.layouts`): a
    record's column names stored once per layout; records are written as
    arrays naming their layout.  Records written before keep the object
    form (both are read alike) until their entry is written again.

    The hot keys name their index by a short code (``pgcatalog_hot_names.
    code``) instead of its name; BooleanIndex values are keys too, and the
    hot row keeps one DateRangeIndex's bounds (``lo``, ``hi``; ``rng``
    for a value of another shape), so that the security filters Plone
    adds (``effectiveRange``) are answered there.  The keys of version 7 are dropped with
    their registrations: a catalog's indexes are answered from the entries
    until ``pgc_sync_indexes`` registers them again (GenericSetup upgrade
    1002 -> 1003)."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_meta_layouts (
        digest text COLLATE "C" PRIMARY KEY,
        names jsonb NOT NULL
    )""")
    conn.execute("DELETE FROM pgcatalog_hot")
    conn.execute("DELETE FROM pgcatalog_hot_names")
    conn.execute("ALTER TABLE pgcatalog_hot_names ADD COLUMN IF NOT EXISTS "
                 "code text NOT NULL")
    # what the index gives the hot row: string keys (FieldIndex,
    # KeywordIndex), a boolean key (BooleanIndex, ``code<RS>true``) or its
    # bounds (one DateRangeIndex per catalog: ``rng``, as ``idx`` has them)
    conn.execute("ALTER TABLE pgcatalog_hot_names ADD COLUMN IF NOT EXISTS "
                 "kind text NOT NULL DEFAULT 'keys'")
    conn.execute("ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS "
                 "lo bigint")
    conn.execute("ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS "
                 "hi bigint")
    conn.execute("ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS "
                 "rng jsonb")
    conn.execute(_V8_KEYS)
    conn.execute(_V8_RANGE)
    conn.execute(_V8_BOUNDS)
    conn.execute(_V8_SYNC)


# The hot row's key set (version 9): its keys without those of the indexes
# left out of the sets (``pgcatalog_hot_names.in_set`` false: ``Subject`` by
# default, whose values make nearly every entry's set its own), sorted.
_V9_SET_KEYS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_set_keys(p_cid integer,
                                                  p_keys text[])
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(k.k ORDER BY k.k), '{}'::text[])
    FROM unnest(p_keys) AS k(k)
    WHERE NOT EXISTS (
        SELECT 1 FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND NOT n.in_set
          AND left(k.k, length(n.code) + 1) IN (n.code || chr(31),
                                                n.code || chr(30)))
$$"""

# The set's id, the set inserted when new.  Sets are never updated; a
# concurrent first insert of the same set is waited for (and, under
# REPEATABLE READ, ends this transaction with a serialization failure: a
# ConflictError, retried).
_V9_SET = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_set(p_cid integer, p_keys text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    s text[];
    d text;
    r integer;
BEGIN
    s := pgcatalog_hot_set_keys(p_cid, p_keys);
    d := md5(array_to_string(s, chr(29)));
    SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
        AND digest = d;
    IF r IS NULL THEN
        INSERT INTO pgcatalog_hot_sets (cid, digest, keys)
        VALUES (p_cid, d, s) ON CONFLICT (cid, digest) DO NOTHING
        RETURNING sid INTO r;
        IF r IS NULL THEN
            SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
                AND digest = d;
        END IF;
    END IF;
    RETURN r;
END
$$"""

_V9_SYNC = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng, sid)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found))
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid) IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid);
    END IF;
    RETURN NULL;
END
$$"""


def _v9(conn):
    """Version 9: hot rows counted by key set.  A hot row's keys, less
    those of the indexes left out of the sets, are one row of
    ``pgcatalog_hot_sets``; the hot row names it (``sid``), and a B-tree on
    ``(sid, lo, hi, rid) INCLUDE (rng)`` answers a count of the rows of
    some sets (within a date) from the index alone (hot.py).  ``Subject`` is left out of the
    sets here (the default ``hot-set-exclude``); the index objects learn
    which of their keys are in sets when ``pgc_sync_indexes`` registers
    them again (GenericSetup upgrade 1003 -> 1004): until then every query
    reads the keys, as in version 8."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_hot_sets (
        sid integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        digest text COLLATE "C" NOT NULL,
        keys text[] COLLATE "C" NOT NULL,
        UNIQUE (cid, digest)
    )""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_sets_keys
        ON pgcatalog_hot_sets USING gin (keys)""")
    conn.execute("ALTER TABLE pgcatalog_hot_names ADD COLUMN IF NOT EXISTS "
                 "in_set boolean NOT NULL DEFAULT true")
    conn.execute("UPDATE pgcatalog_hot_names SET in_set = false WHERE "
                 "name = 'Subject'")
    conn.execute("ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS "
                 "sid integer")
    conn.execute(_V9_SET_KEYS)
    conn.execute(_V9_SET)
    conn.execute(_V9_SYNC)
    conn.execute("UPDATE pgcatalog_hot SET sid = pgcatalog_hot_set(cid, "
                 "keys)")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_sid
        ON pgcatalog_hot (sid, lo, hi, rid) INCLUDE (rng)""")


# The class of a hot row's range value (version 10): 0 none, 1 open (a
# start, no end: within the range from its start on), 2 any other (an end,
# or a value of another shape).
_V10_CLASS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_class(p_lo bigint, p_hi bigint,
                                               p_rng jsonb)
RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE WHEN p_rng IS NOT NULL THEN 2 WHEN p_lo IS NULL THEN 0
                 WHEN p_hi = 9223372036854775807 THEN 1 ELSE 2 END)::smallint
$$"""

# A hot row written, moved to another set or range class, or gone: one
# insert-only row of +1 / -1 (writers never wait for each other here);
# ``first``, the row's rid, keeps a lower bound of the set's rids.
_V10_COUNT = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.sid IS NOT NULL THEN
        INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first)
        VALUES (OLD.cid, OLD.sid,
                pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng), -1, OLD.rid);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.sid IS NOT NULL THEN
        INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first)
        VALUES (NEW.cid, NEW.sid,
                pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng), 1, NEW.rid);
    END IF;
    RETURN NULL;
END
$$"""


def _v10(conn):
    """Version 10: the key sets' counts.  ``pgcatalog_hot_counts`` holds,
    per key set and range class, rows whose ``n`` add up to the number of
    hot rows of that set and class: a trigger on ``pgcatalog_hot`` inserts
    +1 / -1 rows (insert-only, so concurrent writers never conflict), and
    ``db.fold_hot_counts`` folds a set's rows into one from time to time.
    A count of the rows of some sets reads their few rows instead of one
    index tuple per match (hot.py)."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_hot_counts (
        cid integer NOT NULL,
        sid integer NOT NULL,
        cls smallint NOT NULL,
        n bigint NOT NULL,
        first bigint NOT NULL
    ) WITH (autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.05)""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_counts_sid
        ON pgcatalog_hot_counts (sid, cls) INCLUDE (n, first)""")
    conn.execute(_V10_CLASS)
    conn.execute(_V10_COUNT)
    conn.execute("""INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n,
        first) SELECT cid, sid, pgcatalog_hot_class(lo, hi, rng), count(*),
        min(rid) FROM pgcatalog_hot WHERE sid IS NOT NULL
        GROUP BY 1, 2, 3""")
    for name in ("insert", "delete", "update"):
        conn.execute("DROP TRIGGER IF EXISTS pgcatalog_hot_count_%s ON "
                     "pgcatalog_hot" % name)
    conn.execute("""CREATE TRIGGER pgcatalog_hot_count_insert
        AFTER INSERT ON pgcatalog_hot FOR EACH ROW
        EXECUTE FUNCTION pgcatalog_hot_count()""")
    conn.execute("""CREATE TRIGGER pgcatalog_hot_count_delete
        AFTER DELETE ON pgcatalog_hot FOR EACH ROW
        EXECUTE FUNCTION pgcatalog_hot_count()""")
    # an update within the same set and class costs no call
    conn.execute("""CREATE TRIGGER pgcatalog_hot_count_update
        AFTER UPDATE ON pgcatalog_hot FOR EACH ROW
        WHEN (OLD.sid IS DISTINCT FROM NEW.sid
              OR pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng) IS DISTINCT
                 FROM pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng))
        EXECUTE FUNCTION pgcatalog_hot_count()""")
    # the range rows counted one by one (hot.py): those with an end or of
    # another shape, few
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_closed
        ON pgcatalog_hot (sid, lo, hi) INCLUDE (rng)
        WHERE hi <> 9223372036854775807 OR rng IS NOT NULL""")


# A text row written: the words of its tsvector that the lexicon lacks,
# added once per statement.  No unique key: two transactions adding the
# same new word at once both add it (readers take distinct words), and no
# writer ever waits for another here.
_V11_WORDS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_words_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcatalog_words (word)
    SELECT d.word FROM (
        SELECT DISTINCT u.word FROM pgcatalog_text_written n
        CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS u(word)
        WHERE u.word <> chr(3)) d
    WHERE NOT EXISTS (SELECT 1 FROM pgcatalog_words w
                      WHERE w.word = d.word);
    RETURN NULL;
END
$$"""


def _v11(conn):
    """Version 11: the lexicon.  ``pgcatalog_words`` holds every word a
    text row ever had, of any catalog and text index (insert-only, as
    ZCTextIndex's lexicon: a word no document holds any more stays), kept
    by statement triggers on ``pgcatalog_text``.  A glob is replaced by its
    words there (scoring.py); a word of another index or catalog among them
    matches nothing of this one's and adds nothing to a score, so one
    narrow lexicon serves all (a column of the word alone: about 60 bytes
    a word with its B-tree)."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_words (
        word text COLLATE "C" NOT NULL
    )""")
    conn.execute("""INSERT INTO pgcatalog_words (word)
        SELECT DISTINCT u.word FROM pgcatalog_text x
        CROSS JOIN LATERAL unnest(tsvector_to_array(x.tsv)) AS u(word)
        WHERE u.word <> chr(3)""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_words_word
        ON pgcatalog_words (word)""")
    conn.execute(_V11_WORDS)
    for name, event in (("insert", "INSERT"), ("update", "UPDATE")):
        conn.execute("DROP TRIGGER IF EXISTS pgcatalog_text_words_%s ON "
                     "pgcatalog_text" % name)
        conn.execute("""CREATE TRIGGER pgcatalog_text_words_%s
            AFTER %s ON pgcatalog_text
            REFERENCING NEW TABLE AS pgcatalog_text_written
            FOR EACH STATEMENT EXECUTE FUNCTION pgcatalog_words_add()"""
                     % (name, event))


def _v12(conn):
    """Version 12: the (cid, path) index carries each entry's depth and
    rid: a subtree's count and rids, with a depth condition too, are read
    from the index alone (an index-only scan), where each match's wide
    entry row was visited.  ``ON CONFLICT (cid, path)`` still finds the
    unique index (an INCLUDE column is not a key).  The (cid, parent) and
    (cid, depth) indexes stay as they are: with INCLUDE columns their
    repeated keys are no longer deduplicated (at 1,000,000 entries, 16 MB
    -> 97 MB and 6 MB -> 114 MB), and the listings they serve sort by
    position, read from the entries anyway."""
    conn.execute("DROP INDEX IF EXISTS pgcatalog_entries_path_v12")
    conn.execute("CREATE UNIQUE INDEX pgcatalog_entries_path_v12 ON "
                 "pgcatalog_entries (cid, path) INCLUDE (depth, rid)")
    conn.execute("DROP INDEX IF EXISTS pgcatalog_entries_path")
    conn.execute("ALTER INDEX pgcatalog_entries_path_v12 RENAME TO "
                 "pgcatalog_entries_path")


# The hot row written with its entry's path (version 13).
_V13_SYNC = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng, sid, path)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found), NEW.path)
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid, path = EXCLUDED.path
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid, pgcatalog_hot.path)
            IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid, EXCLUDED.path);
    END IF;
    RETURN NULL;
END
$$"""


def _v13(conn):
    """Version 13: the hot row carries its entry's path, under a B-tree
    ``(path) INCLUDE (sid, lo, hi, rid, rng)``: a subtree beside hot
    conditions (a type, a state, the roles, ``effectiveRange``) is counted
    and its rids read from that index alone, the key sets found by a
    hashed semi-join (hot.py), where each entry of the subtree was visited
    in the wide table.  The trigger writes the path with the row (an
    entry's path never changes, but an update of it would be followed).
    The rows are filled here (15 s at 1,000,000 entries): the table then
    holds their old versions too, until ``VACUUM FULL pgcatalog_hot`` gives
    them back (operations.md); the new column's statistics are taken at
    once (the planner's estimate of a subtree's rows)."""
    conn.execute('ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS '
                 'path text COLLATE "C"')
    conn.execute(_V13_SYNC)
    conn.execute("DROP TRIGGER IF EXISTS pgcatalog_entries_hot_update ON "
                 "pgcatalog_entries")
    conn.execute("""CREATE TRIGGER pgcatalog_entries_hot_update
        AFTER UPDATE OF idx, path ON pgcatalog_entries FOR EACH ROW
        WHEN (OLD.idx IS DISTINCT FROM NEW.idx
              OR OLD.path IS DISTINCT FROM NEW.path)
        EXECUTE FUNCTION pgcatalog_hot_sync()""")
    # (the counts' trigger fires on a change of set or range class only)
    conn.execute("UPDATE pgcatalog_hot h SET path = e.path FROM "
                 "pgcatalog_entries e WHERE e.rid = h.rid")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_path
        ON pgcatalog_hot (path) INCLUDE (sid, lo, hi, rid, rng)""")
    conn.execute("ANALYZE pgcatalog_hot")


def _v14(conn):
    """Version 14: the entries' and the hot rows' pages are filled
    (fillfactor 100, was 90).  The writer no longer writes an entry as it
    is (writer.upsert_statement), the hot rows' trigger never did, and
    every other change of either row changes an indexed column: an update
    is never a HOT one, and the tenth of each page kept free for it was
    never used (about 81 + 31 MB at 1,000,000 entries).  Rows written from
    now on fill the pages; ``VACUUM FULL`` packs the old ones
    (operations.md).

    It also marks the metadata records from this release on, whose
    DateTimes may be in the compact form (``codec``: ``@pgc:T``) that an
    earlier release cannot read: an earlier release refuses a version 14
    database instead of failing on a brain's date."""
    conn.execute("ALTER TABLE pgcatalog_entries SET (fillfactor = 100)")
    conn.execute("ALTER TABLE pgcatalog_hot SET (fillfactor = 100)")


def _v15_spec(index_id, new):
    """The text index ``index_id``'s GIN index as version 14 (``new``
    False) or 15 made it: ``(name, CREATE INDEX statement)``, the DDL
    written out here as those versions' ``PGZCTextIndex.pgc_indexes`` wrote
    it (a step does not follow later code)."""
    name = sql.Literal(index_id).as_string(None)
    if new:
        return IndexSpec(
            "words", "USING gin ((CASE WHEN name = %s THEN tsv END))" % name,
            table=TEXT, shared=True).statement(None, index_id)
    return IndexSpec("tsv", "USING gin (tsv)", table=TEXT,
                     where="name = %s" % name, shared=True).statement(
                         None, index_id)


def _v15(conn):
    """Version 15: each text index's GIN index is on ``(CASE WHEN name =
    '<index id>' THEN tsv END)`` (not partial), where it was ``gin (tsv)
    WHERE name = '<index id>'``, and every condition looking for text rows
    by their words is written on that expression
    (``scoring.indexed_words``): PostgreSQL keeps the expression's
    statistics, so a word's rows in one text index are estimated from that
    index's rows alone (they were estimated 2.3x too low, and a
    date-ordered text search could read every match instead of walking the
    date order).  The old indexes registered (``pgcatalog_indexes``) are
    built again in the new form here, in the migration's transaction
    (writes to the text rows wait for it: 26 s for three text indexes at
    1,000,000 entries) and registered under their new names; the
    expressions' statistics are taken at once.  The old ones are dropped
    after the commit, without blocking readers (:func:`replaced_indexes`,
    ``db.ensure_schema``): dropped here, the migration would wait for every
    transaction reading the text rows, and make every new one wait behind
    it.  A text index's GIN index this step does not recognise is left to
    ``pgc_sync_indexes``."""
    registered = conn.execute(
        "SELECT DISTINCT name, pg_index FROM pgcatalog_indexes").fetchall()
    swapped = False
    for index_id, pg_index in registered:
        old, _ = _v15_spec(index_id, False)
        if pg_index != old:
            continue
        new, create = _v15_spec(index_id, True)
        conn.execute(create, ())
        conn.execute("UPDATE pgcatalog_indexes SET pg_index = %s WHERE "
                     "pg_index = %s", (new, old))
        swapped = True
    if swapped:
        conn.execute("ANALYZE pgcatalog_text")


def replaced_indexes(conn):
    """The PostgreSQL indexes a migration replaced and no catalog uses
    (names), to drop after its commit: the text indexes' GIN indexes in
    their version 14 form (``gin (tsv) WHERE name = ...``, :func:`_v15`)
    and the value indexes' B-trees in their version 16 form (the kind a
    ``jsonb`` value, :func:`_v17`) that no catalog registers."""
    return [row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = "
        "i.indexrelid, LATERAL pg_get_indexdef(i.indexrelid) d(def) WHERE "
        "c.relname LIKE 'pgcatalog\\_x\\_%%' AND ((i.indrelid = "
        "to_regclass('pgcatalog_text') AND i.indpred IS NOT NULL AND d.def "
        "LIKE '%%USING gin (tsv) WHERE%%') OR (i.indrelid = "
        "to_regclass('pgcatalog_entries') AND i.indpred IS NULL AND d.def "
        "LIKE '%%USING btree ((%%CASE%%THEN NULL::jsonb%%ELSE (idx -> %%')) "
        "AND NOT EXISTS (SELECT 1 FROM pgcatalog_indexes r WHERE r.pg_index "
        "= c.relname) ORDER BY 1", ()).fetchall()]


def parent_sql(path):
    """The parent's path of the entry whose path is ``path`` (SQL text over
    a column), as ``writer.split_path`` cuts it: everything before the
    last ``/``, or ``''`` when that is the first character or there is
    none.  What the ``(cid, parent)`` B-tree is built on (version 16) and
    what a folder's children and the navigation tree are found by."""
    cut = "length({p}) - strpos(reverse({p}), '/')".format(p=path)
    return ("(CASE WHEN strpos({p}, '/') > 0 AND {cut} > 0 THEN "
            "left({p}, {cut}) ELSE '' END)".format(p=path, cut=cut))


def _v16(conn):
    """Version 16: an entry's parent path is computed from its path
    (:func:`parent_sql`) under the ``(cid, parent)`` B-tree, no longer
    stored beside it: 60 bytes per entry of the entries' heap (60 MB at
    1,000,000 entries) in the rows written from now on (a dropped column
    costs nothing in a new row; ``VACUUM FULL pgcatalog_entries`` packs the
    old ones).  The B-tree is built again here, in the migration's
    transaction (2 s at 1,000,000 entries; writes to the entries wait)."""
    conn.execute("DROP INDEX IF EXISTS pgcatalog_entries_parent_v16")
    conn.execute("CREATE INDEX pgcatalog_entries_parent_v16 ON "
                 "pgcatalog_entries (cid, (%s))" % parent_sql("path"))
    conn.execute("DROP INDEX IF EXISTS pgcatalog_entries_parent")
    conn.execute("ALTER INDEX pgcatalog_entries_parent_v16 RENAME TO "
                 "pgcatalog_entries_parent")
    conn.execute("ALTER TABLE pgcatalog_entries DROP COLUMN IF EXISTS "
                 "parent")
    conn.execute("ANALYZE pgcatalog_entries")


# A JSON value's sort key (version 17): text whose byte order ("C") is the
# value's order, equal for equal values.  The rank of the JSON type first
# (null < string < number < boolean < array < object, jsonb's order of the
# types); a number by its sign, its decimal exponent (seven digits, offset)
# and its significant digits (a negative number's digits complemented and
# ended by ``~``, a positive one's ended by ``!``: a shorter run of digits
# is a smaller magnitude); a string (within an array or object) by its
# characters, chr(1) escaped as chr(1) chr(2) and the end marked by chr(1)
# chr(1); an array by its elements' keys in order, then ``A`` (below every
# rank: a prefix sorts first, Python's order of tuples, where jsonb puts the
# shorter array first whatever its elements); an object by its keys and
# values in jsonb's order of its keys, then ``A``.  A DateTime a FieldIndex
# holds (the codec's ``{"@pgc:D": [micros, ...]}``) sorts by its instant.
# The function calls itself by its schema's name (``{schema}``): an index
# build runs with only ``pg_catalog`` on the search path (PostgreSQL 17).
_V17_KEY = r"""
CREATE OR REPLACE FUNCTION pgcatalog_json_key(v jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    t text := jsonb_typeof(v);
    n numeric;
    s text;
    i text;
    f text;
    e integer;
    d text;
    r text;
    k text;
    x jsonb;
BEGIN
    IF t = 'null' THEN
        RETURN 'B';
    ELSIF t = 'string' THEN
        RETURN 'C' || replace(v #>> '{}', chr(1), chr(1) || chr(2))
            || chr(1) || chr(1);
    ELSIF t = 'boolean' THEN
        RETURN CASE WHEN v = 'true'::jsonb THEN 'Et' ELSE 'Ef' END;
    ELSIF t = 'number' THEN
        n := v::numeric;
        IF n = 0 THEN
            RETURN 'D2';
        END IF;
        s := abs(n)::text;
        i := split_part(s, '.', 1);
        f := split_part(s, '.', 2);
        IF i <> '0' THEN
            e := length(i) - 1;
            d := rtrim(i || f, '0');
        ELSE
            e := length(ltrim(f, '0')) - length(f) - 1;
            d := rtrim(ltrim(f, '0'), '0');
        END IF;
        IF n > 0 THEN
            RETURN 'D3' || lpad((e + 500000)::text, 7, '0') || d || '!';
        END IF;
        RETURN 'D1' || lpad((500000 - e)::text, 7, '0')
            || translate(d, '0123456789', '9876543210') || '~';
    ELSIF t = 'array' THEN
        r := 'F';
        FOR x IN SELECT a.value FROM jsonb_array_elements(v)
                 WITH ORDINALITY AS a(value, n) ORDER BY a.n LOOP
            r := r || {schema}.pgcatalog_json_key(x);
        END LOOP;
        RETURN r || 'A';
    END IF;
    r := 'G';
    FOR k, x IN SELECT o.key, o.value FROM jsonb_each(v) AS o LOOP
        r := r || 'C' || replace(k, chr(1), chr(1) || chr(2))
            || chr(1) || chr(1) || {schema}.pgcatalog_json_key(x);
    END LOOP;
    RETURN r || 'A';
END
$$"""

#: characters of a value's sort key a B-tree holds (version 17): longer
#: keys (arrays or objects of more than a kilobyte) are told apart by the
#: value itself (``common.value_eq_sql``)
KEY_CHARS = 1000


def _home(conn):
    """The schema of the catalog tables, quoted (what a function an index
    expression calls names itself by)."""
    return conn.execute(
        "SELECT quote_ident(n.nspname) FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.oid = "
        "'pgcatalog_entries'::regclass").fetchone()[0]


def _v16_value_sort(index_id):
    """A value index's B-tree as versions up to 16 made it: ``(kind,
    prefix)``, the kind the value itself (``jsonb``) or NULL for a string
    (written out as that version's ``common.sort_index_spec`` wrote it: a
    step does not follow later code)."""
    # (``%`` doubled, as a fragment's text holds it: the DDL runs with an
    # empty parameter tuple)
    name = sql.Literal(index_id).as_string(None).replace("%", "%%")
    key = "(idx -> %s)" % name
    return IndexSpec("valuesort", (
        "(((CASE WHEN jsonb_typeof(%s) = 'string' THEN NULL ELSE %s END)), "
        "(left(((idx ->> %s) COLLATE \"C\"), 400)))" % (key, key, name)),
        shared=True).statement(None, index_id)


def value_kind_sql(key):
    """The first key of a value index's B-tree from version 17 on, over
    ``key`` (SQL text of the value, ``jsonb``): NULL for a string, else the
    value's sort key (``pgcatalog_json_key``, its first
    :data:`KEY_CHARS` characters), ``COLLATE "C"``.  Text, where it was the
    ``jsonb`` value: PostgreSQL deduplicates a B-tree only when every
    column's type can say that equal keys are the same bytes, which
    ``jsonb`` cannot (portal_type's B-tree at 1,000,000 entries: 33 ->
    7 MB)."""
    return ("(CASE WHEN jsonb_typeof({k}) = 'string' THEN NULL ELSE "
            "left(pgcatalog_json_key({k}), {n}) END COLLATE \"C\")".format(
                k=key, n=KEY_CHARS))


def _v17_value_sort(index_id):
    """A value index's B-tree as version 17 makes it (as
    ``common.sort_index_spec`` writes it then)."""
    name = sql.Literal(index_id).as_string(None).replace("%", "%%")
    return IndexSpec("valuesort", "((%s), (left(((idx ->> %s) COLLATE "
                     "\"C\"), 400)))" % (value_kind_sql("(idx -> %s)" % name),
                                         name),
                     shared=True).statement(None, index_id)


def _v17(conn):
    """Version 17: a value index's B-tree (a FieldIndex's, a UUIDIndex's)
    is on ``(kind, prefix)`` with the kind in text
    (:func:`value_kind_sql`), so PostgreSQL deduplicates its repeated keys:
    an index whose values repeat (a type, a state, a position) takes a
    fifth of the space.  The registered B-trees of the version 16 form are
    built again in the new one here, in the migration's transaction (writes
    to the entries wait for it), registered under their new names; the old
    ones are dropped after the commit (:func:`replaced_indexes`).  A value
    index's B-tree this step does not recognise is left to
    ``pgc_sync_indexes``."""
    conn.execute(_V17_KEY.replace("{schema}", _home(conn)))
    registered = conn.execute(
        "SELECT DISTINCT name, pg_index FROM pgcatalog_indexes").fetchall()
    swapped = False
    for index_id, pg_index in registered:
        old, _ = _v16_value_sort(index_id)
        if pg_index != old:
            continue
        new, create = _v17_value_sort(index_id)
        conn.execute(create, ())
        conn.execute("UPDATE pgcatalog_indexes SET pg_index = %s WHERE "
                     "pg_index = %s", (new, old))
        swapped = True
    if swapped:
        conn.execute("ANALYZE pgcatalog_entries")


# The keys of a hot row outside the key sets (version 18): those of the
# indexes left out of the sets (``pgcatalog_hot_names.in_set`` false:
# ``Subject`` by default), sorted; the complement of
# ``pgcatalog_hot_set_keys``.
_V18_FREE_KEYS = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_free_keys(p_cid integer,
                                                   p_keys text[])
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(k.k ORDER BY k.k), '{}'::text[])
    FROM unnest(p_keys) AS k(k)
    WHERE EXISTS (
        SELECT 1 FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND NOT n.in_set
          AND left(k.k, length(n.code) + 1) IN (n.code || chr(31),
                                                n.code || chr(30)))
$$"""

# The id of the key set ``s`` (version 18): the set inserted when new, as
# ``pgcatalog_hot_set`` does with the keys it picks.
_V18_SET_ID = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_set_id(p_cid integer, s text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    d text;
    r integer;
BEGIN
    d := md5(array_to_string(s, chr(29)));
    SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
        AND digest = d;
    IF r IS NULL THEN
        INSERT INTO pgcatalog_hot_sets (cid, digest, keys)
        VALUES (p_cid, d, s) ON CONFLICT (cid, digest) DO NOTHING
        RETURNING sid INTO r;
        IF r IS NULL THEN
            SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
                AND digest = d;
        END IF;
    END IF;
    RETURN r;
END
$$"""

# The set of a hot row's free keys (version 18), or null when it has none.
_V18_FREE_SET = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_free_set(p_cid integer,
                                                  p_keys text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    f text[];
BEGIN
    f := pgcatalog_hot_free_keys(p_cid, p_keys);
    IF cardinality(f) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN pgcatalog_hot_set_id(p_cid, f);
END
$$"""

# The hot row written with the set of its free keys (version 18).
_V18_SYNC = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng, sid, path,
                                   kid)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found), NEW.path,
                pgcatalog_hot_free_set(NEW.cid, found))
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid, path = EXCLUDED.path, kid = EXCLUDED.kid
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid, pgcatalog_hot.path,
               pgcatalog_hot.kid)
            IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid, EXCLUDED.path, EXCLUDED.kid);
    END IF;
    RETURN NULL;
END
$$"""


def _v18(conn):
    """Version 18: the free keys' sets.  A hot row's keys outside the key
    sets (those of the indexes left out of them: ``Subject``'s by
    default, ``pgcatalog_hot_free_keys``) are a set of their own too, a
    row of ``pgcatalog_hot_sets`` (the same table: their keys never meet a
    key set's), which the hot row names (``kid``, null without such keys)
    under a B-tree ``(kid, rid)``.  A search whose hot conditions are all
    on those keys (tags alone) finds the matching sets (a GIN scan of the
    sets) and reads its count and rids from that B-tree alone (an
    index-only scan), where it visited every matching hot row: two tags'
    19,245 matches of 1,000,000 entries were 14,822 page visits after the
    GIN intersection.  The rows are given their set here (every hot row
    with a tag written again: ``VACUUM FULL pgcatalog_hot`` gives the space
    back, operations.md); the index objects learn that their keys are
    there when ``pgc_sync_indexes`` registers them again (GenericSetup
    upgrade 1005 -> 1006): until then their searches read the keys, as
    before."""
    conn.execute("ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS "
                 "kid integer")
    conn.execute(_V18_FREE_KEYS)
    conn.execute(_V18_SET_ID)
    conn.execute(_V18_FREE_SET)
    conn.execute(_V18_SYNC)
    conn.execute("UPDATE pgcatalog_hot SET kid = pgcatalog_hot_free_set("
                 "cid, keys) WHERE kid IS DISTINCT FROM "
                 "pgcatalog_hot_free_set(cid, keys)")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_kid
        ON pgcatalog_hot (kid, rid) WHERE kid IS NOT NULL""")
    conn.execute("ANALYZE pgcatalog_hot")


# The id of the free keys' set ``s`` (version 19): the set inserted into
# ``pgcatalog_hot_free_sets`` when new, as ``pgcatalog_hot_set_id`` does.
_V19_FREE_SET_ID = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_free_set_id(p_cid integer,
                                                     s text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    d text;
    r integer;
BEGIN
    d := md5(array_to_string(s, chr(29)));
    SELECT kid INTO r FROM pgcatalog_hot_free_sets WHERE cid = p_cid
        AND digest = d;
    IF r IS NULL THEN
        INSERT INTO pgcatalog_hot_free_sets (cid, digest, keys)
        VALUES (p_cid, d, s) ON CONFLICT (cid, digest) DO NOTHING
        RETURNING kid INTO r;
        IF r IS NULL THEN
            SELECT kid INTO r FROM pgcatalog_hot_free_sets WHERE cid = p_cid
                AND digest = d;
        END IF;
    END IF;
    RETURN r;
END
$$"""

# The set of a hot row's free keys, in their own table (version 19).
_V19_FREE_SET = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_free_set(p_cid integer,
                                                  p_keys text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    f text[];
BEGIN
    f := pgcatalog_hot_free_keys(p_cid, p_keys);
    IF cardinality(f) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN pgcatalog_hot_free_set_id(p_cid, f);
END
$$"""


def _v19(conn):
    """Version 19: the free keys' sets in a table of their own,
    ``pgcatalog_hot_free_sets (kid, cid, digest, keys)``.  Kept among the
    key sets (version 18), their rows (172,484 at 1,000,000 entries,
    against 21,267 key sets) spread the key sets over five times the
    pages, which a count by key set visits: ``portal_type=Document`` found
    its 6,712 sets on 2,701 pages where they took 756, and took twice as
    long.  The sets a hot row names by ``kid`` move here with their ids
    (no hot row is written), and leave the key sets' table."""
    conn.execute("""CREATE TABLE IF NOT EXISTS pgcatalog_hot_free_sets (
        kid integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        digest text COLLATE "C" NOT NULL,
        keys text[] COLLATE "C" NOT NULL,
        UNIQUE (cid, digest)
    )""")
    conn.execute("""INSERT INTO pgcatalog_hot_free_sets (kid, cid, digest,
        keys) SELECT s.sid, s.cid, s.digest, s.keys FROM pgcatalog_hot_sets s
        WHERE s.sid IN (SELECT h.kid FROM pgcatalog_hot h WHERE h.kid IS NOT
        NULL) ORDER BY s.sid ON CONFLICT DO NOTHING""")
    conn.execute("""DELETE FROM pgcatalog_hot_sets s USING
        pgcatalog_hot_free_sets f WHERE f.kid = s.sid""")
    conn.execute("""SELECT setval(pg_get_serial_sequence(
        'pgcatalog_hot_free_sets', 'kid'), greatest((SELECT max(kid) FROM
        pgcatalog_hot_free_sets), 1))""")
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_free_sets_keys
        ON pgcatalog_hot_free_sets USING gin (keys)""")
    conn.execute(_V19_FREE_SET_ID)
    conn.execute(_V19_FREE_SET)
    conn.execute("ANALYZE pgcatalog_hot_sets")
    conn.execute("ANALYZE pgcatalog_hot_free_sets")


# The sort key of version 17 whose arrays and objects stop once the key is
# longer than a B-tree holds (version 20): the first KEY_CHARS characters,
# all an index or a query reads of it, are the same, in time bounded by
# them (a key of 50,000 numbers took a second: each element copied the
# key so far).
_V20_KEY = _V17_KEY.replace(
    "            r := r || {schema}.pgcatalog_json_key(x);\n",
    "            r := r || {schema}.pgcatalog_json_key(x);\n"
    "            EXIT WHEN length(r) > %d;\n" % KEY_CHARS).replace(
    "            || chr(1) || chr(1) || {schema}.pgcatalog_json_key(x);\n",
    "            || chr(1) || chr(1) || {schema}.pgcatalog_json_key(x);\n"
    "        EXIT WHEN length(r) > %d;\n" % KEY_CHARS)


def _v20(conn):
    """Version 20: ``pgcatalog_json_key`` stops once a key is longer than
    the value B-trees hold (:data:`KEY_CHARS`): their keys, and a query's,
    are unchanged (the first characters are the same), and a long tuple
    costs a bounded time to write or to ask for."""
    conn.execute(_V20_KEY.replace("{schema}", _home(conn)))


# The sort index's value in the hot row (version 21): the catalog's first
# index registered as ``sort`` (by name), as the entries sort it
# (``(idx -> name)::bigint``, a DateIndex's minutes); null without a value,
# or with one no bigint holds (such an entry's own sort fails: never read).
_V21_SORT = r"""
CREATE OR REPLACE FUNCTION pgcatalog_hot_sort(p_cid integer, p_idx jsonb)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v.x) = 'number'
                 AND (v.x #>> '{}')::numeric
                     BETWEEN -9223372036854775808 AND 9223372036854775807
           THEN v.x::bigint END
    FROM (SELECT p_idx -> n.name AS x FROM pgcatalog_hot_names n
          WHERE n.cid = p_cid AND n.kind = 'sort'
          ORDER BY n.name LIMIT 1) v
$$"""

# The hot row written with its sort value (version 21): version 18's, one
# column more.
_V21_SYNC = _V18_SYNC.replace(
    "sid, path,\n                                   kid)",
    "sid, path,\n                                   kid, srt)").replace(
    "                pgcatalog_hot_free_set(NEW.cid, found))",
    "                pgcatalog_hot_free_set(NEW.cid, found),\n"
    "                pgcatalog_hot_sort(NEW.cid, NEW.idx))").replace(
    "path = EXCLUDED.path, kid = EXCLUDED.kid\n",
    "path = EXCLUDED.path, kid = EXCLUDED.kid,\n"
    "            srt = EXCLUDED.srt\n").replace(
    "               pgcatalog_hot.kid)",
    "               pgcatalog_hot.kid, pgcatalog_hot.srt)").replace(
    "             EXCLUDED.sid, EXCLUDED.path, EXCLUDED.kid);",
    "             EXCLUDED.sid, EXCLUDED.path, EXCLUDED.kid, EXCLUDED.srt);")


def _v21(conn):
    """Version 21: the sort index's value in the hot row (``srt``), under
    a B-tree ``(cid, srt, rid) INCLUDE (sid)``.  A page sorted by that
    index (``modified`` by default: the ``hot-indexes`` setting names it,
    a DateIndex registers as ``sort``) whose other conditions are hot
    ones in the key sets, and text, walks that B-tree, each row's set
    checked from the index tuple, where it walked the entries' wide rows
    by the date's B-tree (text + type + state by ``modified`` at 100,000
    entries: 2,853 wide rows for a page).  Empty until an index registers
    as ``sort`` (``pgc_sync_indexes``, GenericSetup upgrade 1006 ->
    1007), which fills the column."""
    conn.execute("ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS "
                 "srt bigint")
    conn.execute(_V21_SORT)
    conn.execute(_V21_SYNC)
    conn.execute("""CREATE INDEX IF NOT EXISTS pgcatalog_hot_srt
        ON pgcatalog_hot (cid, srt, rid) INCLUDE (sid)
        WHERE srt IS NOT NULL""")


#: STEPS[n - 1] makes version n of version n - 1.  Append only.
STEPS = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9, _v10, _v11, _v12,
         _v13, _v14, _v15, _v16,
         _v17, _v18, _v19, _v20, _v21]

SCHEMA_VERSION = len(STEPS)

#: how long :func:`ensure_schema` waits for a lock (another process's
#: migration, a table a step alters)
MIGRATION_LOCK_WAIT = "120s"


def schema_version(conn):
    """The version of the catalog tables in ``conn``'s database (0: none)."""
    if not conn.execute(
            "SELECT to_regclass('pgcatalog_schema') IS NOT NULL").fetchone()[0]:
        return 0
    return conn.execute(
        "SELECT max(version) FROM pgcatalog_schema").fetchone()[0] or 0


def ensure_schema(conn):
    """Create or upgrade the tables (idempotent; safe with concurrent
    processes thanks to an advisory lock): run the steps after the
    database's version, in one transaction.  ``conn`` is in autocommit
    mode."""
    with conn.transaction():
        # another process's migration is waited for, and a step's lock
        # waits for the transactions in its way (a catalog connection
        # waits 200 ms: a migration failed, and others with it)
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(
            sql.Literal(MIGRATION_LOCK_WAIT)), ())
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
        version = schema_version(conn)
        if version == SCHEMA_VERSION:
            return version
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                "The catalog tables have schema version %s, newer than this "
                "plone.pgcatalog (%s): upgrade the package." % (
                    version, SCHEMA_VERSION))
        for step in STEPS[version:]:
            step(conn)
        conn.execute("DELETE FROM pgcatalog_schema")
        conn.execute("INSERT INTO pgcatalog_schema (version) VALUES (%s)",
                     (SCHEMA_VERSION,))
    return SCHEMA_VERSION

