"""ZCTextIndex served from PostgreSQL full text search.

The index object keeps ZCTextIndex's configuration (``lexicon_id``, indexed
attributes, index type) but no data: each object's words are stored as one
``tsvector`` row of ``pgcatalog_text`` (``rid``, ``name`` = index id,
``tsv``).

Words are produced by the *lexicon's own pipeline* (splitter, normalizers,
stop words) exactly as ``Lexicon.sourceToWordIds`` does at index time, but
without assigning word ids, so nothing is written to the ZODB.  The tsvector
holds every word with its position (1..n) so that phrase search and
``getEntryForObject`` work; lexemes are written literally (no PostgreSQL
text search configuration is involved, the tsvector is built from a quoted
literal).

Queries are parsed with ZCTextIndex's own ``QueryParser`` and the lexicon
(same ParseError / QueryError as ZCatalog), and the parse tree is evaluated
with ZCTextIndex's execution rules (stop-word atoms are ignored, a phrase
containing an unknown word matches nothing, ...) into a ``tsquery``.  Globs
with a ``?`` or an inner ``*`` (which a tsquery cannot express) are checked
exactly with a regular expression over the document's lexemes.

Relevance: the rank expression computes ZCTextIndex's Okapi BM25 score
(same formula, same operations, same integer scaling; a union adds the
scores of the branches that matched, NOT parts add nothing) in SQL, so
``data_record_score_`` and the relevance order match ZCatalog's as long as
the collection statistics are exact:

- N (documents in the index) and the mean document length come from
  ``qc.text_stats(index_id) -> (document_count, total_word_count)`` when
  the query context offers it; otherwise N is counted and the mean length
  is taken over the first STATS_SAMPLE rows (exact for small indexes);
- a word's document frequency is counted up to DF_EXACT_LIMIT documents,
  by ``qc.text_df(index_id, tsquery) -> count`` when the query context
  offers it (the tool caches the counts with the statistics), else by a
  subquery of the scoring statement;
- a glob's per-word document frequencies are exact when the glob matches
  at most GLOB_EXACT_DOCS documents, else the glob's own frequency is used.

Each tsvector carries a marker lexeme ``"\x03"`` whose two positions
encode the document's word count (Okapi's document length); no query can
produce it and ``pgc_decode`` skips it.  Cost per matched row: ~15-40 us
for words and phrases (binary searches with setweight/ts_filter), more for
broad globs (every lexeme of the document with the prefix is scored, as
ZCTextIndex does).  ``pgc_rank_mode = "ts_rank"`` (or ``qc.text_rank``)
switches to PostgreSQL's cheaper ts_rank, with another order.

Known differences from ZCatalog (by PostgreSQL's tsvector limits):

- positions above 16383 are clamped to 16383, so phrase search in words
  beyond the 16383rd word of a document is unreliable (may miss or find
  phrases there), and the word order given back by ``pgc_decode`` is lost
  for those words;
- at most 256 positions are kept per distinct word: phrase search on
  occurrences past the 256th, the term frequency used by the score and the
  decoded word list are truncated accordingly;
- a single word longer than 2046 bytes is stored as a truncated prefix
  plus a hash (found by an exact query of the same word and by prefix
  globs, but decoded as that surrogate);
- a document whose distinct words exceed ~1 MB drops the words past that
  budget;
- the empty word (Plone's normalizer maps a few letters to "") is stored
  as ``"\\x01"``;
- ``ZCTextIndex.index_object`` keeps the old words when an object no
  longer has any text (it returns 0 without unindexing); ``pgc_extract``
  returns MISSING then, and the writer decides (deleting the row is the
  saner behaviour, keeping it mirrors ZCatalog).
"""
import functools
import hashlib
import re
from html import escape

from AccessControl.class_init import InitializeClass
from psycopg import sql

from Products.PluginIndexes.util import safe_callable
from Products.ZCTextIndex.interfaces import ILexicon
from Products.ZCTextIndex.Lexicon import _text2list
from Products.ZCTextIndex.ParseTree import QueryError
from Products.ZCTextIndex.QueryParser import QueryParser
from Products.ZCTextIndex.ZCTextIndex import ZCTextIndex
from Products.ZCTextIndex.ZCTextIndex import index_types

from plone.pgcatalog import schema
from plone.pgcatalog.indexes.base import MISSING
from plone.pgcatalog.indexes.base import NO_MATCH
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.base import compose


#: Highest tsvector position (PostgreSQL's MAXENTRYPOS - 1).
MAX_POSITION = 16383
#: Positions kept per lexeme (PostgreSQL's MAXNUMPOS).
MAX_POSITIONS_PER_WORD = 256
#: Longest lexeme PostgreSQL accepts, in bytes.
MAX_LEXEME_BYTES = 2046
#: Budget of distinct lexeme bytes per tsvector (PostgreSQL: 1 MB).
MAX_TSVECTOR_BYTES = 1000000
#: Stored in place of the empty word (no query can produce it).
EMPTY_WORD = "\x01"
#: Separates the kept prefix of an over-long word from its hash.
_LONG_MARK = "\x02"
#: Carries the document length (word count) in its two positions, so the
#: score reads it with a binary search (no query can produce this lexeme).
DL_MARK = "\x03"
_DL_BASE = 8191
#: Rows read to estimate the mean document length when no statistics are
#: given (exact for indexes with no more documents than this).
STATS_SAMPLE = 500
#: Document frequencies (for the idf) are counted up to this many
#: documents; a more frequent word is scored as if it had this many.
DF_EXACT_LIMIT = 2000
#: A glob matching at most this many documents gets the exact per-word
#: document frequencies of ZCTextIndex in its score; a broader glob uses
#: its own document frequency for all its words.
GLOB_EXACT_DOCS = 1000

# Okapi BM25 constants of Products.ZCTextIndex.OkapiIndex.
_K1 = 1.2
_B = 0.75


def _f8(value):
    """A float literal PostgreSQL reads back to the same double."""
    return "%r::float8" % float(value)


_K1_SQL = _f8(_K1)
_K1_PLUS1_SQL = _f8(_K1 + 1.0)
_B_SQL = _f8(_B)
_B_FROM1_SQL = _f8(1.0 - _B)
_ONE_SQL = _f8(1.0)
_SCALE_SQL = _f8(1024.0)
_HALF_SQL = _f8(0.5)


# -- words ---------------------------------------------------------------

def source_words(lexicon, text):
    """The words ``Lexicon.sourceToWordIds(text)`` would assign ids to."""
    last = _text2list(text)
    for element in lexicon._pipeline:
        last = element.process(last)
    return list(last)


def term_words(lexicon, text):
    """The words ``Lexicon.termToWordIds(text)`` would look up."""
    last = _text2list(text)
    for element in lexicon._pipeline:
        process = getattr(element, "process_post_glob", element.process)
        last = process(last)
    return list(last)


def lexeme(word):
    """The tsvector lexeme storing ``word``."""
    if isinstance(word, bytes):
        word = word.decode("utf-8", "replace")
    elif not isinstance(word, str):
        word = str(word)
    if not word:
        return EMPTY_WORD
    if "\x00" in word:
        word = word.replace("\x00", "\ufffd")
    encoded = word.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_LEXEME_BYTES:
        digest = hashlib.sha1(encoded).hexdigest()[:16]
        keep = encoded[:MAX_LEXEME_BYTES - len(digest) - 1]
        word = keep.decode("utf-8", "ignore") + _LONG_MARK + digest
    return word


def _clip_prefix(prefix):
    encoded = prefix.encode("utf-8", "surrogatepass")
    limit = MAX_LEXEME_BYTES - 17
    if len(encoded) > limit:
        prefix = encoded[:limit].decode("utf-8", "ignore")
    return prefix


def quote_lexeme(lex):
    """``lex`` quoted for tsvector / tsquery input."""
    return "'" + lex.replace("\\", "\\\\").replace("'", "''") + "'"


class TextValue(str):
    """A ``pgc_extract`` value: the tsvector input text, carrying the
    document length ``dl`` and the term frequencies ``tf`` (lexeme ->
    count) the writer stores beside it for cheap Okapi scoring."""

    dl = None
    tf = None


def tsvector_literal(words):
    """tsvector input text for a word list, positions 1..n (plus the
    document length marker), as a :class:`TextValue`."""
    words = list(words)
    tf = {}
    dl = min(len(words), _DL_BASE * _DL_BASE - 1)
    positions = {DL_MARK: [dl // _DL_BASE + 1, _DL_BASE + 1 + dl % _DL_BASE]}
    used = 1
    for i, word in enumerate(words):
        lex = lexeme(word)
        pos = i + 1 if i < MAX_POSITION else MAX_POSITION
        tf[lex] = tf.get(lex, 0) + 1
        found = positions.get(lex)
        if found is None:
            size = len(lex.encode("utf-8", "surrogatepass"))
            if used + size > MAX_TSVECTOR_BYTES:
                continue
            used += size
            positions[lex] = [pos]
        elif len(found) < MAX_POSITIONS_PER_WORD and found[-1] != pos:
            found.append(pos)
    value = TextValue(" ".join(
        "%s:%s" % (quote_lexeme(lex), ",".join(map(str, found)))
        for lex, found in positions.items()))
    value.dl = len(words)
    value.tf = {lex: n for lex, n in tf.items() if lex in positions}
    return value


# The marker sorts first (only the empty word's lexeme sorts before it).
_DL_RE = re.compile("(?:'\x01'(?::[0-9A-D,]+)? )?'\x03':(\\d+),(\\d+)")


def doclen_from_tsvector(text):
    """The word count (Okapi document length) of a stored tsvector text or
    of a ``pgc_extract`` value; None without the marker."""
    found = _DL_RE.match(text or "")
    if found is None:
        return None
    return ((int(found.group(1)) - 1) * _DL_BASE
            + int(found.group(2)) - _DL_BASE - 1)


def words_from_tsvector(text):
    """The ordered word list stored in a tsvector (its text form)."""
    if text is None:
        return None
    entries = []
    i = 0
    n = len(text)
    order = 0
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        buf = []
        if c == "'":
            i += 1
            while i < n:
                c = text[i]
                if c == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                elif c == "'":
                    if i + 1 < n and text[i + 1] == "'":
                        buf.append("'")
                        i += 2
                    else:
                        i += 1
                        break
                else:
                    buf.append(c)
                    i += 1
        else:
            while i < n and not text[i].isspace() and text[i] != ":":
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(text[i])
                i += 1
        word = "".join(buf)
        skip = word == DL_MARK
        if word == EMPTY_WORD:
            word = ""
        poss = []
        if i < n and text[i] == ":":
            i += 1
            while i < n and not text[i].isspace():
                j = i
                while j < n and text[j].isdigit():
                    j += 1
                if j > i:
                    poss.append(int(text[i:j]))
                while j < n and text[j] not in ", \t\n\r":
                    j += 1  # weight letter
                if j < n and text[j] == ",":
                    j += 1
                i = j
        if skip:
            continue
        if not poss:
            poss = [MAX_POSITION + 1]
        for pos in poss:
            entries.append((pos, order, word))
        order += 1
    entries.sort()
    return [word for _, _, word in entries]


# -- query tree ------------------------------------------------------------

class _False:
    """Matches nothing."""

    def __repr__(self):
        return "FALSE"


FALSE = _False()


class _Word:
    def __init__(self, lex):
        self.lex = lex


class _Glob:
    def __init__(self, prefix, regex):
        self.prefix = prefix     # literal prefix of the pattern
        self.regex = regex       # PostgreSQL regex, or None for prefix:*


class _Phrase:
    def __init__(self, lexes):
        self.lexes = lexes


class _And:
    def __init__(self, pos, neg):
        self.pos = pos
        self.neg = neg


class _Or:
    def __init__(self, kids):
        self.kids = kids


def _simplify_or(kids):
    kids = [k for k in kids if k is not FALSE]
    if not kids:
        return FALSE
    if len(kids) == 1:
        return kids[0]
    return _Or(kids)


def _simplify_and(pos, neg):
    if not pos or any(p is FALSE for p in pos):
        return FALSE
    neg = [n for n in neg if n is not FALSE]
    if len(pos) == 1 and not neg:
        return pos[0]
    return _And(pos, neg)


def _glob_node(pattern):
    """Mirror Lexicon.globToWordIds(pattern) as a tree node."""
    if isinstance(pattern, bytes):
        pattern = pattern.decode("utf-8", "replace")
    prefix = ""
    rest = pattern
    while rest and rest[0] not in "*?":
        prefix += rest[0]
        rest = rest[1:]
    if not rest:
        return _Word(lexeme(prefix))
    if not prefix:
        raise QueryError(
            "pattern %r shouldn't start with glob character" % rest)
    pat = prefix
    for c in rest:
        if c == "*":
            pat += ".*"
        elif c == "?":
            pat += "."
        else:
            pat += re.escape(c)
    pat += "$"
    re.compile(pat)  # the same re.error as ZCTextIndex for odd prefixes
    simple = rest.strip("*") == "" and re.escape(prefix) == prefix
    return _Glob(_clip_prefix(prefix),
                 None if simple else "^(?:%s)" % pat)


def translate(tree, lexicon):
    """ZCTextIndex's execution of a parse tree, as a match tree.

    Returns None where ZCTextIndex's executeQuery returns None (the node is
    ignored, e.g. a stop word), FALSE when nothing can match."""
    kind = tree.nodeType()
    if kind == "ATOM":
        # OkapiIndex.search: union of the term's words; none -> None.
        words = term_words(lexicon, tree.getValue())
        if not words:
            return None
        return _simplify_or([_Word(lexeme(w)) for w in words])
    if kind == "PHRASE":
        words = term_words(lexicon, tree.getValue())
        if not words:
            return FALSE
        if len(words) == 1:
            return _Word(lexeme(words[0]))
        return _Phrase([lexeme(w) for w in words])
    if kind == "GLOB":
        return _glob_node(tree.getValue())
    if kind == "AND":
        pos = []
        neg = []
        for sub in tree.getValue():
            if sub.nodeType() == "NOT":
                r = translate(sub.getValue(), lexicon)
                if r is not None:
                    neg.append(r)
            else:
                r = translate(sub, lexicon)
                if r is not None:
                    pos.append(r)
        return _simplify_and(pos, neg)
    if kind == "OR":
        kids = []
        for sub in tree.getValue():
            r = translate(sub, lexicon)
            if r is not None:
                kids.append(r)
        return _simplify_or(kids)
    if kind == "NOT":
        raise QueryError("NOT parse tree node cannot be executed directly")
    raise QueryError("Unknown parse tree node %r" % (tree,))


def _has_regex(node):
    if isinstance(node, _Glob):
        return node.regex is not None
    if isinstance(node, _And):
        return any(_has_regex(n) for n in node.pos + node.neg)
    if isinstance(node, _Or):
        return any(_has_regex(n) for n in node.kids)
    return False


def tsquery_text(node):
    """The tsquery for a match tree (globs with a regex: their prefix)."""
    if isinstance(node, _Word):
        return quote_lexeme(node.lex)
    if isinstance(node, _Glob):
        return quote_lexeme(node.prefix) + ":*"
    if isinstance(node, _Phrase):
        return "(%s)" % " <-> ".join(quote_lexeme(x) for x in node.lexes)
    if isinstance(node, _And):
        text = " & ".join(tsquery_text(n) for n in node.pos)
        if node.neg:
            text += " & !(%s)" % " | ".join(tsquery_text(n) for n in node.neg)
        return "(%s)" % text
    if isinstance(node, _Or):
        return "(%s)" % " | ".join(tsquery_text(n) for n in node.kids)
    raise TypeError(node)  # pragma: no cover


def _positive(node):
    """The node without its negated parts (what the score looks at)."""
    if isinstance(node, _And):
        return _simplify_and([_positive(n) for n in node.pos], [])
    if isinstance(node, _Or):
        return _simplify_or([_positive(n) for n in node.kids])
    return node


def match_sql(node, value, tsv="t.tsv"):
    """SQL condition over ``tsv`` for a match tree; ``value(text)`` turns a
    string into SQL (a placeholder or a literal)."""
    if not _has_regex(node):
        return "%s @@ %s::tsquery" % (tsv, value(tsquery_text(node)))
    if isinstance(node, _Glob):
        return (
            "(%s @@ %s::tsquery AND EXISTS (SELECT 1 FROM unnest(%s) u "
            "WHERE starts_with(u.lexeme, %s) AND u.lexeme ~ %s))" % (
                tsv, value(tsquery_text(node)), tsv, value(node.prefix),
                value(node.regex)))
    if isinstance(node, _And):
        text = " AND ".join(match_sql(n, value, tsv) for n in node.pos)
        if node.neg:
            text += " AND NOT (%s)" % " OR ".join(
                match_sql(n, value, tsv) for n in node.neg)
        return "(%s)" % text
    if isinstance(node, _Or):
        return "(%s)" % " OR ".join(
            match_sql(n, value, tsv) for n in node.kids)
    raise TypeError(node)  # pragma: no cover


def _literal(value):
    """A string as an SQL literal inside a statement that has parameters
    (``%`` doubled for psycopg's placeholder parsing)."""
    return compose(sql.Literal(value)).replace("%", "%%")


def _glob_filter(node, lex_sql):
    cond = "starts_with(%s, %s)" % (lex_sql, _literal(node.prefix))
    if node.regex is not None:
        cond += " AND %s ~ %s" % (lex_sql, _literal(node.regex))
    return cond


def _dl_sql(positions):
    """The document length encoded in the marker's positions."""
    return "((%s[1] - 1) * %d + (%s[2] - %d))" % (
        positions, _DL_BASE, positions, _DL_BASE + 1)


def dl_sql(tsv):
    """SQL: the word count of the document stored in ``tsv``."""
    return ("(SELECT %s FROM unnest(ts_filter(setweight(%s, 'A', "
            "ARRAY[%s]), '{a}')) u)" % (
                _dl_sql("u.positions"), tsv, _literal(DL_MARK)))


def _glob_slice(node, array):
    """The part of a sorted lexeme array that may start with the prefix
    (tsvector lexemes are sorted bytewise: those lexemes are adjacent)."""
    prefix = _literal(node.prefix)
    return ('%s[width_bucket(%s COLLATE "C", %s) : width_bucket((%s || '
            'chr(1114111)) COLLATE "C", %s)]' % (
                array, prefix, array, prefix, array))


class _Scorer:
    """ZCTextIndex's Okapi BM25 score (OkapiIndex._search_wids summed as
    the parse tree's weighted unions/intersections do) as SQL.

    Per matched row it only reads the query's lexemes out of the tsvector
    (``setweight`` + ``ts_filter``: binary searches in C), plus the
    lexeme array for globs; collection statistics are uncorrelated
    subqueries (computed once per statement).  Literals only: the
    expression can be placed anywhere in a statement."""

    def __init__(self, name_sql, n_sql, meandl_sql, scope, df=None):
        self.name_sql = name_sql
        self.n_sql = n_sql
        self.meandl_sql = meandl_sql
        self.scope = scope
        #: ``df(tsquery text) -> count`` (capped at DF_EXACT_LIMIT), when
        #: the caller keeps document frequencies; else counted in SQL
        self.df = df
        self.words = {}     # lexeme -> column index
        self.globs = []     # _Glob nodes

    def tf(self, f):
        # OkapiIndex._search_wids, same operations in the same order.
        return ("(%(f)s * %(k1p1)s / (%(f)s + %(k1)s * (%(bf1)s + %(b)s "
                "* s.dl / %(mean)s)))" % dict(
                    f=f, k1p1=_K1_PLUS1_SQL, k1=_K1_SQL, bf1=_B_FROM1_SQL,
                    b=_B_SQL, mean=self.meandl_sql))

    def idf(self, df):
        # inverse_doc_frequency() * 1024.0
        return "(ln(%s + %s / (%s)::float8) * %s)" % (
            _ONE_SQL, self.n_sql, df, _SCALE_SQL)

    def count_sql(self, tsquery):
        # Documents matching ``tsquery``, counted up to DF_EXACT_LIMIT.
        if self.df is not None:
            found = self.df(tsquery)
            if found is not None:
                return _f8(max(int(found), 1))
        return ("(SELECT greatest(count(*), 1) FROM (SELECT 1 FROM %s x "
                "WHERE x.name = %s AND x.tsv @@ %s::tsquery%s LIMIT %d) c)" % (
                    schema.TEXT, self.name_sql, _literal(tsquery),
                    self.scope, DF_EXACT_LIMIT))

    def word(self, lex):
        col = self.words.setdefault(lex, len(self.words))
        f = "s.f%d" % col
        return ("(CASE WHEN %s > 0 THEN floor(%s * %s + %s) ELSE 0 END)" % (
            f, self.tf(f), self.idf(self.count_sql(quote_lexeme(lex))),
            _HALF_SQL))

    def glob(self, node):
        col = len(self.globs)
        self.globs.append(node)
        tsq = _literal(tsquery_text(node))
        count = self.count_sql(tsquery_text(node))
        # lexeme -> document frequency, exact when the glob matches at
        # most GLOB_EXACT_DOCS documents; otherwise every lexeme gets the
        # glob's own document frequency.
        dfmap = (
            "(SELECT CASE WHEN %(count)s <= %(limit)d THEN (SELECT "
            "jsonb_object_agg(y.l, y.n) FROM (SELECT g.l, count(*) AS n "
            "FROM %(text)s x CROSS JOIN LATERAL (SELECT "
            "tsvector_to_array(x.tsv) AS a) xa CROSS JOIN LATERAL "
            "unnest(%(slice)s) AS g(l) WHERE x.name = %(name)s AND x.tsv @@ "
            "%(tsq)s::tsquery AND %(cond)s%(scope)s GROUP BY g.l) y) END)"
            % dict(
                count=count, limit=GLOB_EXACT_DOCS, text=schema.TEXT,
                slice=_glob_slice(node, "xa.a"), name=self.name_sql, tsq=tsq,
                cond=_glob_filter(node, "g.l"), scope=self.scope))
        df = "coalesce((%s ->> g.l)::float8, %s)" % (dfmap, count)
        return (
            "(SELECT coalesce(sum(floor(%s * %s + %s)), 0) FROM "
            "unnest(s.gl%d, s.gc%d) AS g(l, c))" % (
                self.tf("g.c"), self.idf(df), _HALF_SQL, col, col))

    def score(self, node, gated=False):
        if isinstance(node, _Word):
            return self.word(node.lex)
        if isinstance(node, _Glob):
            return self.glob(node)
        if isinstance(node, _Phrase):
            text = " + ".join(self.word(lex) for lex in node.lexes)
        elif isinstance(node, _And):
            text = " + ".join(self.score(n) for n in node.pos)
        elif isinstance(node, _Or):
            # a union adds the scores of the branches that matched
            return "(%s)" % " + ".join(
                self.score(n, gated=True) for n in node.kids)
        else:  # pragma: no cover
            raise TypeError(node)
        if gated:
            return "(CASE WHEN %s THEN %s ELSE 0 END)" % (
                match_sql(node, _literal, "t.tsv"), text)
        return "(%s)" % text

    def build(self, node):
        score = self.score(node)
        if not self.globs:
            # term frequencies and length stored beside the tsvector
            cols = ["t.dl::float8 AS dl"] + [
                "(t.tf ->> %s)::float8 AS f%d" % (_literal(lex), col)
                for lex, col in self.words.items()]
            return (
                "(SELECT %s FROM %s t CROSS JOIN LATERAL (SELECT %s) s "
                "WHERE t.rid = e.rid AND t.name = %s)" % (
                    score, schema.TEXT, ", ".join(cols), self.name_sql))
        wanted = "ARRAY[%s]::text[]" % ", ".join(
            _literal(lex) for lex in [DL_MARK] + list(self.words))
        lateral = ""
        if self.globs:
            lateral = (" CROSS JOIN LATERAL (SELECT tsvector_to_array(t.tsv)"
                       " AS a) ta")
            for glob in self.globs:
                wanted += " || %s" % _glob_slice(glob, "ta.a")
        marker = _literal(DL_MARK)
        cols = ["coalesce(max(%s) FILTER (WHERE u.lexeme = %s), 0)::float8 "
                "AS dl" % (_dl_sql("u.positions"), marker)]
        for lex, col in self.words.items():
            cols.append(
                "sum(cardinality(u.positions)) FILTER (WHERE u.lexeme = %s)"
                "::float8 AS f%d" % (_literal(lex), col))
        for col, glob in enumerate(self.globs):
            cond = _glob_filter(glob, "u.lexeme")
            cols.append("array_agg(u.lexeme) FILTER (WHERE %s) AS gl%d" % (
                cond, col))
            cols.append(
                "array_agg(cardinality(u.positions)::float8) "
                "FILTER (WHERE %s) AS gc%d" % (cond, col))
        return (
            "(SELECT %s FROM %s t%s CROSS JOIN LATERAL (SELECT %s FROM "
            "unnest(ts_filter(setweight(t.tsv, 'A', %s), '{a}')) u) s "
            "WHERE t.rid = e.rid AND t.name = %s)" % (
                score, schema.TEXT, lateral, ", ".join(cols), wanted,
                self.name_sql))


# -- the index ---------------------------------------------------------------

class PGZCTextIndex(PGIndex, ZCTextIndex):
    """ZCTextIndex configuration; the words live in ``pgcatalog_text``."""

    pgc_storage = "text"
    pgc_sortable = False
    #: "okapi": ZCTextIndex's own score (exact, ~20-60 us per matched
    #: row); "ts_rank": PostgreSQL's ts_rank (~5 us per row, another
    #: relevance order).  ``qc.text_rank`` overrides it per query.
    pgc_rank_mode = "okapi"

    def __init__(self, id, extra=None, caller=None, index_factory=None,
                 field_name=None, lexicon_id=None):
        # ZCTextIndex.__init__ without creating the Okapi/Cosine index.
        self.id = id
        self._fieldname = field_name or getattr(extra, 'doc_attr', '') or id
        self._indexed_attrs = self._fieldname.split(',')
        self._indexed_attrs = [attr.strip()
                               for attr in self._indexed_attrs if attr]

        lexicon_id = lexicon_id or getattr(extra, 'lexicon_id', '')
        lexicon = getattr(caller, lexicon_id, None)
        if lexicon is None:
            raise LookupError('Lexicon "%s" not found' % escape(lexicon_id))
        if not ILexicon.providedBy(lexicon):
            raise ValueError('Object "%s" does not implement '
                             'ZCTextIndex Lexicon interface'
                             % lexicon.getId())
        self.lexicon_id = lexicon.getId()
        self._v_lexicon = lexicon

        if index_factory is None:
            if extra.index_type not in index_types.keys():
                raise ValueError('Invalid index type "%s"' % escape(
                    extra.index_type))
            self._index_factory = index_types[extra.index_type]
            self._index_type = extra.index_type
        else:
            self._index_factory = index_factory

    # GenericSetup's ZCTextIndex adapter uses _indexed_attrs; UnIndex-style
    # callers use indexed_attrs.
    @property
    def indexed_attrs(self):
        return self.getIndexSourceNames()

    @indexed_attrs.setter
    def indexed_attrs(self, value):
        self._indexed_attrs = list(value)

    def clear(self):
        """Empty the index (ZCatalog's ``clearIndex``): its rows go (the
        data API's ``clear``, through the catalog tool), and the cached
        lexicon is forgotten."""
        try:
            del self._v_lexicon
        except (AttributeError, KeyError):
            pass
        # ZCTextIndex.clear would make a new Okapi index object (ours has
        # none): the data API's clear deletes this index's text rows.
        super().clear()

    # -- contract --------------------------------------------------------
    def pgc_words(self, obj):
        """The word list ZCTextIndex would index for ``obj`` (None when it
        would not index it)."""
        # ZCTextIndex.index_object
        fields = getattr(self, '_indexed_attrs', [self._fieldname])
        all_texts = []
        for attr in fields:
            text = getattr(obj, attr, None)
            if text is None:
                continue
            if safe_callable(text):
                text = text()
            if text is not None:
                if isinstance(text, (list, tuple, set)):
                    all_texts.extend(text)
                else:
                    all_texts.append(text)
        all_texts = [t for t in all_texts if isinstance(t, str)]
        if not all_texts:
            return None
        return source_words(self.getLexicon(), all_texts)

    def pgc_extract(self, obj):
        words = self.pgc_words(obj)
        if words is None:
            return MISSING
        # No words is a real value too: ZCTextIndex indexes the document
        # with an empty word list (it counts in N and the mean length).
        return tsvector_literal(words)

    def pgc_decode(self, value):
        return words_from_tsvector(value)

    def pgc_parse(self, keys):
        """The match tree for query keys; None when ZCTextIndex returns
        None (empty query string or an ignored query)."""
        query_str = ' '.join(keys)
        if not query_str:
            return None
        lexicon = self.getLexicon()
        tree = QueryParser(lexicon).parseQuery(query_str)
        return translate(tree, lexicon)

    def _pgc_name_sql(self):
        # the index id as a literal inside a statement with parameters
        return _literal(self.getId())

    def pgc_where(self, iq, qc):
        if iq.keys is None:
            return None
        node = self.pgc_parse(iq.keys)
        if node is None or node is FALSE:
            # ZCatalog: an empty (or None) index result short-circuits.
            return NO_MATCH
        cond = match_sql(node, qc.param)
        name_sql = self._pgc_name_sql()
        # The relevance expression has no placeholders (literals only).
        add_rank = getattr(qc, "add_rank", None)
        if add_rank is not None:
            add_rank(self.pgc_rank_sql(node, qc), [])
        elif getattr(qc, "rank_exprs", None) is not None:
            qc.rank_exprs.append(self.pgc_rank_sql(node, qc))
        return ("EXISTS (SELECT 1 FROM %s t WHERE t.rid = e.rid AND "
                "t.name = %s AND %s)" % (schema.TEXT, name_sql, cond))

    def _stats_sql(self, qc):
        """``(N, mean document length, scope)`` as SQL.

        ``qc.text_stats(index_id)`` may return exact
        ``(document_count, total_word_count)`` numbers (the writer can keep
        them, as OkapiIndex keeps ``document_count``/``_totaldoclen``);
        otherwise N is counted and the mean length is taken from the first
        STATS_SAMPLE rows (exact for indexes that small).  ``qc.cid``, when
        set, scopes the statistics to one catalog."""
        name_sql = self._pgc_name_sql()
        cid = getattr(qc, "cid", None)
        scope = ""
        if cid is not None:
            # text rows carry their catalog's id (no join to scope them)
            scope = " AND x.cid = %d" % int(cid)
        stats = getattr(qc, "text_stats", None)
        found = stats(self.getId()) if callable(stats) else None
        if found:
            count, total = found
            count = max(int(count), 1)
            return (_f8(count), _f8(float(int(total)) / float(count)),
                    scope)
        n_sql = ("(SELECT greatest(count(*), 1)::float8 FROM %s x WHERE "
                 "x.name = %s%s)" % (schema.TEXT, name_sql, scope))
        mean_sql = (
            "(SELECT greatest(coalesce(sum(y.dl), 0)::float8 / "
            "greatest(count(*), 1)::float8, 1e-9::float8) FROM (SELECT "
            "%s AS dl FROM %s x WHERE x.name = %s%s LIMIT %d) y)" % (
                dl_sql("x.tsv"), schema.TEXT, name_sql, scope, STATS_SAMPLE))
        return n_sql, mean_sql, scope

    def pgc_rank_sql(self, node, qc=None):
        """Relevance of the matched entry ``e``: ZCTextIndex's Okapi BM25
        score (or ts_rank, see ``pgc_rank_mode``).  SQL with literals only,
        so it can sit anywhere in the statement."""
        mode = getattr(qc, "text_rank", None) or self.pgc_rank_mode
        if mode == "ts_rank":
            return ("(SELECT ts_rank(t.tsv, %s::tsquery) FROM %s t WHERE "
                    "t.rid = e.rid AND t.name = %s)" % (
                        _literal(tsquery_text(_positive(node))), schema.TEXT,
                        self._pgc_name_sql()))
        n_sql, mean_sql, scope = self._stats_sql(qc)
        df = getattr(qc, "text_df", None)
        if df is not None:
            name = self.getId()
            df = functools.partial(df, name)
        return _Scorer(self._pgc_name_sql(), n_sql, mean_sql,
                       scope, df).build(node)

    def pgc_df_sql(self):
        """SQL counting the documents of one catalog (parameters: the
        catalog id, a tsquery) whose words match, up to DF_EXACT_LIMIT: the
        document frequency a score uses."""
        return ("SELECT count(*) FROM (SELECT 1 FROM %s x WHERE x.name = %s "
                "AND x.cid = %%s AND x.tsv @@ %%s::tsquery LIMIT %d) c" % (
                    schema.TEXT, self._pgc_name_sql(), DF_EXACT_LIMIT))

    def pgc_doclen_sql(self, tsv="t.tsv"):
        """SQL: the word count (Okapi document length) of a stored row
        (``%`` free: usable with or without parameters)."""
        alias = tsv.split(".")[0] if "." in tsv else None
        if alias:
            return "coalesce(%s.dl, %s)" % (alias, dl_sql(tsv))
        return dl_sql(tsv)

    def pgc_unique_words_sql(self):
        """SQL counting the distinct words of this index (ZCTextIndex's
        ``numObjects``; a statement without parameters); add a catalog
        scope on ``x.rid`` as needed."""
        return ("SELECT count(DISTINCT u.lexeme) FROM %s x CROSS JOIN "
                "LATERAL unnest(tsvector_to_array(x.tsv)) AS u(lexeme) "
                "WHERE x.name = %s AND u.lexeme <> %s" % (
                    schema.TEXT, self._pgc_key_literal,
                    compose(sql.Literal(DL_MARK))))

    def pgc_indexes(self):
        # shared by the catalogs with a text index of this name (a
        # tsvector column: nothing another catalog stores can break it)
        return [schema.IndexSpec("tsv", "USING gin (tsv)", table=schema.TEXT,
                                 where="name = %s" % self._pgc_name_sql(),
                                 shared=True)]


InitializeClass(PGZCTextIndex)
