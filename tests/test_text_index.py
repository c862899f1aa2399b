"""PGZCTextIndex against a real ZCatalog ZCTextIndex (real PostgreSQL).

The same generated documents are indexed by ZCTextIndex (in a plain ZCatalog,
with Plone's ``plone_lexicon`` pipeline and a stop-word lexicon) and by
PGZCTextIndex (rows in PostgreSQL); generated queries must give the same
set of paths, the same Okapi scores and the same exceptions.
"""
import json
import pickle
import random

import psycopg
import pytest
from Acquisition import aq_base
from Products.CMFPlone.UnicodeSplitter import I18NNormalizer
from Products.CMFPlone.UnicodeSplitter import Splitter as UnicodeSplitter
from Products.ZCatalog.query import IndexQuery
from Products.ZCatalog.ZCatalog import ZCatalog
from Products.ZCTextIndex.Lexicon import CaseNormalizer
from Products.ZCTextIndex.Lexicon import Splitter
from Products.ZCTextIndex.Lexicon import StopWordRemover
from Products.ZCTextIndex.ParseTree import ParseError
from Products.ZCTextIndex.ParseTree import QueryError
from Products.ZCTextIndex.ZCTextIndex import PLexicon
from Products.ZCTextIndex.ZCTextIndex import ZCTextIndex

from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.indexes import text
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.indexes.text import PGZCTextIndex
from plone.pgcatalog.indexes.text import querytree
from plone.pgcatalog.indexes.text import postings
from plone.pgcatalog.indexes.text import scoring
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing import pgserver

NAMES = ("SearchableText", "Description", "Title")

VOCAB = [
    "café", "Café", "CAFÉ", "cafe", "cafés", "naïve", "naive", "résumé",
    "resume", "Über", "uber", "straße", "strasse", "foo-bar", "foo_bar",
    "foo", "bar", "Foo", "BAR", "bars", "barn", "2024", "x1", "x2", "x11",
    "HELLO", "hello", "hell", "help", "world", "apple", "apricot", "apply",
    "banana", "band", "bandana", "can't", "o'neil", "the", "and", "a", "of",
    "or", "not", "in", "to", "plone", "Plone", "zope", "python", "pythons",
    "日本語", "東京", "Ɂ", "a\\b", "ŉx", "ǁ", "data.base", "e-mail",
    "über-cool", "ça", "déjà-vu", "Ærø", "œuvre",
]


RAW_WORDS = ["100%", "50%off", "a+b", "a+bc", "x|y", "$dollar", "a.b", "axb",
             "[br]", "it's", "o''k", "back\\slash", "q?x", "star*", "Foo",
             "foo", "fo.o", "^caret", "d%d", "%s"]


class RawSplitter:
    """Splits on whitespace only: words keep punctuation (and globs)."""

    def process(self, lst):
        return [w for s in lst for w in s.split()]


class Extra:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Doc:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def make_text(rnd):
    parts = []
    for _ in range(rnd.randint(1, 30)):
        parts.append(rnd.choice(VOCAB))
        parts.append(rnd.choice([" ", " ", " ", ", ", ". ", "-", " (",
                                  ") ", "! ", "/"]))
    return "".join(parts)


def make_docs():
    rnd = random.Random(4242)
    docs = []
    for i in range(200):
        kw = {}
        r = i % 20
        if r == 0:
            pass                                      # no attribute at all
        elif r == 1:
            kw["SearchableText"] = None
        elif r == 2:
            kw["SearchableText"] = ""                 # indexed, no words
        elif r == 3:
            kw["SearchableText"] = "!!! ... ---"      # indexed, no words
        elif r == 4:
            value = make_text(rnd)
            kw["SearchableText"] = lambda value=value: value
        elif r == 5:
            kw["SearchableText"] = [make_text(rnd), 42, make_text(rnd)]
        elif r == 6:
            kw["SearchableText"] = b"bytes are ignored"
        elif r == 7:
            kw["SearchableText"] = ("a", "tuple", make_text(rnd))
        else:
            kw["SearchableText"] = make_text(rnd)
        if i % 7 != 3:
            kw["Description"] = make_text(rnd)
        if i % 5 != 2:
            kw["Title"] = " ".join(rnd.choice(RAW_WORDS + VOCAB)
                                   for _ in range(rnd.randint(0, 8)))
        docs.append(("/plone/f%d/doc%d" % (i % 5, i), Doc(**kw)))
    # some structure for phrase tests
    docs.append(("/plone/phrase1", Doc(SearchableText="the quick brown fox",
                                       Description="the quick brown fox")))
    docs.append(("/plone/phrase2", Doc(SearchableText="quick the brown fox",
                                       Description="fox brown the quick")))
    docs.append(("/plone/phrase3", Doc(SearchableText="foo foo bar foo",
                                       Description="foo foo bar foo")))
    return docs


@pytest.fixture(scope="module")
def env():
    cat = ZCatalog("cat")
    cat.threshold = None  # no ZODB connection: no cache GC
    cat._setObject("plone_lexicon", PLexicon(
        "plone_lexicon", "", UnicodeSplitter(), I18NNormalizer()))
    cat._setObject("plaintext_lexicon", PLexicon(
        "plaintext_lexicon", "", Splitter(), CaseNormalizer(),
        StopWordRemover()))
    cat._setObject("raw_lexicon", PLexicon("raw_lexicon", "", RawSplitter()))
    extras = {
        "SearchableText": Extra(lexicon_id="plone_lexicon",
                                index_type="Okapi BM25 Rank"),
        "Description": Extra(lexicon_id="plaintext_lexicon",
                             index_type="Okapi BM25 Rank",
                             doc_attr="Description"),
        "Title": Extra(lexicon_id="raw_lexicon",
                       index_type="Okapi BM25 Rank"),
    }
    pgidx = {}
    for name in NAMES:
        cat._catalog.addIndex(name, ZCTextIndex(name, extras[name], cat))
        pgidx[name] = PGZCTextIndex(name, extras[name], cat)

    dsn = pgserver.fresh_database("pgc_text")
    conn = psycopg.connect(dsn, autocommit=True)
    migrations.apply(conn)
    cid = conn.execute(
        "INSERT INTO pgcatalog_catalogs (key) VALUES ('t') RETURNING cid"
    ).fetchone()[0]
    for name in NAMES:
        schema.ensure_index_ddl(conn, schema.index_statements(pgidx[name],
                                                              cid))
    docs = make_docs()
    rows = []
    with conn.transaction():
        with conn.cursor() as cur:
            for path, doc in docs:
                cat.catalog_object(doc, uid=path)
                rid = cur.execute(
                    "INSERT INTO pgcatalog_entries (cid, path, depth)"
                    " VALUES (%s, %s, %s) RETURNING rid",
                    (cid, path, path.count("/"))).fetchone()[0]
                for name in NAMES:
                    value = pgidx[name].pgc_extract(doc)
                    if value is MISSING:
                        continue
                    rows.append((rid, cid, name, str(value), value.dl,
                                 json.dumps(value.tf)))
            # the columns plone.pgcatalog's writer fills (see writer.py)
            cur.executemany(
                "INSERT INTO pgcatalog_text (rid, cid, name, tsv, dl, tf) "
                "VALUES (%s, %s, %s, %s::tsvector, %s, %s::jsonb)", rows)
    conn.execute("ANALYZE")
    yield dict(cat=cat, pg=pgidx, conn=conn, cid=cid, docs=docs)
    conn.close()
    pgserver.drop_database(dsn)


def outcome(func):
    try:
        return ("ok", func())
    except Exception as exc:
        return ("error", type(exc), str(exc))


def zc_search(env, name, value):
    catalog = env["cat"]._catalog

    def run():
        result = catalog.searchResults({name: value})
        return {catalog.paths[b.getRID()]: b.data_record_score_
                for b in result}
    return outcome(run)


def fetch(env, fragment):
    """The rows of a statement composed as a Fragment."""
    return env["conn"].execute(fragment.text, fragment.params).fetchall()


def scored(qc, where, cid=None):
    """The statement giving each match's path and relevance."""
    ranks = qc.rank_fragments()
    assert len(ranks) == 1
    if cid is None:
        return q("SELECT e.path, {} FROM pgcatalog_entries e WHERE {}",
                 ranks[0], where)
    return q("SELECT e.path, {} FROM pgcatalog_entries e WHERE e.cid = {} "
             "AND {}", ranks[0], cid, where)


class LexiconStore:
    """What textstats reads the lexicon with: the env's catalog."""

    def __init__(self, env):
        self.env = env
        self.cid = env["cid"]

    def value(self, fragment):
        return fetch(self.env, fragment)[0][0]


def lexicon_context(env, qc):
    """``qc`` with the lexicon's glob words and exact document frequencies
    (what the tool's store gives the compiler)."""
    from plone.pgcatalog.pg import textstats
    store = LexiconStore(env)
    qc.text_words = lambda name, prefix, regex: textstats._read_words(
        store, env["pg"][name], prefix, regex)
    qc.text_df = lambda name, tsquery: fetch(env, scoring.df_sql(
        name, env["cid"], tsquery, exact=True))[0][0]
    return qc


def pg_search(env, name, value, lexicon=False, postings=None):
    """The matches' paths and scores, as ``zc_search`` gives them.
    ``postings``: a list; when the query is a union of many words, its
    matches and scores are read word by word (postings.postings_sql) and
    the query is appended to it."""
    catalog = env["cat"]._catalog
    index = env["pg"][name].__of__(env["cat"])

    def run():
        query = catalog.make_query({name: value})
        iq = IndexQuery(query, name, index.query_options, index.operators,
                        index.useOperator)
        qc = QueryContext()
        qc.cid = env["cid"]
        if lexicon:
            lexicon_context(env, qc)
        where = index.pgc_where(iq, qc)
        if where is NO_MATCH or where is None:
            return {}
        statement = None
        if postings is not None:
            statement = qc.text_rows[0].postings(env["cid"])
        if statement is None:
            statement = scored(qc, where, env["cid"])
        else:
            postings.append(value)
            statement = q("SELECT e.path, tr.score FROM ({}) tr JOIN "
                          "pgcatalog_entries e ON e.rid = tr.rid",
                          statement.statement)
        rows = fetch(env, statement)
        return {path: int(score) for path, score in rows}
    return outcome(run)


def compare(env, name, value, lexicon=False, postings=None):
    expected = zc_search(env, name, value)
    got = pg_search(env, name, value, lexicon, postings)
    assert got[0] == expected[0], (name, value, expected, got)
    if expected[0] == "error":
        assert got[1:] == expected[1:], (name, value)
    else:
        assert set(got[1]) == set(expected[1]), (name, value)
        assert got[1] == expected[1], ("scores", name, value)
    return expected


def words_of(env):
    """Query words drawn from the documents' text."""
    words = []
    for _, doc in env["docs"]:
        for attr in NAMES:
            value = getattr(doc, attr, None)
            if isinstance(value, str):
                words.extend(value.replace("(", " ").replace(")", " ")
                             .replace("!", " ").split())
    return sorted(set(words))


def gen_queries(env, count, seed):
    rnd = random.Random(seed)
    words = words_of(env) + VOCAB + RAW_WORDS + ["missing", "nowhere"]

    def w():
        word = rnd.choice(words)
        k = rnd.random()
        if k < 0.1:
            return word.upper()
        if k < 0.15:
            return "-" + word if not word.startswith("-") else word
        return word

    def glob():
        word = rnd.choice(words).strip("-,.!/()")
        if len(word) < 2:
            word = "fo"
        cut = rnd.randint(1, max(1, len(word) - 1))
        k = rnd.random()
        if k < 0.5:
            return word[:cut] + "*"
        if k < 0.7:
            return word[:cut] + "?" + word[cut + 1:]
        if k < 0.85:
            return word[:cut] + "*" + word[-1]
        return word[:cut] + "**"

    def phrase():
        _, doc = rnd.choice(env["docs"])
        value = getattr(doc, rnd.choice(NAMES), None)
        if not isinstance(value, str) or not value.split():
            return '"foo bar"'
        parts = value.replace('"', " ").split()
        start = rnd.randrange(len(parts))
        return '"%s"' % " ".join(parts[start:start + rnd.randint(2, 3)])

    templates = [
        lambda: w(),
        lambda: w(),
        lambda: "%s %s" % (w(), w()),
        lambda: "%s AND %s" % (w(), w()),
        lambda: "%s OR %s" % (w(), w()),
        lambda: "%s or %s or %s" % (w(), w(), w()),
        lambda: "%s AND NOT %s" % (w(), w()),
        lambda: "%s and not %s" % (w(), w()),
        lambda: "%s -%s" % (w(), w()),
        lambda: phrase(),
        lambda: "%s %s" % (phrase(), w()),
        lambda: "-%s %s" % (phrase(), w()),
        lambda: glob(),
        lambda: "%s %s" % (glob(), w()),
        lambda: "%s OR %s" % (glob(), glob()),
        lambda: "%s AND NOT %s" % (w(), glob()),
        lambda: "(%s OR %s) AND %s" % (w(), w(), w()),
        lambda: "(%s OR %s) -%s" % (w(), phrase(), w()),
        lambda: "(%s %s) OR (%s AND NOT %s)" % (w(), w(), w(), glob()),
        lambda: "%s OR (%s AND %s)" % (phrase(), w(), w()),
        lambda: [w(), w()],
        lambda: [w(), "OR", w()],
        lambda: {"query": [w(), w()]},
        lambda: {"query": w()},
        lambda: "%s-%s" % (w(), w()),
    ]
    return [rnd.choice(templates)() for _ in range(count)]


def test_generated_queries_searchabletext(env):
    nonempty = errors = 0
    for query in gen_queries(env, 350, 1):
        result = compare(env, "SearchableText", query)
        if result[0] == "error":
            errors += 1
        elif result[1]:
            nonempty += 1
    # the generator must exercise real matches and errors
    assert nonempty > 110
    assert errors > 15


def test_generated_queries_stopwords(env):
    nonempty = 0
    for query in gen_queries(env, 200, 2):
        result = compare(env, "Description", query)
        if result[0] == "ok" and result[1]:
            nonempty += 1
    assert nonempty > 70


def test_generated_queries_raw_words(env):
    nonempty = 0
    for query in gen_queries(env, 200, 3):
        result = compare(env, "Title", query)
        if result[0] == "ok" and result[1]:
            nonempty += 1
    assert nonempty > 18


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("query", [
    "", " ", "foo", "FOO", "café", "Cafe", "CAFÉ", "cafe*", "caf?",
    "ca*e", "c*", "x1*", "x?", "x??", "foo-bar", "foo_bar", "foo bar",
    '"foo bar"', '"foo foo"', '"foo foo bar"', '"bar foo"', '"foo bar foo"',
    "the", "the AND foo", "foo AND the", "foo OR the", "the OR foo",
    "foo AND NOT the", "foo -the", '"the quick"', '"quick brown"',
    '"the quick brown"', "the quick", "(the)", "(foo OR bar) AND the",
    "日本語", "日本*", "東京", "東*", "Ɂ", "a\\b", "can't", "o'neil",
    "can*", "o'*", "ŉx", "ǁ", "straße", "strasse", "strass*", "Ærø", "aero",
    "œuvre", "oeuvre", "data.base", "e-mail", "über-cool", "déjà-vu",
    "NOT foo", "-foo", "foo OR -bar", "*foo", "?oo", "foo AND", "AND",
    "OR foo", "(foo", "foo)", '"unterminated', '"', '""', "foo (bar",
    "foo AND NOT", "NOT", "foo NOT bar", "-(foo)", "(-foo)", "foo -(bar)",
    "foo AND NOT -bar", "foo AND NOT (bar -baz)", "(foo AND the) OR zope",
    ["foo", "bar"], ["bar", "foo"], ["", ""], [], ["-foo", "bar"],
    ["AND", "foo", "bar"], {"query": ["bar", "AND", "foo"]},
    {"query": ""}, "missing", "missing*", '"missing foo"', "foo missing",
    "foo OR missing", "foo AND NOT missing", "hell*", "hel?", "hel?o",
    "he*o", "ban*a", "ban?", "band*", "2024", "202?", "f*", "fo*",
    "100%", "100*", "50%*", "%s", "%*", "d%d", "a+b", "a+b*", "a+?", "a+*",
    "x|y", "x|*", "x|?", "$dollar", "$*", "a.b", "a.*", "a.?", "[br]",
    "[b*", "it's", "it'*", "o''k", "back\\slash", "back\\*", "q?x",
    "q*", "star*", "fo.o", "fo.*", "^caret", "^*", "*foo", "?oo",
])
def test_fixed_queries(env, name, query):
    compare(env, name, query)


def test_error_classes(env):
    for name in NAMES:
        for query, exc in [("NOT foo", ParseError), ("-foo", ParseError),
                           ("foo AND", ParseError), ("(foo", ParseError)]:
            with pytest.raises(exc):
                _raise(env, name, query)
    # leading globs (only a splitter keeping them can produce one)
    for query in ["*foo", "foo OR ?x", "foo AND NOT (bar OR *x)"]:
        with pytest.raises(QueryError):
            _raise(env, "Title", query)
        assert compare(env, "Title", query)[1] is QueryError
    # stop words only
    with pytest.raises(ParseError):
        _raise(env, "Description", "the")


def _raise(env, name, query):
    index = env["pg"][name].__of__(env["cat"])
    iq = IndexQuery({name: query}, name, index.query_options)
    index.pgc_where(iq, QueryContext())


def test_no_keys_and_empty(env):
    index = env["pg"]["SearchableText"].__of__(env["cat"])
    qc = QueryContext()
    assert index.pgc_where(IndexQuery({}, "SearchableText"), qc) is None
    iq = IndexQuery({"SearchableText": ""}, "SearchableText")
    assert index.pgc_where(iq, qc) is NO_MATCH
    assert qc.ranks == []
    # a non-string key fails as in ZCTextIndex (' '.join)
    iq = IndexQuery({"SearchableText": [1, 2]}, "SearchableText")
    with pytest.raises(TypeError):
        index.pgc_where(iq, qc)


def test_entry_words_match_getEntryForObject(env):
    cat = env["cat"]
    conn = env["conn"]
    for name in NAMES:
        zidx = cat._catalog.getIndex(name)
        rows = conn.execute(
            "SELECT e.path, t.tsv FROM pgcatalog_entries e JOIN "
            "pgcatalog_text t ON t.rid = e.rid AND t.name = %s "
            "WHERE e.cid = %s", (name, env["cid"])).fetchall()
        stored = dict(rows)
        for path, _ in env["docs"]:
            rid = cat._catalog.uids[path]
            expected = zidx.getEntryForObject(rid, default=None)
            if expected is None:
                assert path not in stored
                continue
            assert env["pg"][name].pgc_decode(stored[path]) == expected


def test_document_count_matches(env):
    cat = env["cat"]
    for name in NAMES:
        zidx = cat._catalog.getIndex(name)
        count = env["conn"].execute(
            "SELECT count(*) FROM pgcatalog_text WHERE name = %s",
            (name,)).fetchone()[0]
        assert count == zidx.indexSize()


def test_text_stats_hook(env):
    """Exact statistics from the writer give the same scores."""
    cat = env["cat"]
    zidx = cat._catalog.getIndex("SearchableText")
    index = env["pg"]["SearchableText"].__of__(cat)
    okapi = zidx.index
    stats = (okapi.document_count(), okapi._totaldoclen())
    for query in ["foo", "café OR hello", '"foo bar"', "hel*", "ba?d"]:
        expected = zc_search(env, "SearchableText", query)[1]
        iq = IndexQuery({"SearchableText": query}, "SearchableText")
        qc = QueryContext()
        qc.text_stats = lambda name: stats
        rows = fetch(env, scored(qc, index.pgc_where(iq, qc)))
        assert {p: int(s) for p, s in rows} == expected


def test_sort_on_text_index_raises(env):
    index = env["pg"]["SearchableText"]
    with pytest.raises(CatalogError):
        index.pgc_sort(QueryContext())
    assert index.pgc_storage == "text"


def test_configuration_only(env):
    cat = env["cat"]
    index = env["pg"]["SearchableText"]
    assert not hasattr(aq_base(index), "index")
    index.clear()
    assert not hasattr(aq_base(index), "index")
    state = pickle.loads(pickle.dumps(aq_base(index)))
    assert not hasattr(state, "index")
    # the lexicon is found again by acquisition, by id
    wrapped = index.__of__(cat)
    assert aq_base(wrapped.getLexicon()) is aq_base(cat.plone_lexicon)
    assert index.getIndexType() == "Okapi BM25 Rank"
    assert index.getIndexSourceNames() == ["SearchableText"]
    assert index.lexicon_id == "plone_lexicon"
    desc = env["pg"]["Description"]
    assert desc.getIndexSourceNames() == ["Description"]
    assert desc.indexed_attrs == ["Description"]
    assert isinstance(index, ZCTextIndex)
    assert index.getIndexQueryNames() == ("SearchableText",)
    assert index.meta_type == "ZCTextIndex"
    # nothing written to the lexicon by extraction
    lexicon = cat.plaintext_lexicon
    before = lexicon.length()
    desc.__of__(cat).pgc_extract(Doc(Description="brandnewword zzzyyy"))
    assert lexicon.length() == before
    assert "brandnewword" not in lexicon._wids


def test_constructor_errors(env):
    cat = env["cat"]
    with pytest.raises(LookupError):
        PGZCTextIndex("x", Extra(lexicon_id="nope",
                                 index_type="Okapi BM25 Rank"), cat)
    with pytest.raises(ValueError):
        PGZCTextIndex("x", Extra(lexicon_id="plone_lexicon",
                                 index_type="Bogus"), cat)
    idx = PGZCTextIndex("x", Extra(lexicon_id="plone_lexicon",
                                   index_type="Cosine Measure",
                                   doc_attr="a, b"), cat)
    assert idx.getIndexSourceNames() == ["a", "b"]
    assert idx.getIndexType() == "Cosine Measure"
    idx.indexed_attrs = ["c"]
    assert idx._indexed_attrs == ["c"]


def test_extract_edge_cases(env):
    cat = env["cat"]
    index = env["pg"]["SearchableText"].__of__(cat)
    conn = env["conn"]
    assert index.pgc_extract(Doc()) is MISSING
    assert index.pgc_extract(Doc(SearchableText=None)) is MISSING
    assert index.pgc_extract(Doc(SearchableText=b"x")) is MISSING
    assert index.pgc_extract(Doc(SearchableText=[1, None])) is MISSING
    assert index.pgc_extract(Doc(SearchableText=lambda: None)) is MISSING
    empty = index.pgc_extract(Doc(SearchableText=""))
    assert empty is not MISSING and index.pgc_decode(empty) == []
    assert index.pgc_decode(
        index.pgc_extract(Doc(SearchableText={"set"}))) == ["set"]
    long_word = "x" * 5000
    words = ["it's", "back\\slash", "", long_word, "a", "a"]
    value = text.tsvector_literal(words)
    stored = conn.execute("SELECT %s::tsvector::text", (value,)).fetchone()[0]
    decoded = text.words_from_tsvector(stored)
    assert decoded[:3] == ["it's", "back\\slash", ""]
    assert decoded[3].startswith("x" * 100) and len(decoded[3]) < 2047
    assert decoded[4:] == ["a", "a"]
    # a long document: positions are clamped, the input stays valid
    many = ["w%d" % (i % 300) for i in range(20000)]
    stored = conn.execute(
        "SELECT %s::tsvector::text",
        (text.tsvector_literal(many),)).fetchone()[0]
    decoded = text.words_from_tsvector(stored)
    assert decoded[:16382] == many[:16382]
    # an exact query of the long word finds its surrogate
    node = index.pgc_parse([long_word])
    q = text.tsquery_text(node)
    assert conn.execute("SELECT %s::tsvector @@ %s::tsquery",
                        (value, q)).fetchone()[0]


def test_ddl_and_gin_index_used(env):
    conn = env["conn"]
    index = env["pg"]["SearchableText"]
    (stmt,) = schema.index_statements(index, 1)
    assert stmt.as_string(None).startswith("CREATE INDEX IF NOT EXISTS")
    conn.execute(stmt, ())  # idempotent
    found = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'pgcatalog_text' "
        "AND indexdef LIKE '%gin%'").fetchall()
    assert len(found) == len(NAMES)
    # one index per text index, on its rows' words (not partial: the
    # planner keeps its expression's statistics, see the next test)
    assert any("USING gin ((\nCASE\n    WHEN (name = 'SearchableText'::text)"
               " THEN tsv\n    ELSE NULL::tsvector\nEND))" in f[0]
               and "WHERE" not in f[0] for f in found), found


def test_text_conditions_use_the_index_and_its_own_statistics():
    """A word's rows in one text index are estimated from that index's
    rows (the GIN index's expression statistics), and found by that
    index: 3,000 text rows in three indexes, the word in 600 rows of one.
    Written as ``name = ... AND tsv @@ ...`` (before schema version 15)
    they were estimated at 200 (the word's share of every text row, times
    the name's third)."""
    dsn = pgserver.fresh_database("pgc_text_stats")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrations.apply(conn)
            cid = conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES "
                               "('t') RETURNING cid").fetchone()[0]
            index = _named("SearchableText")
            statements = [stmt for name in NAMES for stmt in
                          schema.index_statements(_named(name), cid)]
            schema.ensure_index_ddl(conn, statements)
            conn.execute(
                "INSERT INTO pgcatalog_entries (cid, path, depth) "
                "SELECT %s, '/p/' || i, 2 FROM generate_series(1, 1000) i",
                (cid,))
            conn.execute(
                "INSERT INTO pgcatalog_text (rid, cid, name, tsv) SELECT "
                "e.rid, e.cid, n.name, CASE WHEN n.name = 'SearchableText' "
                "AND e.rid %% 5 < 3 THEN 'w filler' ELSE 'filler other' "
                "END::tsvector FROM pgcatalog_entries e CROSS JOIN "
                "unnest(%s::text[]) AS n(name)", (list(NAMES),))
            conn.execute("ANALYZE pgcatalog_text")
            count = index.pgc_df_sql(cid, "w", exact=True)
            plan = conn.execute(
                "EXPLAIN (FORMAT JSON) " + count.text,
                count.params).fetchone()[0][0]["Plan"]
            assert plan["Node Type"] == "Aggregate"
            estimate = plan["Plans"][0]["Plan Rows"]
            assert 400 <= estimate <= 900, estimate
            assert fetch({"conn": conn}, count) == [(600,)]
            _assert_served_by_its_index(conn, index, cid, count)
    finally:
        pgserver.drop_database(dsn)


def test_index_id_quoted_in_its_index_and_conditions():
    """An index id with a quote and a backslash is one literal in the GIN
    index's expression and in the conditions, which then use that index."""
    name = "it's \\ text"
    dsn = pgserver.fresh_database("pgc_text_quoted")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrations.apply(conn)
            cid = conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES "
                               "('t') RETURNING cid").fetchone()[0]
            index = _named(name)
            schema.ensure_index_ddl(conn, schema.index_statements(index, cid))
            conn.execute(
                "INSERT INTO pgcatalog_entries (cid, path, depth) "
                "SELECT %s, '/p/' || i, 2 FROM generate_series(1, 50) i",
                (cid,))
            conn.execute(
                "INSERT INTO pgcatalog_text (rid, cid, name, tsv) SELECT "
                "e.rid, e.cid, n.name, CASE WHEN e.rid %% 2 = 0 THEN 'w' "
                "ELSE 'x' END::tsvector FROM pgcatalog_entries e CROSS JOIN "
                "unnest(%s::text[]) AS n(name)", ([name, "Title"],))
            count = index.pgc_df_sql(cid, "w", exact=True)
            assert fetch({"conn": conn}, count) == [(25,)]
            _assert_served_by_its_index(conn, index, cid, count)
    finally:
        pgserver.drop_database(dsn)


def _assert_served_by_its_index(conn, index, cid, statement):
    """PostgreSQL can answer ``statement`` (a Fragment) from ``index``'s
    GIN index (a sequential scan forbidden)."""
    (name, _), = [spec.statement(cid, index.getId())
                  for spec in index.pgc_indexes()]
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN " + statement.text, statement.params).fetchall())
    assert name in plan, plan


def _named(name):
    index = PGZCTextIndex.__new__(PGZCTextIndex)
    index.id = name
    return index


def test_word_and_length_statistics(env):
    """numObjects (distinct words) and Okapi's document lengths."""
    cat = env["cat"]
    conn = env["conn"]
    for name in NAMES:
        zidx = cat._catalog.getIndex(name)
        index = env["pg"][name]
        ((count,),) = fetch(env, index.pgc_unique_words_sql(env["cid"]))
        assert count == zidx.numObjects()
        rows = fetch(env, q(
            "SELECT e.path, {} FROM pgcatalog_entries e JOIN pgcatalog_text t"
            " ON t.rid = e.rid AND t.name = {}", index.pgc_doclen_sql("t"),
            name))
        for path, dl in rows:
            rid = cat._catalog.uids[path]
            assert dl == zidx.index._docweight[rid]
        stored = conn.execute(
            "SELECT e.path, t.tsv FROM pgcatalog_entries e JOIN "
            "pgcatalog_text t ON t.rid = e.rid AND t.name = %s",
            (name,)).fetchall()
        total = 0
        for path, tsv in stored:
            rid = cat._catalog.uids[path]
            total += text.doclen_from_tsvector(tsv)
            assert text.doclen_from_tsvector(tsv) == (
                zidx.index._docweight[rid])
        assert total == zidx.index._totaldoclen()
    assert text.doclen_from_tsvector(text.tsvector_literal(["a"] * 70000)) \
        == 70000


def _pg_rows(env, name, query, **qc_attrs):
    index = env["pg"][name].__of__(env["cat"])
    iq = IndexQuery({name: query}, name, index.query_options)
    qc = QueryContext()
    qc.__dict__.update(qc_attrs)
    return dict(fetch(env, scored(qc, index.pgc_where(iq, qc))))


def test_ts_rank_mode(env):
    for query in ["foo", "café OR hello", '"foo bar"', "hel*", "ba?d",
                  "foo -bar", "(foo OR zope) AND NOT b*"]:
        expected = zc_search(env, "SearchableText", query)[1]
        got = _pg_rows(env, "SearchableText", query, text_rank="ts_rank")
        assert set(got) == set(expected)
        assert all(isinstance(v, float) and v > 0 for v in got.values())
    # the default mode can be changed on the index class too
    index = env["pg"]["SearchableText"]
    index.pgc_rank_mode = "ts_rank"
    try:
        got = _pg_rows(env, "SearchableText", "foo")
        assert all(isinstance(v, float) for v in got.values())
    finally:
        del index.pgc_rank_mode


def test_statistics_caps_keep_matches(env, monkeypatch):
    """Past the exact-statistics limits scores are approximate, matches
    stay exact."""
    monkeypatch.setattr(scoring, "DF_EXACT_LIMIT", 3)
    monkeypatch.setattr(scoring, "GLOB_EXACT_DOCS", 2)
    monkeypatch.setattr(scoring, "STATS_SAMPLE", 5)
    for query in ["foo", "café OR hello", '"foo bar"', "hel*", "ba?d",
                  "b* AND f*", "foo -bar"]:
        expected = zc_search(env, "SearchableText", query)[1]
        got = _pg_rows(env, "SearchableText", query)
        assert set(got) == set(expected)
        assert all(v > 0 for v in got.values())


GLOB_QUERIES = ["b*", "f*", "hel*", "ba?d", "b* AND f*", "foo OR b*",
                 "(foo OR zope) AND NOT b*", "c*", "z*", "caf*", "x*"]


@pytest.mark.parametrize("columns", [0, 1, 4])
def test_globs_scored_from_the_lexicon(env, monkeypatch, columns):
    """A glob expanded to the lexicon's words (schema version 11) gets
    ZCTextIndex's score, each word with its own document frequency, where
    the capped statistics give another (below): whether its words are read
    as words or in one pass (GLOB_WORD_COLUMNS)."""
    monkeypatch.setattr(scoring, "DF_EXACT_LIMIT", 3)
    monkeypatch.setattr(scoring, "GLOB_EXACT_DOCS", 2)
    monkeypatch.setattr(scoring, "GLOB_WORD_COLUMNS", columns)
    queries = GLOB_QUERIES + [query for query in gen_queries(env, 300, 5)
                              if "*" in str(query) or "?" in str(query)]
    nonempty = 0
    for name in NAMES:
        for query in queries:
            result = compare(env, name, query, lexicon=True)
            nonempty += result[0] == "ok" and bool(result[1])
    assert nonempty > 100
    # without the lexicon the same caps give other scores
    differ = [query for query in GLOB_QUERIES
              if pg_search(env, "SearchableText", query)
              != zc_search(env, "SearchableText", query)]
    assert differ


def test_a_glob_of_every_word_with_its_prefix_is_matched_by_it(env):
    """A glob the lexicon's words replace is matched by its prefix
    (``'hel':*``, one range of the GIN index's keys) when the words are
    every word with that prefix; with a ``?`` or an inner ``*`` by its
    words.  Matches and scores stay ZCTextIndex's."""
    index = env["pg"]["SearchableText"].__of__(env["cat"])

    def condition(query):
        qc = lexicon_context(env, QueryContext())
        qc.cid = env["cid"]
        iq = IndexQuery({"SearchableText": query}, "SearchableText",
                        index.query_options)
        where = index.pgc_where(iq, qc)
        return where.text, [str(p) for p in where.params]

    words = textstats_words(env, "b")
    assert len(words) > 2
    _, params = condition("b*")
    assert "'b':*" in params
    assert not any("|" in p for p in params), params
    _, params = condition("foo AND NOT b*")
    assert any("!('b':*)" in p for p in params), params
    # ``?``: the words that match the pattern, not every word with the
    # prefix
    _, params = condition("ba?d")
    assert not any(":*" in p for p in params), params
    # the tsquery for ts_rank keeps the words (it weighs each term)
    qtree = querytree.resolve_globs(querytree._glob_node("b*"),
                                    lambda glob: words)
    assert querytree.tsquery_text(qtree, prefixes=True) == "'b':*"
    assert querytree.tsquery_text(qtree) == "(%s)" % " | ".join(
        text.quote_lexeme(w) for w in words)
    for query in ["b*", "foo AND NOT b*", "ba?d", "hel* OR zope", "c*"]:
        compare(env, "SearchableText", query, lexicon=True)


def textstats_words(env, prefix):
    from plone.pgcatalog.pg import textstats
    return textstats._read_words(LexiconStore(env),
                                 env["pg"]["SearchableText"], prefix)


@pytest.mark.parametrize("least", [2, 5])
def test_unions_of_words_scored_word_by_word(env, monkeypatch, least):
    """A glob's words, or words joined by OR (at least POSTINGS_MIN_WORDS):
    the matches and their scores read word by word (postings.postings_sql)
    are ZCTextIndex's, each word with its own document frequency."""
    monkeypatch.setattr(postings, "POSTINGS_MIN_WORDS", least)
    # plain words (no phrase, no query operator)
    words = [w for w in words_of(env) if w.isalpha()
             and w.lower() not in ("and", "or", "not")]
    rnd = random.Random(7)
    unions = [" OR ".join(rnd.sample(words, k)) for k in (3, 4, 6, 9) * 5]
    # beside required words and phrases (Plone's search: ``word AND
    # glob*``), and negated parts
    beside = ["foo AND b*", '"foo bar" AND b*', "b* AND NOT foo",
              "hello AND c* AND NOT zope", "b* AND f* AND foo",
              "foo AND bar AND (%s)" % unions[-1], "missing AND b*",
              "foo AND NOT ba?d AND b*", "apple AND a*",
              # words a raw lexicon keeps as they are
              "it's AND b*", "back\\slash AND b*", "fo\x00o AND b*",
              "o''k AND NOT f* AND b*", "100% AND a*"]
    queries = GLOB_QUERIES + unions + beside + [
        "missing OR nowhere OR b*", "zzzz*"] + [
        query for query in gen_queries(env, 300, 5)
        if "*" in str(query) or "?" in str(query) or " OR " in str(query)]
    used = []
    for name in NAMES:
        for query in queries:
            compare(env, name, query, lexicon=True, postings=used)
    # the bare globs and the unions of plain words took that way
    assert len(used) > 40
    assert "f*" in used and unions[-1] in used
    assert {"foo AND b*", '"foo bar" AND b*', "b* AND NOT foo",
            "hello AND c* AND NOT zope"} <= set(used)
    # two unions: scored row by row
    assert "b* AND f*" not in used and "b* AND f* AND foo" not in used
    # rows written before term frequencies were kept: counted from the
    # tsvector's positions
    with env["conn"].transaction(force_rollback=True):
        env["conn"].execute("UPDATE pgcatalog_text SET tf = NULL")
        again = []
        for query in GLOB_QUERIES + unions + beside:
            before = len(again)
            got = pg_search(env, "SearchableText", query, lexicon=True,
                            postings=again)
            if len(again) > before:
                assert got == zc_search(env, "SearchableText", query), query
        assert "f*" in again and sum(u in again for u in unions) >= 5
        assert "foo AND b*" in again
    # no lexicon (no words, no frequencies): never
    none = []
    for query in GLOB_QUERIES + unions:
        pg_search(env, "SearchableText", query, postings=none)
    assert none == []


def test_word_by_word_when_no_word_is_here(env):
    """A union whose words no document of this catalog and index holds (a
    shared lexicon's words of another): no match, nothing read."""
    from plone.pgcatalog.indexes.text.querytree import _Or
    from plone.pgcatalog.indexes.text.querytree import _Word
    qc = QueryContext()
    qc.cid = env["cid"]
    qc.text_df = lambda name, tsquery: 0
    qc.text_stats = lambda name: (100, 1000)
    node = _Or([_Word("nosuchword"), _Word("nosuchword2")])
    found = postings.postings_sql("SearchableText", node, qc, env["cid"])
    assert found.reads == 0 and found.documents == 100
    assert fetch(env, found.statement) == []
    # beside a required word no document holds: the same
    from plone.pgcatalog.indexes.text.querytree import _And
    node = _And([_Word("foo"), _Or([_Word("bar"), _Word("baz")])], [])
    qc.text_df = lambda name, tsquery: 0 if "foo" in tsquery else 3
    found = postings.postings_sql("SearchableText", node, qc, env["cid"])
    assert found.reads == 0 and fetch(env, found.statement) == []
    # ts_rank mode: never
    assert postings.postings_sql("SearchableText", node, qc, env["cid"],
                                mode="ts_rank") is None


def test_word_by_word_when_it_pays():
    """A union read word by word (each row once per word it holds) or
    matched at once and scored row by row (only the rows other conditions
    keep): the cheaper by the measured costs per row."""
    # a three-letter glob: 82,912 rows for 60,658 documents of 100,000
    broad = postings.Postings(q("SELECT 1"), 82912, 100000)
    assert broad.pays(100000)
    assert broad.pays(50000)        # an anonymous search
    assert not broad.pays(5000)     # one rare type
    # without other conditions: word by word
    assert postings.Postings(q("SELECT 1"), 300, 100000).pays(100000)
    # no statistics: word by word
    assert postings.Postings(q("SELECT 1"), 82912, None).pays(5)


def test_the_lexicon_is_kept_by_the_text_rows(env):
    """Every word of the text rows is in the lexicon, once; a written row
    adds its new words (insert and update), and a word no row holds any
    more stays (as in ZCTextIndex's lexicon)."""
    conn = env["conn"]
    found = conn.execute("SELECT word, count(*) FROM pgcatalog_words "
                         "GROUP BY 1 ORDER BY 1").fetchall()
    assert [r[:1] for r in found] == conn.execute(
        "SELECT DISTINCT u.w FROM pgcatalog_text CROSS JOIN LATERAL "
        "unnest(tsvector_to_array(tsv)) AS u(w) WHERE u.w <> chr(3) "
        "ORDER BY 1").fetchall()
    assert {r[1] for r in found} == {1}
    with conn.transaction():
        rid = conn.execute("SELECT min(rid) FROM pgcatalog_text WHERE name "
                           "= 'Title'").fetchone()[0]
        conn.execute("UPDATE pgcatalog_text SET tsv = tsv || "
                     "'zzfresh:9'::tsvector WHERE rid = %s AND name = "
                     "'Title'", (rid,))
        conn.execute("INSERT INTO pgcatalog_text (rid, cid, name, tsv) "
                     "SELECT rid, cid, 'Title', 'zznew zzfresh'::tsvector "
                     "FROM pgcatalog_entries WHERE cid = %s AND rid NOT IN "
                     "(SELECT rid FROM pgcatalog_text WHERE name = 'Title') "
                     "LIMIT 1", (env["cid"],))
        conn.execute("UPDATE pgcatalog_text SET tsv = tsv || "
                     "'zzfresh:10'::tsvector WHERE rid = %s AND name = "
                     "'Title'", (rid,))
        conn.execute("DELETE FROM pgcatalog_text WHERE tsv @@ "
                     "'zznew'::tsquery")
        assert conn.execute(
            "SELECT word, count(*) FROM pgcatalog_words WHERE word LIKE "
            "'zz%%' GROUP BY 1 ORDER BY 1").fetchall() == [
                ("zzfresh", 1), ("zznew", 1)]
        raise psycopg.Rollback()


def test_persistent_class_path(env):
    """ZODB pickles name the class by ``__module__``: the package's path,
    not the submodule the class is written in."""
    assert PGZCTextIndex.__module__ == "plone.pgcatalog.indexes.text"
    assert kind_for("ZCTextIndex") is PGZCTextIndex
    data = pickle.dumps(aq_base(env["pg"]["Title"]), protocol=2)
    assert b"plone.pgcatalog.indexes.text" in data
    assert b"indexes.text.index" not in data
    assert type(pickle.loads(data)) is PGZCTextIndex


def test_a_quoted_lexeme_reads_back():
    """A word's document frequency is looked up by its lexeme, read back
    from the tsquery the scorer quoted (encoding.unquote_lexeme); any other
    tsquery is counted from the text rows."""
    from plone.pgcatalog.indexes.text.encoding import lexeme
    from plone.pgcatalog.indexes.text.encoding import unquote_lexeme
    for word in ["a", "it's", "o''k", "back\\slash", "\\", "'", "fo\x00o",
                 "café", "a:*", "", "x" * 3000]:
        lex = lexeme(word)
        assert unquote_lexeme(text.quote_lexeme(lex)) == lex
    for tsquery in ["'a':*", "'a' & 'b'", "'a' | 'b'", "!'a'", "'a':A",
                    "a", "'a'x", "('a')"]:
        assert unquote_lexeme(tsquery) is None, tsquery
