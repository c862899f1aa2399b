"""Okapi's collection statistics and document frequencies, kept per process.

A relevance score needs, per text index, the number of documents and their
total length, and per query word the number of documents holding it.
They are sums of rows the text rows' triggers keep (schema versions 5 and
6: ``pgcatalog_text_totals``; per word ``pgcatalog_text_df``, a few rows
each); another tsquery's (a glob's) is counted from the text rows matching
it.  They are kept per process:

* **Exact** when the catalog has change counters (``changes.py``; every
  catalog written to since they came): kept under the counters of the text
  index, the entries and the "everything" counter in the transaction's
  ZODB snapshot, and kept only when read from a PostgreSQL snapshot that
  holds exactly what that ZODB snapshot counts (as the result cache fills:
  ``store.snapshot_complete``).  A transaction that begins after a
  committed change of the index's text finds another counter and counts
  again; an edit of other indexes keeps them.
* Otherwise (no counters yet) until this process commits catalog writes or
  TEXT_STATS_TTL seconds pass: another process's writes are then seen by
  the scores up to that late.

A transaction with its own catalog writes reads them each time (never
kept): the sums hold its own rows.
All those a score needs and that are not kept are read in one statement
(:func:`prefetch`).

A word's frequency is exact and current.  Another common tsquery (matching
the index kind's ``pgc_df_limit`` documents or more, whose count reads
that many rows) is counted exactly once, and its count kept COMMON_DF_TTL
seconds whatever changes meanwhile.  A glob's own frequency stays capped
(its words' are what ZCatalog scores).

A glob's words are read from the lexicon (``pgcatalog_words``, schema
version 11) and kept as the frequencies are (:func:`words`): each word is
then scored with its own frequency, as ZCTextIndex scores a glob.
"""
import re
import time

from plone.pgcatalog.pg import db
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: (dsn, cid, text index) -> (expiry, version, (docs, words))
_stats = {}
STATS_MAX = 1000
TEXT_STATS_TTL = 30.0
#: (dsn, cid, text index, tsquery) -> (expiry, version, count)
_df = {}
DF_MAX = 20000
_FOREVER = float("inf")
#: (dsn, cid, text index, tsquery) -> (expiry, count): common words' exact
#: document frequencies
_common = {}
COMMON_DF_TTL = 600.0
#: (dsn, cid, text index, "words", prefix, pattern) -> (expiry, version,
#: words or None)
_words = {}
#: (dsn, prefix) -> the row of the prefix's words found last, whatever the
#: counters: what a search may assume (words)
_last_words = {}
#: (dsn, statement text, parameters) -> tsquery texts: a language-aware
#: query's words as each configuration parses them (the configurations do
#: not change with the data: kept until the process ends or the cache
#: fills)
_tsqueries = {}
TSQUERIES_MAX = 5000
#: a glob of more words than this is scored with its own frequency for all
#: its words (scoring.py: a broad glob such as ``a*``)
GLOB_WORDS_MAX = 500


#: dsn -> (expiry, the names of the text indexes whose postings the
#: database keeps): a hint of the plan to compose (postings_named)
_named = {}
POSTINGS_NAMED_TTL = 60.0


def forget():
    _named.clear()
    _stats.clear()
    _df.clear()
    _common.clear()
    _words.clear()
    _last_words.clear()
    _tsqueries.clear()


def tsqueries(store, statement):
    """The row of ``statement`` (language.queries_sql: a query's tsquery
    text in each configuration), read once per process."""
    key = (store.session.dsn, statement.text, statement.params)
    found = _tsqueries.get(key)
    if found is None:
        found = tuple(store.execute(statement).fetchone())
        if len(_tsqueries) >= TSQUERIES_MAX:
            _tsqueries.clear()
        _tsqueries[key] = found
    return found


def postings_named(store):
    """The names of the text indexes whose postings the database keeps
    (``pgcatalog_postings_names``), as this process read them at most
    POSTINGS_NAMED_TTL seconds ago: a hint of which plan to compose, never
    of what a search answers (a statement reading kept postings asks the
    names table itself, in its snapshot: postings.KeptPostings.guard)."""
    key = store.session.dsn
    found = _named.get(key)
    now = time.monotonic()
    if found is None or found[0] <= now:
        names = frozenset(row[0] for row in store.rows(q(
            "SELECT name FROM {}", schema.POSTINGS_NAMES_TABLE)))
        found = _named[key] = (now + POSTINGS_NAMED_TTL, names)
    return found[1]


def stats(store, index):
    """``(documents, total words)`` of text index ``index``."""
    return _cached(store, index, _stats, STATS_MAX, _stats_key(store, index),
                   lambda: _count(store.execute(_stats_sql(store, index))
                                  .fetchone()))


def df(store, index, tsquery):
    """Documents of text index ``index`` matching ``tsquery`` (capped as
    the index kind says; a word's exact, from its kept rows): a word's
    document frequency."""
    key = _stats_key(store, index) + (tsquery,)
    found = _cached(store, index, _df, DF_MAX, key,
                    lambda: int(store.value(index.pgc_df_sql(store.cid,
                                                             tsquery))))
    if not _common_word(index, tsquery, found):
        return found
    kept = _common_found(key)
    if kept is not None:
        return kept
    count = int(store.value(index.pgc_df_sql(store.cid, tsquery,
                                             exact=True)))
    _keep_common(key, count)
    return count


def kept_stats(store, index):
    """``(documents, total words)`` of text index ``index`` when this
    process keeps them for this transaction, else None (no statement)."""
    if store.session.has_writes:
        return None
    found = _found(_stats, _stats_key(store, index), _version(store, index))
    return found[0] if found is not None else None


def kept_df(store, index, tsquery):
    """The document frequency of ``tsquery`` in text index ``index`` when
    this process keeps it for this transaction, else None (no
    statement)."""
    if store.session.has_writes:
        return None
    found = _found(_df, _stats_key(store, index) + (tsquery,),
                   _version(store, index))
    return found[0] if found is not None else None


def words(store, index, prefix, pattern=None):
    """The lexicon's words that start with ``prefix`` and match ``pattern``
    (ZCTextIndex's regular expression, Python's, matched as
    ``Lexicon.globToWordIds`` does), sorted; None when more than
    GLOB_WORDS_MAX words start with the prefix.  The lexicon is shared by
    the catalogs and text indexes of the database: a word of another one
    matches nothing in ``index`` (its document frequency is 0)."""
    key = _stats_key(store, index) + ("words", prefix, pattern)
    writes = store.session.has_writes
    version = None
    if not writes:
        version = _version(store, index)
        found = _found(_words, key, version)
        if found is not None:
            return found[0]
        _expect(store, version)
    statement = _words_sql(prefix)
    # kept under the text index's counters, the words are read again
    # after each edit of a text although new words are rarer: a search
    # assumes those this process found last for the prefix, checked in
    # its snapshot (assumptions.py)
    last_key = (store.session.dsn, prefix)
    last = _last_words.get(last_key)
    if not writes and last is not None and store.assumptions.allowed:
        store.assumptions.assume(statement, last, lambda row: _words_found(
            store, last_key, row, key, version, pattern))
        return _matching(last[0], pattern)
    row = (store.value(statement),)
    _words_found(store, last_key, row, key, version, pattern)
    return _matching(row[0], pattern)


def _words_sql(prefix):
    """The sorted words of the lexicon starting with ``prefix`` (at most
    one more than GLOB_WORDS_MAX), one array."""
    return q(
        "SELECT array_agg(d.word ORDER BY d.word) FROM (SELECT DISTINCT "
        "w.word FROM {} w WHERE w.word >= {} AND w.word < {} AND "
        "starts_with(w.word, {}) LIMIT {}) d", schema.WORDS_TABLE, prefix,
        prefix + chr(0x10FFFF), prefix, GLOB_WORDS_MAX + 1)


def _read_words(store, index, prefix, pattern=None):
    """:func:`words`, read now (nothing kept)."""
    return _matching(store.value(_words_sql(prefix)), pattern)


def _words_found(store, last_key, row, key, version, pattern):
    """The words of a prefix read in ``store``'s snapshot (``row``)."""
    if len(_last_words) >= DF_MAX:
        _last_words.clear()
    _last_words[last_key] = row
    if version is not None:
        _keep(store, _words, key, DF_MAX, version,
              _matching(row[0], pattern))


def _matching(found, pattern):
    """The words of a prefix (an array, None for none) that match
    ``pattern``, sorted; None for more than GLOB_WORDS_MAX."""
    found = list(found or ())
    if len(found) > GLOB_WORDS_MAX:
        return None
    if pattern is not None:
        match = re.compile(pattern).match
        found = [word for word in found if match(word)]
    return found


def _common_word(index, tsquery, count):
    """Whether ``count`` (a capped document frequency) is that of a common
    tsquery, to be counted exactly: not a glob's (see the module
    docstring), nor one the kind counts exactly anyway (a word's)."""
    limit = index.pgc_df_limit  # (IRankingKind)
    return limit is not None and count >= limit and ":*" not in tsquery \
        and index.pgc_df_capped(tsquery)


def _common_found(key):
    """A common word's exact count kept under ``key`` and not expired,
    else None."""
    kept = _common.get(key)
    if kept is not None and kept[0] > time.monotonic():
        return kept[1]
    return None


def _keep_common(key, count):
    if len(_common) >= DF_MAX:
        _common.clear()
    _common[key] = (time.monotonic() + COMMON_DF_TTL, count)


def prefetch(store, index, tsqueries):
    """Read the statistics of ``index`` and the document frequencies of
    ``tsqueries`` that are not kept, in one statement."""
    if store.session.has_writes:
        return      # never kept: each is counted when asked
    version = _version(store, index)
    key = _stats_key(store, index)
    columns, fill = [], []
    if _found(_stats, key, version) is None:
        columns.append(q("({})", _stats_sql(store, index, row=True)))
        fill.append((_stats, key, STATS_MAX, _count))
    missing = [tsquery for tsquery in dict.fromkeys(tsqueries)
               if _found(_df, key + (tsquery,), version) is None]
    # the words' (a glob's, up to 500) read together, in one column
    words = [tsquery for tsquery in missing
             if not index.pgc_df_capped(tsquery)]
    if len(words) < 2:
        words = []
    together = set(words)
    for tsquery in missing:
        if tsquery not in together:
            columns.append(q("({})", index.pgc_df_sql(store.cid, tsquery)))
            fill.append((_df, key + (tsquery,), DF_MAX, int))
    if words:
        columns.append(q("({})", index.pgc_words_df_sql(store.cid, words)))
    if len(fill) + len(words) < 2:
        return      # one statement either way
    _expect(store, version)
    row = store.execute(q("SELECT {}", join(", ", columns))).fetchone()
    if words:
        row, counts = row[:-1], row[-1]
        for tsquery, count in zip(words, counts):
            _keep(store, _df, key + (tsquery,), DF_MAX, version, int(count))
    common = []
    for value, (cache, cache_key, size, convert) in zip(row, fill):
        value = convert(value)
        _keep(store, cache, cache_key, size, version, value)
        if cache is _df and _common_word(index, cache_key[-1], value) \
                and _common_found(cache_key) is None:
            common.append(cache_key)
    if common:
        # the common words' exact counts, together
        row = store.execute(q("SELECT {}", join(", ", [
            q("({})", index.pgc_df_sql(store.cid, key[-1], exact=True))
            for key in common]))).fetchone()
        for key, count in zip(common, row):
            _keep_common(key, int(count))


def _stats_key(store, index):
    return (store.session.dsn, store.cid, index.getId())


def _stats_sql(store, index, row=False):
    # the sums of the totals the text rows' triggers keep (schema version
    # 5): a few rows, where counting read every text row of the index
    columns = "coalesce(sum(k.docs), 0)::bigint, coalesce(sum(k.words), " \
        "0)::bigint"
    if row:
        columns = "row(" + columns + ")"
    return q("SELECT " + columns + " FROM {} k WHERE k.cid = {} AND "
             "k.name = {}", schema.TEXT_TOTALS_TABLE, store.cid,
             index.getId())


def _count(row):
    return int(row[0]), int(row[1])


def _version(store, index):
    """What the kept values of ``index`` are exact for in this
    transaction: its change counters, or the process's commit count (with
    the time-to-live) when the catalog has none."""
    counters = store.counters
    if counters is None:
        return ("process", db.commit_generation())
    return ("counters", counters.token, counters.all, counters.rows,
            counters.names.get(index.getId(), 0))


def _cached(store, index, cache, size, key, compute):
    if store.session.has_writes:
        return compute()
    version = _version(store, index)
    found = _found(cache, key, version)
    if found is not None:
        return found[0]
    _expect(store, version)
    value = compute()
    _keep(store, cache, key, size, version, value)
    return value


def _found(cache, key, version):
    """``(value,)`` kept under ``key`` for ``version``, else None."""
    found = cache.get(key)
    if found is not None and found[1] == version and \
            found[0] > time.monotonic():
        return (found[2],)
    return None


def _expect(store, version):
    if version[0] == "counters":
        # whether the snapshot may fill: asked with the same statement
        store.expect_fill()


def _keep(store, cache, key, size, version, value):
    if version[0] == "counters":
        if not store.snapshot_complete(store.cache_generation):
            return      # read for this transaction only
        expiry = _FOREVER
    else:
        expiry = time.monotonic() + TEXT_STATS_TTL
    if len(cache) >= size:
        cache.clear()
    cache[key] = (expiry, version, value)
