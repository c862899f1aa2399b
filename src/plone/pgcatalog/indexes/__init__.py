"""Index kinds: one class per ZCatalog index type (see base.py)."""
from importlib import import_module

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
    return getattr(import_module("plone.pgcatalog.indexes." + module), name)
