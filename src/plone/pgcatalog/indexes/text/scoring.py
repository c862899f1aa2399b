"""Relevance: ZCTextIndex's Okapi BM25 score, as SQL.

The rank expression computes ZCTextIndex's Okapi BM25 score (same formula,
same operations, same integer scaling; a union adds the scores of the
branches that matched, NOT parts add nothing) in SQL, so
``data_record_score_`` and the relevance order match ZCatalog's as long as
the collection statistics are exact:

- N (documents in the index) and the mean document length come from
  ``qc.text_stats(index_id) -> (document_count, total_word_count)`` when
  the query context offers it; otherwise N is counted and the mean length
  is taken over the first STATS_SAMPLE rows (exact for small indexes);
- a word's document frequency comes from ``qc.text_df(index_id, tsquery)
  -> count`` when the query context offers it (the tool's, textstats.py:
  exact, a common word's kept for a while across changes), else it is
  counted up to DF_EXACT_LIMIT documents by a subquery of the scoring
  statement;
- a glob the index replaced by its words (the lexicon's, ``qc.text_words``,
  textstats.py: a :class:`_Words` node) is the union of those words, each
  scored with its own document frequency, as ZCTextIndex does; a glob
  kept as a glob (no lexicon in the query context, or more than
  ``textstats.GLOB_WORDS_MAX`` words with its prefix) gets exact per-word
  document frequencies when it matches at most GLOB_EXACT_DOCS documents,
  else its own frequency for all its words.

Cost per matched row: ~15-40 us for words and phrases (binary searches
with setweight/ts_filter); a glob of known words reads each word (up to
GLOB_WORD_COLUMNS) as a word, or all of them in one pass over the row's
lexemes (12,542 rows of 100,000 entries: 112 ms with the lexemes listed
per row, 44 ms with the words known, 22 ms for one word read as a word).
A union of words alone or beside hot conditions is read word by word
instead (``postings.py``: each row once per word it holds, its stored
counts only, ~3 us).  The ``"ts_rank"`` mode is
PostgreSQL's cheaper ts_rank, with another order.

The expressions hold their values as *literals*, no parameters: numbers
(the statistics, the document frequencies the tool counted; those it
does not keep for a search of words read by the statement itself from
their kept rows, :func:`_kept_scorer`), lexemes and tsqueries.  The
expression is evaluated per matched row; with constants the planner folds
the statistics' arithmetic once, and the statement reads the same in
``EXPLAIN`` and in the log as it runs.
"""
import functools
import json

from plone.pgcatalog.indexes.text.encoding import DL_MARK
from plone.pgcatalog.indexes.text.encoding import dl_positions_sql
from plone.pgcatalog.indexes.text.encoding import dl_sql
from plone.pgcatalog.indexes.text.encoding import quote_lexeme
from plone.pgcatalog.indexes.text.encoding import unquote_lexeme
from plone.pgcatalog.indexes.text.querytree import _And
from plone.pgcatalog.indexes.text.querytree import _Glob
from plone.pgcatalog.indexes.text.querytree import _Or
from plone.pgcatalog.indexes.text.querytree import _Phrase
from plone.pgcatalog.indexes.text.querytree import _Word
from plone.pgcatalog.indexes.text.querytree import _Words
from plone.pgcatalog.indexes.text.querytree import match_sql
from plone.pgcatalog.indexes.text.querytree import positive
from plone.pgcatalog.indexes.text.querytree import tsquery_text
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: Rows read to estimate the mean document length when no statistics are
#: given (exact for indexes with no more documents than this).
STATS_SAMPLE = 500
#: Document frequencies (for the idf) are counted up to this many
#: documents by the scoring statement itself; the tool counts a more
#: frequent word exactly (textstats.py), without it a word is scored as if
#: it had this many.
DF_EXACT_LIMIT = 2000
#: A glob matching at most this many documents gets the exact per-word
#: document frequencies of ZCTextIndex in its score; a broader glob uses
#: its own document frequency for all its words.
GLOB_EXACT_DOCS = 1000
#: A glob of known words (the lexicon's) reads at most this many of them
#: as words (each a binary search in the row); more in one pass over the
#: row's lexemes.
GLOB_WORD_COLUMNS = 4

# Okapi BM25 constants of Products.ZCTextIndex.OkapiIndex.
_K1 = 1.2
_B = 0.75


def f8(value):
    """A float literal PostgreSQL reads back to the same double (psycopg
    writes a float literal as its ``repr``)."""
    return q("{}::float8", literal(float(value)))


_K1_SQL = f8(_K1)
_K1_PLUS1_SQL = f8(_K1 + 1.0)
_B_SQL = f8(_B)
_B_FROM1_SQL = f8(1.0 - _B)
_ONE_SQL = f8(1.0)
_SCALE_SQL = f8(1024.0)
_HALF_SQL = f8(0.5)

#: the text table
#: the tsvector of the text row ``t`` (the row of the entry ``e``)
T_TSV = q("t.tsv")


def indexed_words(name, row=None):
    """The tsvector of the text row ``row`` (an alias; None: the table's
    columns, for the index's DDL) when that row is text index ``name``'s
    (the index id as a literal), else NULL: what each text index's GIN
    index is built on (schema version 15), and what every condition that
    looks for rows by their words is written on, without ``name = ...``
    beside it.  PostgreSQL keeps an index expression's statistics: a
    word's rows in one text index are estimated from that index's rows,
    where ``name = ... AND tsv @@ ...`` took the word's frequency among
    every text index's rows and multiplied the name's share in (a word in
    2,717 rows of 100,000 entries' SearchableText estimated at 1,165, and
    a date-ordered text search then read every match instead of walking
    the date order)."""
    if row is None:
        return q("(CASE WHEN name = {} THEN tsv END)", name)
    return q("(CASE WHEN {} = {} THEN {} END)", ident(row, "name"), name,
             ident(row, "tsv"))


#: the statement's catalog scope, when no catalog id is known
_NO_SCOPE = q("")


def stats_sql(index_id, qc):
    """``(N, mean document length, scope)`` of text index ``index_id`` as
    Fragments.

    ``qc.text_stats(index_id)`` may return exact ``(document_count,
    total_word_count)`` numbers (the tool keeps them, as OkapiIndex keeps
    ``document_count``/``_totaldoclen``); otherwise N is counted and the
    mean length is taken from the first STATS_SAMPLE rows (exact for
    indexes that small).  ``qc.cid``, when set, scopes the statistics to
    one catalog (``scope``: a condition on the text row ``x``)."""
    name = literal(index_id)
    cid = getattr(qc, "cid", None)
    scope = _NO_SCOPE
    if cid is not None:
        # text rows carry their catalog's id (no join to scope them)
        scope = q(" AND x.cid = {}", literal(int(cid)))
    stats = getattr(qc, "text_stats", None)
    found = stats(index_id) if callable(stats) else None
    if found:
        return _stats_literals(found) + (scope,)
    n_sql = q("(SELECT greatest(count(*), 1)::float8 FROM {} x WHERE "
              "x.name = {}{})", schema.TEXT_TABLE, name, scope)
    mean_sql = q(
        "(SELECT greatest(coalesce(sum(y.dl), 0)::float8 / "
        "greatest(count(*), 1)::float8, 1e-9::float8) FROM (SELECT "
        "{} AS dl FROM {} x WHERE x.name = {}{} LIMIT {}) y)",
        dl_sql(q("x.tsv")), schema.TEXT_TABLE, name, scope,
        literal(STATS_SAMPLE))
    return n_sql, mean_sql, scope


def _stats_literals(found):
    """N and the mean document length as literals, from ``(document
    count, total word count)``."""
    count, total = found
    count = max(int(count), 1)
    return f8(count), f8(float(int(total)) / float(count))


def _row_alias(row):
    """The alias of the text row a score reads where it is (``row``: True
    for ``e``, or an alias), None when it is looked up for the entry."""
    if not row:
        return None
    return "e" if row is True else row


def rank_sql(index_id, node, qc=None, mode="okapi", row=False):
    """Relevance of the matched entry ``e`` for the match tree ``node`` of
    text index ``index_id``: ZCTextIndex's Okapi BM25 score, or
    PostgreSQL's ts_rank (``mode="ts_rank"``).  A Fragment with literals
    only (see the module docstring).  ``row``: the entry's text row of
    this index itself (``pgcatalog_text``) is in the statement, read where
    it is: True (it is ``e``) or its alias."""
    name = literal(index_id)
    row = _row_alias(row)
    if mode == "ts_rank":
        if row:
            return q("ts_rank({}.tsv, {}::tsquery)", ident(row),
                     literal(tsquery_text(positive(node))))
        return q("(SELECT ts_rank(t.tsv, {}::tsquery) FROM {} t WHERE "
                 "t.rid = e.rid AND t.name = {})",
                 literal(tsquery_text(positive(node))), schema.TEXT_TABLE,
                 name)
    return _okapi(index_id, node, qc).build(node, row)


def rank_columns(index_id, node, qc=None, mode="okapi", row="e"):
    """ZCTextIndex's Okapi score of the text row ``row`` (an alias) in two
    parts, for a
    statement that reads the text rows itself: ``(columns, score)``, what
    the score reads of each row (Fragments over ``e`` named ``dl``,
    ``f0``, ``f1``...: each term frequency read once, in the scan's
    projection) and the score over them (``s.dl``, ``s.f0``...), with no
    sub-select per row (23,818 rows of 1,000,000 scored: 68 -> 43 ms).
    None for a query with a glob or a union (whose scores read more of
    the row), or in ``ts_rank`` mode."""
    if mode != "okapi":
        return None
    scorer = _okapi(index_id, node, qc)
    score = scorer.score(node)
    if scorer.globs or scorer.gated:
        return None
    return scorer.word_columns(ident(row),
                               present=_every_word_required(node)), score



def _every_word_required(node):
    """Whether a row matching ``node`` holds each of its scored words (no
    union, no glob): a word missing from the stored frequencies then
    occurs once, without looking it up in the tsvector (two words of
    100,000 entries: 7.7 -> 6.3 ms over 2,386 rows)."""
    if isinstance(node, (_Word, _Phrase)):
        return True
    if isinstance(node, _And):
        return all(_every_word_required(n) for n in node.pos)
    return False


def _words_only(node):
    """Whether ``node`` scores words and phrases only (no union, no glob):
    each document frequency its score needs is then a word's, one lookup
    in the kept frequencies."""
    if isinstance(node, (_Word, _Phrase)):
        return True
    if isinstance(node, _And):
        return all(_words_only(n) for n in node.pos)
    return False


def _okapi(index_id, node, qc):
    """The scorer of ``node`` with the index's statistics and document
    frequencies (fetched together when the query context can; for words
    and phrases, those the process does not keep are read by the scoring
    statement itself: :func:`_kept_scorer`)."""
    name = literal(index_id)
    if _words_only(node):
        scorer = _kept_scorer(index_id, qc)
        if scorer is not None:
            return scorer
    prefetch = getattr(qc, "text_prefetch", None)
    if callable(prefetch):
        # the statistics and every document frequency the score needs,
        # fetched together (one round trip), then read from the cache
        wanted = []
        _Scorer(name, _ONE_SQL, _ONE_SQL, _NO_SCOPE,
                lambda tsquery: wanted.append(tsquery)).build(node)
        prefetch(index_id, wanted)
    n_sql, mean_sql, scope = stats_sql(index_id, qc)
    text_df = getattr(qc, "text_df", None)
    df = None if text_df is None else functools.partial(text_df, index_id)
    return _Scorer(name, n_sql, mean_sql, scope, df)


def _kept_scorer(index_id, qc):
    """The scorer of words and phrases of text index ``index_id`` that
    asks no statement of its own: the statistics and each word's document
    frequency the process keeps (``qc.text_stats_kept``,
    ``qc.text_df_kept``) as literals, the others read from their kept rows
    by the scoring statement (uncorrelated sub-selects, run once: the sums
    ``pgcatalog_text_totals`` and ``pgcatalog_text_df`` keep, the same
    numbers a statement before it would read, with the same arithmetic).
    A search after an edit of a text pays no round trip for them.  None
    when the query context offers no kept values or no catalog id."""
    stats_kept = getattr(qc, "text_stats_kept", None)
    df_kept = getattr(qc, "text_df_kept", None)
    cid = getattr(qc, "cid", None)
    if stats_kept is None or df_kept is None or cid is None:
        return None
    name = literal(index_id)
    scope = q(" AND x.cid = {}", literal(int(cid)))
    found = stats_kept(index_id)
    if found is not None:
        n_sql, mean_sql = _stats_literals(found)
    else:
        docs = q("greatest(coalesce(sum(k.docs), 0), 1)::float8")
        source = q("FROM {} k WHERE k.cid = {} AND k.name = {}",
                   schema.TEXT_TOTALS_TABLE, literal(int(cid)), name)
        n_sql = q("(SELECT {} {})", docs, source)
        mean_sql = q("(SELECT coalesce(sum(k.words), 0)::float8 / {} {})",
                     docs, source)
    scorer = _Scorer(name, n_sql, mean_sql, scope)

    def idf(lex):
        count = df_kept(index_id, quote_lexeme(lex))
        if count is not None:
            return scorer.idf(f8(max(int(count), 1)))
        return q("(SELECT {} FROM {} k WHERE k.cid = {} AND k.name = {} "
                 "AND k.word = {})",
                 scorer.idf(q("greatest(coalesce(sum(k.n), 0), 1)")),
                 schema.TEXT_DF_TABLE, literal(int(cid)), name,
                 literal(lex))
    scorer.word_idf = idf
    return scorer


def df_sql(index_id, cid, tsquery, exact=False):
    """The statement counting the documents of catalog ``cid`` whose text
    in index ``index_id`` matches ``tsquery`` (a tsquery's text), up to
    DF_EXACT_LIMIT (``exact``: all of them): a word's document frequency.
    A word's (one lexeme) is the sum of its rows in the frequencies the
    text rows' triggers keep (``pgcatalog_text_df``, schema version 6):
    exact, a few rows.  The catalog id and the tsquery (or word) are
    parameters."""
    word = unquote_lexeme(tsquery)
    if word is not None:
        return q("SELECT coalesce(sum(k.n), 0)::bigint FROM {} k WHERE "
                 "k.cid = {} AND k.name = {} AND k.word = {}",
                 schema.TEXT_DF_TABLE, cid, index_id, word)
    words = indexed_words(literal(index_id), "x")
    if exact:
        return q("SELECT count(*) FROM {} x WHERE x.cid = {} AND {} @@ "
                 "{}::tsquery", schema.TEXT_TABLE, cid, words, tsquery)
    return q("SELECT count(*) FROM (SELECT 1 FROM {} x WHERE x.cid = {} "
             "AND {} @@ {}::tsquery LIMIT {}) c", schema.TEXT_TABLE, cid,
             words, tsquery,
             literal(DF_EXACT_LIMIT))


def words_df_sql(index_id, cid, tsqueries):
    """The statement of the document frequencies of several words
    (``tsqueries`` of one lexeme each) in catalog ``cid``'s text index
    ``index_id``, from their kept rows: one ``bigint[]`` in their order
    (a glob's words in one scan of the frequencies' B-tree, where a
    sub-select per word was planned and run once each)."""
    words = [unquote_lexeme(tsquery) for tsquery in tsqueries]
    return q("SELECT ARRAY(SELECT coalesce(k.n, 0)::bigint FROM unnest({}::"
             "text[]) WITH ORDINALITY AS w(word, i) LEFT JOIN (SELECT "
             "k.word, sum(k.n) AS n FROM {} k WHERE k.cid = {} AND k.name = "
             "{} AND k.word = ANY({}::text[]) GROUP BY k.word) k ON k.word = "
             "w.word ORDER BY w.i)", words, schema.TEXT_DF_TABLE, cid,
             index_id, words)


def glob_filter(node, lex):
    """The lexeme ``lex`` (a Fragment) is one the glob ``node`` matches."""
    conds = [q("starts_with({}, {})", lex, literal(node.prefix))]
    if node.regex is not None:
        conds.append(q("{} ~ {}", lex, literal(node.regex)))
    return join(" AND ", conds)


def glob_slice(node, array):
    """The part of a sorted lexeme array (a Fragment) that may start with
    the glob's prefix (tsvector lexemes are sorted bytewise: those lexemes
    are adjacent)."""
    prefix = literal(node.prefix)
    return q('{}[width_bucket({} COLLATE "C", {}) : width_bucket(({} || '
             'chr(1114111)) COLLATE "C", {})]',
             array, prefix, array, prefix, array)


def _column(kind, number):
    # a column of the per-row lateral subquery ``s``: f<n> (a word's term
    # frequency), gl<n> / gc<n> (a glob's lexemes and their frequencies),
    # k<n> (the score of a glob's known words)
    return kind + str(number)


class _Scorer:
    """ZCTextIndex's Okapi BM25 score (OkapiIndex._search_wids summed as
    the parse tree's weighted unions/intersections do) as SQL.

    Per matched row it only reads the query's lexemes out of the tsvector
    (``setweight`` + ``ts_filter``: binary searches in C), plus the
    lexeme array for globs; collection statistics are uncorrelated
    subqueries (computed once per statement)."""

    def __init__(self, name, n_sql, meandl_sql, scope, df=None):
        self.name = name            # the index id as a literal
        self.n_sql = n_sql
        self.meandl_sql = meandl_sql
        self.scope = scope
        #: ``df(tsquery text) -> count`` (capped at DF_EXACT_LIMIT), when
        #: the caller keeps document frequencies; else counted in SQL
        self.df = df
        self.words = {}     # lexeme -> column number
        self.globs = []     # _Glob nodes scored from the row's lexemes
        #: (words, document frequencies) of globs' words (from the
        #: lexicon) read in one pass (a column ``k<n>`` each)
        self.word_sets = []
        #: a union's branch scored only when it matched (reads ``t.tsv``)
        self.gated = False
        #: ``word_idf(lexeme) -> Fragment``: a word's idf as the scorer's
        #: maker gives it (:func:`_kept_scorer`), else from :meth:`idf`
        #: of :meth:`count_sql`
        self.word_idf = None

    def tf(self, f, dl=q("s.dl")):
        # OkapiIndex._search_wids, same operations in the same order.
        return q("({} * {} / ({} + {} * ({} + {} * {} / {})))",
                 f, _K1_PLUS1_SQL, f, _K1_SQL, _B_FROM1_SQL, _B_SQL, dl,
                 self.meandl_sql)

    def dl_at_most(self, f, least):
        """The longest document (SQL, a float) in which a word counted
        ``f`` times has a :meth:`tf` of at least ``least`` (SQL, above
        0): :meth:`tf` solved for the length, which it falls with."""
        return q("({} * ((({} * {} / {}) - {}) / {} - {}) / {})",
                 self.meandl_sql, _K1_PLUS1_SQL, f, least, f, _K1_SQL,
                 _B_FROM1_SQL, _B_SQL)

    def idf(self, df):
        # inverse_doc_frequency() * 1024.0
        return q("(ln({} + {} / ({})::float8) * {})",
                 _ONE_SQL, self.n_sql, df, _SCALE_SQL)

    def count_sql(self, tsquery):
        # Documents matching ``tsquery``, counted up to DF_EXACT_LIMIT.
        if self.df is not None:
            found = self.df(tsquery)
            if found is not None:
                return f8(max(int(found), 1))
        return q("(SELECT greatest(count(*), 1) FROM (SELECT 1 FROM {} x "
                 "WHERE {} @@ {}::tsquery{} LIMIT {}) c)",
                 schema.TEXT_TABLE, indexed_words(self.name, "x"),
                 literal(tsquery),
                 self.scope, literal(DF_EXACT_LIMIT))

    def word_idf_sql(self, lex):
        """A word's inverse document frequency (SQL): as the scorer's
        maker gives it (:func:`_kept_scorer`), else of its count."""
        if self.word_idf is not None:
            return self.word_idf(lex)
        return self.idf(self.count_sql(quote_lexeme(lex)))

    def word(self, lex):
        col = self.words.setdefault(lex, len(self.words))
        f = ident("s", _column("f", col))
        return q("(CASE WHEN {} > 0 THEN floor({} * {} + {}) ELSE 0 END)",
                 f, self.tf(f), self.word_idf_sql(lex), _HALF_SQL)

    def glob(self, node):
        col = len(self.globs)
        self.globs.append(node)
        tsquery = tsquery_text(node)
        count = self.count_sql(tsquery)
        # lexeme -> document frequency, exact when the glob matches at
        # most GLOB_EXACT_DOCS documents; otherwise every lexeme gets the
        # glob's own document frequency.
        dfmap = q(
            "(SELECT CASE WHEN {} <= {} THEN (SELECT "
            "jsonb_object_agg(y.l, y.n) FROM (SELECT g.l, count(*) AS n "
            "FROM {} x CROSS JOIN LATERAL (SELECT "
            "tsvector_to_array(x.tsv) AS a) xa CROSS JOIN LATERAL "
            "unnest({}) AS g(l) WHERE {} @@ {}::tsquery AND {}{} GROUP BY "
            "g.l) y) END)",
            count, literal(GLOB_EXACT_DOCS), schema.TEXT_TABLE,
            glob_slice(node, q("xa.a")), indexed_words(self.name, "x"),
            literal(tsquery),
            glob_filter(node, q("g.l")), self.scope)
        df = q("coalesce(({} ->> g.l)::float8, {})", dfmap, count)
        return q("(SELECT coalesce(sum(floor({} * {} + {})), 0) FROM "
                 "unnest({}, {}) AS g(l, c))",
                 self.tf(q("g.c")), self.idf(df), _HALF_SQL,
                 ident("s", _column("gl", col)),
                 ident("s", _column("gc", col)))

    def glob_words(self, node):
        """A glob's words (from the lexicon): ZCTextIndex's score of a
        glob, the sum of its words' (OkapiIndex.search_glob), each with its
        own document frequency; a word no document holds adds nothing.
        Up to GLOB_WORD_COLUMNS words are read as words, more in one pass
        over the row's lexemes (with the frequencies the query context
        gives)."""
        if len(node.lexes) <= GLOB_WORD_COLUMNS or self.df is None:
            return q("({})", join(" + ", [self.word(lex)
                                          for lex in node.lexes]))
        found = [(lex, self.df(quote_lexeme(lex))) for lex in node.lexes]
        if any(n is None for _, n in found):
            return _ONE_SQL     # collecting the frequencies (_okapi)
        found = [(lex, n) for lex, n in found if n > 0]
        if not found:
            return q("0")
        col = len(self.word_sets)
        self.word_sets.append(found)
        return ident("s", _column("k", col))

    def word_set_column(self, row, col):
        """The score of the word set ``col`` in the text row ``row`` (an
        alias): one pass over the row's lexemes of those words, each
        word's frequency read from a map (a constant)."""
        found = self.word_sets[col]
        lexes = q("ARRAY[{}]::text[]", join(", ", [
            literal(lex) for lex, _ in found]))
        dfs = q("{}::jsonb", literal(json.dumps(dict(found))))
        count = q("coalesce(({}.tf ->> u.lexeme)::float8, CASE WHEN {}.tf "
                  "IS NULL THEN cardinality(u.positions)::float8 ELSE 1 "
                  "END)", row, row)
        return q("(SELECT coalesce(sum(floor({} * {} + {})), 0) FROM "
                 "unnest(ts_filter(setweight({}.tsv, 'A', {}), '{{a}}')) u)"
                 "::float8 AS {}",
                 self.tf(count, q("{}.dl::float8", row)),
                 self.idf(q("({} ->> u.lexeme)::float8", dfs)), _HALF_SQL,
                 row, lexes, ident(_column("k", col)))

    def word_columns(self, row, present=False):
        """What the score of the words reads of the text row ``row`` (an
        alias): its length and each word's term frequency, stored beside
        the tsvector (a word's count when above 1, else 1 if the row holds
        the word; ``tf`` NULL: a row written before term frequencies were
        kept).  ``present``: the rows read hold every word (the match
        requires them all), so an absent count is 1."""
        def once(lex):
            if present:
                return q("1")
            return q("CASE WHEN {}.tsv @@ {}::tsquery THEN 1 ELSE 0 END",
                     row, literal(quote_lexeme(lex)))
        return join(", ", [q("{}.dl::float8 AS dl", row)] + [
            q("(CASE WHEN {}.tf IS NULL THEN NULL ELSE coalesce(({}.tf ->> "
              "{})::float8, {}) END)::float8 AS {}", row, row, literal(lex),
              once(lex), ident(_column("f", col)))
            for lex, col in self.words.items()] + [
            self.word_set_column(row, col)
            for col in range(len(self.word_sets))])

    def score(self, node, gated=False):
        if isinstance(node, _Word):
            return self.word(node.lex)
        if isinstance(node, _Glob):
            return self.glob(node)
        if isinstance(node, _Words):
            return self.glob_words(node)
        if isinstance(node, _Phrase):
            terms = [self.word(lex) for lex in node.lexes]
        elif isinstance(node, _And):
            terms = [self.score(n) for n in node.pos]
        elif isinstance(node, _Or):
            # a union adds the scores of the branches that matched
            return q("({})", join(" + ", [
                self.score(n, gated=True) for n in node.kids]))
        else:  # pragma: no cover
            raise TypeError(node)
        if gated:
            self.gated = True
            return q("(CASE WHEN {} THEN {} ELSE 0 END)",
                     match_sql(node, T_TSV, literal), join(" + ", terms))
        return q("({})", join(" + ", terms))

    def build(self, node, row=False):
        score = self.score(node)
        # the text row ``t``: looked up for the entry ``e``, or the
        # columns of the text row in the statement (``row``)
        row = _row_alias(row)
        if row:
            alias = ident(row)
            source, where = q("(SELECT {}.tsv, {}.dl, {}.tf) t", alias,
                              alias, alias), q("")
        else:
            source, where = q("{} t", schema.TEXT_TABLE), q(
                " WHERE t.rid = e.rid AND t.name = {}", self.name)
        if not self.globs:
            return q("(SELECT {} FROM {} CROSS JOIN LATERAL (SELECT {}) s"
                     "{})", score, source, self.word_columns(q("t")), where)
        wanted = join(" || ", [q("ARRAY[{}]::text[]", join(", ", [
            literal(lex) for lex in [DL_MARK] + list(self.words)]))] + [
            glob_slice(glob, q("ta.a")) for glob in self.globs])
        cols = [q("coalesce(max({}) FILTER (WHERE u.lexeme = {}), 0)::float8 "
                  "AS dl", dl_positions_sql(q("u.positions")),
                  literal(DL_MARK))]
        for lex, col in self.words.items():
            cols.append(q("sum(cardinality(u.positions)) FILTER (WHERE "
                          "u.lexeme = {})::float8 AS {}",
                          literal(lex), ident(_column("f", col))))
        for col in range(len(self.word_sets)):
            cols.append(self.word_set_column(q("t"), col))
        for col, glob in enumerate(self.globs):
            cond = glob_filter(glob, q("u.lexeme"))
            cols.append(q("array_agg(u.lexeme) FILTER (WHERE {}) AS {}",
                          cond, ident(_column("gl", col))))
            cols.append(q("array_agg(cardinality(u.positions)::float8) "
                          "FILTER (WHERE {}) AS {}",
                          cond, ident(_column("gc", col))))
        return q("(SELECT {} FROM {} CROSS JOIN LATERAL (SELECT "
                 "tsvector_to_array(t.tsv) AS a) ta CROSS JOIN LATERAL "
                 "(SELECT {} FROM unnest(ts_filter(setweight(t.tsv, 'A', {}), "
                 "'{{a}}')) u) s{})",
                 score, source, join(", ", cols), wanted, where)
