"""Search plans for a text search without ``sort_on``: its matches in
relevance order (Okapi BM25 score descending, equal scores newest rid
first, as ZCatalog's ``byValue``), and the sources they are read from.

- :class:`TextRelevance`: one text index takes part; its text rows are
  matched and scored in one pass: alone (``TEXT_ROWS``), joined to their
  entries (``TEXT_JOINED``) or to their hot rows (``TEXT_HOT``) for the
  search's other conditions, or read word by word (:func:`postings`),
  kept by the hot rows (:func:`among_hot`) and by the entries (each
  looked up, :func:`postings_joined`, or among them, hashed,
  :func:`among_entries`, as :func:`entries_hashed` says); every match or
  a page;
- :class:`Relevance`: every match, scored only when a brain is first read;
- :class:`RelevancePage`: a page (several text indexes), each match scored
  once in SQL.

The compiler (``compiler.py``) chooses among them; they build on
``plans.py`` (the base class, :class:`~plans.EveryMatch`, the brains'
metadata read with the answer).
"""

from plone.pgcatalog.pg import estimates
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search.plans import PAGE_WITH_METADATA
from plone.pgcatalog.search.plans import RID
from plone.pgcatalog.search.plans import EveryMatch
from plone.pgcatalog.search.plans import Plan
from plone.pgcatalog.search.plans import fetch_row
from plone.pgcatalog.search.plans import FIRST_WITH_METADATA
from plone.pgcatalog.search.plans import keep_first_metadata
from plone.pgcatalog.search.plans import with_small_metadata
from plone.pgcatalog.search.results import Answer
from plone.pgcatalog.search.results import Scores
from plone.pgcatalog.search.results import by_relevance

def text_rows(table=schema.TEXT_TABLE):
    """The text rows of ``table`` as the entries ``e`` of a text search's
    only condition (their rid and catalog id are the entry's)."""
    return q("{} e", table)


def text_joined(table=schema.TEXT_TABLE):
    """The text rows ``tr`` of ``table`` joined to their entries ``e`` (the
    search's other conditions)."""
    return q("{} tr JOIN {} ON e.rid = tr.rid", table, schema.FROM_ENTRIES)


def text_hot(table=schema.TEXT_TABLE):
    """The text rows ``tr`` of ``table`` joined to their hot rows ``h``
    (every other condition of the search is hot: hot.py)."""
    return q("{} tr JOIN {} h ON h.rid = tr.rid", table, schema.HOT_TABLE)


#: the ZCTextIndex rows (``pgcatalog_text``) so
TEXT_ROWS = text_rows()
TEXT_JOINED = text_joined()
TEXT_HOT = text_hot()
#: the rid of the text row ``tr``
TEXT_RID = q("tr.rid")
#: the score of a match ``tr`` read word by word (:func:`postings`)
POSTINGS_SCORE = q("tr.score")


def postings(statement):
    """The matches ``tr`` (``rid``, ``score``) of a union of many words read
    word by word (``statement``: postings.postings_sql) as a TextRelevance
    source."""
    return q("({}) tr", statement)


def text_alone(table=schema.TEXT_TABLE):
    """The text rows ``tr`` of ``table`` alone (the text condition is the
    search's only one)."""
    return q("{} tr", table)


def kept_or(kept, condition, fallback):
    """The matches ``tr`` (``rid``, ``score``) read from the postings kept
    for their index meeting ``condition`` (``kept``: a
    postings.KeptPostings), or, in a database that does not keep that
    index's postings, those of ``fallback`` (a statement of ``rid``,
    ``score`` whose condition holds ``NOT kept.guard()``)."""
    return q("(({}) UNION ALL ({})) tr", kept.statement(condition), fallback)


def kept_word_or(kept, condition, rows):
    """The matches ``tr`` of a single word read from its kept postings
    meeting ``condition`` (``kept``: a postings.KeptWord), or, in a
    database that does not keep them, its text rows' (``rows``:
    :func:`word_rows`): a common word beside the anonymous filters
    (more_queries' TG, 12,542 rows of 100,000 entries) reads its postings
    from one B-tree range without a text row."""
    return kept_or(kept, condition, rows)


def word_rows(kept, where, rank, source):
    """The statement (``rid``, ``score``) of a single word matched and
    scored on its text rows as :class:`TextRelevance` does (``where``,
    ``rank`` over ``source``, the text rows ``tr``): nothing while the
    word's postings are read (``kept.guard()``)."""
    return _scored(q("{} AND NOT {}", where, kept.guard()), rank, source,
                   TEXT_RID)


def kept_postings_or(kept, condition, source, where):
    """The matches ``tr`` (``rid``, ``score``) of a union alone read from
    its index's kept postings meeting ``condition`` (``kept``: a
    postings.KeptPostings), or, in a database that does not keep that
    index's postings, from ``source`` meeting ``where`` (the union read
    word by word, :func:`postings` and the others): the statement says
    which, an uncorrelated sub-select PostgreSQL evaluates once, so the
    other branch is never run.  A three-letter prefix of ``Title`` beside
    the anonymous filters at 100,000 entries (more_queries' SU): medians
    17.7 and 16.3 ms read word by word and joined to the hot rows, 7.2 and
    5.0 from the kept postings, by turns (BENCHMARKS.md)."""
    return kept_or(kept, condition, q(
        "SELECT tr.rid, tr.score FROM {} WHERE {} AND NOT {}", source, where,
        kept.guard()))


def estimated_entries(store, where):
    """PostgreSQL's estimate of the entries meeting ``where`` (an EXPLAIN,
    no row read)."""
    return estimates.rows(store, q(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM {} WHERE {}",
        schema.FROM_ENTRIES, where))


def postings_joined(statement):
    """The matches ``tr`` of a union read word by word (as
    :func:`postings`) joined to their entries ``e``, for the search's
    other conditions."""
    return q("{} JOIN {} ON e.rid = tr.rid", postings(statement),
    schema.FROM_ENTRIES)


def among_hot(condition, hashed=True):
    """The match ``tr`` is among the hot rows ``h`` meeting ``condition``:
    a semi-join the planner hashes (the hot rows of the matching sets,
    from their B-tree) rather than a look-up of each match's hot row.
    ``h.rid + 0`` is what makes it so: the planner cannot estimate how
    many rows a union's grouping gives (164 for 60,658), and looked each
    up (334 ms, against 218 hashed, at 100,000 entries).  ``hashed``
    False (:func:`hot_hashed` says so: a small union beside many hot
    rows) leaves the planner its look-up of each match's hot row."""
    if not hashed:
        return q("tr.rid IN (SELECT h.rid FROM {} h WHERE {})",
                 schema.HOT_TABLE, condition)
    return q("tr.rid IN (SELECT h.rid + 0 FROM {} h WHERE {})",
             schema.HOT_TABLE, condition)


def postings_on_hot(statement):
    """The matches ``tr`` of a union read word by word (as
    :func:`postings`) joined to their hot rows ``h`` (a hot row per rid:
    the join keeps each match once), for a condition on ``h`` fewer
    matches than hot rows meet (``postings_hashed_first``).  The planner
    hashes the matches (a union's grouping is estimated at a few hundred
    rows) and reads the hot rows meeting the condition once, from their
    B-tree: a semi-join (:func:`among_hot`) hashes the hot rows instead,
    the larger side (PostgreSQL 15 hashes a semi-join's inner side only).
    ``h.rid + 0`` keeps the planner from looking each match's hot row
    up.  A three-letter prefix of ``Title`` beside the anonymous filters
    at 100,000 entries (more_queries' SU: 4,477 matches among 51,258 hot
    rows): medians 20.3 and 20.2 ms before, 18.0 and 16.2 after, by turns
    (BENCHMARKS.md)."""
    return q("({}) tr JOIN {} h ON h.rid + 0 = tr.rid", statement,
             schema.HOT_TABLE)


def postings_hashed_first(reads, kept):
    """Whether a union reading ``reads`` rows (at least its matches), to
    be kept among the ``kept`` hot rows by a hash (:func:`hot_hashed`),
    is hashed itself and joined (:func:`postings_on_hot`): when they are
    fewer than those hot rows, and fit in memory (HASHED_ROWS_MAX)."""
    return reads <= kept and reads <= HASHED_ROWS_MAX


#: Cost of keeping a union's matches among the hot rows meeting other
#: conditions, two ways, in microseconds per row (100,000 entries, warm,
#: PostgreSQL 15: auto_explain of a three-letter prefix of ``Title`` beside
#: the anonymous filters, both ways): ``HOT_LOOKUP_US`` per row the union
#: reads, its hot row looked up by rid (4,477 rows: 14 ms);
#: ``HOT_HASHED_US`` per hot row kept, read from the key sets' B-tree and
#: hashed (51,258 rows: 10.2 ms).  Only their ratio decides
#: (:func:`hot_hashed`): a four-letter prefix's 620 matches (more_queries'
#: SU4), looked up: medians 14.6-22.7 ms hashed, 13.1-15.0 looked up, five
#: rounds by turns.
HOT_LOOKUP_US = 3.0
HOT_HASHED_US = 0.2


def hot_hashed(reads, kept):
    """Whether a union reading ``reads`` rows is kept among the ``kept``
    hot rows at less cost hashed (:func:`among_hot`) than by a look-up of
    each match's hot row."""
    return float(reads) * HOT_LOOKUP_US >= float(kept) * HOT_HASHED_US


#: Cost of keeping the matches of a union read word by word by conditions
#: on the entries, two ways, in microseconds per row (100,000 entries,
#: warm): ``ENTRY_LOOKUP_US`` per match, its entry looked up by rid (the
#: primary key, then the row: 174 ms for 60,658 matches of a glob beside
#: ``is_folderish``); ``ENTRY_HASHED_US`` per entry meeting the
#: conditions, read once and joined to the matches by a hash (the 95,000
#: entries of ``is_folderish=False`` read by a scan: 66 ms).  Only their
#: ratio decides (:func:`entries_hashed`: hashed when those entries are
#: fewer than ENTRY_LOOKUP_US / ENTRY_HASHED_US times the matches); the
#: figures are one machine's.  Measured by ``python
#: benchmarks/cost_constants.py --entries 100000`` (benchmarks/README.md).
ENTRY_LOOKUP_US = 3.0
ENTRY_HASHED_US = 1.0
#: Most rows on either side of that hash: PostgreSQL hashes the side it
#: estimates smaller (a union's grouping, estimated at a few hundred rows
#: whatever its size), in ``work_mem`` (4 MB by default, twice that for a
#: hash).  Past it the hash spills to disk in batches: a glob's 606,251
#: matches beside ``is_folderish`` at 1,000,000 entries took 6.3 s hashed
#: against 5.6 looked up.
HASHED_ROWS_MAX = 100000


def entries_hashed(matches, entries):
    """Whether ``matches`` (the matches to keep, as estimated) are kept at
    less cost among the ``entries`` meeting the other conditions
    (PostgreSQL's estimate), read once and hashed (:func:`among_entries`),
    than by a look-up of each match's entry; never when either side
    would not fit in memory (HASHED_ROWS_MAX)."""
    return entries * ENTRY_HASHED_US < matches * ENTRY_LOOKUP_US \
        and max(matches, entries) <= HASHED_ROWS_MAX


def among_entries(condition):
    """The match ``tr`` is among the entries ``e`` meeting ``condition``:
    a semi-join the planner hashes (the entries read once, by their own
    indexes or a scan), rather than a look-up of each match's entry.  As
    in :func:`among_hot`, ``e.rid + 0`` keeps the planner from turning it
    into a look-up per match (a union's grouping is estimated at a few
    hundred rows whatever its size)."""
    return q("tr.rid IN (SELECT e.rid + 0 FROM {} WHERE {})",
    schema.FROM_ENTRIES,
             condition)


#: relevance order (ZCatalog's byValue: score descending, equal scores newest
#: rid first), for the ordered aggregates of the statements that score every
#: match; PostgreSQL sorts once for both (Python's sort of the pairs cost
#: 26 ms for 23,810 matches, PostgreSQL's about 4)
RELEVANCE_ORDER = q("ORDER BY s.score DESC, s.rid DESC")


def _relevance(ranks):
    return join(" + ", [q("COALESCE({}, 0)", r) for r in ranks])


class Relevance(EveryMatch):
    """A text search without a page: match now, score when a brain is
    first read (``len()`` of a text search never pays for relevance).
    Scores are computed once per row (OFFSET 0 keeps the subquery from
    being flattened into several evaluations) and ordered by PostgreSQL
    (``RELEVANCE_ORDER``); the rank expressions only read ``e.rid``, so
    the matched rids are enough."""

    descending = True

    def __init__(self, where, ranks):
        super().__init__(where)
        self.rank = _relevance(ranks)

    def scoring(self, rids):
        return q("SELECT array_agg(s.rid {}), array_agg(s.score {}) FROM "
                 "(SELECT e.rid, ({})::float8 AS score FROM unnest("
                 "{}::bigint[]) AS e(rid) OFFSET 0) s", RELEVANCE_ORDER,
                 RELEVANCE_ORDER, self.rank, rids)

    def answer(self, store):
        count, rids, _small = self.matches(store)
        return Answer(rids, count, scoring=self.scoring)


def _scored(where, rank, source, rid):
    """A statement of ``(rid, score)`` per match of ``where`` over
    ``source``.  ``rank``: the score, a Fragment over the rows, or
    ``(columns, score)`` (scoring.rank_columns): what the score reads of
    the text row, read in the scan, and the score over it (``s``), without
    a sub-select per row."""
    if isinstance(rank, tuple):
        columns, rank = rank
        return q("SELECT s.rid, ({})::float8 AS score FROM (SELECT {} AS "
                 "rid, {} FROM {} WHERE {} OFFSET 0) s", rank, rid, columns,
                 source, where)
    return q("SELECT {} AS rid, ({})::float8 AS score FROM {} WHERE {}",
             rid, rank, source, where)


def page_of(scored, window):
    """One row: the number of matches, the page's rids and scores in
    relevance order, the best score of every match (what the scores are
    normalized by; the first page's first score is it, NULL then: one
    pass over the matches less); each match of ``scored`` (a statement of
    ``rid``, ``score``) scored once (a materialized CTE)."""
    best = (q("NULL::float8") if window.b_start == 0 and window.b_size > 0
            else q("(SELECT max(s.score) FROM s)"))
    return q(
        "WITH s AS MATERIALIZED ({}) SELECT (SELECT count(*) FROM s), "
        "array_agg(p.rid ORDER BY p.score DESC, p.rid DESC), "
        "array_agg(p.score ORDER BY p.score DESC, p.rid DESC), "
        "{} FROM (SELECT * FROM s ORDER BY s.score DESC, s.rid DESC LIMIT "
        "{} OFFSET {}) p", scored, best, window.b_size, window.b_start)


def _scored_page(scored, window):
    """:func:`page_of`; a page of up to ``PAGE_WITH_METADATA`` comes with
    its brains' metadata (:func:`with_small_metadata`)."""
    page = page_of(scored, window)
    if window.b_size <= PAGE_WITH_METADATA:
        return with_small_metadata(page, 4, 1, first=window.b_size)
    return page


def page_answer(store, statement, counting=None):
    """The Answer of a page's ``statement`` (:func:`page_of`'s columns,
    then what :func:`with_small_metadata` adds); ``counting``: the
    statement counting the total when the row does not hold it."""
    row = fetch_row(store, statement)
    count, rids, raw, top = row[:4]
    rids = rids or []
    if top is None:
        # the first page: its first score is the best
        top = raw[0] if raw else 0
    # normalized by the best score of every match, not of the page
    scores = Scores(dict(zip(rids, raw or [])), top or 0)
    answer = Answer(rids, count, scores, counting=counting)
    keep_first_metadata(store, answer, row[4:])
    return answer


class TextRelevance(Plan):
    """A search by relevance with one text index, matched and scored in one
    pass over its text rows (the score reads the row it matched instead of
    looking it up again), ordered as Relevance orders; every match, or a
    page (``window``).

    ``source``: the text rows alone as ``e`` (``TEXT_ROWS``: the text
    condition is the search's only one; their rid and catalog id are the
    entry's), or joined to their entries (``TEXT_JOINED``: the text rows
    ``tr``, the entries ``e`` for the search's other conditions), or to
    their hot rows when the other conditions are all hot (``TEXT_HOT``:
    ``h``); ``rid`` the match's rid there.  ``rank``: the score of the
    text row, a Fragment or ``(columns, score)`` (see :func:`_scored`).

    Text + filters (12,542 text matches of 100,000 entries, 8,123 kept by
    ``allowedRolesAndUsers`` and ``effectiveRange``): matched on the
    entries and then scored by a look-up per match, 57 + 31 ms; joined
    and scored in the scan, 73 ms; joined to the hot rows (the key sets'
    ids given as an array PostgreSQL can estimate: a hash of the text
    matches probed by the sets' B-tree), 49-57 ms in SQL."""

    def __init__(self, where, rank, source=TEXT_ROWS, rid=RID, window=None):
        scored = _scored(where, rank, source, rid)
        self.window = window
        if window is not None:
            self.statement = _scored_page(scored, window)
            return
        # with the first brains' metadata (in SQL it cost about as much
        # as the window a first brain read fetches, 0.8-1.0 ms at 100,000
        # entries, but that window is a round trip more, which a busy
        # multi-threaded process pays in waits for the GIL too)
        self.statement = with_small_metadata(q(
            "SELECT count(*), array_agg(s.rid {}), array_agg(s.score {}) "
            "FROM ({} OFFSET 0) s", RELEVANCE_ORDER, RELEVANCE_ORDER,
            scored), 3, 1, first=FIRST_WITH_METADATA)

    def answer(self, store):
        if self.window is not None:
            return page_answer(store, self.statement)
        row = fetch_row(store, self.statement)
        count, rids, raw = row[:3]
        ordered, scores = by_relevance(rids, raw)
        answer = Answer(ordered, count, scores)
        keep_first_metadata(store, answer, row[3:])
        return answer


class RelevancePage(Plan):
    """A page of a text search by relevance (rank computed once per
    matching entry, the count and the best score read from the same
    scored matches); equal scores by descending rid, as ZCatalog's
    ``byValue`` (newest entry first)."""

    def __init__(self, where, ranks, window):
        self.statement = _scored_page(
            _scored(where, _relevance(ranks), schema.FROM_ENTRIES, RID),
            window)

    def answer(self, store):
        return page_answer(store, self.statement)
