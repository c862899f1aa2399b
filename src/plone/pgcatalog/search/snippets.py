"""Snippets: the passages of a result's text where the searched words are,
highlighted (``portal_catalog.pgc_snippets``, docs/snippets.md).

Made for the rows shown only, from the object's own text (the text index's
source: ``SearchableText`` as the indexers give it), never stored.  A word
of the text is highlighted when the text index's lexicon turns it into a
word the query looks for (its words, the words of its phrases, a word its
globs match; not its ``NOT`` parts), so ``Running`` is highlighted for
``running`` when the lexicon folds case, exactly as the index matched it.
The best passages are those with the most distinct searched words, then
the most searched words, then the earliest; HTML is escaped and the words
wrapped in ``<mark>``.
"""
import re
from html import escape

from plone.pgcatalog.indexes.text.encoding import lexeme
from plone.pgcatalog.indexes.text.encoding import source_words
from plone.pgcatalog.indexes.text.querytree import _And
from plone.pgcatalog.indexes.text.querytree import _Glob
from plone.pgcatalog.indexes.text.querytree import _Or
from plone.pgcatalog.indexes.text.querytree import _Phrase
from plone.pgcatalog.indexes.text.querytree import _Word

#: the characters of a text read for its snippet (a book-length text is
#: not scanned to its end)
MAX_SOURCE = 100000
#: words a passage holds, and passages a snippet joins, at most
MAX_SIZE = 100
MAX_FRAGMENTS = 5
#: what stands for the text left out
ELLIPSIS = "\u2026"

_TOKEN = re.compile(r"\w+")

#: a lexicon's words of a text's word (its pipeline run on the word), kept
#: per process: (lexicon's oid, its serial) -> {word: words}; a lexicon
#: changed (its pipeline) has another serial
_kept = {}
KEPT_MAX = 200000
_kept_size = [0]


def words_of(lexicon):
    """A function giving the words ``lexicon`` makes of a text's word (a
    tuple), kept per process (a text's words are mostly the site's
    common words: a snippet of 800 words then runs the pipeline on a few
    of them)."""
    oid = getattr(lexicon, "_p_oid", None)
    if oid is None:     # not stored (tests): nothing kept
        return lambda token: tuple(source_words(lexicon, [token]))
    key = (oid, getattr(lexicon, "_p_serial", None))
    known = _kept.get(key)
    if known is None:
        known = _kept[key] = {}

    def words(token):
        found = known.get(token)
        if found is None:
            if _kept_size[0] >= KEPT_MAX:
                _kept.clear()
                _kept_size[0] = 0
            found = known[token] = tuple(source_words(lexicon, [token]))
            _kept_size[0] += 1
        return found
    return words


class Terms:
    """What a query's match tree looks for: words (lexemes) and globs."""

    def __init__(self, node):
        self.words = set()
        self.globs = []
        self._collect(node)

    def _collect(self, node):
        if isinstance(node, _Word):
            self.words.add(node.lex)
        elif isinstance(node, _Phrase):
            self.words.update(node.lexes)
        elif isinstance(node, _Glob):
            self.globs.append((node.prefix, None if node.pattern is None
                               else re.compile(node.pattern).match))
        elif isinstance(node, _And):
            for kid in node.pos:        # never the NOT parts
                self._collect(kid)
        elif isinstance(node, _Or):
            for kid in node.kids:
                self._collect(kid)

    def __bool__(self):
        return bool(self.words or self.globs)

    def match(self, word):
        """The term ``word`` (a lexicon's word) is, or None."""
        lex = lexeme(word)
        if lex in self.words:
            return lex
        for prefix, pattern in self.globs:
            if lex.startswith(prefix) and (pattern is None or pattern(lex)):
                return prefix + "*"
        return None


def snippet(lexicon, terms, texts, size=30, fragments=2):
    """The snippet (HTML) of ``texts`` (strings) for ``terms``: at most
    ``fragments`` passages of ``size`` words around the searched words,
    joined by an ellipsis; the text's beginning when no word is found
    there; "" for no text."""
    text = " ".join(texts)[:MAX_SOURCE]
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    if not tokens:
        return ""
    hits = {}       # token index -> the term it is
    if terms:
        seen = {}
        words = words_of(lexicon)
        for i, (start, end) in enumerate(tokens):
            token = text[start:end]
            if token not in seen:
                term = None
                for word in words(token):
                    term = terms.match(word)
                    if term is not None:
                        break
                seen[token] = term
            if seen[token] is not None:
                hits[i] = seen[token]
    chosen = _passages(len(tokens), hits, size, fragments)
    parts = []
    for first, last in chosen:
        html = []
        # the text's own beginning and end belong to its first and last
        # passages
        position = 0 if first == 0 else tokens[first][0]
        for i in range(first, last + 1):
            start, end = tokens[i]
            html.append(escape(text[position:start]))
            word = escape(text[start:end])
            html.append("<mark>%s</mark>" % word if i in hits else word)
            position = end
        if last == len(tokens) - 1:
            html.append(escape(text[position:]))
        parts.append("".join(html).strip())
    before = ELLIPSIS if chosen[0][0] > 0 else ""
    after = ELLIPSIS if chosen[-1][1] < len(tokens) - 1 else ""
    return before + (" %s " % ELLIPSIS).join(parts) + after


def _passages(count, hits, size, fragments):
    """The passages (first, last token index), in text order, that hold
    the most searched words: each starts a little before a hit."""
    if not hits:
        return [(0, min(size, count) - 1)]
    lead = size // 4
    candidates = []
    for i in sorted(hits):
        first = max(0, min(i - lead, count - size))
        last = min(count, first + size) - 1
        inside = [hits[j] for j in range(first, last + 1) if j in hits]
        candidates.append((-len(set(inside)), -len(inside), first, last))
    candidates.sort()
    chosen = []
    for _distinct, _hits, first, last in candidates:
        if all(last < f or first > l for f, l in chosen):
            chosen.append((first, last))
            if len(chosen) == fragments:
                break
    return sorted(chosen)
