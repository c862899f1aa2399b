"""How a document's words are stored: one ``tsvector`` per document.

Words are produced by the *lexicon's own pipeline* (splitter, normalizers,
stop words) exactly as ``Lexicon.sourceToWordIds`` does at index time, but
without assigning word ids, so nothing is written to the ZODB.  The tsvector
holds every word with its position (1..n) so that phrase search and
``getEntryForObject`` work; lexemes are written literally (no PostgreSQL
text search configuration is involved, the tsvector is built from a quoted
literal).

Each tsvector carries a marker lexeme ``"\\x03"`` whose two positions
encode the document's word count (Okapi's document length); no query can
produce it and :func:`words_from_tsvector` skips it.  :func:`dl_sql` reads
it back in SQL.

PostgreSQL's tsvector limits (see the package docstring for what they
change): positions above 16383 are clamped, at most 256 positions are kept
per word, a lexeme has at most 2046 bytes (a longer word is stored as a
prefix plus a hash), a tsvector's distinct lexemes at most ~1 MB; the empty
word is stored as ``"\\x01"``.
"""
import hashlib
import re

from Products.ZCTextIndex.Lexicon import _text2list

from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q

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


# -- words -----------------------------------------------------------------

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


def clip_prefix(prefix):
    """``prefix`` cut to what a lexeme can start with (room for the hash
    of an over-long word)."""
    encoded = prefix.encode("utf-8", "surrogatepass")
    limit = MAX_LEXEME_BYTES - 17
    if len(encoded) > limit:
        prefix = encoded[:limit].decode("utf-8", "ignore")
    return prefix


def quote_lexeme(lex):
    """``lex`` quoted for tsvector / tsquery input."""
    return "'" + lex.replace("\\", "\\\\").replace("'", "''") + "'"


_QUOTED_RE = re.compile(r"'((?:[^'\\]|''|\\.)*)'\Z", re.S)


def unquote_lexeme(text):
    """The lexeme ``text`` (a tsquery's text) is made of, when it is one
    lexeme as :func:`quote_lexeme` quotes it (no prefix, weight or
    operator), else None."""
    found = _QUOTED_RE.match(text)
    if found is None:
        return None
    return re.sub(r"''|\\(.)", lambda m: m.group(1) or "'",
                  found.group(1), flags=re.S)


class TextValue(str):
    """A ``pgc_extract`` value: the tsvector input text, carrying the
    document length ``dl`` and the term frequencies ``tf`` (lexeme ->
    count, for the words occurring more than once) the writer stores beside
    it for cheap Okapi scoring, and ``language``, the language form of a
    text index searched by language."""

    dl = None
    tf = None
    #: the language form (language.LanguageValue) of a text index searched
    #: by language, else None
    language = None


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
        quote_lexeme(lex) + ":" + ",".join(map(str, found))
        for lex, found in positions.items()))
    value.dl = len(words)
    # the counts above 1 only: a word of the tsvector without one occurs
    # once (most words of a text: 1,665 -> about 200 bytes a row measured
    # for SearchableText at 100,000 entries)
    value.tf = {lex: n for lex, n in tf.items()
                if n > 1 and lex in positions}
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


# -- the document length in SQL ----------------------------------------------

def dl_positions_sql(positions):
    """The document length encoded in the marker's positions (a Fragment:
    an ``int2[]`` of the marker lexeme's positions)."""
    return q("(({}[1] - 1) * {} + ({}[2] - {}))", positions,
             literal(_DL_BASE), positions, literal(_DL_BASE + 1))


def dl_sql(tsv):
    """The word count of the document stored in ``tsv`` (a Fragment)."""
    return q("(SELECT {} FROM unnest(ts_filter(setweight({}, 'A', "
             "ARRAY[{}]), '{{a}}')) u)",
             dl_positions_sql(q("u.positions")), tsv, literal(DL_MARK))
