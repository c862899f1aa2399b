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
(same formula, same integer scaling) in SQL, so ``data_record_score_`` and
the relevance order match ZCatalog's as long as the collection statistics
are exact (see ``_stats_sql``).

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
  as ``"\\x01"``.
"""
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
#: Rows read to estimate the mean document length when no statistics are
#: given (exact for indexes with no more documents than this).
STATS_SAMPLE = 1000

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


def tsvector_literal(words):
    """tsvector input text for a word list, positions 1..n."""
    positions = {}
    used = 0
    for i, word in enumerate(words):
        lex = lexeme(word)
        pos = i + 1 if i < MAX_POSITION else MAX_POSITION
        found = positions.get(lex)
        if found is None:
            size = len(lex.encode("utf-8", "surrogatepass"))
            if used + size > MAX_TSVECTOR_BYTES:
                continue
            used += size
            positions[lex] = [pos]
        elif len(found) < MAX_POSITIONS_PER_WORD and found[-1] != pos:
            found.append(pos)
    return " ".join(
        "%s:%s" % (quote_lexeme(lex), ",".join(map(str, found)))
        for lex, found in positions.items())


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


class _Scorer:
    """Builds the Okapi BM25 score of ZCTextIndex as SQL (literals only)."""

    def __init__(self, name_sql, n_sql, meandl_sql):
        self.name_sql = name_sql
        self.n_sql = n_sql
        self.meandl_sql = meandl_sql
        self.words = {}     # lexeme -> column index
        self.globs = []     # _Glob nodes

    def tf(self, f):
        # OkapiIndex._search_wids, same operation order.
        return ("(%(f)s * %(k1p1)s / (%(f)s + %(k1)s * (%(bf1)s + %(b)s "
                "* s.dl / %(mean)s)))" % dict(
                    f=f, k1p1=_K1_PLUS1_SQL, k1=_K1_SQL, bf1=_B_FROM1_SQL,
                    b=_B_SQL, mean=self.meandl_sql))

    def idf(self, df):
        return "(ln(%s + %s / (%s)::float8) * %s)" % (
            _ONE_SQL, self.n_sql, df, _SCALE_SQL)

    def word(self, lex):
        col = self.words.setdefault(lex, len(self.words))
        df = ("SELECT greatest(count(*), 1) FROM pgcatalog_text x WHERE "
              "x.name = %s AND x.tsv @@ %s::tsquery%s" % (
                  self.name_sql, _literal(quote_lexeme(lex)), self.scope))
        f = "s.f%d" % col
        return ("(CASE WHEN %s > 0 THEN floor(%s * %s + %s) ELSE 0 END)" % (
            f, self.tf(f), self.idf("(%s)" % df), _HALF_SQL))

    def glob(self, node):
        col = len(self.globs)
        self.globs.append(node)
        dfmap = (
            "SELECT jsonb_object_agg(y.l, y.n) FROM (SELECT u.lexeme AS l, "
            "count(*) AS n FROM pgcatalog_text x CROSS JOIN LATERAL "
            "unnest(x.tsv) u WHERE x.name = %s AND x.tsv @@ %s::tsquery "
            "AND %s%s GROUP BY u.lexeme) y" % (
                self.name_sql, _literal(tsquery_text(node)),
                _glob_filter(node, "u.lexeme"), self.scope))
        return (
            "(SELECT coalesce(sum(floor(%s * %s + %s)), 0) FROM "
            "unnest(s.gl%d, s.gc%d) AS g(l, c))" % (
                self.tf("g.c"), self.idf("((%s) ->> g.l)" % dfmap),
                _HALF_SQL, col, col))

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
            return "(%s)" % " + ".join(
                self.score(n, gated=True) for n in node.kids)
        else:  # pragma: no cover
            raise TypeError(node)
        if gated:
            return "(CASE WHEN %s THEN %s ELSE 0 END)" % (
                match_sql(node, _literal, "t.tsv"), text)
        return "(%s)" % text

    def build(self, node, scope=""):
        self.scope = scope
        score = self.score(node)
        cols = ["coalesce(sum(cardinality(u.positions)), 0)::float8 AS dl"]
        for lex, col in sorted(self.words.items(), key=lambda x: x[1]):
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
            "(SELECT %s FROM %s t CROSS JOIN LATERAL (SELECT %s FROM "
            "unnest(t.tsv) u) s WHERE t.rid = e.rid AND t.name = %s)" % (
                score, schema.TEXT, ", ".join(cols), self.name_sql))


# -- the index ---------------------------------------------------------------

class PGZCTextIndex(PGIndex, ZCTextIndex):
    """ZCTextIndex configuration; the words live in ``pgcatalog_text``."""

    pgc_storage = "text"
    pgc_sortable = False

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
        """Forget the cached lexicon; the rows are cleared by the catalog."""
        try:
            del self._v_lexicon
        except (AttributeError, KeyError):
            pass

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
        # "" (no words) is a real value: ZCTextIndex indexes the document
        # with an empty word list.
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

    def pgc_where(self, iq, qc):
        if iq.keys is None:
            return None
        node = self.pgc_parse(iq.keys)
        if node is None or node is FALSE:
            # ZCatalog: an empty (or None) index result short-circuits.
            return NO_MATCH
        cond = match_sql(node, qc.param)
        name_sql = self._pgc_key_literal
        rank_exprs = getattr(qc, "rank_exprs", None)
        if rank_exprs is not None:
            rank_exprs.append(self.pgc_rank_sql(node, qc))
        return ("EXISTS (SELECT 1 FROM %s t WHERE t.rid = e.rid AND "
                "t.name = %s AND %s)" % (schema.TEXT, name_sql, cond))

    def _stats_sql(self, qc):
        """``(N, mean document length, scope)`` as SQL.

        ``qc.text_stats(index_id)`` may return exact
        ``(document_count, total_word_count)`` numbers (the writer can keep
        them, as OkapiIndex keeps ``document_count``/``_totaldoclen``);
        otherwise N is counted and the mean length is taken from the first
        STATS_SAMPLE rows (exact for small indexes).  ``qc.cid``, when set,
        scopes the statistics to one catalog."""
        name_sql = self._pgc_key_literal
        cid = getattr(qc, "cid", None)
        scope = ""
        if cid is not None:
            scope = (" AND EXISTS (SELECT 1 FROM %s xe WHERE xe.rid = x.rid "
                     "AND xe.cid = %s)" % (schema.ENTRIES, int(cid)))
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
            "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM "
            "unnest(x.tsv) u) AS dl FROM %s x WHERE x.name = %s%s LIMIT %d) y)"
            % (schema.TEXT, name_sql, scope, STATS_SAMPLE))
        return n_sql, mean_sql, scope

    def pgc_rank_sql(self, node, qc=None):
        """Okapi BM25 score of the matched entry ``e`` (SQL, literals only,
        so it can sit anywhere in the statement)."""
        n_sql, mean_sql, scope = self._stats_sql(qc)
        return _Scorer(self._pgc_key_literal, n_sql, mean_sql).build(
            node, scope)

    def pgc_ddl(self, table):
        stmt = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} USING gin (tsv) "
            "WHERE name = {}").format(
                schema.index_name(schema.TEXT, "tsv", self.getId()),
                sql.Identifier(schema.TEXT),
                sql.Literal(self.getId()))
        return [compose(stmt)]


InitializeClass(PGZCTextIndex)
