"""Codec tags for the Zope, Plone and standard library types that catalog
metadata holds beyond what ``core.py`` itself handles, so that none of
them needs a pickle:

* ``zope.i18nmessageid.Message`` (the ``Type`` column): msgid, domain,
  default, mapping, plural fields, as its own ``__reduce__`` gives them;
* ``PersistentMapping`` (``image_scales``) and ``PersistentList``: their
  ``data``, restored with ``__new__`` + ``__setstate__`` as unpickling does
  (one with other attributes stays a pickle);
* ``collections.Counter`` (plone.volto's ``block_types``) and
  ``OrderedDict`` (in order: ``jsonb`` reorders object keys);
* the BTrees package's BTree, Bucket, Set and TreeSet classes (items;
  equal contents, not the same bucket layout);
* ``bytearray``, ``complex``;
* ``datetime`` and ``time`` in a zone ``isoformat`` cannot give back: pytz
  zones (plone.app.event / plone.app.discussion dates) as pytz pickles
  them (the same tzinfo instance comes back), ``zoneinfo.ZoneInfo`` by key,
  named fixed-offset ``datetime.timezone``.

``codec`` imports this module and binds ``encode``, ``decode`` and
``enc_pickle`` (``bind``) before any of it runs.
"""
import base64
import collections
import datetime
import importlib
import zoneinfo

import pytz
from persistent.list import PersistentList
from persistent.mapping import PersistentMapping
from zope.i18nmessageid import Message

from plone.pgcatalog.codec import unpickle

TAG = "@pgc:"  # codec.TAG

encode = decode = enc_pickle = None  # bound by codec (bind)


def bind(enc, dec, pickler):
    global encode, decode, enc_pickle
    encode, decode, enc_pickle = enc, dec, pickler


def _enc_tz(tz):
    """A JSON spec of a pytz, zoneinfo or named fixed zone; None if other."""
    t = type(tz)
    if t is datetime.timezone:
        return ["fixed"] + [encode(a) for a in tz.__getinitargs__()]
    if t is zoneinfo.ZoneInfo or isinstance(tz, pytz.BaseTzInfo):
        func, args = tz.__reduce__()[:2]
        if func is pytz._p or func is pytz._UTC:
            return ["pytz"] + list(args)
        if func == zoneinfo.ZoneInfo._unpickle and type(args[0]) is str:
            return ["zoneinfo"] + list(args)
    return None


def _dec_tz(spec):
    kind, args = spec[0], spec[1:]
    if kind == "fixed":
        return datetime.timezone(*[decode(a) for a in args])
    if kind == "pytz":
        return pytz._p(*args) if args else pytz.utc
    if kind == "zoneinfo":
        return zoneinfo.ZoneInfo._unpickle(*args)
    raise ValueError("unknown time zone spec %r" % (kind,))


def enc_zoned(v, tag):
    """A datetime or time with a zone isoformat cannot give back."""
    spec = _enc_tz(v.tzinfo)
    if spec is None:
        return enc_pickle(v)
    return {TAG + tag: [v.replace(tzinfo=None).isoformat(), v.fold, spec]}


def _enc_bytearray(v):
    return {TAG + "ba": base64.b64encode(v).decode("ascii")}


def _enc_complex(v):
    return {TAG + "c": [encode(v.real), encode(v.imag)]}


def _enc_message(v):
    args = list(v.__reduce__()[1])
    while args and args[-1] is None:
        args.pop()
    return {TAG + "msg": [encode(a) for a in args]}


def _enc_persistent(v, tag, kind):
    state = v.__getstate__()
    if (type(state) is not dict or list(state) != ["data"]
            or type(state["data"]) is not kind):
        return enc_pickle(v)  # extra attributes: keep them exactly
    if kind is list:
        return {TAG + tag: [encode(x) for x in state["data"]]}
    return {TAG + tag: encode(state["data"])}


def _enc_counter(v):
    return {TAG + "ctr": encode(dict(v))}


def _enc_odict(v):
    return {TAG + "od": [[encode(k), encode(x)] for k, x in v.items()]}


def _enc_btree(v):
    t = type(v)
    if not unpickle.is_btree(t.__module__, t.__name__):
        return enc_pickle(v)
    if hasattr(v, "items"):
        return {TAG + "bt": [t.__name__, [[encode(k), encode(x)]
                                          for k, x in v.items()]]}
    return {TAG + "bt": [t.__name__, [encode(k) for k in v]]}


def _dec_datetime_tz(v):
    dt = datetime.datetime.fromisoformat(v[0])
    return dt.replace(tzinfo=_dec_tz(v[2]), fold=v[1])


def _dec_time_tz(v):
    t = datetime.time.fromisoformat(v[0])
    return t.replace(tzinfo=_dec_tz(v[2]), fold=v[1])


def _dec_bytearray(v):
    return bytearray(base64.b64decode(v))


def _dec_complex(v):
    return complex(decode(v[0]), decode(v[1]))


def _dec_message(v):
    return Message(*[decode(a) for a in v])


def _dec_persistent(cls, data):
    obj = cls.__new__(cls)  # as unpickling does: __new__, __setstate__
    obj.__setstate__({"data": data})
    return obj


def _dec_counter(v):
    return collections.Counter(decode(v))


def _dec_odict(v):
    return collections.OrderedDict([(decode(k), decode(x)) for k, x in v])


def _dec_btree(v):
    name, items = v
    family = name[:2]
    module = "BTrees.%sBTree" % family
    if not unpickle.is_btree(module, name):
        raise ValueError("not a BTrees class: %r" % (name,))
    cls = getattr(importlib.import_module(module), name)
    if name.endswith(("BTree", "Bucket")):
        return cls([(decode(k), decode(x)) for k, x in items])
    return cls([decode(k) for k in items])


ENCODERS = {
    bytearray: _enc_bytearray,
    complex: _enc_complex,
    Message: _enc_message,
    PersistentMapping: lambda v: _enc_persistent(v, "pm", dict),
    PersistentList: lambda v: _enc_persistent(v, "pl", list),
    collections.Counter: _enc_counter,
    collections.OrderedDict: _enc_odict,
}

DECODERS = {
    TAG + "dtz": _dec_datetime_tz,
    TAG + "ttz": _dec_time_tz,
    TAG + "ba": _dec_bytearray,
    TAG + "c": _dec_complex,
    TAG + "msg": _dec_message,
    TAG + "pm": lambda v: _dec_persistent(PersistentMapping, decode(v)),
    TAG + "pl": lambda v: _dec_persistent(
        PersistentList, [decode(x) for x in v]),
    TAG + "ctr": _dec_counter,
    TAG + "od": _dec_odict,
    TAG + "bt": _dec_btree,
}


def enc_other(value):
    """The tag of a value of a type without an encoder (BTrees), else a
    pickle."""
    if type(value).__module__.startswith("BTrees."):
        return _enc_btree(value)
    return enc_pickle(value)
