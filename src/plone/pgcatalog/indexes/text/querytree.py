"""A text query as a match tree, and the match tree as SQL.

Queries are parsed with ZCTextIndex's own ``QueryParser`` and the lexicon
(same ParseError / QueryError as ZCatalog); :func:`translate` evaluates the
parse tree with ZCTextIndex's execution rules (stop-word atoms are ignored,
a phrase containing an unknown word matches nothing, ...) into a match tree
(:class:`_Word`, :class:`_Glob`, :class:`_Phrase`, :class:`_And`,
:class:`_Or`, :data:`FALSE`), which :func:`tsquery_text` writes as a
``tsquery`` and :func:`match_sql` as a condition.  Globs with a ``?`` or an
inner ``*`` (which a tsquery cannot express) are checked exactly with a
regular expression over the document's lexemes.
"""
import re

from Products.ZCTextIndex.ParseTree import QueryError

from plone.pgcatalog.indexes.text.encoding import clip_prefix
from plone.pgcatalog.indexes.text.encoding import lexeme
from plone.pgcatalog.indexes.text.encoding import quote_lexeme
from plone.pgcatalog.indexes.text.encoding import term_words
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import param
from plone.pgcatalog.pg.fragment import q


class _False:
    """Matches nothing."""

    def __repr__(self):
        return "FALSE"


FALSE = _False()


class _Word:
    def __init__(self, lex):
        self.lex = lex


class _Glob:
    def __init__(self, prefix, regex, pattern=None):
        self.prefix = prefix     # literal prefix of the pattern
        self.regex = regex       # PostgreSQL regex, or None for prefix:*
        #: ZCTextIndex's own regular expression (Python's ``re``, matched
        #: at the start of a word), None for prefix:*
        self.pattern = pattern


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


class _Words(_Or):
    """A glob's words, from the lexicon: their union (ZCTextIndex's
    ``search_glob``), scored as words.

    ``prefix``: the glob's prefix when the words are every word of the
    lexicon that starts with it (a glob without ``?`` or an inner ``*``).
    Every lexeme of a document is a word of the lexicon (the text rows'
    trigger adds them), so a document holds one of the words exactly when
    it holds a lexeme with that prefix: matched as ``prefix:*``
    (:func:`tsquery_text` with ``prefixes``), one range of the GIN index's
    keys and one binary search of a row's lexemes, instead of an OR of
    every word (60,658 documents of 100,000 holding one of a three-letter
    prefix's 112 words: 40 ms against 667)."""

    def __init__(self, lexes, prefix=None):
        super().__init__([_Word(lex) for lex in lexes])
        self.lexes = lexes
        self.prefix = prefix


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
    return _Glob(clip_prefix(prefix),
                 None if simple else "^(?:%s)" % pat,
                 None if simple else pat)


def resolve_globs(node, words_of):
    """The match tree with each glob replaced by its words:
    ``words_of(glob)`` gives them (the lexicon's, matched as
    ``Lexicon.globToWordIds`` matches) or None to keep the glob (a glob of
    too many words).  A glob without words matches nothing (FALSE)."""
    if isinstance(node, _Glob):
        words = words_of(node)
        if words is None:
            return node
        if not words:
            return FALSE
        if len(words) == 1:
            return _Word(words[0])
        return _Words(list(words),
                      prefix=node.prefix if node.regex is None else None)
    if isinstance(node, _And):
        return _simplify_and([resolve_globs(n, words_of) for n in node.pos],
                             [resolve_globs(n, words_of) for n in node.neg])
    if isinstance(node, _Or) and not isinstance(node, _Words):
        return _simplify_or([resolve_globs(n, words_of) for n in node.kids])
    return node


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


def tsquery_text(node, prefixes=False):
    """The tsquery (a value: it goes into SQL as a parameter or a literal)
    for a match tree (globs with a regex: their prefix).  ``prefixes``: a
    glob's words that are every word with its prefix are written as the
    prefix (:class:`_Words`): the same matches, for a condition (not for
    ``ts_rank``, which weighs each query term)."""
    if isinstance(node, _Words) and prefixes and node.prefix is not None:
        return quote_lexeme(node.prefix) + ":*"
    if isinstance(node, _Word):
        return quote_lexeme(node.lex)
    if isinstance(node, _Glob):
        return quote_lexeme(node.prefix) + ":*"
    if isinstance(node, _Phrase):
        return "(" + " <-> ".join(quote_lexeme(x) for x in node.lexes) + ")"
    if isinstance(node, _And):
        text = " & ".join(tsquery_text(n, prefixes) for n in node.pos)
        if node.neg:
            text += " & !(" + " | ".join(
                tsquery_text(n, prefixes) for n in node.neg) + ")"
        return "(" + text + ")"
    if isinstance(node, _Or):
        return "(" + " | ".join(
            tsquery_text(n, prefixes) for n in node.kids) + ")"
    raise TypeError(node)  # pragma: no cover


def positive(node):
    """The node without its negated parts (what the score looks at)."""
    if isinstance(node, _And):
        return _simplify_and([positive(n) for n in node.pos], [])
    if isinstance(node, _Or):
        return _simplify_or([positive(n) for n in node.kids])
    return node


def match_sql(node, tsv, value=param):
    """A condition (Fragment) over the tsvector ``tsv`` (a Fragment) for a
    match tree; ``value`` turns a string (a tsquery, a prefix, a regular
    expression) into SQL: :func:`~plone.pgcatalog.pg.fragment.param` (a
    parameter, the default) or :func:`~plone.pgcatalog.pg.fragment.literal`."""
    if not _has_regex(node):
        return q("{} @@ {}::tsquery", tsv,
                 value(tsquery_text(node, prefixes=True)))
    if isinstance(node, _Glob):
        return q("({} @@ {}::tsquery AND EXISTS (SELECT 1 FROM unnest({}) u "
                 "WHERE starts_with(u.lexeme, {}) AND u.lexeme ~ {}))",
                 tsv, value(tsquery_text(node)), tsv, value(node.prefix),
                 value(node.regex))
    if isinstance(node, _And):
        conds = [match_sql(n, tsv, value) for n in node.pos]
        if node.neg:
            conds.append(q("NOT ({})", join(" OR ", [
                match_sql(n, tsv, value) for n in node.neg])))
        return q("({})", join(" AND ", conds))
    if isinstance(node, _Or):
        return q("({})", join(" OR ", [
            match_sql(n, tsv, value) for n in node.kids]))
    raise TypeError(node)  # pragma: no cover
