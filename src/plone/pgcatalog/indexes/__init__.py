"""Index kinds: one class per ZCatalog index type (see base.py).

:func:`kind_for` names the class serving a ZCatalog meta_type;
:func:`convert_index` copies a ZCatalog index's configuration into one
(``addIndex`` with an index object, the install's carrying over).
"""
from importlib import import_module

from Acquisition import aq_base
from Persistence import Persistent

from plone.pgcatalog.errors import UnsupportedIndexType


#: meta_type -> "module:Class" of the class serving it.
KINDS = {
    "FieldIndex": "field:PGFieldIndex",
    "KeywordIndex": "keyword:PGKeywordIndex",
    "BooleanIndex": "boolean:PGBooleanIndex",
    "UUIDIndex": "uuid:PGUUIDIndex",
    "DateIndex": "date:PGDateIndex",
    "DateRangeIndex": "daterange:PGDateRangeIndex",
    "DateRecurringIndex": "daterecurring:PGDateRecurringIndex",
    "ExtendedPathIndex": "path:PGExtendedPathIndex",
    "ZCTextIndex": "text:PGZCTextIndex",
    "GopipIndex": "gopip:PGGopipIndex",
}


def kind_for(meta_type):
    """The class serving ``meta_type``; UnsupportedIndexType otherwise."""
    spec = KINDS.get(meta_type)
    if spec is None:
        raise UnsupportedIndexType(
            "plone.pgcatalog cannot serve index type %r (supported: %s)"
            % (meta_type, ", ".join(sorted(KINDS))))
    module, name = spec.split(":")
    # a table of names, imported on demand: the kinds import this package
    return getattr(import_module("plone.pgcatalog.indexes." + module), name)


def _is_data(value):
    """Index attributes that hold data (BTrees, Lengths, Okapi indexes)."""
    return isinstance(value, Persistent) or type(value).__module__.startswith(
        ("BTrees", "Products.ZCTextIndex.OkapiIndex",
         "Products.ZCTextIndex.CosineIndex"))


def convert_index(index, target=None):
    """A copy of ``index``'s configuration as an index of class ``target``
    (default: the plone.pgcatalog kind serving its meta_type)."""
    index = aq_base(index)
    klass = target or kind_for(index.meta_type)
    new = klass.__new__(klass)
    for key, value in index.__dict__.items():
        if key.startswith("_v_") or key.startswith("_p_") or _is_data(value):
            continue
        new.__dict__[key] = value
    return new
