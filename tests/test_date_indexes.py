"""DateIndex, DateRangeIndex and DateRecurringIndex against the originals.

The same few hundred generated objects are indexed by the real PluginIndexes
/ DateRecurringIndex classes (standalone, inside a stand-in catalog so that
``not`` queries see every catalogued document as in ZCatalog) and stored in
PostgreSQL through ``pgc_extract``; then hundreds of generated queries run on
both sides and must return the same documents, in the same order when
sorted.
"""
import datetime
import random
import types

import orjson
import Products.CMFPlone.patches  # noqa: F401  (dateIndexPatch, as in Plone)
import psycopg
import pytest
import pytz
from Acquisition import Implicit
from BTrees.IIBTree import IISet
from BTrees.IIBTree import intersection
from DateTime import DateTime
from plone.event.utils import dt2int
from Products.DateRecurringIndex.index import DateRecurringIndex
from Products.PluginIndexes.DateIndex.DateIndex import DateIndex
from Products.PluginIndexes.DateRangeIndex.DateRangeIndex import DateRangeIndex
from Products.PluginIndexes.interfaces import IDateRangeIndex
from Products.ZCatalog.query import IndexQuery

from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.indexes.date import PGDateIndex
from plone.pgcatalog.indexes.daterange import PGDateRangeIndex
from plone.pgcatalog.indexes.daterecurring import PGDateRecurringIndex
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.pg.store import CatalogStore
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing.pgserver import drop_database
from plone.pgcatalog.testing.pgserver import fresh_database

N_OBJECTS = 400
ZONES = ["UTC", "GMT+2", "GMT-5", "Europe/Vienna", "US/Eastern",
         "Asia/Tokyo"]
LOW = DateTime("1950/01/01 UTC").timeTime()
HIGH = DateTime("2060/01/01 UTC").timeTime()
FLOOR = DateTime(1970, 0)
CEILING = DateTime(2500, 0)
RULES = ["RRULE:FREQ=DAILY;COUNT=5", "RRULE:FREQ=WEEKLY;COUNT=3",
         "RRULE:FREQ=DAILY;INTERVAL=3;COUNT=4", "RRULE:FREQ=MONTHLY;COUNT=2"]


# -- data -------------------------------------------------------------------

class Obj:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __repr__(self):
        return "Obj(%r)" % self.__dict__


class Method:
    """A callable attribute (indexes call them)."""

    def __init__(self, value):
        self.value = value

    def __call__(self):
        return self.value


class Gen:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        rng = self.rng
        # Minutes the values cluster on, so that queries hit exact values.
        self.pool = [int(rng.uniform(LOW, HIGH)) // 60 * 60
                     for _ in range(50)]

    def epoch(self):
        rng = self.rng
        if rng.random() < 0.7:
            base = rng.choice(self.pool)
        else:
            base = int(rng.uniform(LOW, HIGH)) // 60 * 60
        return base + rng.randint(0, 59) + rng.choice([0, 0.25, 0.999999])

    def represent(self, epoch, kinds):
        rng = self.rng
        kind = rng.choice(kinds)
        zone = rng.choice(ZONES)
        if kind == "DT":
            return DateTime(epoch, zone)
        if kind == "str":
            return str(DateTime(epoch, zone))
        if kind == "naive":
            return datetime.datetime.utcfromtimestamp(epoch)
        if kind == "aware":
            tz = rng.choice([datetime.timezone.utc,
                             pytz.timezone("Europe/Vienna"),
                             pytz.timezone("US/Eastern")])
            return datetime.datetime.fromtimestamp(epoch, tz)
        if kind == "pytz":  # plone.event's recurrence wants pytz zones
            tz = pytz.timezone(rng.choice(["Europe/Vienna", "UTC"]))
            return datetime.datetime.fromtimestamp(epoch, tz)
        if kind == "date":
            return datetime.datetime.utcfromtimestamp(epoch).date()
        if kind == "int":
            return int(epoch)
        if kind == "float":
            return float(epoch)
        raise AssertionError(kind)

    def date_value(self, kinds):
        rng = self.rng
        r = rng.random()
        if r < 0.05:
            return None
        if r < 0.09:
            return rng.choice([FLOOR, CEILING, DateTime(5000, 1, 1)])
        return self.represent(self.epoch(), kinds)

    def obj(self):
        rng = self.rng
        attrs = {}
        all_kinds = ["DT", "DT", "str", "naive", "aware", "date", "int",
                     "float"]
        # DateIndex 'modified' (sometimes missing, None or a method)
        if rng.random() > 0.08:
            value = self.date_value(all_kinds)
            attrs["modified"] = Method(value) if rng.random() < 0.2 \
                else value
        # DateIndex 'multi' over the attributes m1, m2
        for name in ("m1", "m2"):
            if rng.random() < 0.6:
                attrs[name] = self.date_value(all_kinds)
        # DateRangeIndex effective / expires
        range_kinds = ["DT", "DT", "str", "naive", "aware"]
        for name in ("effective", "expires"):
            r = rng.random()
            if r < 0.15:
                continue  # attribute missing
            if r < 0.25:
                attrs[name] = None
            elif r < 0.35:
                attrs[name] = FLOOR if name == "effective" else CEILING
            elif r < 0.38:
                attrs[name] = DateTime(900, 1, 1)
            else:
                value = self.represent(self.epoch(), range_kinds)
                attrs[name] = Method(value) if rng.random() < 0.2 \
                    else value
        # DateRecurringIndex start (+ recurrence, recurrence_until)
        r = rng.random()
        if r < 0.06:
            pass  # no start attribute: not indexed
        elif r < 0.1:
            attrs["start"] = None  # indexed as 0
        else:
            attrs["start"] = self.represent(
                self.epoch(), ["DT", "DT", "naive", "aware", "pytz", "date"])
            if rng.random() < 0.35 and not isinstance(
                    getattr(attrs["start"], "tzinfo", None),
                    datetime.timezone):
                attrs["recurrence"] = rng.choice(RULES)
                if rng.random() < 0.3:
                    attrs["recurrence_until"] = DateTime(
                        self.epoch() + 86400 * 30)
            elif rng.random() < 0.1:
                attrs["recurrence"] = ""
        return Obj(**attrs)


class FakeCatalog(Implicit):
    """What ``aq_parent(index).paths`` gives a ZCatalog index."""

    def __init__(self, paths):
        self.paths = paths


class ConnSession:
    """A catalog session over one autocommit connection (no ZODB
    transaction): what a store needs to run statements."""

    has_writes = False
    pending = None

    def __init__(self, conn):
        self.conn = conn
        self.dsn = "stub"
        self.cache = {}

    def execute(self, query, params=(), prepare=None, binary=False):
        if isinstance(query, Fragment):
            query, params = query.text, query.params
        return self.conn.execute(query, params, prepare=prepare,
                                 binary=binary)


class StubTool:
    """The bits of the catalog tool the index data API uses."""

    def __init__(self, conn, cid):
        self.conn = conn
        self.cid = cid
        self.store = CatalogStore(ConnSession(conn), "t")
        self.store._cid = cid

    def _pgc_cid(self):
        return self.cid

    def _pgc_store(self):
        return self.store


def make_indexes(cls_date, cls_range, cls_recurring):
    modified = cls_date("modified")
    multi = cls_date("multi", extra={"indexed_attrs": "m1,m2"})
    coarse = cls_date("coarse", extra={"indexed_attrs": "modified"})
    coarse.precision = 15
    er = cls_range("effectiveRange", "effective", "expires")
    er5 = cls_range("er5", "effective", "expires", precision_value=5)
    unset = cls_range("unset")
    start = cls_recurring("start", extra=types.SimpleNamespace(
        recurdef="recurrence", until="recurrence_until"))
    return {"modified": modified, "multi": multi, "coarse": coarse,
            "effectiveRange": er, "er5": er5, "unset": unset,
            "start": start}


@pytest.fixture(scope="module")
def world():
    gen = Gen(20240611)
    objects = {rid: gen.obj() for rid in range(1, N_OBJECTS + 1)}
    paths = {rid: "/plone/o%d" % rid for rid in objects}
    originals = make_indexes(DateIndex, DateRangeIndex, DateRecurringIndex)
    ours = make_indexes(PGDateIndex, PGDateRangeIndex, PGDateRecurringIndex)
    parent = FakeCatalog(paths)
    wrapped = {name: index.__of__(parent) for name, index in originals.items()}
    rows = []
    for rid, obj in objects.items():
        idx = {}
        for name, index in originals.items():
            index.index_object(rid, obj)
            value = ours[name].pgc_extract(obj)
            if value is not MISSING:
                idx[name] = value
        rows.append((rid, paths[rid], orjson.dumps(idx).decode("utf-8")))

    dsn = fresh_database("pgc_dates")
    conn = psycopg.connect(dsn, autocommit=True)
    psycopg.types.json.set_json_loads(orjson.loads, conn)
    migrations.apply(conn)
    cid = conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES ('t') "
                       "RETURNING cid").fetchone()[0]
    # another catalog in the same database must not leak in
    other = conn.execute("INSERT INTO pgcatalog_catalogs (key) VALUES "
                         "('other') RETURNING cid").fetchone()[0]
    conn.execute("SELECT setval('pgcatalog_rid_seq', 1000000)")
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO pgcatalog_entries (rid, cid, path, depth, idx) "
            "VALUES (%s, %s, %s, 2, %s::jsonb)",
            [(rid, cid, path, idx) for rid, path, idx in rows])
        cur.executemany(
            "INSERT INTO pgcatalog_entries (cid, path, depth, idx) "
            "VALUES (%s, %s, 2, %s::jsonb)",
            [(other, path, idx) for rid, path, idx in rows[:50]])
    for index in ours.values():
        schema.ensure_index_ddl(conn, schema.index_statements(index, cid))
    conn.execute("ANALYZE pgcatalog_entries")
    tool = StubTool(conn, cid)
    for index in ours.values():
        index._v_pgc_tool = tool
    world = types.SimpleNamespace(
        gen=gen, objects=objects, paths=paths, originals=originals,
        wrapped=wrapped, ours=ours, conn=conn, cid=cid)
    yield world
    conn.close()
    drop_database(dsn)


# -- running queries on both sides --------------------------------------------

def make_iq(index, query, name):
    return IndexQuery(query, name, index.query_options, index.operators,
                      index.useOperator)


def run_original(world, name, query, rs=None):
    index = world.wrapped[name]
    try:
        iq = make_iq(index, query, name)
        result = index.query_index(iq, rs)
        if rs is not None:
            result = intersection(rs, result)
    except Exception as exc:  # compared with ours below
        return type(exc)
    return {world.paths[rid] for rid in result}


def pg_where(world, name, query):
    index = world.ours[name]
    iq = make_iq(index, query, name)
    return index.pgc_where(iq, QueryContext())


def run_pg(world, name, query, rs=None, order=None):
    """Paths matching ``query`` (``order``: ``(present, keys, reverse)``
    of ``pgc_sort``, then the sorted paths)."""
    try:
        fragment = pg_where(world, name, query)
    except Exception as exc:
        return type(exc)
    if fragment is NO_MATCH:
        return set() if order is None else []
    assert isinstance(fragment, Fragment)
    conditions = [q("e.cid = {}", world.cid), fragment]
    if rs is not None:
        conditions.append(q("e.rid = ANY({})", list(rs)))
    if order is not None:
        present, keys, reverse = order
        conditions.append(present)
        order_by = join(", ", [q("{} DESC", k) if reverse else k
                               for k in keys] + [q("e.rid")])
        statement = q("SELECT e.path FROM pgcatalog_entries e WHERE {} "
                      "ORDER BY {}", and_(*conditions), order_by)
        return [r[0] for r in world.conn.execute(statement.text,
                                                 statement.params)]
    statement = q("SELECT e.path FROM pgcatalog_entries e WHERE {}",
                  and_(*conditions))
    return {r[0] for r in world.conn.execute(statement.text,
                                             statement.params)}


def check(world, name, query, rs=None):
    expected = run_original(world, name, query, rs)
    got = run_pg(world, name, query, rs)
    assert got == expected, (name, query, _diff(world, name, expected, got))
    return expected


def _diff(world, name, expected, got):
    if not isinstance(expected, set) or not isinstance(got, set):
        return expected, got
    by_path = {p: rid for rid, p in world.paths.items()}
    out = []
    for path in sorted((expected - got) | (got - expected))[:5]:
        rid = by_path[path]
        out.append(("missing" if path in expected else "extra", path,
                    world.originals[name]._unindex.get(rid),
                    world.objects[rid]))
    return out


# -- query generators ---------------------------------------------------------

def date_key(gen, kinds):
    rng = gen.rng
    if rng.random() < 0.05:
        return None
    return gen.represent(gen.epoch(), kinds)


def unindex_queries(world, name, kinds, count, encode):
    """Generated query dicts for a UnIndex-style date index."""
    gen = world.gen
    rng = gen.rng
    values = sorted({v for v in _stored_values(world, name)})
    queries = []
    for _ in range(count):
        form = rng.randrange(12)
        if form == 0:
            queries.append({name: date_key(gen, kinds)})
        elif form == 1:
            queries.append({name: [date_key(gen, kinds)
                                   for _ in range(rng.randint(1, 3))]})
        elif form in (2, 3, 4):
            keys = [gen.represent(gen.epoch(), kinds)
                    for _ in range(rng.choice([1, 1, 2, 3]))]
            queries.append({name: {
                "query": keys if len(keys) > 1 else keys[0],
                "range": rng.choice(["min", "max", "min:max", "minmax",
                                     "max:min"])}})
        elif form == 5:
            queries.append({name: {"query": None, "range": rng.choice(
                ["min", "max", "min:max"])}})
        elif form == 6:
            nots = [gen.represent(gen.epoch(), kinds)
                    for _ in range(rng.randint(1, 2))]
            queries.append({name: {"not": nots if len(nots) > 1
                                   else nots[0]}})
        elif form == 7:
            # excluded values nobody has: ZCatalog's fallback
            queries.append({name: {"not": DateTime(1800, 1, 1)}})
        elif form == 8:
            queries.append({name: {
                "not": gen.represent(gen.epoch(), kinds),
                "range": rng.choice(["min", "max", "min:max"])}})
        elif form == 9:
            raw = rng.choice([
                rng.choice(values) if values else 0,
                gen.represent(gen.epoch(), ["DT"]),
                float(rng.choice(values)) if values else 0.0])
            queries.append({name: {
                "query": gen.represent(gen.epoch(), kinds),
                "range": rng.choice(["min", "max"]),
                "not": [raw, rng.choice(values)] if rng.random() < 0.3
                else raw}})
        elif form == 10:
            # the same minute, written differently
            epoch = gen.epoch()
            keys = [gen.represent(epoch, kinds),
                    gen.represent(rng.choice([epoch, gen.epoch()]), kinds)]
            queries.append({name: keys})
        else:
            lo = gen.epoch()
            hi = lo + rng.choice([0, 60, 3600, 86400 * 3, 86400 * 400])
            queries.append({name: {
                "query": [gen.represent(lo, ["DT"]),
                          gen.represent(hi, ["DT"])],
                "range": "min:max"}})
    return queries


def _stored_values(world, name):
    index = world.originals[name]
    out = []
    for value in index._unindex.values():
        if isinstance(value, tuple):
            out.extend(value)
        else:
            out.append(value)
    return out


# -- tests ----------------------------------------------------------------

def test_extraction_matches(world):
    for name, index in world.originals.items():
        ours = world.ours[name]
        for rid, obj in world.objects.items():
            stored = ours.pgc_extract(obj)
            original = index._unindex.get(rid, MISSING)
            if stored is MISSING:
                assert original is MISSING, (name, obj)
            else:
                assert ours.pgc_decode(stored) == original, (name, obj)
    # all the cases we meant to have are there
    er = world.originals["effectiveRange"]._unindex.values()
    assert (None, None) in er
    assert any(s is None and u is not None for s, u in er)
    assert any(s is not None and u is None for s, u in er)
    assert any(s is not None and u is not None for s, u in er)
    starts = world.originals["start"]._unindex.values()
    assert any(len(s) > 1 for s in starts) and (0,) in starts
    assert not world.originals["unset"]._unindex


@pytest.mark.parametrize("name", ["modified", "multi", "coarse"])
def test_date_index_queries(world, name):
    kinds = ["DT", "DT", "str", "naive", "aware", "date", "int", "float"]
    queries = unindex_queries(world, name, kinds, 300, None)
    nonempty = 0
    for query in queries:
        result = check(world, name, query)
        nonempty += bool(result) and isinstance(result, set)
    assert nonempty > 100


def minutes_to_datetime(value):
    """The inverse of the minute encoding (dt2int / DateIndex._convert)."""
    minute = value % 60
    value //= 60
    hour = value % 24
    value //= 24
    day = (value - 1) % 31 + 1
    value = (value - day) // 31
    month = (value - 1) % 12 + 1
    year = (value - month) // 12
    return datetime.datetime(year, month, day, hour, minute, tzinfo=pytz.utc)


def test_date_recurring_queries(world):
    kinds = ["DT", "DT", "naive", "aware", "date"]
    queries = unindex_queries(world, "start", kinds, 400, None)
    queries += [{"start": "2020/01/01"}, {"start": 12345},
                {"start": {"query": "2020/01/01", "range": "min"}}]
    # ranges that only an occurrence in the middle of a series falls in
    series = [v for v in world.originals["start"]._unindex.values()
              if len(v) >= 3]
    assert len(series) > 10
    for occurrences in series:
        middle = minutes_to_datetime(occurrences[1])
        assert dt2int(middle) == occurrences[1]
        queries.append({"start": {"query": [middle, middle],
                                  "range": "min:max"}})
        queries.append({"start": [middle]})
    nonempty = 0
    for query in queries:
        result = check(world, "start", query)
        nonempty += bool(result) and isinstance(result, set)
    assert nonempty > 100


@pytest.mark.parametrize("name", ["effectiveRange", "er5", "unset"])
def test_date_range_queries(world, name):
    gen = world.gen
    rng = gen.rng
    queries = []
    for _ in range(150):
        kind = rng.choice(["DT", "DT", "str", "naive", "aware"])
        key = gen.represent(gen.epoch(), [kind])
        form = rng.randrange(4)
        if form == 0:
            queries.append({name: key})
        elif form == 1:
            queries.append({name: {"query": key}})
        elif form == 2:
            queries.append({name: [key, gen.represent(gen.epoch(), ["DT"])]})
        else:
            queries.append({name: rng.choice([
                None, CEILING, FLOOR, DateTime(2600, 1, 1),
                DateTime(900, 1, 1), int(gen.epoch() // 60),
                gen.epoch() / 60, DateTime(5000, 1, 1),
                datetime.date(2020, 1, 1)])})
    for query in queries:
        check(world, name, query)


def test_queries_with_a_resultset(world):
    """The index is not first in ZCatalog's plan: it gets the result so far
    (results are then intersected)."""
    rng = random.Random(7)
    rids = list(world.objects)
    kinds = ["DT", "naive", "aware"]
    for name in ("modified", "start", "effectiveRange"):
        if name == "effectiveRange":
            queries = [{name: world.gen.represent(world.gen.epoch(), kinds)}
                       for _ in range(40)]
        else:
            queries = [q for q in unindex_queries(world, name, kinds, 120,
                                                  None)
                       if q[name] is not None]
        for query in queries:
            rs = IISet(rng.sample(rids, rng.randint(1, 200)))
            check(world, name, query, rs)


def test_empty_and_short_circuits(world):
    for name in ("modified", "start"):
        for query in ({name: []}, {name: {"query": []}}, {name: [None]},
                      {name: {"query": (), "not": []}}):
            assert pg_where(world, name, query) is NO_MATCH, query


def test_empty_ranges_raise_as_zcatalog(world):
    """No values for a min/max range: UnIndex's ValueError (min of an
    empty list); an empty effectiveRange query: DateRangeIndex's
    IndexError (its ``record.keys[0]``)."""
    for name in ("modified", "start"):
        query = {name: {"query": [], "range": "min"}}
        assert run_original(world, name, query) is ValueError
        with pytest.raises(ValueError):
            pg_where(world, name, query)
    query = {"effectiveRange": []}
    assert run_original(world, "effectiveRange", query) is IndexError
    with pytest.raises(IndexError):
        pg_where(world, "effectiveRange", query)


def test_range_without_bounds_is_every_dated_document(world):
    """``{"range": "mni"}`` names neither min nor max: every document with
    a value, as UnIndex answers (it used to match nothing here)."""
    for name in ("modified", "start"):
        for query in ({name: {"range": "mni"}},
                      {name: {"query": [], "range": "mni"}}):
            expected = run_original(world, name, query)
            assert expected, query
            assert run_pg(world, name, query) == expected, query


def test_operator_is_not_an_option(world):
    """DateIndex and DateRecurringIndex take no ``operator``: IndexQuery
    refuses it before the index is asked."""
    for name in ("modified", "start"):
        index = world.ours[name]
        with pytest.raises(ValueError):
            make_iq(index, {name: {"query": [DateTime()], "operator": "and"}},
                    name)


def test_not_alone_includes_documents_without_value(world):
    name = "modified"
    value = world.gen.pool[0] + 5
    expected = run_original(world, name, {name: {"not": value}})
    got = run_pg(world, name, {name: {"not": value}})
    assert got == expected
    without = {world.paths[rid] for rid in world.objects
               if rid not in world.originals[name]._unindex}
    assert without and without <= got


def test_hi_falsy_means_no_upper_bound(world):
    for name in ("modified", "start"):
        query = {name: {"query": None, "range": "max"}}
        expected = run_original(world, name, query)
        assert expected == run_pg(world, name, query)
        assert len(expected) == len(world.originals[name]._unindex)


def _sorted_check(world, name, query, reverse, key_of):
    index = world.ours[name]
    keys, present = index.pgc_sort(QueryContext())
    assert isinstance(keys, tuple) and isinstance(present, Fragment)
    got = run_pg(world, name, query, order=(present, keys, reverse))
    expected = run_original(world, name, query)
    keymap = world.originals[name].documentToKeyMap()
    by_path = {p: rid for rid, p in world.paths.items()}
    # ZCatalog drops documents without a sort key
    expected = {p for p in expected if by_path[p] in keymap}
    assert set(got) == expected, (name, query)
    keys = [key_of(keymap[by_path[p]]) for p in got]
    assert keys == sorted(keys, reverse=reverse), (name, query)


@pytest.mark.parametrize("name", ["modified", "multi", "start"])
def test_sort_order(world, name):
    gen = world.gen
    rng = gen.rng
    queries = [{name: {"query": None, "range": "min"}}]
    for _ in range(30):
        lo = gen.epoch()
        queries.append({name: {
            "query": [DateTime(lo), DateTime(lo + rng.choice([86400 * 900,
                                                                86400 * 9000]))],
            "range": "min:max"}})
    for query in queries:
        for reverse in (False, True):
            _sorted_check(world, name, query, reverse, lambda k: k)


def test_sort_order_date_range(world):
    # ZCatalog cannot sort mixed None/int tuples; we put open ends first.
    def key(value):
        return tuple(float("-inf") if v is None else v for v in value)
    query = {"effectiveRange": None}
    for reverse in (False, True):
        _sorted_check(world, "effectiveRange", query, reverse, key)


def test_recurring_sort_is_tuple_order(world):
    """jsonb would compare arrays by length first; tuples do not."""
    conn = world.conn
    index = world.ours["start"]
    (key,), _ = index.pgc_sort(QueryContext())
    statement = q(
        "SELECT v, {} FROM (VALUES ('{{\"start\": [5, 9]}}'::jsonb), "
        "('{{\"start\": [6]}}'::jsonb), ('{{\"start\": [5]}}'::jsonb), "
        "('{{\"start\": [5, 9, 1]}}'::jsonb)) AS e(idx), "
        "LATERAL (SELECT e.idx -> 'start' AS v) s ORDER BY 2", key)
    rows = conn.execute(statement.text, statement.params).fetchall()
    assert [tuple(r[0]) for r in rows] == sorted(
        [(5, 9), (6,), (5,), (5, 9, 1)])


def test_unique_values_and_entries(world):
    for name in ("modified", "multi", "start"):
        original, ours = world.originals[name], world.ours[name]
        assert list(ours.uniqueValues()) == list(original.uniqueValues())
        assert list(ours.uniqueValues(withLengths=1)) == \
            list(original.uniqueValues(withLengths=1))
        assert ours.numObjects() == original.numObjects()
    er, ours = world.originals["effectiveRange"], world.ours["effectiveRange"]
    for field in ("effective", "expires", "other"):
        assert list(ours.uniqueValues(field)) == list(er.uniqueValues(field))
        assert list(ours.uniqueValues(field, withLengths=1)) == \
            list(er.uniqueValues(field, withLengths=1))
    assert ours.indexSize() == er.indexSize()
    for rid in list(world.objects)[:60]:
        for name in ("modified", "effectiveRange", "start"):
            assert world.ours[name].getEntryForObject(rid) == \
                world.originals[name].getEntryForObject(rid, None)


def test_ddl_serves_queries(world):
    conn = world.conn
    conn.execute("SET enable_seqscan = off")
    try:
        for name, query in (
                ("modified", {"modified": {"query": DateTime(2000, 1, 1),
                                           "range": "min"}}),
                ("modified", {"modified": [DateTime(2000, 1, 1),
                                           DateTime(2001, 1, 1)]}),
                ("start", {"start": {"query": DateTime(2000, 1, 1),
                                     "range": "max"}}),
                ("start", {"start": {"query": DateTime(2000, 1, 1),
                                     "range": "min"}}),
                ("start", {"start": DateTime(2000, 1, 1)})):
            statement = q("EXPLAIN SELECT e.rid FROM pgcatalog_entries e "
                          "WHERE e.cid = {} AND {}", world.cid,
                          pg_where(world, name, query))
            plan = "\n".join(r[0] for r in conn.execute(
                statement.text, statement.params))
            assert "pgcatalog_x_" in plan, (query, plan)
    finally:
        conn.execute("RESET enable_seqscan")


def test_configuration_is_kept():
    index = PGDateIndex("modified")
    assert index.index_naive_time_as_local is True and index.precision == 1
    assert [p["id"] for p in index._properties] == [
        "index_naive_time_as_local", "precision"]
    assert index.meta_type == "DateIndex"
    drange = PGDateRangeIndex("effectiveRange", "effective", "expires")
    assert (drange.getSinceField(), drange.getUntilField()) == (
        "effective", "expires")
    drange._edit("a", "b", floor_value=5, ceiling_value=10)
    assert (drange.getSinceField(), drange.getUntilField(),
            drange.getFloorValue(), drange.getCeilingValue()) == (
        "a", "b", 5, 10)
    assert "_always" not in drange.__dict__
    assert "_unindex" not in drange.__dict__
    rec = PGDateRecurringIndex("start", extra=types.SimpleNamespace(
        recurdef="recurrence", until="recurrence_until"))
    assert (rec.attr_recurdef, rec.attr_until) == ("recurrence",
                                                   "recurrence_until")
    if IDateRangeIndex.implementedBy(DateRecurringIndex):
        # Products.DateRecurringIndex 4 (Plone 6.2) is an IDateRangeIndex;
        # 3 (Plone 6.1) has no such getters.
        assert rec.getUntilField() == "recurrence_until"
        assert rec.getSinceField() is None
    assert "_index" not in rec.__dict__ and "_unindex" not in rec.__dict__


def test_overflowing_recurrence_raises_like_the_original():
    rec = PGDateRecurringIndex("start", extra=types.SimpleNamespace(
        recurdef="recurrence", until="recurrence_until"))
    original = DateRecurringIndex("start", extra=types.SimpleNamespace(
        recurdef="recurrence", until="recurrence_until"))
    obj = Obj(start=DateTime(5000, 1, 1))
    with pytest.raises(Exception) as expected:
        original.index_object(1, obj)
    with pytest.raises(expected.type):  # dt2int's OverflowError, via IISet
        rec.pgc_extract(obj)
    assert rec.pgc_extract(Obj(start=DateTime("2020/01/01 10:00 UTC"))) \
        == [dt2int(DateTime("2020/01/01 10:00 UTC"))]
