"""DateRangeIndex (effectiveRange): a [since, until] pair per document.

Stored as the JSON array ``[since, until]`` of what
``DateRangeIndex._convertDateTime`` makes of the two attributes (minutes
since the epoch, ``None`` = open end: missing, ``None`` or outside the
floor/ceiling values).  A document without either attribute is stored as
``[null, null]`` and, as in ZCatalog, always matches.  With no since field
configured ZCatalog indexes nothing, and so do we.
"""
from DateTime import DateTime
from Products.PluginIndexes.DateRangeIndex.DateRangeIndex import DateRangeIndex
from Products.PluginIndexes.util import safe_callable
from zope.interface import implementer

from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import find_tool
from plone.pgcatalog.indexes.date import json_int
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.indexes.interfaces import IQueryValueKind
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg.fragment import q


@implementer(IHotKind, IHotConditionKind, IQueryValueKind)
class PGDateRangeIndex(PGIndex, DateRangeIndex):
    """DateRangeIndex whose ranges live in ``idx[name]``; when hot, also in
    the hot row (``h.rng``, hot.py), where its condition is the same.  A
    query's DateTime counts as its minutes (``pgc_query_value``)."""

    pgc_hot_kind = "range"

    def _pgc_attr(self, obj, name):
        value = getattr(obj, name, None)
        if safe_callable(value):
            value = value()
        return self._convertDateTime(value)

    def pgc_extract(self, obj):
        # DateRangeIndex.index_object, with the same attribute access.
        if self._since_field is None:
            return MISSING
        since = self._pgc_attr(obj, self._since_field)
        until = self._pgc_attr(obj, self._until_field)
        return [since, until]

    def pgc_where(self, iq, qc):
        # an empty key list raises IndexError here, as in ZCatalog
        return self._pgc_range_sql(self.pgc_key_sql(), iq)

    def pgc_hot_where(self, iq, qc):
        if iq is None or not iq.keys or not hot.ready(self, qc.cid):
            return None
        term = self._convertDateTime(iq.keys[0])
        if term is None:
            return hot.Ranged(hot.range_present(), present=True)
        if not hot.BIGINT_MIN < term < hot.BIGINT_MAX:
            return None
        return hot.Ranged(hot.range_contains(
            term, self._pgc_range_sql(hot.RANGE, iq)), term)

    def pgc_query_value(self, value):
        """A DateTime as the minutes the index compares, ``("minutes",
        n)``; other values as they are (None)."""
        if isinstance(value, DateTime):
            return ("minutes", self._convertDateTime(value))
        return None

    def _pgc_range_sql(self, expr, iq):
        """The query's condition on ``expr``, the entry's ``[since,
        until]`` (the entry's value, or the hot row's copy of it)."""
        term = self._convertDateTime(iq.keys[0])
        if term is None:
            # None, or a date beyond floor/ceiling: ZCatalog's bucket ranges
            # become unbounded and every indexed document matches.
            return q("({} IS NOT NULL)", expr)
        since = q("({} -> 0)", expr)
        until = q("({} -> 1)", expr)
        # jsonb orders null below every number, so an open since passes
        # ``since <= term`` by itself; an open until needs saying.
        return q("({} <= {}::jsonb AND ({} >= {}::jsonb OR {} = "
                 "'null'::jsonb))", since, json_int(term), until,
                 json_int(term), until)

    def pgc_sort(self, qc):
        # ZCatalog sorts by the (since, until) tuples of documentToKeyMap
        # (and fails when it meets None or sorts without a limit); jsonb
        # orders these two-element arrays element-wise, null first.
        return (self.pgc_key_sql(),), self.pgc_present_sql()

    def pgc_decode(self, value):
        return tuple(value)

    def indexSize(self):
        # DateRangeIndex never counts its values: len(index) is always 0.
        return 0

    def uniqueValues(self, name=None, withLengths=0):
        """As DateRangeIndex: the since (or until) values of the bounded
        documents, then those of the open-ended ones, each group sorted."""
        if name not in (self._since_field, self._until_field):
            return
        pos = 0 if name == self._since_field else 1
        rows = find_tool(self)._pgc_store().range_bound_counts(self, pos)
        rows = sorted(((bool(is_open), value, count)
                       for value, is_open, count in rows),
                      key=lambda row: (row[0], row[1]))
        for _open, value, count in rows:
            yield (value, count) if withLengths else value
