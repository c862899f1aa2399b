"""The statements of the verifier (``verify.py``) on one catalog's rows.

Each reads a bounded batch in one statement, so a verification walks a
catalog of any size in constant memory: entries after a rid (keyset paging,
never OFFSET), which of some paths are catalogued, which stored text index
values differ from freshly computed ones (compared by PostgreSQL itself, as
``tsvector`` values: the text form PostgreSQL prints is normalized, the one
the writer sends is not).  Every function takes the catalog's store
(``store.CatalogStore``) of the current transaction.
"""
from plone.pgcatalog.indexes.text.encoding import dl_sql
from plone.pgcatalog.ops import postings
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema


class StoredEntry:
    """One catalog entry as stored: ``rid``, ``path``, ``idx`` (the index
    document's JSON text), ``meta`` (the metadata JSON text, None without a
    metadata row), ``text_names`` (the text indexes with a row) and
    ``language_names`` (those with a language row)."""

    __slots__ = ("rid", "path", "idx", "meta", "text_names",
                 "language_names")

    def __init__(self, rid, path, idx, meta, text_names,
                 language_names=()):
        self.rid = rid
        self.path = path
        self.idx = idx
        self.meta = meta
        self.text_names = text_names
        self.language_names = language_names


def entries_after(store, after, limit):
    """Up to ``limit`` entries with a rid above ``after`` (None: from the
    first), in rid order, as :class:`StoredEntry`."""
    limit = int(limit)
    if limit < 1:
        raise ValueError("batch size must be at least 1, not %r" % limit)
    condition = q("TRUE") if after is None else q("e.rid > {}", int(after))
    return _entries(store, condition, limit)


def entries_at(store, paths):
    """The entries of ``paths`` that exist, in rid order, as
    :class:`StoredEntry` (one statement)."""
    paths = list(paths)
    if not paths:
        return []
    return _entries(store, q("e.path = ANY({})", paths), None)


def _entries(store, condition, limit):
    rows = store.rows(q(
        "SELECT e.rid, e.path, e.idx::text, m.meta::text, "
        "ARRAY(SELECT t.name FROM {} t WHERE t.rid = e.rid), "
        "ARRAY(SELECT l.name FROM {} l WHERE l.rid = e.rid) "
        "FROM {} LEFT JOIN {} ON m.rid = e.rid "
        "WHERE e.cid = {} AND {} ORDER BY e.rid{}",
        schema.TEXT_TABLE, schema.LANGTEXT_TABLE, schema.FROM_ENTRIES,
        schema.FROM_META, store.cid, condition,
        q("") if limit is None else q(" LIMIT {}", literal(int(limit)))))
    return [StoredEntry(rid, path, idx, meta, list(names or ()),
                        list(languages or ()))
            for rid, path, idx, meta, names, languages in rows]


def catalogued(store, paths):
    """Which of ``paths`` are entries of the catalog (one statement)."""
    paths = list(paths)
    if not paths:
        return set()
    return {r[0] for r in store.rows(q(
        "SELECT e.path FROM {} WHERE e.cid = {} AND e.path = ANY({})",
        schema.FROM_ENTRIES, store.cid, paths))}


def text_mismatches(store, wanted):
    """``{(rid, text index name)}`` of the ``wanted`` triples ``(rid, name,
    tsvector input text)`` whose stored tsvector differs (one statement;
    each triple's stored row is known to exist)."""
    wanted = list(wanted)
    if not wanted:
        return set()
    return {(r[0], r[1]) for r in store.rows(q(
        "SELECT v.rid, v.name FROM unnest({}::bigint[], {}::text[], "
        "{}::text[]) AS v(rid, name, tsv) JOIN {} t ON t.rid = v.rid AND "
        "t.name = v.name WHERE t.tsv IS DISTINCT FROM v.tsv::tsvector",
        [w[0] for w in wanted], [w[1] for w in wanted],
        [str(w[2]) for w in wanted], schema.TEXT_TABLE))}


def long_lists(store, digests):
    """``{digest: list}`` of the stored long keyword lists ``digests``
    (:mod:`plone.pgcatalog.pg.lists`; one statement)."""
    return {r[0]: r[1] for r in store.rows(q(
        "SELECT l.digest, l.value FROM {} l WHERE l.digest = ANY({})",
        schema.LISTS_TABLE, sorted(digests)))}


def hot_mismatches(store, rids):
    """The ``rids`` (entries of the catalog) whose hot row is not what
    their values make, its key set, its free keys' set and its sort
    value included
    (:mod:`plone.pgcatalog.pg.hot`; one statement)."""
    rids = list(rids)
    if not rids:
        return set()
    return {r[0] for r in store.rows(q(
        "SELECT e.rid FROM {} LEFT JOIN {} h ON h.rid = e.rid WHERE "
        "e.cid = {} AND e.rid = ANY({}::bigint[]) AND (nullif("
        "pgcatalog_hot_keys(e.cid, e.idx), '{{}}') IS DISTINCT FROM h.keys "
        "OR (h.rid IS NOT NULL AND (SELECT (b.lo, b.hi, b.rng) FROM "
        "pgcatalog_hot_bounds(e.cid, e.idx) b) IS DISTINCT FROM (h.lo, h.hi, "
        "h.rng)) OR (h.rid IS NOT NULL AND h.path IS DISTINCT FROM e.path) "
        "OR (h.rid IS NOT NULL AND h.srt IS DISTINCT FROM "
        "pgcatalog_hot_sort(e.cid, e.idx)) "
        "OR (h.rid IS NOT NULL AND (SELECT s.keys FROM {} s WHERE "
        "s.sid = h.sid AND s.cid = h.cid) IS DISTINCT FROM "
        "pgcatalog_hot_set_keys(h.cid, h.keys)) OR (h.rid IS NOT NULL AND "
        "(SELECT s.keys FROM {} s WHERE s.kid = h.kid AND s.cid = h.cid) IS "
        "DISTINCT FROM nullif(pgcatalog_hot_free_keys(h.cid, h.keys), "
        "'{{}}')))",
        schema.FROM_ENTRIES, schema.HOT_TABLE, store.cid, rids,
        schema.HOT_SETS_TABLE, schema.HOT_FREE_SETS_TABLE))}


def hot_count_mismatches(store, limit):
    """Up to ``limit`` ``(sid, cls, counted, rows)`` of the catalog's key
    sets whose counts (``pgcatalog_hot_counts``) do not add up to their hot
    rows, or whose bound of the first rid is above it (hot.py; one
    statement, reading every hot row of the catalog)."""
    return [tuple(r) for r in store.rows(q(
        "SELECT coalesce(a.sid, k.sid), coalesce(a.cls, k.cls), "
        "coalesce(k.n, 0), coalesce(a.n, 0) FROM ({}) a FULL JOIN (SELECT "
        "k.sid, k.cls, sum(k.n) AS n, min(k.first) AS first FROM {} k WHERE "
        "k.cid = {} GROUP BY 1, 2) k ON k.sid = a.sid AND k.cls = a.cls "
        "WHERE coalesce(a.n, 0) <> coalesce(k.n, 0) OR k.first > a.first "
        "ORDER BY 1, 2 LIMIT {}", hot.counted(store.cid),
        schema.HOT_COUNTS_TABLE, store.cid, literal(int(limit))))]


def key_count_mismatches(store, limit):
    """Up to ``limit`` ``(sid, cls, key, counted, rows)`` of the catalog's
    free keys whose counts per key set (``pgcatalog_hot_key_counts``) do
    not add up to their hot rows (one statement, reading every hot row of
    the catalog)."""
    return [tuple(r) for r in store.rows(q(
        "SELECT coalesce(a.sid, k.sid), coalesce(a.cls, k.cls), "
        "coalesce(a.key, k.key), coalesce(k.n, 0), coalesce(a.n, 0) FROM "
        "({}) a FULL JOIN (SELECT k.sid, k.cls, k.key, sum(k.n) AS n FROM {} "
        "k WHERE k.cid = {} GROUP BY 1, 2, 3) k ON k.sid = a.sid AND k.cls = "
        "a.cls AND k.key = a.key WHERE coalesce(a.n, 0) <> coalesce(k.n, 0) "
        "ORDER BY 1, 2, 3 LIMIT {}", hot.key_counted(store.cid),
        schema.HOT_KEY_COUNTS_TABLE, store.cid, literal(int(limit))))]


def _text_counted(cid):
    # the catalog's text rows counted per text index, as the totals the
    # triggers keep (pgcatalog_text_totals, schema version 5) should sum
    return q("SELECT t.cid, t.name, count(*) AS docs, coalesce(sum(coalesce("
             "t.dl, {})), 0) AS words FROM {} t WHERE t.cid = {} GROUP BY 1, "
             "2", dl_sql(q("t.tsv")), schema.TEXT_TABLE, cid)


def text_total_mismatches(store, limit):
    """Up to ``limit`` ``(text index, (documents, words) kept, (documents,
    words) of the rows)`` of the catalog's text indexes whose kept totals
    (``pgcatalog_text_totals``) do not add up to their text rows (one
    statement, reading every text row of the catalog)."""
    return [(r[0], (int(r[1]), int(r[2])), (int(r[3]), int(r[4])))
            for r in store.rows(q(
                "SELECT coalesce(a.name, k.name), coalesce(k.docs, 0), "
                "coalesce(k.words, 0), coalesce(a.docs, 0), coalesce(a.words, "
                "0) FROM ({}) a FULL JOIN (SELECT k.name, sum(k.docs) AS "
                "docs, sum(k.words) AS words FROM {} k WHERE k.cid = {} "
                "GROUP BY 1) "
                "k ON k.name = a.name WHERE (coalesce(a.docs, 0), coalesce("
                "a.words, 0)) <> (coalesce(k.docs, 0), coalesce(k.words, 0)) "
                "ORDER BY 1 LIMIT {}", _text_counted(store.cid),
                schema.TEXT_TOTALS_TABLE, store.cid, literal(int(limit))))]


def recount_text_totals(store):
    """Count the catalog's text rows per text index again into its totals
    (verify's repair), in one statement: the rows it deletes and the
    text rows it counts are those of one snapshot; writers meanwhile add
    their own rows, which stay right beside it."""
    store.session.execute_write(store.cid, q(
        "WITH d AS (DELETE FROM {} WHERE cid = {}) INSERT INTO {} (cid, "
        "name, docs, words) {}", schema.TEXT_TOTALS_TABLE, store.cid,
        schema.TEXT_TOTALS_TABLE, _text_counted(store.cid)))


def _words_counted(cid):
    # the catalog's text rows' words counted per text index, as the
    # frequencies the triggers keep (pgcatalog_text_df, schema version 6)
    # should sum
    return q("SELECT t.cid, t.name, u.word, count(*) AS n FROM {} t CROSS "
             "JOIN LATERAL unnest(tsvector_to_array(t.tsv)) AS u(word) WHERE "
             "t.cid = {} AND u.word <> chr(3) GROUP BY 1, 2, 3",
             schema.TEXT_TABLE, cid)


def text_df_mismatches(store, limit):
    """Up to ``limit`` ``(text index, word, documents kept, documents of
    the rows)`` of the catalog's words whose kept document frequencies
    (``pgcatalog_text_df``) do not add up to their text rows (one
    statement, reading every text row of the catalog)."""
    return [(r[0], r[1], int(r[2]), int(r[3])) for r in store.rows(q(
        "SELECT coalesce(a.name, k.name), coalesce(a.word, k.word), "
        "coalesce(k.n, 0), coalesce(a.n, 0) FROM ({}) a FULL JOIN (SELECT "
        "k.name, k.word, sum(k.n) AS n FROM {} k WHERE k.cid = {} GROUP BY "
        "1, 2) k ON k.name = a.name AND k.word = a.word WHERE coalesce(a.n, "
        "0) <> coalesce(k.n, 0) ORDER BY 1, 2 LIMIT {}",
        _words_counted(store.cid), schema.TEXT_DF_TABLE, store.cid,
        literal(int(limit))))]


def recount_text_df(store):
    """Count the catalog's words per text index again into the kept
    document frequencies (verify's repair), in one statement (as
    :func:`recount_text_totals`)."""
    store.session.execute_write(store.cid, q(
        "WITH d AS (DELETE FROM {} WHERE cid = {}) INSERT INTO {} (cid, "
        "name, word, n, folded) SELECT c.*, true FROM ({}) c",
        schema.TEXT_DF_TABLE, store.cid, schema.TEXT_DF_TABLE,
        _words_counted(store.cid)))


def _postings_stored(cid):
    return q("SELECT p.cid, p.name, p.word, p.rid, p.tf, p.dl, p.sid, "
             "p.lo, p.hi, p.rng FROM {} p WHERE p.cid = {}",
             schema.POSTINGS_TABLE, cid)


def postings_mismatches(store, limit):
    """Up to ``limit`` ``(text index, word, rid)`` of the catalog's kept
    postings (``pgcatalog_postings``, schema version 7) missing, left
    over, or holding other values than its text rows and hot rows give
    (one statement, reading every text row of the kept indexes)."""
    expected = postings.expected(cid=store.cid)
    stored = _postings_stored(store.cid)
    return [tuple(r) for r in store.rows(q(
        "SELECT DISTINCT d.name, d.word, d.rid FROM (({} EXCEPT ALL {}) "
        "UNION ALL ({} EXCEPT ALL {})) d(cid, name, word, rid) ORDER BY 1, "
        "2, 3 LIMIT {}", expected, stored, stored, expected,
        literal(int(limit))))]


def rewrite_postings(store):
    """Write the catalog's kept postings again from its text rows and hot
    rows (verify's repair), in one statement."""
    store.session.execute_write(store.cid, q(
        "WITH d AS (DELETE FROM {} WHERE cid = {}) INSERT INTO {} {} {}",
        schema.POSTINGS_TABLE, store.cid, schema.POSTINGS_TABLE,
        postings.COLUMNS, postings.expected(cid=store.cid)))


def hot_orphans(store, limit):
    """Up to ``limit`` rids of the catalog's hot rows without an entry."""
    return [r[0] for r in store.rows(q(
        "SELECT h.rid FROM {} h WHERE h.cid = {} AND NOT EXISTS (SELECT 1 "
        "FROM {} WHERE e.rid = h.rid) ORDER BY h.rid LIMIT {}",
        schema.HOT_TABLE, store.cid, schema.FROM_ENTRIES,
        literal(int(limit))))]


def _text_words(cid):
    # the distinct words of the catalog's text rows the lexicon lacks
    return q("SELECT d.word FROM (SELECT DISTINCT u.word FROM {} t CROSS "
             "JOIN LATERAL unnest(tsvector_to_array(t.tsv)) AS u(word) WHERE "
             "t.cid = {} AND u.word <> chr(3)) d WHERE NOT EXISTS (SELECT 1 "
             "FROM {} w WHERE w.word = d.word)", schema.TEXT_TABLE, cid,
             schema.WORDS_TABLE)


def missing_words(store, limit):
    """Up to ``limit`` words of the catalog's text rows missing from the
    lexicon (``pgcatalog_words``, kept by triggers: only a change behind
    the catalog's back loses one; a glob would miss its documents)."""
    return [r[0] for r in store.rows(q("{} ORDER BY 1 LIMIT {}",
                                       _text_words(store.cid),
                                       literal(int(limit))))]


def add_missing_words(store):
    """Add every word of the catalog's text rows the lexicon lacks."""
    store.session.execute_write(None, q(
        "INSERT INTO {} (word) {}", schema.WORDS_TABLE,
        _text_words(store.cid)))
