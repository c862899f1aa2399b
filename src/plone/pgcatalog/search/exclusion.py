"""Which entries a query cannot match, judged from their digests.

A cached answer stays the answer after writes that touched only entries
its query cannot match, before nor after the write (changes.py logs each
touched entry's digest, :func:`plone.pgcatalog.changes.facts`): a new
document leaves the events portlet's answer standing (it provides no
``IEvent``), and a listing of another folder.

:func:`cannot_match` makes the judge of a query from its conditions that
are simple to decide exactly, each enough on its own (a catalog query is
the AND of its conditions):

* a FieldIndex, KeywordIndex or UUIDIndex asked for strings (one, a list,
  or ``{"query": ..., "operator": "or" | "and"}``): an entry whose digest
  holds none of them (``or``), or lacks one (``and``), is not matched
  (unless its keywords are a long list stored by a digest this process
  does not know: pg/lists.py);
* an ExtendedPathIndex asked for paths with depth 0 or 1 (``{"query":
  ..., "depth": 1}``: a folder's listing, the navigation portlet's): an
  entry whose path is under none of them is not matched.  Other path
  searches may depend on the catalog as a whole (indexes/path: ZCatalog's
  deepest level, entries outside the site), so they are not judged.

Anything else in a condition (``range``, values that are not strings)
leaves that condition out.  Enough on its own, because every condition of
the query says something of one entry alone: a touched entry no condition
takes cannot change which of the others match.  So a query is not judged
when one of its conditions may depend on the catalog as a whole: ``not``
without a query (ZCatalog takes every entry unless none has the value),
path searches other than depth 0 or 1 at level 0 (ZCatalog's deepest
level), old-style options (``Subject_operator``), an index kind not listed
below (:func:`_local`); nor a query of a text index: its scores count
every entry (Okapi's statistics).
"""
from plone.pgcatalog.changes import fact_bit
from plone.pgcatalog.changes import opaque_bit
from plone.pgcatalog.changes import path_bit
from plone.pgcatalog.indexes.boolean import PGBooleanIndex
from plone.pgcatalog.indexes.common import needs_tag
from plone.pgcatalog.indexes.date import PGDateIndex
from plone.pgcatalog.indexes.daterange import PGDateRangeIndex
from plone.pgcatalog.indexes.daterecurring import PGDateRecurringIndex
from plone.pgcatalog.indexes.field import PGFieldIndex
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.indexes.keyword import PGKeywordIndex
from plone.pgcatalog.indexes.path import PGExtendedPathIndex
from plone.pgcatalog.indexes.uuid import PGUUIDIndex

_VALUE_KINDS = (PGFieldIndex, PGKeywordIndex, PGUUIDIndex)


def cannot_match(catalog, query):
    """``judge(facts)``: True when an entry of digest ``facts`` cannot
    match ``query`` (a merged query dict) on ``catalog``; None when no
    condition of the query can be judged."""
    indexes = catalog._indexes
    tests = []
    for name, value in query.items():
        index = indexes.get(name) if isinstance(name, str) else None
        if index is None:
            continue
        if ITextKind.providedBy(index) or not _local(index, value) or \
                any(isinstance(key, str) and key.startswith(name + "_")
                    for key in query):
            return None
        kind = type(index)
        if kind in _VALUE_KINDS:
            test = _values_test(name, value)
            if test is not None and kind is PGKeywordIndex:
                # a long list stored by digest (pg/lists.py) this process
                # cannot expand may hold anything
                test = (test[0], test[1], 1 << opaque_bit(name))
            elif test is not None:
                # "operator" is no option of a FieldIndex or UUIDIndex:
                # ZCatalog reads its values as "or"
                test = (False, test[1], 0)
        elif kind is PGExtendedPathIndex:
            test = _paths_test(value)
        else:
            test = None
        if test is not None:
            tests.append(test)
    if not tests:
        return None
    masks = tuple(tests)

    def judge(facts):
        for every, mask, opaque in masks:
            if facts & opaque:
                continue
            held = facts & mask
            if (held != mask) if every else not held:
                return True
        return False

    return judge


#: the options of a condition that says something of one entry alone, by
#: index kind (ZCatalog's query_options otherwise)
_LOCAL_OPTIONS = {
    PGFieldIndex: {"query", "operator", "range"},
    PGKeywordIndex: {"query", "operator", "range"},
    PGUUIDIndex: {"query", "operator", "range"},
    PGBooleanIndex: {"query"},
    PGDateIndex: {"query", "range"},
    PGDateRecurringIndex: {"query", "range"},
    PGDateRangeIndex: {"query"},
}


def _local(index, value):
    """Whether the condition ``value`` of ``index`` is met or not by each
    entry on its own (see the module docstring)."""
    kind = type(index)
    if kind is PGExtendedPathIndex:
        return _paths_test(value) is not None
    options = _LOCAL_OPTIONS.get(kind)
    if options is None:
        return False
    return not isinstance(value, dict) or set(value) <= options


def _strings(value):
    """The strings of a query value (one or a list or tuple), or None
    when it is anything else (or empty, or holds an empty string)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(isinstance(v, str) and v and not needs_tag(v)
               for v in value):
        return None     # ("": ZCatalog leaves such a condition out)
    return [str(v) for v in value]


def _values_test(name, value):
    """``(every, mask, 0)``: the bits of the strings asked for, all
    needed (``and``) or any (``or``); None when not judged."""
    every = False
    if isinstance(value, dict):
        if not set(value) <= {"query", "operator"}:
            return None
        operator = value.get("operator", "or")
        if operator not in ("or", "and"):
            return None
        every = operator == "and"
        value = value.get("query")
    strings = _strings(value)
    if strings is None:
        return None
    mask = 0
    for item in strings:
        mask |= 1 << fact_bit(name, item)
    return every, mask, 0


def _paths_test(value):
    """``(False, mask, 0)``: the bits of the paths asked for (an entry
    under none of them is not matched), for a search of depth 0 or 1 (the
    paths themselves or their children, as ExtendedPathIndex finds them
    without looking at the catalog as a whole: indexes/path); None when
    not judged."""
    if not isinstance(value, dict) or not set(value) <= {"query", "depth"}:
        return None
    if value.get("depth") not in (0, 1) or type(value["depth"]) is not int:
        return None
    strings = _strings(value.get("query"))
    if strings is None:
        return None
    mask = 0
    for path in strings:
        path = path.rstrip("/")
        parts = path.split("/")
        if not path.startswith("/") or any(
                part in ("", ".", "..") for part in parts[1:]):
            return None     # the root, or a path not spelled plainly
        mask |= 1 << path_bit(path)
    return False, mask, 0
