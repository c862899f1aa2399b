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
its own language only.  Relevance is PostgreSQL's ``ts_rank`` over the
weighted words (:data:`RANK_WEIGHTS`, normalised by the document's
length: :data:`RANK_NORMALIZATION`).

This module describes the language form (what is stored, how a query is
written); the index kind (:mod:`.index`) uses it once the index's rows
are complete (``LanguageText.ready``).
"""
from Products.ZCTextIndex.ParseTree import QueryError

from plone.pgcatalog.indexes.context import TextRow
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
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
#: ``ts_rank``'s weights of D, C, B, A (PostgreSQL's order)
RANK_WEIGHTS = "{0.1, 0.2, 0.4, 1.0}"
#: ``ts_rank``'s normalisation: the rank divided by 1 + the logarithm of
#: the document's length (a long page does not win by length alone)
RANK_NORMALIZATION = 1


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
    """The statement giving the tsquery text of ``tree`` in each of
    ``configs`` (one row, one column per configuration)."""
    return q("SELECT {}", join(", ", [
        q("({})::text", query_sql(tree, literal(config)))
        for config in configs]))


def match_sql(name, queries, alias="l"):
    """The language row ``alias`` of index ``name`` matches: in its own
    configuration, the query's tsquery there (``queries``: ``[(config,
    tsquery text)]``, the empty ones left out)."""
    row = q(alias)
    return q("{}.name = {} AND ({})", row, literal(name), join(
        " OR ", [q("({}.config = {} AND {}.tsv @@ {}::tsquery)", row,
                   literal(config), row, literal(text))
                 for config, text in queries]))


def exists_sql(rid, name, queries):
    """The entry whose rid is ``rid`` has a language row of ``name``
    matching ``queries``."""
    return q("EXISTS (SELECT 1 FROM {} l WHERE l.rid = {} AND {})",
             schema.LANGTEXT_TABLE, rid, match_sql(name, queries))


def row_rank_sql(queries, alias="l"):
    """The relevance of the language row ``alias``: ts_rank of its
    weighted words for the query in the row's configuration."""
    row = q(alias)
    cases = join(" ", [
        q("WHEN {} THEN ts_rank({}, {}.tsv, {}::tsquery, {})",
          literal(config), literal(RANK_WEIGHTS), row, literal(text),
          literal(RANK_NORMALIZATION))
        for config, text in queries])
    return q("(CASE {}.config {} END)", row, cases)


def rank_sql(name, queries):
    """The relevance of the entry ``e`` (its language row's)."""
    return q("(SELECT {} FROM {} l WHERE l.rid = e.rid AND l.name = {})",
             row_rank_sql(queries), schema.LANGTEXT_TABLE, literal(name))


def text_row(name, queries):
    """The condition and the score over a language row itself
    (context.TextRow): a search by relevance matches and scores in one pass
    over the language rows (search/relevance.TextRelevance)."""
    return TextRow(
        lambda alias: match_sql(name, queries, alias),
        lambda alias: (q("{} AS lr", row_rank_sql(queries, alias)),
                       q("s.lr")),
        lambda alias: row_rank_sql(queries, alias),
        table=schema.LANGTEXT_TABLE)
