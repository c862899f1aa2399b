"""The catalog's tables, by name, and the SQL the code shares with them.

Layout (one set of tables per database, every row scoped by catalog
``cid``; ``migrations/baseline.sql`` defines them, with a comment on each):

``pgcatalog_schema``
    one row: the schema version (:mod:`plone.pgcatalog.schema.migrations`).
``pgcatalog_catalogs``
    one row per catalog (a Plone site's portal_catalog), keyed by the random
    key the tool got at creation; holds the transactional change counter
    (``getCounter``).
``pgcatalog_entries``
    an entry: ``rid``, ``cid``, ``path`` / ``depth`` (the physical path,
    ``COLLATE "C"`` so ranges and ordering are by code point as in
    ZCatalog; its parent's path is computed from it, :func:`parent_sql`),
    and ``idx``: every index value in one JSONB document.
``pgcatalog_meta`` / ``pgcatalog_meta_layouts``
    the brain metadata (typed codec), read lazily by rid batches; each
    record an array of values naming its layout, the column names stored
    once per layout (:mod:`plone.pgcatalog.pg.layouts`).  Stored
    as ``json`` (the text as written), not ``jsonb``: it is never queried
    inside, only sent back whole, and ``json`` goes out as a plain copy where
    ``jsonb`` would be serialised again on every read (measured: 0.44 ->
    0.25 ms for a window of 32 brains).
``pgcatalog_text``
    one ``tsvector`` row per (entry, text index): full text is kept out of
    the entries; ``dl`` / ``tf`` (word count, term frequencies) feed the
    Okapi score; rows up to 8 KB stay uncompressed (``toast_tuple_target``).
``pgcatalog_langtext``
    one row per (entry, text index searched by language, docs/language-text.md):
    the text search configuration of the object's language and the
    weighted ``tsvector`` PostgreSQL parsed with it (schema version 2).
``pgcatalog_postings`` / ``pgcatalog_postings_names``
    one row per word and text row of the text indexes the names table
    names (``Title`` by default): the word's count, the row's length and
    the key set and range of the entry's hot row, under one B-tree: a
    prefix's matches beside the hot conditions read from it alone
    (schema version 7, :mod:`plone.pgcatalog.indexes.text.postings`).
``pgcatalog_langpostings``
    one row per word and language row: the word's weighted count, the
    row's length and the entry's hot row's key set and range, under two
    B-trees (by word; by entry): the matches and scores of a search by
    language read without the rows' ``tsvector`` (schema version 9,
    :class:`plone.pgcatalog.indexes.text.language.LanguagePostings`).
``pgcatalog_words``
    the lexicon: every word of the text rows, kept by a trigger.
``pgcatalog_commits``
    one row per committed writing transaction of a catalog (its change
    count): insert-only, so concurrent writers never conflict on a shared
    counter row; folded into ``pgcatalog_catalogs`` from time to time
    (``upkeep.compact_commit_log``).  ``getCounter`` and the change stamp read both.
``pgcatalog_indexes``
    which PostgreSQL indexes each catalog's index uses (the registry:
    ``delIndex`` drops what ``addIndex`` created, a shared index when its
    last user goes).
``pgcatalog_lists``
    long keyword lists stored once, by digest (an entry's ``idx`` holds
    the digest): shared by the catalogs, never updated
    (:mod:`plone.pgcatalog.pg.lists`).
``pgcatalog_hot`` / ``pgcatalog_hot_names``
    the hot keys: one narrow row per entry holding the string values of a
    few hot field and keyword indexes (``portal_type``, ``review_state``,
    ``allowedRolesAndUsers``, ``Subject`` by default) as ``code<US>value``
    texts under one GIN index, its effective range, a copy of its path and
    its sort date, kept by a trigger on ``pgcatalog_entries``; counts and
    every-match answers on those indexes alone are read there, never from
    the wide row (:mod:`plone.pgcatalog.pg.hot`).
``pgcatalog_hot_sets`` / ``pgcatalog_hot_counts``
    the hot rows' key sets (their keys but ``Subject``'s), which each hot
    row names, and the number of hot rows of each set, kept by a trigger
    as insert-only +1 / -1 rows folded from time to time: a count of many
    matches reads a few rows per set (:mod:`plone.pgcatalog.pg.hot`).
``pgcatalog_hot_key_counts``
    the free keys (``Subject``'s) counted per key set and range class, as
    insert-only +1 / -1 rows kept by the same trigger and folded with the
    sets' counts (schema version 4): facet counts of a search on the key
    sets add them up (:mod:`plone.pgcatalog.pg.facetcounts`).
``pgcatalog_hot_free_sets``
    the hot rows' keys outside the key sets (``Subject``'s) as sets of
    their own, which the hot row names (``kid``) under a B-tree of
    ``(kid, rid)``: a search on tags alone is read from that index alone.

Per-index PostgreSQL indexes are described by the index kinds
(``pgc_indexes``: :class:`IndexSpec`), registered when ``addIndex`` runs and
built once its transaction committed (:mod:`plone.pgcatalog.schema.ddl`).  An index
whose expressions cannot fail on any stored value (a FieldIndex's, a
BooleanIndex's, DateRecurringIndex's B-trees; GIN indexes of keyword lists
and text) is shared by the catalogs using the same name and kind, over
every row: PostgreSQL keeps statistics of its expressions, which its
planner reads as a column's.  A DateIndex's B-tree casts the value to
``bigint``, which another catalog's value under the same name (another
kind) could fail: it is partial, one per catalog (``WHERE cid = N``), and
has a statistics object of its own (:func:`plone.pgcatalog.schema.planstats.ensure_statistics`).

The tables are created, and upgraded, by :mod:`plone.pgcatalog.schema.migrations`;
this module names them for the code that reads and writes them.
"""
import hashlib

from psycopg import sql

from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import migrations

ENTRIES = "pgcatalog_entries"
META = "pgcatalog_meta"
TEXT = "pgcatalog_text"
LANGTEXT = "pgcatalog_langtext"
CATALOGS = "pgcatalog_catalogs"
COMMITS = "pgcatalog_commits"
INDEXES = "pgcatalog_indexes"
LISTS = "pgcatalog_lists"
HOT = "pgcatalog_hot"
HOT_NAMES = "pgcatalog_hot_names"
HOT_SETS = "pgcatalog_hot_sets"
HOT_COUNTS = "pgcatalog_hot_counts"
HOT_FREE_SETS = "pgcatalog_hot_free_sets"
HOT_KEY_COUNTS = "pgcatalog_hot_key_counts"
WORDS = "pgcatalog_words"
TEXT_TOTALS = "pgcatalog_text_totals"
TEXT_DF = "pgcatalog_text_df"
POSTINGS = "pgcatalog_postings"
POSTINGS_NAMES = "pgcatalog_postings_names"
LANGPOSTINGS = "pgcatalog_langpostings"
META_LAYOUTS = "pgcatalog_meta_layouts"

#: the tables' names as SQL identifiers (composed into statements, never
#: formatted into their text)
ENTRIES_TABLE = ident(ENTRIES)
META_TABLE = ident(META)
TEXT_TABLE = ident(TEXT)
LANGTEXT_TABLE = ident(LANGTEXT)
#: the text search configuration a language row's words as written are
#: parsed with (weight D: lower case, accents folded, not stemmed; made by
#: schema step 2)
FORMS_CONFIG = "pgcatalog_simple"
CATALOGS_TABLE = ident(CATALOGS)
INDEXES_TABLE = ident(INDEXES)
LISTS_TABLE = ident(LISTS)
HOT_TABLE = ident(HOT)
HOT_NAMES_TABLE = ident(HOT_NAMES)
HOT_SETS_TABLE = ident(HOT_SETS)
HOT_COUNTS_TABLE = ident(HOT_COUNTS)
HOT_FREE_SETS_TABLE = ident(HOT_FREE_SETS)
HOT_KEY_COUNTS_TABLE = ident(HOT_KEY_COUNTS)
META_LAYOUTS_TABLE = ident(META_LAYOUTS)
COMMITS_TABLE = ident(COMMITS)
WORDS_TABLE = ident(WORDS)
TEXT_TOTALS_TABLE = ident(TEXT_TOTALS)
TEXT_DF_TABLE = ident(TEXT_DF)
POSTINGS_TABLE = ident(POSTINGS)
POSTINGS_NAMES_TABLE = ident(POSTINGS_NAMES)
LANGPOSTINGS_TABLE = ident(LANGPOSTINGS)

#: the tables as statements name them, each with the one alias every
#: statement gives it (``e.idx``, ``m.meta``, ``t.words``, ``h.keys``)
FROM_ENTRIES = q("{} e", ENTRIES_TABLE)
FROM_META = q("{} m", META_TABLE)
FROM_TEXT = q("{} t", TEXT_TABLE)
FROM_HOT = q("{} h", HOT_TABLE)

#: pg_advisory_xact_lock key while the schema or its shared objects change
DDL_LOCK = migrations.LOCK
#: (this, hashtext(name)): one process at a time builds or drops a
#: PostgreSQL index of the catalog (plone.pgcatalog.schema.ddl)
INDEX_LOCK = 0x70676369  # "pgci"
#: (this, cid): one process at a time folds a catalog's commit log
COMPACT_LOCK = 0x70676363  # "pgcc"
#: one process at a time folds the key sets' counts (upkeep.fold_hot_counts)
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
    (tests and tools; the tool registers them too: plone.pgcatalog.schema.ddl)."""
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


def parent_sql(path):
    """The parent's path of the entry whose path is ``path`` (SQL text over
    a column), as ``writer.split_path`` cuts it: everything before the
    last ``/``, or ``''`` when that is the first character or there is
    none.  What the ``(cid, parent)`` B-tree is built on (the baseline's
    ``pgcatalog_entries_parent``, which must read the same) and
    what a folder's children and the navigation tree are found by."""
    cut = "length({p}) - strpos(reverse({p}), '/')".format(p=path)
    return ("(CASE WHEN strpos({p}, '/') > 0 AND {cut} > 0 THEN "
            "left({p}, {cut}) ELSE '' END)".format(p=path, cut=cut))


#: characters of a value's sort key a B-tree holds: longer keys (arrays or
#: objects of more than a kilobyte) are told apart by the value itself
#: (``common.value_eq_sql``); ``pgcatalog_json_key`` stops building a key
#: past this length (baseline.sql)
KEY_CHARS = 1000


def value_kind_sql(key):
    """The first key of a value index's B-tree, over
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
