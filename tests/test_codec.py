"""The typed JSON codec: exact round trips, also through PostgreSQL jsonb."""
import collections
import datetime
import decimal
import json
import math
import pickle
import random
import zoneinfo

import orjson
import psycopg
import pytest
import pytz
from BTrees.IIBTree import IITreeSet
from BTrees.OOBTree import OOBTree
from BTrees.OOBTree import OOSet
from DateTime import DateTime
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from Missing import MV
from persistent.list import PersistentList
from persistent.mapping import PersistentMapping
from zope.i18nmessageid import Message

from plone.pgcatalog.codec import allow_class
from plone.pgcatalog.codec import core as codec

# -- helpers ----------------------------------------------------------------

def same(a, b):
    """Equal and of the same type, all the way down (nan == nan, -0.0 is
    not 0.0, DateTime keeps its zone and naive flag)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Message):
        return a == b and same(a.__reduce__(), b.__reduce__())
    if isinstance(a, (PersistentMapping, PersistentList)):
        return same(a.__getstate__(), b.__getstate__())
    if isinstance(a, collections.OrderedDict):
        return same(list(a.items()), list(b.items()))
    if type(a).__module__.startswith("BTrees."):
        items = (lambda t: list(t.items()) if hasattr(t, "items")
                 else list(t))
        return same(items(a), items(b))
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, decimal.Decimal):
        return str(a) == str(b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        bkeys = list(b)
        for k, v in a.items():
            match = [bk for bk in bkeys if same(k, bk)]
            if not match or not same(v, b[match[0]]):
                return False
        return True
    if isinstance(a, DateTime):
        return (a == b and str(a) == str(b) and a.timezone() == b.timezone()
                and a.__getstate__() == b.__getstate__()
                # an unset _timezone_naive reads as False once pickled
                # (ZODB), which is what the codec gives back as well
                and all(getattr(a, s) == getattr(b, s)
                        for s in DateTime.__slots__
                        if s != "_timezone_naive"))
    if isinstance(a, (datetime.datetime, datetime.time)):
        return (a == b and repr(a) == repr(b) and a.fold == b.fold
                and (a.tzinfo is b.tzinfo or repr(a.tzinfo) == repr(b.tzinfo)))
    if a is MV:
        return b is MV
    return a == b


def pg_roundtrip(conn, value):
    data = codec.dumps(value)
    (back,) = conn.execute("SELECT %s::jsonb", (data.decode("utf-8"),)
                           ).fetchone()
    return codec.decode(back)


# -- strategies -------------------------------------------------------------

texts = st.text(alphabet=st.characters(blacklist_categories=()), max_size=12)
tag_like = st.sampled_from(["@pgc:", "@pgc:dt", "@pgc:l", "@pgc:x", "@p"])
floats = st.floats(allow_nan=True, allow_infinity=True)
ints = st.one_of(st.integers(), st.integers(min_value=-2 ** 200,
                                            max_value=2 ** 200))
fixed_tz = st.one_of(
    st.just(datetime.timezone.utc),
    st.integers(min_value=-23 * 60, max_value=23 * 60).map(
        lambda m: datetime.timezone(datetime.timedelta(minutes=m))),
    st.just(datetime.timezone(datetime.timedelta(hours=1), "CET")),
    st.sampled_from(["Europe/Vienna", "America/New_York", "Asia/Kolkata"]
                    ).map(zoneinfo.ZoneInfo),
)
naive_dt = st.datetimes(min_value=datetime.datetime(1, 1, 2),
                        max_value=datetime.datetime(9999, 12, 30))
aware_dt = st.builds(lambda d, tz: d.replace(tzinfo=tz), naive_dt, fixed_tz)
pytz_dt = st.builds(
    lambda d, name: pytz.timezone(name).localize(d),
    st.datetimes(min_value=datetime.datetime(1900, 1, 1),
                 max_value=datetime.datetime(2200, 1, 1)),
    st.sampled_from(["Europe/Vienna", "US/Eastern", "UTC"]))
zone_names = st.sampled_from([
    None, "UTC", "GMT+2", "GMT-5", "Europe/Vienna", "US/Eastern",
    "Asia/Tokyo", "Brazil/East"])


@st.composite
def zope_datetimes(draw):
    seconds = draw(st.floats(min_value=-2e9, max_value=1.6e10,
                             allow_nan=False))
    zone = draw(zone_names)
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return DateTime(seconds) if zone is None else DateTime(seconds, zone)
    if kind == 1:  # a naive DateTime parsed from a string
        base = DateTime(seconds, "UTC")
        return DateTime(base.strftime("%Y-%m-%d %H:%M:%S"))
    if kind == 2:  # string with zone and micros
        micros = draw(st.integers(0, 999999))
        base = DateTime(seconds, zone or "UTC")
        return DateTime("%s.%06d %s" % (
            base.strftime("%Y/%m/%d %H:%M:%S"), micros, zone or "UTC"))
    return DateTime(*draw(st.sampled_from([
        (1970, 0), (2500, 0), (4008, 0)])))


class Point:
    """A picklable value the codec does not know (pickle fallback, read
    back because it is allowlisted below)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)


allow_class(Point)


scalars = st.one_of(
    st.none(), st.booleans(), ints, floats, texts, st.binary(max_size=16),
    zope_datetimes(), naive_dt, aware_dt, pytz_dt, st.dates(),
    st.times(), st.times(timezones=fixed_tz), st.timedeltas(),
    st.decimals(allow_nan=True, allow_infinity=True), st.just(MV),
    st.builds(Point, st.integers(), texts),
)
hashables = st.one_of(st.none(), st.booleans(), st.integers(), texts,
                      st.floats(allow_nan=False), st.dates())
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(tuple),
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(texts, tag_like), children, max_size=4),
        st.dictionaries(hashables, children, max_size=3),
        st.frozensets(hashables, max_size=4),
        st.sets(hashables, max_size=4),
        st.dictionaries(texts, children, max_size=3).map(PersistentMapping),
        st.lists(children, max_size=3).map(PersistentList),
        st.dictionaries(hashables, st.integers(), max_size=3).map(
            collections.Counter),
        st.lists(st.tuples(hashables, children), max_size=3).map(
            collections.OrderedDict),
        st.builds(Message, texts, st.one_of(st.none(), texts),
                  st.one_of(st.none(), texts),
                  st.one_of(st.none(), st.dictionaries(texts, children,
                                                       max_size=2))),
    ),
    max_leaves=12,
)


# -- property tests ---------------------------------------------------------

@settings(max_examples=600, deadline=None)
@given(values)
def test_roundtrip_in_memory(value):
    assert same(codec.loads(codec.dumps(value)), value)
    assert same(codec.decode(orjson.loads(orjson.dumps(codec.encode(value)))),
                value)


@pytest.fixture(scope="module")
def conn():
    from plone.pgcatalog.testing.pgserver import server_dsn
    with psycopg.connect(server_dsn(), autocommit=True) as conn:
        psycopg.types.json.set_json_loads(orjson.loads, conn)
        yield conn


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_roundtrip_through_jsonb(conn, value):
    assert same(pg_roundtrip(conn, value), value)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyzABCDEF_@:0123",
                               min_size=1, max_size=10),
                       values, max_size=6))
def test_meta_roundtrip(record):
    # column names are metadata ids: valid UTF-8 without NUL
    data = codec.encode_meta(record)
    back = codec.decode_meta(orjson.loads(data))
    expected = {k: v for k, v in record.items() if v is not MV}
    assert same(back, expected)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), values, max_size=6),
       st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10),
       st.booleans())
def test_meta_values_are_the_records_columns(record, names, old_form):
    # a brain's values: the columns it names, in its order, from a record
    # of any layout (its own, another order, fewer or more columns, or
    # the object written before layouts); Missing.Value where absent
    names = tuple(names)
    obj = orjson.loads(codec.encode_meta(record))
    if old_form:
        obj = codec.meta_dict(obj)
    expected = tuple(record.get(name, MV) for name in names)
    assert same(codec.meta_values(obj, names, decoded=True), expected)
    stored = codec.meta_values(obj, names)
    assert same(tuple(v if v is MV else codec.decode(v) for v in stored),
                expected)
    assert all(v is MV or same(v, codec.meta_dict(obj)[name])
               for name, v in zip(names, stored))
    assert codec.meta_values(None, names) == (MV,) * len(names)


# -- explicit cases ---------------------------------------------------------

VIENNA = pytz.timezone("Europe/Vienna")
# Products.CMFPlone's image_scales: a PersistentMapping of lists of dicts
IMAGE_SCALES = PersistentMapping({"image": [{
    "content-type": "image/png", "download": "@@images/image-1-x.png",
    "filename": "p.png", "height": 10, "width": 20, "size": 999,
    "scales": {"thumb": {"download": "@@images/t.png", "height": 5,
                         "width": 10}}}]})
BLOCK_TYPES = collections.Counter({"slate": 3, "image": 1})
LAST_COMMENT = VIENNA.localize(datetime.datetime(2021, 7, 1, 12, 30))

#: what Plone 6.2 core and common add-ons put in metadata columns (and
#: index values) that the codec used to keep as pickles
PLONE_VALUES = [
    # CMF's Type(): the type info's title as an i18n message
    Message("Page", "plone"),
    Message("label_x", "plone", "X ${n}", {"n": 3, "d": DateTime(2020, 0)},
            "xs", "Xs ${n}", 3),
    Message("\x00odd", None, Message("inner", "d")),
    IMAGE_SCALES,
    PersistentMapping(), PersistentMapping({"a": PersistentList([1, (2,)])}),
    PersistentList([1, "a", (None,)]), PersistentList(),
    # plone.volto's block_types
    BLOCK_TYPES, collections.Counter(),
    collections.Counter({1: 2, None: -1}),
    collections.OrderedDict([("b", 1), ("a", (2,)), (3, "c")]),
    # plone.app.discussion's last_comment_date, plone.app.event dates:
    # pytz-localized datetimes; zoneinfo datetimes; named fixed zones
    LAST_COMMENT,
    VIENNA.localize(datetime.datetime(2021, 1, 1, 12, 30, 0, 7)),
    VIENNA.localize(datetime.datetime(2021, 10, 31, 2, 30), is_dst=False),
    datetime.datetime(2021, 7, 1, tzinfo=VIENNA),  # LMT: unlocalized
    datetime.datetime(2021, 7, 1, tzinfo=pytz.utc),
    datetime.datetime(2021, 7, 1, tzinfo=pytz.timezone("Etc/GMT+5")),
    pytz.timezone("US/Eastern").localize(datetime.datetime(1999, 12, 31)),
    datetime.datetime(2021, 10, 31, 2, 30,
                      tzinfo=zoneinfo.ZoneInfo("Europe/Vienna")),
    datetime.datetime(2021, 7, 1, tzinfo=zoneinfo.ZoneInfo("UTC")),
    datetime.datetime(2021, 7, 1, tzinfo=datetime.timezone(
        datetime.timedelta(hours=1), "CET")),
    datetime.time(10, 30, tzinfo=pytz.utc),
    datetime.time(10, 30, fold=1, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo")),
    # BTrees, bytearray, complex
    OOBTree({"a": 1, "b": (2,)}), OOSet(["x", "y"]), IITreeSet([3, 1, 2]),
    bytearray(b"\x00ab"), complex(1.5, -0.0), complex("nan+infj"),
    # nested: a tuple of messages, a dict holding a pytz date
    (Message("a", "d"), Message("b", "d")),
    {"when": VIENNA.localize(datetime.datetime(2020, 2, 2))},
]


@pytest.mark.parametrize("value", PLONE_VALUES)
def test_plone_types_without_pickle(conn, value):
    """Each of these used to be stored as a pickle: now as typed JSON."""
    data = codec.dumps(value)
    assert b'"@pgc:p"' not in data
    assert same(codec.loads(data), value)
    assert same(pg_roundtrip(conn, value), value)


def test_pytz_dates_keep_their_tzinfo():
    """The same tzinfo instance comes back, as from a pickle: utcoffset,
    tzname and normalize() agree."""
    for value in PLONE_VALUES:
        if isinstance(value, datetime.datetime) and isinstance(
                value.tzinfo, pytz.BaseTzInfo):
            back = codec.loads(codec.dumps(value))
            assert back.tzinfo is pickle.loads(pickle.dumps(value)).tzinfo
            assert back.utcoffset() == value.utcoffset()
            assert back.tzname() == value.tzname()


def test_plone_metadata_record_without_pickle():
    """A typical Plone 6.2 record: no column is a pickle."""
    record = {
        "Title": "Hello", "Type": Message("Page", "plone"),
        "Subject": ("a", "b"), "listCreators": ("admin",),
        "created": DateTime("2021/01/01 10:00 GMT+1"), "getIcon": True,
        "exclude_from_nav": False, "getObjSize": "1.2 KB",
        "mime_type": "text/plain", "getRemoteUrl": None, "location": "",
        "image_scales": IMAGE_SCALES, "block_types": BLOCK_TYPES,
        "last_comment_date": LAST_COMMENT, "commentators": ("bob",),
        "end": MV, "total_comments": 0,
    }
    data = codec.encode_meta(record)
    assert b'"@pgc:p"' not in data
    back = codec.decode_meta(orjson.loads(data))
    assert same(back, {k: v for k, v in record.items() if v is not MV})

@pytest.mark.parametrize("value", [
    None, True, False, 0, -1, 2 ** 63 - 1, 2 ** 63, -2 ** 63 - 1, 10 ** 40,
    0.0, -0.0, 1.5, 0.1 + 0.2, 1e16, 1e-7, 5e-324, 1.7976931348623157e308,
    float("nan"), float("inf"), float("-inf"),
    "", "abc", "caf\u00e9", "a\x00b", "\ud800", "\U0001f600",
    b"", b"\x00\xff", (), (1, "a", None), [], [1, (2, [3])],
    {}, {"a": 1}, {"@pgc:l": [1]}, {"@pgc:x": 1, "b": 2}, {1: "a", None: 2},
    {"a\x00": 1}, {(1, 2): "t"}, set(), {1, "a"}, frozenset({2}),
    DateTime("2021/03/04 10:11:12.123456 Europe/Vienna"),
    DateTime("2021-03-04 10:11"), DateTime(2500, 0), DateTime(1970, 0),
    DateTime("2011/11/11 11:11:11 GMT+1"),
    datetime.datetime(2020, 1, 2, 3, 4, 5, 6),
    datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
    datetime.datetime(2021, 10, 31, 2, 30, fold=1,
                      tzinfo=zoneinfo.ZoneInfo("Europe/Vienna")),
    pytz.timezone("Europe/Vienna").localize(datetime.datetime(2020, 7, 1)),
    datetime.date(2020, 2, 29), datetime.time(23, 59, 59, 999999),
    datetime.timedelta(days=-3, seconds=5, microseconds=7),
    decimal.Decimal("1.10"), decimal.Decimal("-0"), decimal.Decimal("NaN"),
    decimal.Decimal("sNaN"), decimal.Decimal("-Infinity"), MV,
    (MV, (MV,)), Point(1, "x"),
] + PLONE_VALUES)
def test_explicit(conn, value):
    assert same(codec.loads(codec.dumps(value)), value)
    assert same(pg_roundtrip(conn, value), value)


def test_json_shapes():
    assert codec.encode((1, "a", None, True)) == [1, "a", None, True]
    assert codec.encode({"a": (1,)}) == {"a": [1]}
    assert codec.encode([1]) == {"@pgc:l": [1]}
    assert codec.encode(MV) == {"@pgc:M": 0}
    assert codec.encode({"@pgc:l": 1}) == {"@pgc:d": [["@pgc:l", 1]]}
    assert list(codec.encode(DateTime(2020, 1, 1))) == ["@pgc:D"]
    assert codec.decode([1, [2]]) == (1, (2,))
    assert codec.decode("x") == "x"
    with pytest.raises(ValueError):
        codec.decode({"@pgc:nope": 1})


def test_datetime_keeps_zone():
    for spec in ["2021/03/04 10:11:12.5 Europe/Vienna", "2021/03/04 GMT-7",
                 "2021-03-04T10:11:12", "2021/03/04 10:11 US/Eastern"]:
        original = DateTime(spec)
        back = codec.loads(codec.dumps(original))
        assert back == original
        assert back.timezone() == original.timezone()
        pickled = pickle.loads(pickle.dumps(original))
        assert back.timezoneNaive() == pickled.timezoneNaive()
        assert str(back) == str(original)
        assert back.ISO8601() == original.ISO8601()
        assert back.millis() == original.millis()
        assert back.toZone("UTC") == original.toZone("UTC")


def test_datetime_other_version_falls_back(monkeypatch):
    """A record written with only (micros, naive, tz) still decodes."""
    original = DateTime("2021/03/04 10:11:12.5 Europe/Vienna")
    state = list(original.__getstate__())
    back = codec.decode({"@pgc:DT": state})
    assert same(back, original)


def test_meta_is_an_array_of_its_layout():
    data = codec.encode_meta({"a": MV, "b": None, "c": (MV,), "d": "x\x00",
                              "e": MV})
    obj = orjson.loads(data)
    digest = codec.layout_digest(("a", "b", "c", "d", "e"))
    assert len(digest) == codec.LAYOUT_CHARS
    assert codec.meta_layout_of(data) == digest
    assert codec.meta_layout_of(data.decode("utf-8")) == digest
    # Missing.Value tagged, trailing ones left out: no column name written
    assert obj == [digest, {"@pgc:M": 0}, None, [{"@pgc:M": 0}],
                   {"@pgc:s": obj[4]["@pgc:s"]}]
    assert b'"b"' not in data
    back = codec.decode_meta(obj)
    assert back["c"] == (MV,)
    assert back["d"] == "x\x00"
    assert back.get("a", MV) is MV and back.get("e", MV) is MV
    # records written before layouts (an object) read alike
    assert codec.decode_meta({"b": None, "d": "y"}) == {"b": None, "d": "y"}


def test_meta_layout_unknown_to_the_process():
    names = ("only", "here")
    data = codec.encode_meta({"only": 1, "here": "x"})
    digest = codec._DIGESTS.pop(names)
    del codec._LAYOUTS[digest]
    with pytest.raises(KeyError):
        codec.decode_meta(orjson.loads(data))
    asked = []

    def lookup(d):
        asked.append(d)
        return codec.learn_layout(d, ["only", "here"])
    assert codec.decode_meta(orjson.loads(data), lookup) == {
        "only": 1, "here": "x"}
    assert asked == [digest]
    del codec._LAYOUTS[codec._DIGESTS.pop(names)]
    with pytest.raises(KeyError):
        codec.meta_values(orjson.loads(data), ("here",))
    assert codec.meta_values(orjson.loads(data), ("here", "x", "only"),
                             lookup) == ("x", MV, 1)
    assert asked == [digest, digest]
    # a layout whose names do not give its digest is refused
    with pytest.raises(ValueError):
        codec.learn_layout(digest, ["other"])
    assert codec.meta_layout_of(b'{"a": 1}') is None


def test_subclasses_keep_their_type():
    from zope.i18nmessageid import Message
    msg = Message("label_x", domain="plone", default="X")
    back = codec.loads(codec.dumps(msg))
    assert type(back) is Message
    assert back == msg and back.domain == "plone" and back.default == "X"


def test_datetime_short_form():
    """A DateTime whose two long floats are what DateTime computes from its
    micros (any DateTime loaded from the ZODB, or made from seconds) is
    written without them, and read back with every slot equal; another
    keeps the full form."""
    for value in (DateTime(1641930360.0, "UTC"),
                  DateTime("2022-01-08T06:04:00+00:00"),
                  pickle.loads(pickle.dumps(DateTime(2022, 1, 8, 6, 4, 0.5,
                                                     "Europe/Vienna"))),
                  DateTime(1641930360.123456, "GMT+2")):
        encoded = codec.encode(value)
        assert list(encoded) == ["@pgc:D"]
        assert len(orjson.dumps(encoded)) < 80
        back = codec.loads(codec.dumps(value))
        assert same(back, value)
    full = DateTime(2022, 1, 8, 6, 4, 0.5, "Europe/Vienna")
    assert list(codec.encode(full)) == ["@pgc:DT"]
    assert same(codec.loads(codec.dumps(full)), full)


def test_datetime_compact_form_in_metadata():
    """In a metadata record a DateTime of a one-offset zone is written as
    its pickled state only (the micros alone for UTC) and read back as the
    ZODB gives it back: its slots computed again as ``__setstate__`` does.
    A named zone (its offset costs a pytz look-up to read again) or a
    numeric one keeps the short form; ``encode`` (index values) too."""
    for value, form in (
            (DateTime(1641930360.0, "UTC"), 1641930360000000),
            (DateTime("2022-01-08T06:04:00+00:00"),
             [1641621840000000, "GMT+0"]),
            (DateTime(1641930360.123456, "GMT+2"),
             [1641930360123456, "GMT+2"]),
            (DateTime("2021/01/01 10:00 GMT+1"), [1609491600000000, "GMT+1"]),
            (pickle.loads(pickle.dumps(DateTime(1641930360.0, "UTC"))),
             1641930360000000)):
        record = json.loads(codec.encode_meta({"d": value}))
        assert record[1] == {"@pgc:T": form}
        short = orjson.dumps(codec.encode(value))
        assert list(codec.encode(value)) == ["@pgc:D"]
        assert len(short) - len(orjson.dumps(record[1])) >= 20
        back = codec.decode_meta(record)["d"]
        assert same(back, value)
        # the ZODB's copy of it, slot for slot (types included)
        zodb = pickle.loads(pickle.dumps(value))
        for name in DateTime.__slots__:
            assert type(getattr(back, name)) is type(getattr(zodb, name))
            assert getattr(back, name) == getattr(zodb, name)
    naive = DateTime("2021-03-04 10:11")
    assert naive.timezoneNaive()
    record = json.loads(codec.encode_meta({"d": naive}))
    if codec._fixed_offset(naive._tz) is not None:  # the machine's zone
        assert record[1] == {"@pgc:T": [naive._micros, naive._tz, True]}
    back = codec.decode_meta(record)["d"]
    assert same(back, naive) and back.timezoneNaive()
    for value in (DateTime("2021/03/04 10:11:12.123456 Europe/Vienna"),
                  DateTime("2010/10/10 10:10 +0130"),
                  DateTime(2022, 1, 8, 6, 4, 0.5, "Europe/Vienna")):
        record = json.loads(codec.encode_meta({"d": value}))
        assert list(record[1]) != ["@pgc:T"]
        assert same(codec.decode_meta(record)["d"], value)


def test_datetime_compact_form_is_setstate():
    """The compact form's DateTime is ``DateTime.__setstate__``'s, slot for
    slot and type for type, over dates from year 1 to 9999 in one-offset
    zones (a DateTime version computing otherwise fails here)."""
    rng = random.Random(7)
    zones = ["UTC", "GMT", "GMT+1", "GMT-11", "GMT+13", "gmt+2"]
    for i in range(3000):
        micros = rng.randint(-62135596800000000, 253402300799999999)
        if i % 3 == 0:
            micros -= micros % 60000000  # whole minutes
        state = (micros, rng.random() < 0.2, rng.choice(zones))
        ours = codec._dt_from_state(*state)
        theirs = DateTime.__new__(DateTime)
        theirs.__setstate__(state)
        for name in DateTime.__slots__:
            a, b = getattr(ours, name), getattr(theirs, name)
            assert type(a) is type(b) and a == b, (state, name, a, b)


def test_datetime_compact_form_decoded_once(monkeypatch):
    """A compact DateTime is decoded once and shared (an immutable value,
    as ZCatalog's brains share their records' DateTimes): the same state
    gives the same object, another state (zone, naive flag) another; the
    kept ones are bounded."""
    monkeypatch.setattr(codec, "_dt_decoded", {})
    first = codec.decode({"@pgc:T": 1641930360000000})
    assert codec.decode({"@pgc:T": 1641930360000000}) is first
    assert same(first, DateTime(1641930360.0, "UTC"))
    other = codec.decode({"@pgc:T": [1641930360000000, "GMT+1"]})
    naive = codec.decode({"@pgc:T": [1641930360000000, "GMT+1", True]})
    assert other is not first and naive is not other
    assert naive.timezoneNaive() and not other.timezoneNaive()
    assert other.tzoffset() == 3600 and first.tzoffset() == 0
    monkeypatch.setattr(codec, "DT_DECODED_MAX", 3)
    codec.decode({"@pgc:T": 1})
    assert len(codec._dt_decoded) == 1
    assert codec.decode({"@pgc:T": 1641930360000000}) is not first


@pytest.mark.parametrize("value", [
    "x", [], [1], [1, 2], ["1", "UTC"], [1.5, "UTC"], [1, "UTC", 1, 2],
    [1, "Nowhere/Else"], {"a": 1}, None, True])
def test_datetime_compact_form_rejects_other_shapes(value):
    with pytest.raises(ValueError):
        codec.decode({"@pgc:T": value})
