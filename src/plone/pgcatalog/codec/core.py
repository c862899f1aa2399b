"""A typed JSON codec for brain metadata and non-JSON index values.

JSON (and PostgreSQL's ``jsonb``) knows strings, numbers, booleans, null,
arrays and objects.  Catalog metadata holds more: tuples, DateTime objects,
``Missing.Value``, bytes, sets, big integers, ...  ``encode`` turns a Python
value into a JSON-ready structure that ``decode`` turns back into an equal
value of the same type:

* ``None``, ``bool``, ``str``, ``int`` (64-bit) and ordinary ``float`` are
  themselves;
* a JSON array means a **tuple** (catalog metadata sequences are mostly
  tuples); a list is tagged;
* a JSON object is a ``dict`` with ``str`` keys;
* everything else is a *tag*: a one-key object whose key starts with
  ``@pgc:``, e.g. ``{"@pgc:b": "<base64>"}`` for bytes.  A dict that could be
  mistaken for a tag is itself tagged.

``jsonb`` normalises a few things that plain JSON keeps, so these are
tagged too: strings containing ``\\x00`` (rejected by ``jsonb``) or lone
surrogates (rejected by UTF-8), ``-0.0`` (``jsonb`` drops the sign),
floats written with an exponent (``1e+16`` would come back as the integer
``10000000000000000``), ``nan``/``inf`` and integers beyond 64 bits.
``jsonb`` does reorder the keys of an object: a decoded dict is equal to the
original but its key order may differ.

Zope and Plone types (Message, PersistentMapping, Counter, pytz dates,
...) have tags in ``plonetypes.py``.  Anything else is kept as a base64
pickle, read back by ``unpickle.loads``, which loads allowlisted classes
only (``allow_class``): a refused pickle reads as ``Missing.Value`` and is
logged.  See docs/security.md.
"""
import base64
import datetime
import decimal
import hashlib
import math
import pickle

import orjson
from DateTime import DateTime
from Missing import MV

from plone.pgcatalog.codec import plonetypes
from plone.pgcatalog.codec import unpickle
from plone.pgcatalog.codec.unpickle import UnpicklingRefused

TAG = "@pgc:"

_INT_MIN = -(2 ** 63)
_INT_MAX = 2 ** 63 - 1

# DateTime keeps its value in a handful of slots; __setstate__ recomputes
# all of them from (micros, tz naive flag, tz), which is slow (~25 us).  We
# store the computed slots too and restore them directly when the running
# DateTime has exactly these slots (checked once, below); otherwise (another
# DateTime version) we fall back to __setstate__ on the first three.
_DT_STATE = ("_micros", "_timezone_naive", "_tz")
_DT_DERIVED = ("_dayoffset", "_year", "_month", "_day", "_hour", "_minute",
               "_second", "_nearsec", "_d", "time")
_DT_FAST = set(getattr(DateTime, "__slots__", ())) == set(
    _DT_STATE + _DT_DERIVED)
_DT_LEN = len(_DT_STATE) + len(_DT_DERIVED)
# The short form (``@pgc:D``) leaves out the two long floats, ``_d`` and
# ``time``: DateTime's own ``_calcSD`` gives them back from ``_micros`` (as
# ``__setstate__`` computes them, so as a ZCatalog brain's DateTime has
# them).  Used only when that gives exactly the object's values (else the
# full form): about 40 bytes less per DateTime, 200 per entry of a Plone
# site's metadata.
_DT_SHORT = _DT_STATE + _DT_DERIVED[:-2]
try:
    from DateTime.DateTime import _calcSD
except ImportError:  # pragma: no cover - another DateTime version
    _calcSD = None
if _calcSD is None or _DT_DERIVED[-2:] != ("_d", "time"):
    _DT_SHORT = None  # pragma: no cover
# The compact form (``@pgc:T``, metadata only): what DateTime pickles, its
# micros and zone (the micros alone for UTC), every other slot computed
# again when read, as ``DateTime.__setstate__`` computes them (what the
# ZODB gives back of a DateTime, so what a ZCatalog brain holds once its
# record was loaded), with DateTime's own functions.  Used for a zone of
# one offset (UTC, GMT+1, ...: a named zone's offset costs 10 us to read
# again) when the slots computed equal the object's (else the short form):
# 36 bytes less per UTC DateTime than the short form, about 180 per entry
# of level1's metadata.  The one difference from the object indexed is
# ZODB's: the whole ``second()`` of a DateTime parsed from a string comes
# back as a float (0.0, not 0), as after a pickle round trip.
try:
    import pytz as _pytz
    from DateTime.DateTime import _TZINFO
    from DateTime.DateTime import EPOCH as _EPOCH
    from DateTime.DateTime import _calcDependentSecond
    from DateTime.DateTime import _calcYMDHMS
    from DateTime.DateTime import _julianday
    from DateTime.DateTime import _tzoffset
    _ZONES = _TZINFO._zmap
    _EPOCH_SECONDS = int(_EPOCH)
except (ImportError, AttributeError):  # pragma: no cover - another DateTime
    _ZONES = None


# -- encoding ---------------------------------------------------------------

def _str_needs_tag(s):
    if s.isascii():
        return "\x00" in s
    if "\x00" in s:
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return True
    return False


def _enc_str(s):
    if _str_needs_tag(s):
        return {TAG + "s": base64.b64encode(
            s.encode("utf-8", "surrogatepass")).decode("ascii")}
    return s


def _enc_int(v):
    if _INT_MIN <= v <= _INT_MAX:
        return v
    return {TAG + "i": str(v)}


def _enc_float(v):
    r = repr(v)
    # Plain when jsonb gives the same text back: a decimal point, no
    # exponent, not nan/inf and not a negative zero.
    if "e" in r or "n" in r or r == "-0.0":
        return {TAG + "f": r}
    return v


def _enc_tuple(v):
    return [encode(x) for x in v]


def _enc_list(v):
    return {TAG + "l": [encode(x) for x in v]}


def _enc_dict(v):
    plain = True
    for k in v:
        if type(k) is not str or k.startswith(TAG) or _str_needs_tag(k):
            plain = False
            break
    if plain:
        return {k: encode(x) for k, x in v.items()}
    return {TAG + "d": [[encode(k), encode(x)] for k, x in v.items()]}


def _enc_set(v):
    return {TAG + "set": [encode(x) for x in v]}


def _enc_frozenset(v):
    return {TAG + "fs": [encode(x) for x in v]}


def _enc_bytes(v):
    return {TAG + "b": base64.b64encode(v).decode("ascii")}


def _enc_DateTime(v):
    if type(v) is not DateTime:
        return _enc_pickle(v)
    state = [encode(x) for x in v.__getstate__()]
    if _DT_FAST:
        if _DT_SHORT is not None and \
                _calcSD(v._micros / 1000000.) == (v.time, v._d):
            state.extend(encode(getattr(v, name))
                         for name in _DT_DERIVED[:-2])
            return {TAG + "D": state}
        state.extend(encode(getattr(v, name)) for name in _DT_DERIVED)
    return {TAG + "DT": state}


def _dt_from_state(micros, naive, tz):
    """The DateTime of state ``(micros, naive, tz)``, its slots computed as
    ``DateTime.__setstate__`` computes them (its ``_parse_args`` for
    seconds and a zone name), or None for a zone DateTime's table does not
    name (a numeric one)."""
    zone = _ZONES.get(tz.lower())
    if zone is None:
        return None
    t = micros / 1000000.
    floor = math.floor(t)
    offset = _fixed_offset(zone)
    if offset is None:
        offset = _tzoffset(zone, t)
    yr, mo, dy, hr, mn, sc = _calcYMDHMS(
        offset + int(floor) + _EPOCH_SECONDS - 86400, t - floor)
    sc = round(sc, 6)
    if sc >= 60.0:
        sc = 59.999999
    dt = _new_DateTime(DateTime)
    set_ = _setattr
    set_(dt, "_dayoffset", int((_julianday(yr, mo, dy) + 2) % 7))
    set_(dt, "_nearsec", math.floor(sc))
    set_(dt, "_year", yr)
    set_(dt, "_month", mo)
    set_(dt, "_day", dy)
    set_(dt, "_hour", hr)
    set_(dt, "_minute", mn)
    set_(dt, "_second", sc)
    dt.time, dt._d = _calcSD(t)
    set_(dt, "_tz", zone)
    set_(dt, "_micros", micros)
    set_(dt, "_timezone_naive", naive)
    return dt


#: zone name -> its one offset (UTC, GMT+1, ...), or None for a zone of
#: several (a named zone's changes with daylight saving time)
_fixed_offsets = {}


def _fixed_offset(zone):
    """The offset of DateTime's ``zone`` when it has only one, else None
    (kept per zone: whether it has one does not depend on the time)."""
    try:
        return _fixed_offsets[zone]
    except KeyError:
        pass
    try:
        tzinfo = _TZINFO[zone].tzinfo
    except Exception:  # noqa: B902 - as DateTime's _tzoffset
        tzinfo = None
    offset = None
    if tzinfo is _pytz.utc or isinstance(tzinfo, _pytz.tzinfo.StaticTzInfo):
        offset = _tzoffset(zone, 0)
    _fixed_offsets[zone] = offset
    return offset


def _enc_DateTime_meta(v):
    """A DateTime of a metadata column: the compact form when its zone has
    one offset (UTC, GMT+1, ...) and its slots computed again equal its
    own, else :func:`encode`'s."""
    if type(v) is DateTime and _DT_FAST and _ZONES is not None:
        # the state as pickled (a DateTime made from a string may lack
        # ``_timezone_naive``: False, as ``__getstate__`` says)
        micros, naive, tz = v.__getstate__()
        if type(micros) is int and type(naive) is bool and type(tz) is str \
                and _ZONES.get(tz.lower()) == tz \
                and _fixed_offset(tz) is not None:
            back = _dt_from_state(micros, naive, tz)
            if all(getattr(back, name) == getattr(v, name)
                   for name in _DT_DERIVED):
                if naive:
                    return {TAG + "T": [micros, tz, True]}
                return {TAG + "T": micros if tz == "UTC" else [micros, tz]}
    return encode(v)


def _simple_tz(tz):
    """True when isoformat/fromisoformat give ``tz`` back exactly."""
    if tz is None or tz is datetime.timezone.utc:
        return True
    if type(tz) is datetime.timezone:
        return repr(tz) == repr(datetime.timezone(tz.utcoffset(None)))
    return False


def _enc_datetime(v):
    if not _simple_tz(v.tzinfo):
        return plonetypes.enc_zoned(v, "dtz")
    if v.fold:
        return {TAG + "dt": [v.isoformat(), 1]}
    return {TAG + "dt": [v.isoformat()]}


def _enc_date(v):
    return {TAG + "date": v.isoformat()}


def _enc_time(v):
    if not _simple_tz(v.tzinfo):
        return plonetypes.enc_zoned(v, "ttz")
    if v.fold:
        return {TAG + "time": [v.isoformat(), 1]}
    return {TAG + "time": [v.isoformat()]}


def _enc_timedelta(v):
    return {TAG + "td": [v.days, v.seconds, v.microseconds]}


def _enc_decimal(v):
    return {TAG + "dec": str(v)}


def _enc_pickle(v):
    data = pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        unpickle.loads(data)  # as a read will: say now if it is refused
    except UnpicklingRefused as exc:
        unpickle.report(exc, writing=True)
    except Exception:  # a read fails alike: store it, as before
        pass
    return {TAG + "p": base64.b64encode(data).decode("ascii")}


_ENCODERS = {
    str: _enc_str,
    int: _enc_int,
    float: _enc_float,
    tuple: _enc_tuple,
    list: _enc_list,
    dict: _enc_dict,
    set: _enc_set,
    frozenset: _enc_frozenset,
    bytes: _enc_bytes,
    DateTime: _enc_DateTime,
    datetime.datetime: _enc_datetime,
    datetime.date: _enc_date,
    datetime.time: _enc_time,
    datetime.timedelta: _enc_timedelta,
    decimal.Decimal: _enc_decimal,
}
_ENCODERS.update(plonetypes.ENCODERS)

_PLAIN = (bool, type(None))


def encode(value):
    """A JSON-ready structure for ``value`` (see the module docstring)."""
    t = type(value)
    if t in _PLAIN:
        return value
    enc = _ENCODERS.get(t)
    if enc is not None:
        return enc(value)
    if value is MV:
        return {TAG + "M": 0}
    return plonetypes.enc_other(value)


def dumps(value):
    """``value`` as JSON bytes."""
    return orjson.dumps(encode(value))


#: what pickling an object that cannot be pickled raises
UNPICKLABLE = (pickle.PicklingError, TypeError, AttributeError)


#: a metadata record's layout: its column names, named by a digest of them
#: (the same digest for the same names in every process and database)
LAYOUT_CHARS = 12
_LAYOUTS = {}
_DIGESTS = {}
#: a column whose value is Missing.Value, in a record's array
_MISSING = {TAG + "M": 0}


def layout_digest(names):
    """The digest naming the layout ``names`` (a tuple of column names)."""
    digest = _DIGESTS.get(names)
    if digest is None:
        digest = hashlib.sha1("\x1f".join(names).encode("utf-8")) \
            .hexdigest()[:LAYOUT_CHARS]
        _DIGESTS[names] = digest
        _LAYOUTS[digest] = names
    return digest


def layout_names(digest):
    """The column names of layout ``digest``, if this process knows them."""
    return _LAYOUTS.get(digest)


def learn_layout(digest, names):
    """Remember layout ``digest`` read from the database (only if the names
    give that digest: a row names its layout, never another's)."""
    names = tuple(names)
    if layout_digest(names) != digest:
        raise ValueError("metadata layout %r does not name %r"
                         % (digest, names))
    return names


def meta_layout_of(text):
    """The layout digest of stored metadata text (str or bytes) in the
    array form, else None."""
    if isinstance(text, (bytes, bytearray)):
        text = text[:LAYOUT_CHARS + 3].decode("ascii", "replace")
    if text.startswith('["') and len(text) > LAYOUT_CHARS + 2 and \
            text[LAYOUT_CHARS + 2] == '"':
        return text[2:LAYOUT_CHARS + 2]
    return None


def encode_meta(record, unpicklable=None):
    """A metadata record (``{column: value}``, in the catalog's column
    order) as JSON bytes: an array, its layout's digest first, then the
    values in column order (``Missing.Value`` tagged, trailing ones left
    out).  The column names are written once per layout
    (``pgcatalog_meta_layouts``), not once per entry: about a third of a
    Plone site's metadata.

    A value that cannot be pickled raises, unless ``unpicklable`` (a list)
    is given: then ``(column, exception)`` is appended to it and the
    column is stored as Missing.Value."""
    out = [layout_digest(tuple(record))]
    append = out.append
    for name, value in record.items():
        t = type(value)
        if t in _PLAIN:
            append(value)
        elif t is str:
            append(_enc_str(value) if _str_needs_tag(value) else value)
        elif value is MV:
            append(_MISSING)
        elif t is DateTime:
            append(_enc_DateTime_meta(value))
        elif unpicklable is None:
            append(encode(value))
        else:
            try:
                append(encode(value))
            except UNPICKLABLE as exc:
                unpicklable.append((name, exc))
                append(_MISSING)
    while out[-1] is _MISSING:
        out.pop()
    return orjson.dumps(out)


# -- decoding ---------------------------------------------------------------

_SCALARS = frozenset((str, int, float, bool, type(None)))


def _dec_str(v):
    return base64.b64decode(v).decode("utf-8", "surrogatepass")


def _dec_int(v):
    return int(v)


def _dec_float(v):
    return float(v)


def _dec_list(v):
    return [x if type(x) in _SCALARS else decode(x) for x in v]


def _dec_dict(v):
    return {decode(k): decode(x) for k, x in v}


def _dec_set(v):
    return {decode(x) for x in v}


def _dec_frozenset(v):
    return frozenset(decode(x) for x in v)


def _dec_bytes(v):
    return base64.b64decode(v)


_new_DateTime = DateTime.__new__
_setattr = object.__setattr__


def _dec_DateTime(v):
    dt = _new_DateTime(DateTime)
    if _DT_FAST and len(v) == _DT_LEN:
        for name, value in zip(_DT_STATE + _DT_DERIVED, v):
            if type(value) not in _SCALARS:
                value = decode(value)
            _setattr(dt, name, value)
    else:
        dt.__setstate__(tuple(decode(x) for x in v[:3]))
    return dt


def _dec_DateTime_short(v):
    if _DT_SHORT is None or len(v) != len(_DT_SHORT):
        dt = _new_DateTime(DateTime)  # pragma: no cover - another version
        dt.__setstate__(tuple(decode(x) for x in v[:3]))
        return dt
    dt = _new_DateTime(DateTime)
    for name, value in zip(_DT_SHORT, v):
        if type(value) not in _SCALARS:
            value = decode(value)
        _setattr(dt, name, value)
    dt.time, dt._d = _calcSD(dt._micros / 1000000.)
    return dt


#: DateTimes decoded from their compact form, by state: a DateTime is an
#: immutable value, so brains share one as ZCatalog's share the DateTimes
#: of their metadata records (a listing's dates decoded once, not per
#: brain and request: 10-20 us each)
_dt_decoded = {}
DT_DECODED_MAX = 20000


def _dec_DateTime_compact(v):
    if type(v) is int:
        micros, tz, naive = v, "UTC", False
    elif type(v) is list and len(v) in (2, 3):
        micros, tz = v[0], v[1]
        naive = len(v) == 3 and v[2] is True
    else:
        raise ValueError("not a compact DateTime: %r" % (v,))
    if type(micros) is not int or type(tz) is not str:
        raise ValueError("not a compact DateTime: %r" % (v,))
    key = (micros, tz, naive)
    dt = _dt_decoded.get(key)
    if dt is not None:
        return dt
    if _ZONES is None:  # pragma: no cover - another DateTime version
        dt = _new_DateTime(DateTime)
        dt.__setstate__((micros, naive, tz))
    else:
        dt = _dt_from_state(micros, naive, tz)
        if dt is None:
            raise ValueError("not a compact DateTime: unknown zone %r" % tz)
    if len(_dt_decoded) >= DT_DECODED_MAX:
        _dt_decoded.clear()
    _dt_decoded[key] = dt
    return dt


def _dec_datetime(v):
    dt = datetime.datetime.fromisoformat(v[0])
    if len(v) > 1 and v[1]:
        dt = dt.replace(fold=1)
    return dt


def _dec_date(v):
    return datetime.date.fromisoformat(v)


def _dec_time(v):
    t = datetime.time.fromisoformat(v[0])
    if len(v) > 1 and v[1]:
        t = t.replace(fold=1)
    return t


def _dec_timedelta(v):
    return datetime.timedelta(v[0], v[1], v[2])


def _dec_decimal(v):
    return decimal.Decimal(v)


def _dec_missing(v):
    return MV


def _dec_pickle(v):
    try:
        return unpickle.loads(base64.b64decode(v))
    except UnpicklingRefused as exc:
        unpickle.report(exc)
        return MV


_DECODERS = {
    TAG + "s": _dec_str,
    TAG + "i": _dec_int,
    TAG + "f": _dec_float,
    TAG + "l": _dec_list,
    TAG + "d": _dec_dict,
    TAG + "set": _dec_set,
    TAG + "fs": _dec_frozenset,
    TAG + "b": _dec_bytes,
    TAG + "DT": _dec_DateTime,
    TAG + "D": _dec_DateTime_short,
    TAG + "T": _dec_DateTime_compact,
    TAG + "dt": _dec_datetime,
    TAG + "date": _dec_date,
    TAG + "time": _dec_time,
    TAG + "td": _dec_timedelta,
    TAG + "dec": _dec_decimal,
    TAG + "M": _dec_missing,
    TAG + "p": _dec_pickle,
}
_DECODERS.update(plonetypes.DECODERS)


def decode(value):
    """The Python value ``encode`` made ``value`` from."""
    t = type(value)
    if t is list:
        return tuple([x if type(x) in _SCALARS else decode(x)
                      for x in value])
    if t is dict:
        if len(value) == 1:
            for key in value:
                if key.startswith(TAG):
                    dec = _DECODERS.get(key)
                    if dec is None:
                        raise ValueError("unknown codec tag %r" % key)
                    return dec(value[key])
        return {k: (x if type(x) in _SCALARS else decode(x))
                for k, x in value.items()}
    return value


def loads(data):
    """The Python value of JSON text (bytes or str) made by ``dumps``."""
    return decode(orjson.loads(data))


def meta_dict(obj, lookup=None):
    """``{column: stored value}`` of parsed metadata JSON: an array (its
    layout's digest, then the values) or, as written before layouts, an
    object.  Missing.Value columns are left out.  ``lookup(digest)`` gives
    the names of a layout this process does not know (read from the
    database); without it an unknown layout raises KeyError."""
    if type(obj) is not list:
        return obj
    digest = obj[0]
    names = _LAYOUTS.get(digest)
    if names is None:
        if lookup is None:
            raise KeyError(digest)
        names = lookup(digest)
    return {name: value for name, value in zip(names, obj[1:])
            if value != _MISSING}


#: (layout digest, names) -> each name's index in a record of the layout
_PROJECTIONS = {}   # (past its end: absent)


def _projection(digest, names, lookup):
    key = (digest, names)
    where = _PROJECTIONS.get(key)
    if where is None:
        layout = _LAYOUTS.get(digest)
        if layout is None:
            if lookup is None:
                raise KeyError(digest)
            layout = lookup(digest)
        if tuple(layout) == names:
            where = True
        else:
            index = {name: i + 1 for i, name in enumerate(layout)}
            absent = len(layout) + 1
            where = tuple([index.get(name, absent) for name in names])
        _PROJECTIONS[key] = where
    return where


def meta_values(obj, names, lookup=None, decoded=False):
    """The values of the columns ``names`` (a tuple) in parsed metadata
    JSON (see :func:`meta_dict`), Missing.Value for a column the record
    does not have; typed values decoded if ``decoded``, else as stored."""
    if not obj:
        return (MV,) * len(names)
    if type(obj) is not list:
        get = obj.get
        values = [get(name, _MISSING) for name in names]
    else:
        where = _projection(obj[0], names, lookup)
        if where is True:
            values = obj[1:]
            if len(values) < len(names):
                values += [_MISSING] * (len(names) - len(values))
        else:
            size = len(obj)
            values = [obj[i] if i < size else _MISSING for i in where]
    if decoded:
        return tuple([decode(value) if type(value) in (dict, list) else
                      value for value in values])
    return tuple([MV if type(value) is dict and value == _MISSING
                  else value for value in values])


def decode_meta(obj, lookup=None):
    """``{column: value}`` from parsed metadata JSON (as read from
    ``pgcatalog_meta.meta``, see :func:`meta_dict`), decoded; columns left
    out are Missing.Value (the caller's ``get(name, MV)``)."""
    obj = meta_dict(obj, lookup)
    for name, value in obj.items():
        if type(value) in _SCALARS:
            continue
        obj[name] = decode(value)
    return obj


assert plonetypes.TAG == TAG
plonetypes.bind(encode, decode, _enc_pickle)
