"""The ``path`` index (ExtendedPathIndex) answered by PostgreSQL.

The main test is differential: a real ``ExtendedPathIndex`` (acquisition
wrapped below ``/plone/portal_catalog`` as in a Plone site, because its
answers depend on its own physical path) and the same paths as rows of
``pgcatalog_entries`` answer thousands of generated queries; the result sets
must be identical.
"""
import random

import psycopg
import pytest
from Acquisition import Implicit
from OFS.Application import Application
from OFS.Folder import Folder
from Products.ExtendedPathIndex.ExtendedPathIndex import ExtendedPathIndex
from Products.ZCatalog.query import IndexQuery
from Products.ZCatalog.ZCatalog import ZCatalog

from plone.pgcatalog.catalog import CatalogConfig
from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.indexes.path import PGExtendedPathIndex
from plone.pgcatalog.indexes.path.predicates import outside_tree
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing import pgserver

NASTY = ["a_b", "a%b", "a b", "x~y", "p(1)", "n#1", "c+d", "e@f",
         "++conversation++default", "123", "a-1", "a.txt", "a0", "a!"]


class Tool(Implicit):
    """Stands for ``portal_catalog._catalog``, the parent an index is
    wrapped in.  Its physical path is acquired from the tool and repeats
    the tool's id (see test_index_physical_path_as_in_zcatalog)."""

    def getPhysicalPath(self):
        return ("", "plone", "portal_catalog", "portal_catalog")


class Content:
    def __init__(self, path):
        self._path = path

    def getPhysicalPath(self):
        return tuple(self._path.split("/"))


def _tree(rnd, root, ids, levels, fanout):
    paths = []
    frontier = [root]
    for _ in range(levels):
        nxt = []
        for parent in frontier:
            for name in rnd.sample(ids, rnd.randint(1, fanout)):
                child = parent + "/" + name
                paths.append(child)
                nxt.append(child)
        frontier = rnd.sample(nxt, min(len(nxt), 6))
    return paths


def _datasets():
    rnd = random.Random(20240611)
    ids = NASTY + ["a", "b", "c", "d", "news", "folder", "plone",
                   "portal_catalog", "path"]
    full = ["/plone"] + _tree(rnd, "/plone", ids, 5, 5)
    full += ["/plone/a", "/plone/a/b", "/plone/a/b/c", "/plone/d",
             "/plone/a-1", "/plone/a-1/b", "/plone/a b/c",
             "/plone/portal_catalog/path/a", "/other", "/other/a",
             "/plone/portal_catalog/portal_catalog/a",
             "/other/plone/a", "/plone-2/a/b", "/plone x/a", "/plonea",
             "/plone!/a", "/a", "/a/b"]
    plone = ["/plone"] + _tree(rnd, "/plone", ids, 4, 4)
    # no site root, comments below an uncatalogued conversation, and a
    # level with no entry at all (depth 3) below which entries exist
    gappy = ["/plone/doc", "/plone/doc/++conversation++default/1",
             "/plone/doc/++conversation++default/2", "/plone/f",
             "/plone/f/g/h/i", "/plone/f/g/h/j", "/plone/f/g/h/j/k",
             "/plone/e/g/x/y", "/plone/a_b/c%d/x/y/z", "/plone/a%b"]
    tiny = ["/plone", "/plone/a", "/plone/b"]
    return {"full": sorted(set(full)), "plone": sorted(set(plone)),
            "gappy": sorted(set(gappy)), "tiny": tiny}


DATASETS = _datasets()


@pytest.fixture(scope="module")
def db():
    dsn = pgserver.fresh_database("pgcatalog_path")
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrations.apply(conn)
        cats = {}
        for name, paths in DATASETS.items():
            cid = conn.execute(
                "INSERT INTO pgcatalog_catalogs (key) VALUES (%s) "
                "RETURNING cid", (name,)).fetchone()[0]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO pgcatalog_entries (cid, path, depth)"
                    " VALUES (%s, %s, %s)",
                    [(cid, p, p.count("/")) for p in paths])
            cats[name] = cid
        yield conn, cats
    pgserver.drop_database(dsn)


def _real_index(paths, multi_valued=False):
    index = ExtendedPathIndex("path", extra={"multi_valued": multi_valued})
    index = index.__of__(Tool())
    for rid, p in enumerate(paths, 1):
        index.index_object(rid, Content(p))
    return index


def _pg_index(multi_valued=False):
    index = PGExtendedPathIndex("path", extra={"multi_valued": multi_valued})
    return index.__of__(Tool())


def _outside(conn, cid):
    """``path_outside`` as the store answers it, on ``conn``."""
    def outside(path):
        comps = [c for c in path.split("/") if c]
        statement = q("SELECT EXISTS (SELECT 1 FROM pgcatalog_entries e "
                      "WHERE e.cid = {} AND {})", cid, outside_tree(comps))
        return conn.execute(statement.text,
                            statement.params).fetchone()[0]
    return outside


def _pg_search(conn, cid, index, query, with_cid=True, ask_outside=True):
    """The entries of catalog ``cid`` matching ``query``; as the only
    condition of a search (``ask_outside``), and then with the catalog's
    id (``with_cid``) the index asks whether entries lie outside the site,
    as the compiler lets it."""
    iq = IndexQuery({"path": query}, "path", index.query_options,
                    index.operators, index.useOperator)
    qc = QueryContext()
    # alone (the compiler's ``qc.alone``): a subtree as one range, and
    # with the catalog's id, the catalog asked about entries outside
    qc.alone = ask_outside
    if with_cid:
        qc.cid = cid
        if ask_outside:
            qc.path_outside = _outside(conn, cid)
    where = index.pgc_where(iq, qc)
    if where is NO_MATCH:
        return set(), where
    assert isinstance(where, Fragment)
    statement = q("SELECT e.path FROM pgcatalog_entries e "
                  "WHERE e.cid = {} AND {}", cid, where)
    rows = conn.execute(statement.text, statement.params).fetchall()
    return {r[0] for r in rows}, where


def _pg_hot_search(conn, cid, index, query):
    """The entries of catalog ``cid`` matching ``query`` by its form over
    the hot row's copy of the path (``h.path``; hot.OnPath), the catalog
    asked about entries outside the site as the compiler lets it; None
    when the query has no such form.  The entries stand for the hot rows
    (the form reads ``h.path`` alone)."""
    iq = IndexQuery({"path": query}, "path", index.query_options,
                    index.operators, index.useOperator)
    qc = QueryContext()
    qc.cid = cid
    qc.path_outside = _outside(conn, cid)
    found = index.pgc_hot_where(iq, qc)
    if found is None:
        return None, None
    found = found.resolved()
    if found is None:
        return None, None
    if found is hot.EVERYWHERE:
        # every entry meets it
        rows = conn.execute("SELECT path FROM pgcatalog_entries WHERE "
                            "cid = %s", (cid,)).fetchall()
        return {r[0] for r in rows}, TRUE
    where = found.fragment
    assert "e." not in where.text, where.text
    # the subtrees are read one by one (a UNION ALL): no entry in two
    seen = []
    for part in found.parts:
        statement = q("SELECT h.path FROM pgcatalog_entries h "
                      "WHERE h.cid = {} AND {}", cid, part)
        seen += [r[0] for r in conn.execute(statement.text,
                                            statement.params).fetchall()]
    assert len(seen) == len(set(seen)), (query, found.parts)
    return set(seen), where


def _real_search(index, paths, query):
    iq = IndexQuery({"path": query}, "path", index.query_options,
                    index.operators, index.useOperator)
    return {paths[rid - 1] for rid in index.query_index(iq)}


def _query_paths(rnd, paths):
    """Query strings: existing paths, their parts, variants, misses."""
    p = rnd.choice(paths)
    comps = [c for c in p.split("/") if c]
    cut = rnd.randint(0, len(comps))
    r = rnd.random()
    if r < 0.45:
        return p
    if r < 0.55:
        return "/" + "/".join(comps[:cut])
    if r < 0.62:
        return p + "/"
    if r < 0.68:
        return p.lstrip("/")
    if r < 0.76:
        return "/".join(comps[rnd.randint(0, len(comps) - 1):])
    if r < 0.82:
        return p + "/" + rnd.choice(["nope", "a", "b/nope", "c"])
    return rnd.choice(["", "/", "/plone", "/plone/", "plone", "//plone//a",
                       "/plone/portal_catalog", "/plone/portal_catalog/path",
                       "/plone/portal_catalog/path/a", "/nope", "a", "b",
                       "/plone/portal_catalog/portal_catalog/path/a",
                       "/plone/a_b", "/plone/a%b", "/plone/a b",
                       "/plone/a", "/plone/a-1", "/other", "/plone x"])


def _random_query(rnd, paths):
    nkeys = rnd.choice([1, 1, 1, 1, 2, 2, 3])
    keys = [_query_paths(rnd, paths) for _ in range(nkeys)]
    if rnd.random() < 0.05:
        keys[0] = (keys[0], rnd.choice([0, 1, 2, -1]))
    opts = {}
    r = rnd.random()
    if r < 0.7:
        opts["depth"] = rnd.choice([-1, -1, 0, 0, 1, 1, 2, 3, 4])
    elif r < 0.72:
        opts["depth"] = -2
    if rnd.random() < 0.35:
        opts["navtree"] = rnd.choice([1, 1, True, 0])
        if rnd.random() < 0.7:
            opts["navtree_start"] = rnd.choice([0, 1, 1, 2, 2, 3, 4, 5])
    if rnd.random() < 0.25:
        opts["level"] = rnd.choice([0, 1, 2, 3, -1, -1])
    if nkeys > 1 and rnd.random() < 0.5:
        opts["operator"] = rnd.choice(["and", "or", "AND"])
    if not opts and nkeys == 1 and rnd.random() < 0.5:
        return keys[0]  # plain string query
    if not opts and rnd.random() < 0.5:
        return keys  # plain list
    if nkeys == 1 and rnd.random() < 0.5:
        return dict(opts, query=keys[0])
    return dict(opts, query=keys)


QUERIES_PER_DATASET = 1500


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_differential(db, name):
    conn, cats = db
    paths = DATASETS[name]
    cid = cats[name]
    rnd = random.Random("path-" + name)
    real = _real_index(paths)
    pg = _pg_index()
    failures = []
    hot_forms = 0
    for n in range(QUERIES_PER_DATASET):
        query = _random_query(rnd, paths)
        try:
            expected = _real_search(real, paths, query)
        except TypeError as exc:
            with pytest.raises(type(exc)):
                _pg_search(conn, cid, pg, query)
            continue
        got, where = _pg_search(conn, cid, pg, query, with_cid=n % 4 != 3,
                                ask_outside=n % 4 != 2)
        if got != expected:
            failures.append((query, sorted(expected - got),
                             sorted(got - expected), where))
        # the form over the hot rows' copy of the path, where it has one
        got, where = _pg_hot_search(conn, cid, pg, query)
        if got is not None:
            hot_forms += 1
            if got != expected:
                failures.append(("hot", query, sorted(expected - got),
                                 sorted(got - expected), where))
    assert not failures, "%d of %d differ, first: %r" % (
        len(failures), QUERIES_PER_DATASET, failures[:3])
    # (a dataset with entries outside the site has no such form)
    assert hot_forms > 50 or name == "full", hot_forms


@pytest.mark.parametrize("name", ["full", "gappy"])
def test_differential_multi_valued(db, name):
    conn, cats = db
    paths = DATASETS[name]
    real = _real_index(paths, multi_valued=True)
    pg = _pg_index(multi_valued=True)
    rnd = random.Random("multi-" + name)
    for _ in range(300):
        query = _random_query(rnd, paths)
        try:
            expected = _real_search(real, paths, query)
        except TypeError:
            continue
        got, where = _pg_search(conn, cats[name], pg, query)
        assert got == expected, (query, where)


def test_exhaustive_options(db):
    """Every option combination on every query path of the full tree."""
    conn, cats = db
    paths = DATASETS["full"]
    real = _real_index(paths)
    pg = _pg_index()
    queries = sorted({p for p in paths if p.count("/") <= 3} | {
        "", "/", "/plone/", "plone/a", "a/b", "/plone/nope", "/plone/a/"})
    count = 0
    for path in queries:
        for depth in (-1, 0, 1, 2, 3):
            for navtree, starts in ((0, (0,)), (1, (0, 1, 2, 3, -3))):
                for ns in starts:
                    query = {"query": path, "depth": depth,
                             "navtree": navtree, "navtree_start": ns}
                    expected = _real_search(real, paths, query)
                    got, where = _pg_search(conn, cats["full"], pg, query)
                    assert got == expected, (query, where)
                    count += 1
    assert count > 1000


@pytest.mark.parametrize("name", ["gappy", "tiny", "full"])
def test_exhaustive_levels(db, name):
    """Explicit and negative levels with every other option: these take
    the array-slice and ``generate_series`` paths and the catalog facts
    (``_depth``, levels nobody ends at)."""
    conn, cats = db
    paths = DATASETS[name]
    real = _real_index(paths)
    pg = _pg_index()
    qpaths = sorted(set(paths) | {"/".join(p.split("/")[-2:]) for p in paths}
                    | {p.split("/")[-1] for p in paths}
                    | {"", "/", "g/h", "plone/f", "nope"})
    combos = [(depth, nav, ns, level)
              for depth in (-1, 0, 1, 2, 3) for nav in (0, 1)
              for ns in ((0, 1, 2, 3, 5) if nav else (0,))
              for level in (-1, 1, 2)]
    rnd = random.Random("levels-" + name)
    queries = [(p, c) for p in qpaths for c in combos]
    if len(queries) > 1200:
        queries = rnd.sample(queries, 1200)
    for n, (path, (depth, nav, ns, level)) in enumerate(queries):
        query = {"query": path, "depth": depth, "navtree": nav,
                 "navtree_start": ns, "level": level}
        expected = _real_search(real, paths, query)
        got, where = _pg_search(conn, cats[name], pg, query,
                                with_cid=n % 2 == 0)
        assert got == expected, (query, where)


# -- the documented behaviour, spelled out --------------------------------

TREE = ["/plone", "/plone/a", "/plone/a/b", "/plone/a/b/c", "/plone/d"]


@pytest.fixture(scope="module")
def tree(db):
    conn, _ = db
    cid = conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES ('tree')"
                       " RETURNING cid").fetchone()[0]
    for p in TREE:
        conn.execute("INSERT INTO pgcatalog_entries (cid, path, depth)"
                     " VALUES (%s, %s, %s)", (cid, p, p.count("/")))
    return conn, cid


@pytest.mark.parametrize("query,expected", [
    ("/plone/a", {"/plone/a", "/plone/a/b", "/plone/a/b/c"}),
    ({"query": "/plone/a", "depth": 0}, {"/plone/a"}),
    ({"query": "/plone/a", "depth": 1}, {"/plone/a/b"}),
    ({"query": "/plone/a", "depth": 2},
     {"/plone/a", "/plone/a/b", "/plone/a/b/c"}),
    ({"query": "/plone/a/", "depth": 1}, set()),
    ({"query": "plone/a", "depth": 0}, {"/plone/a"}),
    ("a/b", set()),
    ("/plone/nope", set()),
    ("", set(TREE)),
    ("/", set(TREE)),
    ({"query": ""}, set(TREE)),
    ({"query": "b", "level": 2}, {"/plone/a/b", "/plone/a/b/c"}),
    ({"query": "b", "level": -1}, {"/plone/a/b", "/plone/a/b/c"}),
    (["/plone/a/b", "/plone/d"], {"/plone/a/b", "/plone/a/b/c", "/plone/d"}),
    ({"query": ["/plone/a", "/plone/a/b"], "operator": "and"},
     {"/plone/a/b", "/plone/a/b/c"}),
    ({"query": "/plone/a/b", "navtree": 1},
     {"/plone", "/plone/a", "/plone/d", "/plone/a/b", "/plone/a/b/c"}),
    ({"query": "/plone/a/b", "navtree": 1, "navtree_start": 2},
     {"/plone/a/b", "/plone/a/b/c"}),
    ({"query": "/plone/a/b/c", "navtree": 1, "depth": 0},
     {"/plone", "/plone/a", "/plone/a/b", "/plone/a/b/c"}),
])
def test_documented_semantics(tree, query, expected):
    conn, cid = tree
    got, _ = _pg_search(conn, cid, _pg_index(), query)
    assert got == expected
    assert _real_search(_real_index(TREE), TREE, query) == expected


def test_values_are_parameters(tree):
    conn, cid = tree
    index = _pg_index()
    for path in NASTY:
        for depth in (-1, 0, 1, 2):
            iq = IndexQuery({"path": {"query": "/plone/" + path,
                                      "depth": depth}}, "path",
                            index.query_options)
            where = index.pgc_where(iq, QueryContext())
            assert path not in where.text
            assert "LIKE" not in where.text.upper()
            assert "/plone/" + path in where.params


def test_no_query_and_empty_list(tree):
    index = _pg_index()
    iq = IndexQuery({"other": 1}, "path", index.query_options)
    assert index.pgc_where(iq, QueryContext()) is None
    iq = IndexQuery({"path": {"query": []}}, "path", index.query_options)
    assert index.pgc_where(iq, QueryContext()) is NO_MATCH
    iq = IndexQuery({"path": {"query": "/plone/a/", "depth": 1}}, "path",
                    index.query_options)
    assert index.pgc_where(iq, QueryContext()) is NO_MATCH


def _where(query, cid=None):
    index = _pg_index()
    iq = IndexQuery({"path": query}, "path", index.query_options,
                    index.operators, index.useOperator)
    return index.pgc_where(iq, QueryContext(cid=cid))


#: the entry's parent path, computed from its path (schema version 16)
PARENT = q(schema.parent_sql("e.path"))
SUBTREE = "(e.path = {} OR (e.path >= {} AND e.path < {}))"
RANGE = "(e.path >= {} AND e.path < {} AND (e.path = {} OR e.path >= {}))"


# What navigation, breadcrumbs and folder listings ask on every page: the
# conditions the (cid, parent), (cid, path) and (cid, depth) indexes serve.
@pytest.mark.parametrize("query,expected", [
    # folder listing: the children
    ({"query": "/plone/a", "depth": 1}, q("({} = {})", PARENT, "/plone/a")),
    ({"query": "/plone/a", "depth": 0}, q("(e.path = {})", "/plone/a")),
    # navtree: the children of every folder along the path
    ({"query": "/plone/a/b", "navtree": 1},
     q("({} = ANY({}::text[]))", PARENT, ["/plone/a/b", "/plone/a",
                                          "/plone", ""])),
    # breadcrumbs: the objects along the path
    ({"query": "/plone/a/b", "navtree": 1, "depth": 0},
     q("(e.path = ANY({}::text[]))", ["/plone/a/b", "/plone/a", "/plone",
                                      "/"])),
    # global navigation: depths only
    ({"query": "/plone", "depth": 3},
     q("(e.depth BETWEEN {}::int AND {}::int)", 1, 4)),
    # a subtree: ranges on path (the site's own components are not checked)
    ({"query": "/plone/a", "depth": -1},
     q("((" + SUBTREE + " OR ((e.path < {} OR (e.path > {} AND e.path < {}) "
       "OR e.path >= {}) AND (array_remove(string_to_array(e.path, '/'), "
       "''))[{}::int:{}::int] = {}::text[])))",
       "/plone/a", "/plone/a/", "/plone/a0", "/plone", "/plone", "/plone/",
       "/plone0", 2, 2, ["a"])),
    # a level: a cheap string test before the components
    ({"query": "b", "level": 2},
     q("((strpos(substr(e.path || '/', 2), {}) > 0 AND "
       "(array_remove(string_to_array(e.path, '/'), ''))[{}::int:{}::int] "
       "= {}::text[]))", "/b/", 3, 3, ["b"])),
])
def test_sql_shapes(query, expected):
    assert _where(query) == expected
    assert _where(query, cid=5) == expected


def test_a_subtree_is_one_range_when_nothing_lies_outside_the_site():
    """The components of the site's own path are not checked (ZCatalog),
    so an entry outside the site can match the rest.  A path search alone
    asks the catalog, and when none is there, a subtree is the one range of
    (cid, path); beside other conditions nothing is asked and the subtree
    is the two ranges of before."""
    index = _pg_index()
    asked = []

    def where(query, outside, alone=True):
        iq = IndexQuery({"path": query}, "path", index.query_options,
                        index.operators, index.useOperator)
        qc = QueryContext(
            cid=5, path_outside=lambda path: asked.append(path) or outside)
        qc.alone = alone
        return index.pgc_where(iq, qc)

    subtree = {"query": "/plone/a", "depth": -1}
    assert where(subtree, False) == q(
        "(" + RANGE + ")", "/plone/a", "/plone/a0", "/plone/a", "/plone/a/")
    assert asked == ["/plone"]
    ranged = where(subtree, True)
    assert ranged.text.startswith("((" + RANGE.replace("{}", "%s") + " OR ")
    assert ranged.params[4:] == _where(subtree).params[3:]
    # beside other conditions: not asked, as before
    del asked[:]
    assert where(subtree, False, alone=False) == _where(subtree)
    assert asked == []
    # two levels below the site, a depth: asked once per search
    assert "array_remove" not in where(
        {"query": "/plone/a/b", "depth": 2}, False).text
    assert asked == ["/plone"]


def test_catalog_facts_with_and_without_cid():
    """A fact about the catalog is a probe of the query's catalog when the
    compiler gives its id, else looked up for the entry's catalog."""
    query = {"query": "/plone/a/b", "navtree": 1, "navtree_start": 1,
             "depth": 0}
    with_cid = _where(query, cid=5)
    assert 'FROM "pgcatalog_entries" d WHERE d.cid = %s::int AND ' \
        'd.depth >= %s::int' in with_cid.text
    assert 5 in with_cid.params
    assert "c.cid" not in with_cid.text
    without = _where(query)
    assert 'e.cid = ANY(ARRAY(SELECT c.cid FROM "pgcatalog_catalogs" c ' \
        'WHERE EXISTS (SELECT 1 FROM "pgcatalog_entries" d WHERE ' \
        'd.cid = c.cid AND d.depth >= %s::int)))' in without.text


def test_everything_is_true(tree):
    assert _where({"query": "/plone"}) is TRUE
    conn, cid = tree
    got, where = _pg_search(conn, cid, _pg_index(), "/plone")
    assert where is TRUE and got == set(TREE)


def test_extract():
    index = PGExtendedPathIndex("path")
    assert index.pgc_extract(Content("/plone/a b/c")) == "/plone/a b/c"
    assert index.pgc_extract(object()) is MISSING

    class WithAttr(Content):
        def path(self):
            return ("", "plone", "virtual")

    assert index.pgc_extract(WithAttr("/plone/x")) == "/plone/virtual"
    other = PGExtendedPathIndex(
        "path", extra={"indexed_attrs": "getPhysicalPath, ignored"})
    assert other.indexed_attrs == ("getPhysicalPath",)
    assert other.pgc_extract(Content("/plone/x")) == "/plone/x"

    class Bad:
        path = 42

    with pytest.raises(TypeError):
        index.pgc_extract(Bad())


def test_configuration_only():
    index = PGExtendedPathIndex("path", extra={"multi_valued": True})
    assert index.getId() == "path"
    assert index.meta_type == "ExtendedPathIndex"
    assert index.multi_valued
    assert isinstance(index, ExtendedPathIndex)
    assert index.pgc_storage == "path"
    assert not hasattr(index, "_index_items")
    assert not hasattr(index, "_unindex")
    assert index.getIndexSourceNames() == ("getPhysicalPath",)
    # ZCatalog sorts by the indexed path; every entry has one
    assert index.pgc_sort(QueryContext()) == ((q("e.path"),), None)
    # the base schema's (cid, path), (cid, parent), (cid, depth) serve it
    assert index.pgc_indexes() == []


def test_persistent_class_path():
    """Catalogs in the ZODB hold the index under this class path."""
    assert PGExtendedPathIndex.__module__ == "plone.pgcatalog.indexes.path"
    assert kind_for("ExtendedPathIndex") is PGExtendedPathIndex


def test_index_physical_path_as_in_zcatalog():
    """search() skips the query components shared with the index's own
    physical path, so the index must sit where ZCatalog's does."""
    app = Application()
    app._setObject("plone", Folder("plone"))
    app.plone._setObject("zcatalog", ZCatalog("zcatalog"))
    zcatalog = app.plone.zcatalog
    zcatalog._catalog.addIndex("path", ExtendedPathIndex("path"))
    assert zcatalog._catalog.getIndex("path").getPhysicalPath() == (
        "", "plone", "zcatalog", "zcatalog", "path")

    class PGTool(Folder):
        pass

    tool = PGTool("pgcatalog")
    tool._catalog = CatalogConfig()
    app.plone._setObject("pgcatalog", tool)
    tool = app.plone.pgcatalog
    tool._catalog.addIndex("path", PGExtendedPathIndex("path"))
    assert tool._catalog.getIndex("path").getPhysicalPath() == (
        "", "plone", "pgcatalog", "pgcatalog", "path")
    assert _pg_index().getPhysicalPath() == (
        "", "plone", "portal_catalog", "portal_catalog", "path")
