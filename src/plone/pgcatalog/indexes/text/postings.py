"""A union of words read word by word: the matches of a glob the lexicon
replaced by its words (or of ``a OR b OR ...``), alone or beside required
words and phrases, with ZCTextIndex's Okapi scores (``scoring.py``'s
arithmetic), each text row read once per word it holds, its stored counts
only; and the cost model that says when this pays over matching the union
row by row (:meth:`Postings.pays`)."""
from plone.pgcatalog.indexes.text.encoding import quote_lexeme
from plone.pgcatalog.indexes.text.querytree import _And
from plone.pgcatalog.indexes.text.querytree import _has_regex
from plone.pgcatalog.indexes.text.querytree import _Or
from plone.pgcatalog.indexes.text.querytree import _Phrase
from plone.pgcatalog.indexes.text.querytree import _Word
from plone.pgcatalog.indexes.text.querytree import tsquery_text
from plone.pgcatalog.indexes.text.scoring import _HALF_SQL
from plone.pgcatalog.indexes.text.scoring import _okapi
from plone.pgcatalog.indexes.text.scoring import f8
from plone.pgcatalog.indexes.text.scoring import indexed_words
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import param
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema


#: A union of at least this many words, alone or beside hot conditions, is
#: read word by word (:func:`postings_sql`): even for a few words, a row
#: matched at once is read with its whole tsvector (a three-word glob
#: beside the anonymous filters at 100,000 entries: 132 -> 58 ms).
POSTINGS_MIN_WORDS = 2
#: Cost of a union of words, two ways, in microseconds per row (100,000
#: entries, warm): read word by word, ``POSTING_US`` per row read (a row
#: once per word it holds: its term frequency and length, then summed per
#: row); or matched at once, ``UNION_ROW_US`` per row of the union (one
#: bitmap scan) plus ``ROW_SCORE_US`` per matched row the other
#: conditions keep, scored in one pass over its lexemes
#: (``_Scorer.glob_words``).  Only their ratios decide
#: (:meth:`Postings.pays`: word by word when the other conditions keep
#: more than (POSTING_US * reads / union - UNION_ROW_US) / ROW_SCORE_US
#: of the documents); the figures are one machine's.  Measured by
#: ``python benchmarks/cost_constants.py --entries 100000``
#: (benchmarks/README.md).
POSTING_US = 3.0
UNION_ROW_US = 1.0
ROW_SCORE_US = 15.0


class Postings:
    """The matches of a union of many words and their scores, read word by
    word (:func:`postings_sql`): ``statement`` (``SELECT rid, score``),
    ``reads`` (the rows it reads: the sum of the words' document
    frequencies) and ``documents`` (the index's, when known)."""

    def __init__(self, statement, reads, documents, kept=None):
        self.statement = statement
        self.reads = reads
        self.documents = documents
        #: a :class:`KeptPostings` reading the same matches and scores from
        #: the kept postings (a union alone), else None
        self.kept = kept

    def pays(self, kept):
        """Whether reading word by word costs less than matching the union
        row by row and scoring the rows ``kept`` of ``documents`` other
        conditions keep (each row of the union is then read once, and only
        those kept are scored; the union's size is taken as the words' sum,
        the rows kept as independent of the words)."""
        if not self.documents:
            return True
        union = min(self.reads, self.documents)
        share = min(1.0, float(kept) / self.documents)
        return self.reads * POSTING_US <= \
            union * (UNION_ROW_US + share * ROW_SCORE_US)


class KeptPostings:
    """A union of words alone read from the postings kept for its index
    (``pgcatalog_postings``, schema version 7), when the index is named in
    ``pgcatalog_postings_names``: the words' rows of one B-tree range
    each, read alone (the count, the row's length, the entry's key set and
    range are in it).  ``name``: the index's id as a literal; ``words``,
    ``frequencies``: the union's words and their document frequencies;
    ``tf(count, dl)`` and ``idf(df)``: the scorer's arithmetic."""

    def __init__(self, cid, name, words, frequencies, word_score, idf):
        self.cid = cid
        self.name = name
        self.words = words
        self.frequencies = frequencies
        self.word_score = word_score
        self.idf = idf

    def guard(self):
        """Whether the index's postings are kept (SQL, evaluated once per
        statement: an uncorrelated sub-select)."""
        return q("EXISTS (SELECT 1 FROM {} k WHERE k.name = {})",
                 schema.POSTINGS_NAMES_TABLE, self.name)

    def statement(self, condition):
        """``SELECT rid, score`` of the union's matches whose postings
        ``h`` meet ``condition`` (a Fragment over ``h``'s ``sid``, ``lo``,
        ``hi``, ``rng``: the hot row's columns of those names), nothing
        when the postings are not kept (:meth:`guard`): the same matches
        and scores as :func:`postings_sql`'s, word for word."""
        return q(
            "SELECT h.rid, (sum({}))::float8 AS score FROM (SELECT w.lex, "
            "{} AS idf FROM unnest({}::text[], {}::float8[]) w(lex, df) "
            "OFFSET 0) w JOIN {} h ON h.cid = {} AND h.name = {} AND "
            "h.word = w.lex COLLATE \"C\" WHERE {} AND {} GROUP BY h.rid",
            self.word_score, self.idf, param(self.words),
            param(self.frequencies), schema.POSTINGS_TABLE,
            literal(int(self.cid)), self.name, self.guard(), condition)


class KeptWord(KeptPostings):
    """A single word (or a glob the lexicon replaced by one word) read from
    the postings kept for its index: its rows of one B-tree range, read
    alone, scored with the scorer's arithmetic for a word (``score``: over
    the posting ``h``'s ``tf`` and ``dl`` and the word's inverse frequency
    ``w.idf``; ``idf``: that frequency, SQL).  The same matches and scores
    as the word matched and scored on its text rows.

    ``rows``: beside hot conditions, the hot rows they keep; the postings
    are then read only when that pays (KEPT_WORD_SHARE_MIN), which the
    statement asks itself of the word's kept frequency: an uncorrelated
    sub-select, evaluated once, as the names are (:meth:`guard`)."""

    def __init__(self, cid, name, word, score, idf, rows=None,
                 dl_at_most=None):
        super().__init__(cid, name, [word], None, score, idf)
        self.rows = rows
        #: ``dl_at_most(count, least)``: the longest document in which the
        #: word counted ``count`` times (SQL) scores at least ``least``
        #: (SQL, a score), as SQL; None when unknown
        self.dl_at_most = dl_at_most

    def beside(self, rows):
        """The same word beside hot conditions keeping ``rows`` rows."""
        return KeptWord(self.cid, self.name, self.words[0], self.word_score,
                        self.idf, rows, self.dl_at_most)

    def at(self):
        """The word's postings ``h`` (SQL: a condition): one range of the
        postings' B-tree."""
        return q("h.cid = {} AND h.name = {} AND h.word = {} COLLATE \"C\"",
                 literal(int(self.cid)), self.name, self.words[0])

    def guard(self):
        """Whether the postings are kept and, beside hot conditions, the
        word's postings are few enough for the rows those keep."""
        kept = super().guard()
        if self.rows is None:
            return kept
        return q("({} AND (SELECT coalesce(sum(k.n), 0) FROM {} k WHERE "
                 "k.cid = {} AND k.name = {} AND k.word = {}) <= {})",
                 kept, schema.TEXT_DF_TABLE, literal(int(self.cid)),
                 self.name, literal(self.words[0]),
                 f8(float(self.rows) / KEPT_WORD_SHARE_MIN))

    def statement(self, condition):
        """``SELECT rid, score`` of the word's postings ``h`` meeting
        ``condition`` (as :meth:`KeptPostings.statement`), nothing unless
        :meth:`guard`; one posting per row: nothing to sum."""
        return q(
            "SELECT h.rid, ({})::float8 AS score FROM (SELECT {} AS idf "
            "OFFSET 0) w JOIN {} h ON h.cid = {} AND h.name = {} AND "
            "h.word = {} COLLATE \"C\" WHERE {} AND {}",
            self.word_score, self.idf, schema.POSTINGS_TABLE,
            literal(int(self.cid)), self.name, self.words[0], self.guard(),
            condition)


#: A single word beside hot conditions is read from its kept postings
#: when the hot rows those conditions keep are at least this share of the
#: word's postings: each of its postings is then read (a B-tree range,
#: index-only, the key set tested on each), where matching its text rows
#: reads at most as many text rows as hot rows kept, each a heap visit.
KEPT_WORD_SHARE_MIN = 0.05


def kept_word(index_id, node, qc, cid, mode="okapi"):
    """The matches of a single word of text index ``index_id`` in catalog
    ``cid`` and their Okapi scores read from the index's kept postings (a
    :class:`KeptWord`), or None for any other tree, in ``ts_rank`` mode."""
    if mode != "okapi" or not isinstance(node, _Word):
        return None
    scorer = _okapi(index_id, node, qc)
    score = q("floor({} * w.idf + {})",
              scorer.tf(q("h.tf"), q("h.dl::float8")), _HALF_SQL)

    def dl_at_most(count, least):
        # floor(tf * idf + 0.5) >= least  <=>  tf >= (least - 0.5) / idf
        # (``least`` a whole number, idf above 0)
        return scorer.dl_at_most(count, q("(({} - {}) / w.idf)", least,
                                          _HALF_SQL))

    return KeptWord(cid, scorer.name, node.lex, score,
                    scorer.word_idf_sql(node.lex), dl_at_most=dl_at_most)


def _union_of_words(node):
    """Whether ``node`` is a union of POSTINGS_MIN_WORDS words or more."""
    return isinstance(node, _Or) and len(node.kids) >= POSTINGS_MIN_WORDS \
        and all(isinstance(k, _Word) for k in node.kids)


def _posting_parts(node):
    """``(union, rest, neg)`` of a tree read word by word: a union of
    words alone, or beside words and phrases all required (``rest``) and
    negated parts without a regular expression (``neg``); None for any
    other tree."""
    if _union_of_words(node):
        return node, [], []
    if not isinstance(node, _And):
        return None
    unions = [n for n in node.pos if _union_of_words(n)]
    rest = [n for n in node.pos if not _union_of_words(n)]
    if len(unions) != 1 or \
            not all(isinstance(n, (_Word, _Phrase)) for n in rest) or \
            any(_has_regex(n) for n in node.neg):
        return None
    return unions[0], rest, node.neg


def _posting_count(lex):
    """A word's count in the text row ``x`` (``lex``: the word, SQL): the
    stored count, 1 when not stored, the positions of a row written
    before counts were stored."""
    return q("coalesce((x.tf ->> {})::float8, CASE WHEN x.tf IS NULL THEN "
             "(SELECT cardinality(u.positions) FROM unnest(ts_filter("
             "setweight(x.tsv, 'A', ARRAY[{}]), '{{a}}')) u)::float8 ELSE 1 "
             "END)", lex, lex)


def postings_sql(index_id, node, qc, cid, mode="okapi"):
    """The matches of a union of words (a glob the lexicon replaced by its
    words, or ``a OR b OR ...``), alone or beside required words and
    phrases (``word AND glob*``, as Plone's search sends two words), with
    their scores, read word by word (a :class:`Postings`): ``SELECT rid,
    score`` over the text rows of catalog ``cid``, one bitmap scan of the
    index per word of the union (with the required words: each scan reads
    the rows holding them all), each row read once per word it holds (its
    term frequencies and length only), the union's words' scores summed
    per row and the required words' added once.  None for any other tree,
    under POSTINGS_MIN_WORDS words, in ``ts_rank`` mode, or when a word's
    document frequency is not known.

    The same score as the one pass over each matching row's lexemes
    (``_Scorer.glob_words``), in a fifth of the time for a broad glob:
    a three-letter glob of 112 words over 60,658 of 100,000 rows, 950 ->
    170 ms in SQL (a row's lexemes are not searched for every word)."""
    parts = _posting_parts(node) if mode == "okapi" else None
    if parts is None:
        return None
    union, rest, neg = parts
    scorer = _okapi(index_id, node, qc)
    if scorer.df is None:
        return None
    required = [lex for n in rest
                for lex in ([n.lex] if isinstance(n, _Word) else n.lexes)]
    found = [(kid.lex, scorer.df(quote_lexeme(kid.lex)))
             for kid in union.kids]
    needed = [(lex, scorer.df(quote_lexeme(lex))) for lex in required]
    if any(n is None for _, n in found + needed):
        return None
    stats = getattr(qc, "text_stats", None)
    stats = stats(index_id) if callable(stats) else None
    documents = int(stats[0]) if stats else None
    found = [(lex, int(n)) for lex, n in found if n > 0]
    # the rows each scan reads: the word's, or fewer with required words
    reads = sum(n for _, n in found)
    if needed:
        reads = min(reads, min(int(n) for _, n in needed))
    if not found or any(int(n) == 0 for _, n in needed):
        return Postings(q("SELECT NULL::bigint AS rid, NULL::float8 AS "
                          "score WHERE FALSE"), 0, documents)
    # the words, their queries and frequencies as three arrays (not a
    # VALUES list: a three-letter glob's hundred words were 15 KB of
    # statement to compose, send, parse and plan); each word's query and
    # inverse frequency made once (OFFSET 0), not per row read
    words = [lex for lex, _n in found]
    queries = [tsquery_text(_And(rest + [_Word(lex)], neg), prefixes=True)
               if rest or neg else quote_lexeme(lex) for lex in words]
    frequencies = [float(n) for _lex, n in found]
    dl = q("x.dl::float8")
    # each word's score computed where its row is read (OFFSET 0: not
    # pulled up into the grouping): only (rid, score) go on to the sum.
    # Pulled up, the rows' tsvectors went through the grouping's sort (124
    # MB on disk for 82,912 rows: 433 ms).
    def word_score(count, length):
        # a word's Okapi term from its count and the row's length, and
        # the word's inverse frequency ``w.idf``: the same arithmetic
        # over the text rows and over the kept postings
        return q("floor({} * w.idf + {})", scorer.tf(count, length),
                 _HALF_SQL)

    word = word_score(_posting_count(q("w.lex")), dl)
    idf = scorer.idf(q("w.df"))
    # the required words' scores: the same in each of the row's reads,
    # added once
    also = join(" + ", [q("floor({} * {} + {})",
                          scorer.tf(_posting_count(literal(lex)), dl),
                          scorer.idf(f8(max(int(n), 1))), _HALF_SQL)
                        for lex, n in needed]) if needed else q("0")
    total = q("sum(p.k) + max(p.r)") if needed else q("sum(p.k)")
    kept = None
    if not needed and not neg:
        kept = KeptPostings(
            cid, scorer.name, words, frequencies,
            word_score(q("h.tf"), q("h.dl::float8")), idf)
    return Postings(q(
        "SELECT p.rid, ({})::float8 AS score FROM (SELECT w.lex, "
        "w.query::tsquery AS query, {} AS idf FROM unnest({}::text[], "
        "{}::text[], {}::float8[]) w(lex, query, df) OFFSET 0) w CROSS "
        "JOIN LATERAL (SELECT x.rid, {} AS k, {} AS r FROM {} x WHERE "
        "x.cid = {} AND {} @@ w.query OFFSET 0) p GROUP BY p.rid",
        total, idf, param(words), param(queries),
        param(frequencies), word, also, schema.TEXT_TABLE,
        literal(int(cid)),
        indexed_words(scorer.name, "x")), reads, documents, kept)
