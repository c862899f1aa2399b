"""Restricted unpickling of the pickles the codec keeps in catalog rows.

The typed JSON codec (``core.py``) stores a value it has no tag for as a
base64 pickle.  The catalog database is outside the ZODB and may be
writable by more people or programs than the ZODB is, so a pickle read
from it is untrusted: ``pickle.loads`` would call whatever global a
crafted pickle names (``os.system``, ``builtins.eval``, ...).

``loads`` here resolves globals only from an explicit allowlist of
harmless classes (``ALLOWED``; BTrees classes by name pattern); anything
else raises ``UnpicklingRefused`` before it is imported or called.
Integrators add their own classes with ``allow_class`` (or zope.conf's
``unpickle-allow`` / ``PGCATALOG_UNPICKLE_ALLOW``: ``module:name``
separated by spaces or commas).  See docs/security.md.
"""
import io
import logging
import os
import pickle
import re
import threading

from plone.pgcatalog import config

logger = logging.getLogger("plone.pgcatalog.codec")

ENV_ALLOW = "PGCATALOG_UNPICKLE_ALLOW"

#: (module, name) pairs a stored pickle may load
ALLOWED = set()
ALLOWED.update(("builtins", n) for n in (
    "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset",
    "int", "list", "range", "set", "slice", "str", "tuple"))
ALLOWED.update(("datetime", n) for n in (
    "date", "datetime", "time", "timedelta", "timezone", "tzinfo"))
ALLOWED.update([
    ("decimal", "Decimal"),
    ("DateTime.DateTime", "DateTime"),
    ("Missing", "V"), ("Missing", "Value"), ("Missing", "MV"),
    ("persistent.mapping", "PersistentMapping"),
    ("persistent.list", "PersistentList"),
    ("persistent.dict", "PersistentDict"),
    ("zope.i18nmessageid.message", "Message"),
    ("zope.i18nmessageid.message", "pyMessage"),
    ("collections", "OrderedDict"), ("collections", "Counter"),
    ("collections", "defaultdict"), ("collections", "deque"),
    ("BTrees.Length", "Length"),
    ("pytz", "_p"), ("pytz", "_UTC"), ("pytz.tzinfo", "unpickler"),
    ("zoneinfo", "ZoneInfo"),
    ("dateutil.tz.tz", "tzutc"), ("dateutil.tz.tz", "tzoffset"),
    # a zoneinfo.ZoneInfo pickles as getattr(ZoneInfo, "_unpickle")(...);
    # getattr itself is replaced by _getattr below (only _ATTRS)
    ("builtins", "getattr"),
])

# the attributes the pickled ``getattr`` may fetch: (module, class, attr)
_ATTRS = {("zoneinfo", "ZoneInfo", "_unpickle")}

_BTREES = re.compile(r"BTrees\.([A-Z]{2}|fs)BTree\Z")
_BTREE_KINDS = ("BTree", "Bucket", "Set", "TreeSet")

_lock = threading.Lock()
_configured = {"raw": None, "pairs": frozenset()}
_reported = set()


class UnpicklingRefused(pickle.UnpicklingError):
    """A stored pickle names a global that is not allowlisted."""

    def __init__(self, module, name):
        self.module, self.name = module, name
        super().__init__(
            "refused to unpickle %s.%s from the catalog database: not an "
            "allowed class (see plone.pgcatalog.codec.core.allow_class)"
            % (module, name))


def allow_class(module, name=None):
    """Let stored pickles load ``module.name`` (or the class ``module``).

    Only allow classes whose construction and ``__setstate__`` run no code
    a pickle's data could steer: plain value classes."""
    if name is None:
        module, name = module.__module__, module.__qualname__
    if not (isinstance(module, str) and isinstance(name, str)):
        raise TypeError("allow_class(module: str, name: str)")
    with _lock:
        ALLOWED.add((module, name))
    return module, name


def _parse(raw):
    pairs = set()
    for item in raw.replace(",", " ").split():
        module, sep, name = item.partition(":")
        if not sep:
            module, _, name = item.rpartition(".")
        if module and name:
            pairs.add((module, name))
    return frozenset(pairs)


def configured():
    """The (module, name) pairs allowed by zope.conf / the environment."""
    raw = (config.product_config().get("unpickle-allow")
           or os.environ.get(ENV_ALLOW) or "")
    if raw != _configured["raw"]:
        _configured["pairs"] = _parse(raw)
        _configured["raw"] = raw
    return _configured["pairs"]


def is_btree(module, name):
    """``module.name`` is one of the BTrees package's BTree, Bucket, Set or
    TreeSet classes (``BTrees.OOBTree.OOBTree``, ...)."""
    match = _BTREES.match(module)
    return bool(match) and name in [match.group(1) + k for k in _BTREE_KINDS]


def is_allowed(module, name):
    return ((module, name) in ALLOWED or is_btree(module, name)
            or (module, name) in configured())


def _getattr(obj, attr):
    key = (getattr(obj, "__module__", None), getattr(obj, "__name__", None),
           attr)
    if isinstance(obj, type) and key in _ATTRS:
        return getattr(obj, attr)
    raise UnpicklingRefused("getattr(%s.%s)" % key[:2], attr)


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that loads only allowlisted globals."""

    def find_class(self, module, name):
        if not is_allowed(module, name):
            raise UnpicklingRefused(module, name)
        if (module, name) == ("builtins", "getattr"):
            return _getattr
        return super().find_class(module, name)

    def persistent_load(self, pid):
        raise UnpicklingRefused("persistent reference", repr(pid)[:60])


def loads(data):
    """Unpickle ``data``, refusing (``UnpicklingRefused``) any global not
    allowlisted; nothing outside the allowlist is imported or called."""
    return RestrictedUnpickler(io.BytesIO(data), fix_imports=False).load()


def report(exc, writing=False):
    """Log a refused pickle, once per class and occasion (read: ERROR,
    write: WARNING), then at DEBUG."""
    key = (exc.module, exc.name, writing)
    level = logging.ERROR if not writing else logging.WARNING
    if key in _reported or len(_reported) >= 1000:  # bounded: names are data
        level = logging.DEBUG
    else:
        _reported.add(key)
    if writing:
        logger.log(level, "%s; stored as a pickle, it reads as Missing.Value"
                   " until allowed", exc)
    else:
        logger.log(level, "%s; the value reads as Missing.Value", exc)
