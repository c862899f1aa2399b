"""A page of a search by language of words joined by AND, by relevance,
read from the language postings without scoring every match.

An entry's relevance for words joined by AND (language.word_score_sql,
summed over the words) is ``(g(t1) + ... + g(tn)) / (1 + ln(dl))``: ``g``
of each word's weighted count ``t`` in the entry (it rises with the
count), over the entry's number of words ``dl``, the same in each of its
postings (one language row per entry and index).  The postings' B-tree
(schema version 9) holds a word's postings by count, and within a count
shortest entry first.  So, for ``k`` = the page's start + its size:

1. **a seed**: each word's first postings in that order from its highest
   count down (``SEED`` of them, meeting the search's conditions), joined
   by entry: entries having every word, scored exactly; the ``k``-th best
   of them, ``theta``, is at most the ``k``-th best of all matches (with
   fewer than ``k``, a seed ``LARGER`` times as large is read; with fewer
   still, ``theta`` is no bound: every match is read);
2. **the candidates**: an entry scoring at least ``theta`` has, for each
   word of count ``t`` there, ``1 + ln(dl) <= (g(t) + G) / theta``, ``G``
   the most the other words can add (each one's ``g`` of its highest
   count).  So each word's postings are read count by count (found by
   skipping from count to count), each count's up to the length that
   bound allows (one range of the B-tree), and joined by entry.

Every entry of the page scores at least the ``k``-th best of all, hence at
least ``theta``: the candidates hold the page, which is then put in
relevance order (score descending, equal scores newest rid first) exactly
as when every match is scored, the scores computed by the same
expression.  The lengths' bound is rounded up by one: a score computed in
floating point differs from the exact one by far less than that moves.

The total (``actual_result_count``) is counted when first read (every
match then).  At 1,000,000 entries two common words beside the anonymous
filters (language_text.py's TP: 96,795 and 236,066 postings, 15,465
matches) read 10,000 postings meeting the filters for the seeds (36
matches) and 33,718 candidates, where scoring every match read 332,861:
22-26 ms instead of 71-84 (BENCHMARKS.md, "Language-aware text").
"""
from plone.pgcatalog.indexes.text.language import LanguagePostings
from plone.pgcatalog.indexes.text.language import count_share_sql
from plone.pgcatalog.indexes.text.language import word_score_sql
from plone.pgcatalog.pg import estimates
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import param
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import relevance
from plone.pgcatalog.search import wordpage
from plone.pgcatalog.search.plans import PAGE_WITH_METADATA
from plone.pgcatalog.search.plans import Plan
from plone.pgcatalog.search.plans import with_small_metadata

#: postings of each word the seed reads (about 0.5 ms per thousand at
#: 1,000,000 entries); TP's two words' seeds of 5,000 held 36 matches,
#: of 10,000 145, of 3,000 7 (fewer than its page of 10)
SEED = 5000
#: the larger seed, read when the first holds fewer matches than the page
#: reaches, is this many times as large
LARGER = 4
#: most words joined by AND read so (each adds two reads and a join)
MAX_WORDS = 4
#: fewest postings of each word for a page read so: the seeds and the
#: candidates read again what every match's join reads once, for words of
#: fewer postings than a few seeds (TP at 100,000 entries: 9,676 and
#: 23,479 postings, 7.5-8.4 ms scoring every match, 12.5-14.3 so)
POSTINGS_MIN = 30000


def applies(lang, window, store):
    """Whether a search by language read from its postings (``lang``:
    language.postings_of's) is read so for the page ``window``: words
    joined by AND in one configuration, a page reaching no further than
    wordpage.REACH_MAX, each word with at least ``POSTINGS_MIN`` postings
    as PostgreSQL estimates them (an ``EXPLAIN`` per word, kept a while:
    pg/estimates.py)."""
    if not (isinstance(lang, LanguagePostings) and lang.all_of and
            1 <= len(lang.words) <= MAX_WORDS and wordpage.reaches(window)):
        return False
    return all(estimates.rows(store, q(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM {} h WHERE {} AND h.word = {}",
        schema.LANGPOSTINGS_TABLE, _at(lang), param(word))) >= POSTINGS_MIN
        for word in lang.words)


def _at(lang):
    """The postings ``h`` of ``lang``'s index and configuration."""
    return q("h.cid = {} AND h.name = {} AND h.config = {}",
             literal(lang.cid), literal(lang.name), literal(lang.config))


def _exact(sides):
    """The relevance of an entry over the postings ``sides`` (aliases of
    each word's, in the words' order), as LanguagePostings.statement
    computes it (the same expression, the same order of the sum)."""
    total = word_score_sql(q("{}.tf", sides[0]), q("{}.dl", sides[0]))
    for side in sides[1:]:
        total = q("({} + {})", total, word_score_sql(
            q("{}.tf", side), q("{}.dl", side)))
    return q("({})::float8", total)


def _kept(n):
    """How the postings read of the ``n``-th word are kept: the first
    word's materialized, the others' in the statement that joins them
    (each is read once): PostgreSQL knows their entries are distinct
    there (the table's statistics) and hashes them, where it merged
    materialized rows after sorting both sides (TP at 1,000,000 entries:
    21.5 ms against 28-30 in SQL)."""
    return q("AS MATERIALIZED" if n == 0 else "AS NOT MATERIALIZED")


def _joined(names):
    """``SELECT rid, score`` of the entries in every one of the CTEs
    ``names`` (each word's postings read: rid, tf, dl)."""
    sides = [q("w%d" % n) for n in range(len(names))]
    source = q("{} w0", q(names[0]))
    for n, name in enumerate(names[1:], 1):
        source = q("{} JOIN {} {} ON {}.rid = w0.rid", source, q(name),
                   sides[n], sides[n])
    return q("SELECT w0.rid, {} AS score FROM {}", _exact(sides), source)


def best_page(lang, condition, window):
    """The page's statement: one row of NULL (the total, counted later),
    the page's rids and scores in relevance order, and the best score of
    every match (NULL for a page from the first match: its first score).
    ``lang``: a language.LanguagePostings of words joined by AND;
    ``condition``: over its postings ``h`` (the hot row's set and range
    under their names)."""
    k = window.b_start + window.b_size
    at = _at(lang)
    words = [param(word) for word in lang.words]
    table = schema.LANGPOSTINGS_TABLE
    ctes = []
    for n, word in enumerate(words):
        # the word's counts, from the highest, each found by one descent
        # of the B-tree; and each count's g
        t, u = q("t%d" % n), q("u%d" % n)
        ctes.append(q(
            "{}(tf) AS ((SELECT h.tf FROM {} h WHERE {} AND h.word = {} "
            "ORDER BY h.tf DESC LIMIT 1) UNION ALL SELECT (SELECT h.tf "
            "FROM {} h WHERE {} AND h.word = {} AND h.tf < {}.tf ORDER BY "
            "h.tf DESC LIMIT 1) FROM {} WHERE {}.tf IS NOT NULL), "
            "{} AS MATERIALIZED (SELECT {}.tf, {} AS g FROM {} WHERE "
            "{}.tf IS NOT NULL)",
            t, table, at, word, table, at, word, t, t, t,
            u, t, count_share_sql(q("{}.tf", t)), t, t))
    # the seeds: each word's first postings from its highest count down,
    # shortest entry first within a count; a larger one only when the
    # first holds fewer than k matches (PostgreSQL reads a CTE when a
    # statement first asks for its rows: coalesce asks in turn)
    for prefix, size in (("s", SEED), ("r", SEED * LARGER)):
        for n, word in enumerate(words):
            u = q("u%d" % n)
            ctes.append(q(
                "{} {} (SELECT x.rid, x.tf, x.dl FROM (SELECT {}.tf FROM "
                "{} ORDER BY {}.tf DESC) t CROSS JOIN LATERAL (SELECT h.rid, "
                "h.tf, h.dl FROM {} h WHERE {} AND h.word = {} AND h.tf = "
                "t.tf AND {} ORDER BY h.dl LIMIT {}) x LIMIT {})",
                q("%s%d" % (prefix, n)), _kept(n), u, u, u, table, at, word,
                condition, literal(size), literal(size)))
    least = [q("(SELECT y.score FROM ({}) y ORDER BY y.score DESC LIMIT 1 "
               "OFFSET {})", _joined(["%s%d" % (prefix, n)
                                      for n in range(len(words))]),
               literal(k - 1)) for prefix in ("s", "r")]
    ctes.append(q(
        "th AS MATERIALIZED (SELECT coalesce({}, {}, '-infinity'::float8) "
        "AS theta)", least[0], least[1]))
    most = [q("(SELECT max({}.g) FROM {})", q("u%d" % n), q("u%d" % n))
            for n in range(len(words))]
    for n, word in enumerate(words):
        reach = q("u.g")
        for other in (m for i, m in enumerate(most) if i != n):
            reach = q("({} + {})", reach, other)
        # the longest entry of this count that can score theta (a bound
        # of the B-tree, one more for rounding); every length while
        # theta is no bound
        b = q("b%d" % n)
        ctes.append(q(
            "{} AS MATERIALIZED (SELECT u.tf, CASE WHEN th.theta > 0 THEN "
            "(least(floor(exp(least({} / th.theta - 1, 40::float8))), "
            "2000000000::float8) + 1)::integer ELSE 2147483647 END AS "
            "dlmax FROM {} u CROSS JOIN th), "
            "{} {} (SELECT x.rid, x.tf, x.dl FROM {} b CROSS JOIN "
            "LATERAL (SELECT h.rid, h.tf, h.dl FROM {} h WHERE {} AND "
            "h.word = {} AND h.tf = b.tf AND h.dl <= b.dlmax AND {} OFFSET "
            "0) x)",
            b, reach, q("u%d" % n), q("c%d" % n), _kept(n), b, table, at,
            word, condition))
    ctes.append(q("m AS MATERIALIZED ({})",
                  _joined(["c%d" % n for n in range(len(words))])))
    best = (q("NULL::float8") if window.b_start == 0
            else q("(SELECT max(m.score) FROM m)"))
    return q(
        "WITH RECURSIVE {} SELECT NULL::bigint, array_agg(p.rid ORDER BY "
        "p.score DESC, p.rid DESC), array_agg(p.score ORDER BY p.score "
        "DESC, p.rid DESC), {} FROM (SELECT * FROM m ORDER BY m.score "
        "DESC, m.rid DESC LIMIT {} OFFSET {}) p", join(", ", ctes), best,
        literal(window.b_size), literal(window.b_start))


class LanguageWordsPage(Plan):
    """A page of words joined by AND searched by language, by relevance:
    its best matches (:func:`best_page`); the total counted from every
    match (``lang.statement``) when read."""

    def __init__(self, lang, condition, window):
        page = best_page(lang, condition, window)
        if window.b_size <= PAGE_WITH_METADATA:
            page = with_small_metadata(page, 4, 1, first=window.b_size)
        self.statement = page
        self.counting = q("SELECT count(*) FROM ({}) tr",
                          lang.statement(condition))

    def answer(self, store):
        return relevance.page_answer(store, self.statement, self.counting)
