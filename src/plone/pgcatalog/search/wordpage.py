"""A page of a single word by relevance, read from the word's kept postings
without scoring every one of them.

A word's Okapi score in a document (ZCTextIndex's, ``scoring.py``) depends
on two things only: the word's count there (``tf``), with which it rises,
and the document's length (``dl``), with which it falls.  The postings'
B-tree (schema version 8) holds a word's postings by count, and within a
count shortest document first.  So the best ``k`` postings (``k`` = the
page's start + its size) are found in two reads of that B-tree:

1. for each count the word has (found by skipping from count to count),
   the first ``k`` postings meeting the search's conditions: together at
   least ``k`` postings (when there are as many), so the ``k``-th best
   score among them, ``least``, is at most the ``k``-th best of all (with
   fewer, ``least`` is no bound and the second read takes every match);
2. for each count, every posting meeting the conditions whose score is at
   least ``least``: those of a length up to the longest scoring that much
   (:meth:`~plone.pgcatalog.indexes.text.postings.KeptWord.dl_at_most`),
   each score then compared exactly.

Every posting of the page scores at least the ``k``-th best of all, hence
at least ``least``: the second read holds the page, which is then put in
relevance order (score descending, equal scores newest rid first) exactly
as when every posting is scored.  A posting without a count or a length
(none is written so) is read in the second read whatever its score.

The page's total (``actual_result_count``) is counted when first read
(every posting then), as a sorted page's is.  In a database that does not
keep the index's postings, or beside conditions keeping few hot rows
(``KeptWord.guard``), the statement scores every match instead.

Plone's live search asks this of ``SearchableText`` (``word*`` whose only
word is ``word``), beside the anonymous filters: a common word of
level1's 1,000,000 entries has about a hundred thousand postings.
"""
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import relevance
from plone.pgcatalog.search.plans import PAGE_WITH_METADATA
from plone.pgcatalog.search.plans import Plan
from plone.pgcatalog.search.plans import with_small_metadata

#: a page reaching further (its start + its size) scores every match: the
#: first read would read this many postings of each count
REACH_MAX = 1000

#: the longest document length a B-tree bound may name (an integer)
_DL_MAX = q("2000000000::float8")


def reaches(window):
    """Whether a page (``window``: its ``b_start``, ``b_size``) is read
    this way."""
    return window is not None and window.b_size is not None and \
        window.b_size > 0 and window.b_start + window.b_size <= REACH_MAX


def best_postings(kept, condition, window):
    """The page's statement: one row of NULL (the total, counted later),
    the page's rids and scores in relevance order, and the best score of
    every match (NULL for a page from the first match: its first score).
    ``kept``: a postings.KeptWord; ``condition``: over its postings ``h``
    (the hot row's set and range under their names)."""
    k = window.b_start + window.b_size
    at = kept.at()

    def scored(where):
        # the word's postings ``h`` meeting ``where`` and the condition,
        # scored (``w.idf``, the word's: from the row the subquery is
        # lateral to, so that a bound over it is one of the B-tree's)
        return q("SELECT h.rid, ({})::float8 AS score FROM {} h WHERE {} "
                 "AND {} AND {}", kept.word_score, schema.POSTINGS_TABLE,
                 at, where, condition)

    # the longest length scoring at least s.least for count t.tf, as the
    # B-tree's integer bound: one more, for rounding (the score itself is
    # compared after); every length for a bound not above 0
    bound = q("(CASE WHEN ((s.least - 0.5::float8) / w.idf) > 0 THEN "
              "(greatest(least(floor({}), {}), -1::float8) + 1)::integer "
              "ELSE 2147483647 END)",
              kept.dl_at_most(q("t.tf"), q("s.least")), _DL_MAX)
    best = (q("NULL::float8") if window.b_start == 0
            else q("(SELECT max(c.score) FROM c)"))
    return q(
        "WITH RECURSIVE t(tf) AS ((SELECT h.tf FROM {} h WHERE {} AND "
        "h.tf IS NOT NULL ORDER BY h.tf DESC LIMIT 1) UNION ALL SELECT "
        "(SELECT h.tf FROM {} h WHERE {} AND h.tf < t.tf ORDER BY h.tf "
        "DESC LIMIT 1) FROM t WHERE t.tf IS NOT NULL), "
        "w AS MATERIALIZED (SELECT {} AS idf), "
        "f AS MATERIALIZED (SELECT x.rid, x.score FROM t CROSS JOIN w "
        "CROSS JOIN LATERAL ({} ORDER BY h.dl LIMIT {}) x "
        "WHERE t.tf IS NOT NULL), "
        "s AS MATERIALIZED (SELECT coalesce((SELECT f.score FROM f ORDER "
        "BY f.score DESC, f.rid DESC OFFSET {} LIMIT 1), "
        "'-infinity'::float8) AS least), "
        "c AS MATERIALIZED (SELECT x.rid, x.score FROM t CROSS JOIN w "
        "CROSS JOIN s CROSS JOIN LATERAL ({} OFFSET 0) x WHERE t.tf IS NOT "
        "NULL AND x.score >= s.least "
        "UNION ALL SELECT x.rid, x.score FROM t CROSS JOIN w CROSS JOIN "
        "LATERAL ({} OFFSET 0) x WHERE t.tf IS NOT NULL "
        "UNION ALL SELECT x.rid, x.score FROM w CROSS JOIN LATERAL ({} "
        "OFFSET 0) x) "
        "SELECT NULL::bigint, array_agg(p.rid ORDER BY p.score DESC, "
        "p.rid DESC), array_agg(p.score ORDER BY p.score DESC, p.rid "
        "DESC), {} FROM (SELECT * FROM c ORDER BY c.score DESC, c.rid "
        "DESC LIMIT {} OFFSET {}) p",
        schema.POSTINGS_TABLE, at, schema.POSTINGS_TABLE, at, kept.idf,
        scored(q("h.tf = t.tf AND h.dl IS NOT NULL")), literal(k),
        literal(k - 1),
        scored(q("h.tf = t.tf AND h.dl <= {}", bound)),
        scored(q("h.tf = t.tf AND h.dl IS NULL")),
        scored(q("h.tf IS NULL")),
        best, literal(window.b_size), literal(window.b_start))


class KeptWordPage(Plan):
    """A page of a single word by relevance: its best postings
    (:func:`best_postings`) when the statement finds them kept
    (``kept.guard()``), else every match of its text rows (``rows``:
    relevance.word_rows) scored; the total counted from ``matches``
    (``tr``: the word's postings or its text rows,
    relevance.kept_word_or) when read."""

    def __init__(self, kept, condition, matches, window, rows):
        guard = kept.guard()
        every = relevance.page_of(rows, window)
        page = q("SELECT * FROM ({}) b WHERE {} UNION ALL SELECT * FROM "
                 "({}) a WHERE NOT {}",
                 best_postings(kept, condition, window), guard, every,
                 guard)
        if window.b_size <= PAGE_WITH_METADATA:
            page = with_small_metadata(page, 4, 1, first=window.b_size)
        self.statement = page
        self.counting = q("SELECT count(*) FROM {}", matches)

    def answer(self, store):
        return relevance.page_answer(store, self.statement, self.counting)
