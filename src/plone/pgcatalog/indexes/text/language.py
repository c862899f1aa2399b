"""Language-aware search of a text index: stems, folded accents, weights.

A text index is ZCTextIndex-exact by default.  Switched over
(:class:`LanguageText` on the index, docs/language-text.md), each entry
also gets a row of ``pgcatalog_langtext``: its text parsed by PostgreSQL
with the text search configuration of the object's language
(``pgcatalog_german``: accents folded by ``unaccent``, then the German
stemmer; schema step 2 makes them), weighted: the title ``A``, the
description ``B``, the index's own text ``C``.  A query keeps the syntax
users type (ZCTextIndex's parser: AND, OR, NOT, "phrases", globs); each
word is stemmed in each language the index holds, and an entry matches in
its own language only.  Relevance adds up per word of the query the
entry has: its weighted count (:data:`TENTHS`), saturated as Okapi BM25
saturates a count, divided by ``1 + ln`` of the entry's number of words
(:func:`word_score_sql`); from the language row (:func:`row_rank_sql`) or,
for a page, from the postings schema step 9 keeps.

This module describes the language form (what is stored, how a query is
written); the index kind (:mod:`.index`) uses it once the index's rows
are complete (``LanguageText.ready``).
"""
import re

from Products.ZCTextIndex.ParseTree import QueryError

from plone.pgcatalog.indexes.context import TextRow
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import param
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: ISO 639-1 codes -> PostgreSQL's own text search configurations (the
#: Snowball stemmers; the server's set, read at switch time, decides)
CONFIGS = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan",
    "da": "danish", "nl": "dutch", "en": "english", "fi": "finnish",
    "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "no": "norwegian",
    "nb": "norwegian", "nn": "norwegian", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish",
    "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
#: the configuration of a text without a stemmer (accents folded only)
SIMPLE = "simple"
#: our copies of PostgreSQL's configurations are named so
PREFIX = "pgcatalog_"

#: the weights the title, the description and the rest get (PostgreSQL's
#: tsvector weights, ``A`` highest)
DEFAULT_WEIGHTS = (("Title", "A"), ("Description", "B"))
#: the weight of the index's own text
BODY_WEIGHT = "C"
#: the weights a text can be given (D holds every word as written, lower
#: case and accents folded but not stemmed, so that a prefix typed finds
#: the words it begins: ``runni*`` finds *running*, whose stem is *run*)
WEIGHTS = ("A", "B", "C")
#: the configuration the word forms of D are parsed with
FORMS = schema.FORMS_CONFIG


def language_code(value):
    """The primary language subtag of a language tag (``de-at`` -> ``de``,
    ``pt_BR`` -> ``pt``), lower case; '' for none."""
    if not isinstance(value, str):
        return ""
    return value.replace("_", "-").split("-", 1)[0].strip().lower()


class LanguageText:
    """How a text index is searched by language (immutable: the index
    gets a new one when it changes).

    ``languages``: ``{code: configuration}`` of the languages the index
    stems (codes of ``Language``, configurations ``pgcatalog_<name>``);
    ``default``: the configuration of an object in another language or in
    none; ``weights``: ``((attribute, weight), ...)`` read besides the
    index's own text; ``ready``: every entry has its language row (until
    then searches are answered ZCTextIndex-exact, while writes already
    keep the rows)."""

    def __init__(self, languages, default, weights=DEFAULT_WEIGHTS,
                 ready=False):
        self.languages = dict(languages)
        self.default = default
        self.weights = tuple(tuple(w) for w in weights)
        self.ready = ready

    def completed(self):
        return LanguageText(self.languages, self.default, self.weights,
                            ready=True)

    def configs(self):
        """Every configuration an entry's row may have been parsed with,
        sorted."""
        return sorted(set(self.languages.values()) | {self.default})

    def config_of(self, language):
        """The configuration of an object whose ``Language`` is
        ``language``."""
        return self.languages.get(language_code(language), self.default)

    def configs_for(self, languages):
        """The configurations a query restricted to ``languages`` (the
        query's ``Language`` values, None: any) reads."""
        if languages is None:
            return self.configs()
        found = set()
        for value in languages:
            found.add(self.config_of(value))
        return sorted(found)

    def key(self):
        """What searches depend on, hashable (the result cache's key)."""
        return (self.ready, tuple(sorted(self.languages.items())),
                self.default, self.weights)

    def as_dict(self):
        """The settings as plain data (what the index stores: no class of
        this module's is pickled in a site's ZODB)."""
        return {"languages": dict(self.languages), "default": self.default,
                "weights": [list(w) for w in self.weights],
                "ready": self.ready}

    @classmethod
    def from_dict(cls, data):
        return cls(data["languages"], data["default"], data["weights"],
                   data["ready"])


def choose_configs(available, languages, default):
    """A :class:`LanguageText`'s ``(languages, default)`` from language
    codes, given the configurations the server has (``available``: the
    names after :data:`PREFIX`).  A code without a stemmer there is left
    out (its objects get the default); the default language without one
    is the simple configuration."""
    chosen = {}
    for code in languages:
        code = language_code(code)
        name = CONFIGS.get(code)
        if code and name in available:
            chosen[code] = PREFIX + name
    name = CONFIGS.get(language_code(default))
    fallback = PREFIX + (name if name in available else SIMPLE)
    return chosen, fallback


# -- what is stored ----------------------------------------------------------

class LanguageValue:
    """The language form of one object's text: the configuration and the
    weighted texts ``[(weight, text)]`` (the writer has PostgreSQL parse
    them: pg/writer.language_rows)."""

    __slots__ = ("config", "parts")

    def __init__(self, config, parts):
        self.config = config
        self.parts = parts

    def texts(self):
        """The weighted texts as ``(A, B, C, D)`` strings: each weight's
        texts joined, and D every text (its words as written, for
        prefixes: :data:`FORMS`)."""
        found = {"A": [], "B": [], "C": []}
        for weight, text in self.parts:
            found[weight].append(text)
        return tuple(" ".join(found[w]) for w in "ABC") + (
            " ".join(text for _weight, text in self.parts),)


def value_of(settings, obj, body):
    """The :class:`LanguageValue` of ``obj`` (an indexable wrapper) whose
    own texts are ``body``."""
    language = _attribute(obj, "Language")
    parts = []
    for attribute, weight in settings.weights:
        text = _attribute(obj, attribute)
        if text:
            parts.append((weight, text))
    parts.extend((BODY_WEIGHT, text) for text in body if text)
    return LanguageValue(settings.config_of(language), parts)


def _attribute(obj, name):
    value = getattr(obj, name, None)
    if callable(value):
        try:
            value = value()
        except (TypeError, AttributeError):
            return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.replace("\x00", " ") if isinstance(value, str) else None


# -- what a query asks -------------------------------------------------------

def _tsquery_word(word):
    """``word`` quoted for to_tsquery's input."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _clean(value):
    """A parse tree node's word(s) as PostgreSQL text (no NUL, which a
    lexicon with another splitter could leave in)."""
    if isinstance(value, str):
        return value.replace("\x00", " ")
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def query_sql(tree, config):
    """A parse tree (ZCTextIndex's QueryParser) as a ``tsquery`` expression
    (a Fragment) in text search configuration ``config`` (a Fragment).
    ZCTextIndex's rules: NOT only beside a positive part of an AND, never
    alone or in an OR (QueryError)."""
    kind = tree.nodeType()
    value = _clean(tree.getValue())
    if kind == "ATOM":
        return q("plainto_tsquery({}, {})", config, value)
    if kind == "PHRASE":
        return q("phraseto_tsquery({}, {})", config, " ".join(value))
    if kind == "GLOB":
        # the literal part before the first wildcard, as a prefix (a ? or
        # an inner * is taken as the end of the prefix)
        prefix = value
        for mark in "*?":
            prefix = prefix.split(mark, 1)[0]
        if not prefix:
            return q("''::tsquery")
        # the stems it begins, and the words as written (D)
        word = _tsquery_word(prefix) + ":*"
        return q("(to_tsquery({}, {}) || to_tsquery({}, {}))", config, word,
                 literal(FORMS), word)
    if kind == "AND":
        positive = [query_sql(n, config) for n in value
                    if n.nodeType() != "NOT"]
        negative = [query_sql(n.getValue(), config) for n in value
                    if n.nodeType() == "NOT"]
        if not positive:
            return q("''::tsquery")
        parts = positive + [q("(!! {})", n) for n in negative]
        return q("({})", join(" && ", parts))
    if kind == "OR":
        if any(n.nodeType() == "NOT" for n in value):
            raise QueryError("NOT parse tree node cannot be executed "
                             "directly")
        return q("({})", join(" || ", [query_sql(n, config) for n in value]))
    raise QueryError("NOT parse tree node cannot be executed directly")


def queries_sql(tree, configs):
    """The statement giving, for each of ``configs``, the tsquery text of
    ``tree`` and that of its positive part (``querytree``: what a NOT
    excludes left out), one row, two columns per configuration."""
    parts = []
    for config in configs:
        tsquery = query_sql(tree, literal(config))
        parts.append(q("({})::text", tsquery))
        parts.append(q("querytree({})", tsquery))
    return q("SELECT {}", join(", ", parts))


#: a lexeme of a tsquery's text (quoted, ``''`` and ``\\`` escaped) and
#: its marks (``:*`` a prefix; weights)
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)'(:[*A-D]*)?")
_ESCAPE = re.compile(r"''|\\(.)", re.S)
#: a tsquery of lexemes and prefixes joined by OR (or one alone)
_OR_OF_TERMS = re.compile(
    r"^'(?:[^'\\]|''|\\.)*'(?::\*)?"
    r"(?: \| '(?:[^'\\]|''|\\.)*'(?::\*)?)*$", re.S)


def _unquote(text):
    return _ESCAPE.sub(lambda m: "'" if m.group(0) == "''" else m.group(1),
                       text)


class LanguageQuery:
    """A query in one configuration: ``text``, its tsquery's text;
    ``words``, ``prefixes``: the lexemes its positive part names, whole or
    as prefixes (sorted, distinct), whose counts score a match;
    ``groups``: its matches' shape when the postings can give them."""

    def __init__(self, config, text, positive):
        self.config = config
        self.text = text
        words, prefixes = set(), set()
        for found in _LEXEME.finditer(positive or ""):
            lexeme = _unquote(found.group(1))
            if "*" in (found.group(2) or ""):
                prefixes.add(lexeme)
            else:
                words.add(lexeme)
        self.words = sorted(words)
        self.prefixes = sorted(prefixes)
        #: the query as groups joined by AND, each words and prefixes
        #: joined by OR (``[(words, prefixes)]``: Plone's search box sends
        #: ``a* AND b*``), else None
        self.groups = _groups(text)


def _groups(text):
    """``[(words, prefixes)]`` of a tsquery's text that is groups joined by
    AND, each words and prefixes joined by OR (or one alone), else None."""
    # split on the top level's " & " (outside quotes and parentheses)
    parts, quoted, depth, start = [], False, 0, 0
    i = 0
    while i < len(text):
        char = text[i]
        if quoted:
            if char == "\\":
                i += 2
                continue
            if char == "'":
                if text[i + 1:i + 2] == "'":
                    i += 2
                    continue
                quoted = False
        elif char == "'":
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and text.startswith(" & ", i):
            parts.append(text[start:i])
            start = i + 3
            i += 3
            continue
        i += 1
    parts.append(text[start:])
    groups = []
    for part in parts:
        part = part.strip()
        if part.startswith("( ") and part.endswith(" )"):
            part = part[2:-2]
        elif len(parts) > 1 and not _LEXEME.fullmatch(part):
            # ``a | b & c`` is ``a | (b & c)``: & binds tighter, a group
            # of several terms beside & is in parentheses
            return None
        if not _OR_OF_TERMS.match(part):
            return None
        words, prefixes = set(), set()
        for found in _LEXEME.finditer(part):
            lexeme = _unquote(found.group(1))
            (prefixes if "*" in (found.group(2) or "") else words).add(
                lexeme)
        groups.append((sorted(words), sorted(prefixes)))
    return groups


def language_queries(configs, texts):
    """The :class:`LanguageQuery` of each configuration whose query is not
    empty (``texts``: :func:`queries_sql`'s row)."""
    found = []
    for i, config in enumerate(configs):
        text, positive = texts[2 * i], texts[2 * i + 1]
        if text:
            found.append(LanguageQuery(config, text, positive))
    return found


def match_sql(name, queries, alias="l"):
    """The language row ``alias`` of index ``name`` matches: in its own
    configuration, the query's tsquery there (``queries``:
    :class:`LanguageQuery`)."""
    row = q(alias)
    return q("{}.name = {} AND ({})", row, literal(name), join(
        " OR ", [q("({}.config = {} AND {}.tsv @@ {}::tsquery)", row,
                   literal(query.config), row, literal(query.text))
                 for query in queries]))


def exists_sql(rid, name, queries):
    """The entry whose rid is ``rid`` has a language row of ``name``
    matching ``queries``."""
    return q("EXISTS (SELECT 1 FROM {} l WHERE l.rid = {} AND {})",
             schema.LANGTEXT_TABLE, rid, match_sql(name, queries))


# -- relevance ---------------------------------------------------------------

#: a position's share of a word's weighted count, in tenths, per weight
#: (PostgreSQL's ``ts_rank`` default weights, 0.1 0.2 0.4 1.0, as integers:
#: sums of them are exact)
TENTHS = (("A", 10), ("B", 4), ("C", 2), ("D", 1))
#: Okapi BM25's saturation of a count (``k1``)
K1 = 1.2


def weighted_count_sql(weights):
    """A word's weighted count in tenths from its positions' weights
    (``weights``: the ``weights`` of ``unnest(tsvector)``, a Fragment); a
    word without positions counts as one of weight D.  Schema step 9's
    triggers store the postings' ``tf`` with the same arithmetic."""
    cases = " ".join("WHEN '%s' THEN %d" % pair for pair in TENTHS[:-1])
    return q("coalesce((SELECT sum(CASE w " + cases + " ELSE 1 END) FROM "
             "unnest({}) w), 1)::integer", weights)


def word_score_sql(tf, dl):
    """A word's share of an entry's relevance (a Fragment of float8):
    ``t * (k1 + 1) / (t + k1)`` for its weighted count ``t`` (``tf``
    tenths), divided by ``1 + ln(dl)``, the entry's number of words
    (``dl``, at least 1).  It rises with the count and falls with the
    length."""
    return q("(({}::float8 / 10) * {} / ({}::float8 / 10 + {}) / (1 + "
             "ln(greatest({}, 1)::float8)))", tf, q("%r::float8" % (K1 + 1)),
             tf, q("%r::float8" % K1), dl)


def count_share_sql(tf):
    """A word's share of relevance before the entry's length divides it
    (:func:`word_score_sql` without ``1 + ln(dl)``, a Fragment of float8):
    what the best count of a word can add, in the bounds of
    search/langpage.py."""
    return q("(({}::float8 / 10) * {} / ({}::float8 / 10 + {}))", tf,
             q("%r::float8" % (K1 + 1)), tf, q("%r::float8" % K1))


def row_rank_sql(queries, alias="l"):
    """The relevance of the language row ``alias``: the sum over the
    query's words (in the row's configuration) that the row has, of each
    one's :func:`word_score_sql`, in the words' order; 0 when it has none
    (a phrase of stop words).  Read from the row's postings (schema
    version 9: one B-tree range per row, its words' counts and its
    length in the B-tree): the same counts as the row's ``tsvector``
    holds (the triggers write them with :func:`weighted_count_sql`),
    without reading the whole ``tsvector``."""
    row = q(alias)
    cases = []
    for query in queries:
        if not query.words and not query.prefixes:
            continue
        found = []
        if query.words:
            found.append(q("p.word = ANY({}::text[])", param(query.words)))
        for prefix in query.prefixes:
            found.append(q("p.word ^@ {}", param(prefix)))
        cases.append(q(
            "WHEN {} THEN (SELECT sum({} ORDER BY p.word) FROM {} p WHERE "
            "p.rid = {}.rid AND p.name = {}.name AND ({}))",
            literal(query.config), word_score_sql(q("p.tf"), q("p.dl")),
            schema.LANGPOSTINGS_TABLE, row, row, join(" OR ", found)))
    if not cases:
        return q("0::float8")
    return q("coalesce(CASE {}.config {} END, 0::float8)", row,
             join(" ", cases))


def rank_sql(name, queries):
    """The relevance of the entry ``e`` (its language row's)."""
    return q("(SELECT {} FROM {} l WHERE l.rid = e.rid AND l.name = {})",
             row_rank_sql(queries), schema.LANGTEXT_TABLE, literal(name))


def text_row(name, queries, language_postings=None):
    """The condition and the score over a language row itself
    (context.TextRow): a search by relevance matches and scores in one pass
    over the language rows (search/relevance.TextRelevance), or reads its
    matches and scores from the postings (``language_postings``)."""
    return TextRow(
        lambda alias: match_sql(name, queries, alias),
        lambda alias: (q("{} AS lr", row_rank_sql(queries, alias)),
                       q("s.lr")),
        lambda alias: row_rank_sql(queries, alias),
        table=schema.LANGTEXT_TABLE, language_postings=language_postings)


def prefix_end(prefix):
    """The least string above every string starting with ``prefix`` in
    code point order (``COLLATE "C"`` on UTF-8), or None when there is
    none."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if 0xD800 <= last <= 0xDFFF:
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def _disjoint(words, prefixes):
    """``(words, prefixes)`` without a prefix or word a shorter prefix
    covers: their B-tree ranges do not overlap."""
    kept = []
    for prefix in sorted(prefixes):
        if not any(prefix.startswith(p) for p in kept):
            kept.append(prefix)
    return ([w for w in words if not any(w.startswith(p) for p in kept)],
            kept)


class LanguagePostings:
    """The matches and scores of a search by language read from its
    postings (``pgcatalog_langpostings``, schema version 9), when its
    query in one configuration is groups joined by AND, each words and
    prefixes joined by OR (``LanguageQuery.groups``: words joined by AND,
    a glob's stems and words as written, Plone's ``a* AND b*``); each of
    an entry's words is counted once, as :func:`row_rank_sql` counts
    it."""

    def __init__(self, cid, name, query):
        self.cid = int(cid)
        self.name = name
        self.config = query.config
        self.groups = [_disjoint(words, prefixes)
                       for words, prefixes in query.groups]
        #: words joined by AND only
        self.all_of = all(len(words) == 1 and not prefixes
                          for words, prefixes in self.groups)
        self.words = sorted({w for words, _p in self.groups for w in words})

    def statement(self, condition):
        """``SELECT rid, score`` of every match whose postings ``h`` meet
        ``condition`` (over their key set and range, under the hot row's
        names), its words' shares summed in the words' order: words joined
        by AND, each word's postings joined to the others' by entry (a
        hash join of their B-tree ranges: only the matches are scored);
        else the ranges' postings summed per entry."""
        at = q("h.cid = {} AND h.name = {} AND h.config = {}",
               literal(self.cid), literal(self.name), literal(self.config))
        share = word_score_sql(q("h.tf"), q("h.dl"))
        if self.all_of:
            # each word's postings read alone, their shares computed for
            # the matches only, after the join (looked up by entry instead,
            # one word's for each of the other's, estimated at a twentieth
            # of their number: 72 instead of 20 ms at 100,000 entries)
            parts = [q("(SELECT h.rid, h.tf, h.dl FROM {} h WHERE {} AND "
                       "h.word = {} AND {} OFFSET 0) {}",
                       schema.LANGPOSTINGS_TABLE, at, param(word),
                       condition, q("w%d" % n))
                     for n, word in enumerate(self.words)]
            joined = parts[0]
            total = word_score_sql(q("w0.tf"), q("w0.dl"))
            for n, part in enumerate(parts[1:], 1):
                alias = q("w%d" % n)
                joined = q("{} JOIN {} ON {}.rid = w0.rid", joined, part,
                           alias)
                total = q("({} + {})", total, word_score_sql(
                    q("{}.tf", alias), q("{}.dl", alias)))
            return q("SELECT w0.rid, ({})::float8 AS score FROM {}", total,
                     joined)
        parts = []
        for group, (words, prefixes) in enumerate(self.groups):
            ranges = []
            if words:
                ranges.append(q("h.word = ANY({}::text[])", param(words)))
            for prefix in prefixes:
                end = prefix_end(prefix)
                if end is None:
                    ranges.append(q("h.word >= {}", param(prefix)))
                else:
                    ranges.append(q("h.word >= {} AND h.word < {}",
                                    param(prefix), param(end)))
            parts.extend(
                q("SELECT h.rid, h.word, {} AS share, {} AS g FROM {} h "
                  "WHERE {} AND {} AND {}", share, literal(1 << group),
                  schema.LANGPOSTINGS_TABLE, at, where, condition)
                for where in ranges)
        union = join(" UNION ALL ", parts)
        if len(self.groups) == 1:
            # (one group: its ranges do not overlap)
            return q("SELECT u.rid, (sum(u.share ORDER BY u.word))::float8 "
                     "AS score FROM ({}) u GROUP BY u.rid", union)
        # a word in several groups' ranges counted once; every group met
        return q("SELECT x.rid, (sum(x.share ORDER BY x.word))::float8 AS "
                 "score FROM (SELECT u.rid, u.word, min(u.share) AS share, "
                 "bit_or(u.g) AS g FROM ({}) u GROUP BY u.rid, u.word) x "
                 "GROUP BY x.rid HAVING bit_or(x.g) = {}", union,
                 literal((1 << len(self.groups)) - 1))


#: a search reading more B-tree ranges of postings than this (its
#: prefixes, and its words' lists, over its groups and configurations) is
#: matched on the language rows instead
MAX_RANGES = 32


class EachLanguage:
    """The matches and scores of a search in several configurations read
    from the postings: each configuration's (an entry is parsed in one
    only, so none is found twice)."""

    def __init__(self, parts):
        self.parts = parts

    def statement(self, condition):
        return join(" UNION ALL ", [q("({})", part.statement(condition))
                                    for part in self.parts])


def postings_of(cid, name, queries):
    """The :class:`LanguagePostings` of a search (``queries``: its
    :class:`LanguageQuery` list, one per configuration) whose query is
    groups joined by AND, each words and prefixes joined by OR, in each
    configuration (:class:`EachLanguage` for several); else None."""
    if not all(query.groups for query in queries):
        return None
    ranges = sum(bool(words) + len(prefixes) for query in queries
                 for words, prefixes in query.groups)
    if ranges > MAX_RANGES:
        # (a statement of that many ranges costs more to plan than the
        # language rows' GIN index costs to read)
        return None
    parts = [LanguagePostings(cid, name, query) for query in queries]
    return parts[0] if len(parts) == 1 else EachLanguage(parts)
