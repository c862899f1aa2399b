"""DateRecurringIndex (plone.app.event's start/end): every occurrence.

Stored as the sorted JSON array of the occurrences' minute integers
(``plone.event.utils.dt2int``, recurrence rules expanded exactly as
``DateRecurringIndex.index_object`` does).  Queries are UnIndex queries in
which a document matches when *any* occurrence matches (see
:class:`plone.pgcatalog.indexes.date.UnIndexDateQuery`).

Because the array is sorted, "some occurrence >= lo" is "the last one >=
lo" and "some occurrence <= hi" is "the first one <= hi": B-tree expression
indexes on the first and last element serve the range queries Plone sends;
a GIN index serves equality.
"""
from BTrees.IIBTree import IISet
from plone.event.recurrence import recurrence_sequence_ical
from plone.event.utils import dt2int
from plone.event.utils import pydt
from Products.DateRecurringIndex.index import DateRecurringIndex
from Products.PluginIndexes.util import safe_callable
from zope.interface import implementer

from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import dumps
from plone.pgcatalog.indexes.date import UnIndexDateQuery
from plone.pgcatalog.indexes.date import json_int
from plone.pgcatalog.indexes.interfaces import IQueryValueKind
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema.tables import IndexSpec


@implementer(IQueryValueKind)
class PGDateRecurringIndex(UnIndexDateQuery, PGIndex, DateRecurringIndex):
    """DateRecurringIndex whose occurrence lists live in ``idx[name]``."""

    pgc_multi = True

    def pgc_extract(self, obj):
        # DateRecurringIndex.index_object, step by step.
        try:
            date_attr = getattr(obj, self.id)
            if safe_callable(date_attr):
                date_attr = date_attr()
        except AttributeError:
            return MISSING
        recurdef = getattr(obj, self.attr_recurdef, None)
        if safe_callable(recurdef):
            recurdef = recurdef()
        if not recurdef:
            dates = [pydt(date_attr)]
        else:
            # attr_until, not getUntilField(): that getter (which returns
            # it) came with Products.DateRecurringIndex 4 (Plone 6.2); 3
            # (Plone 6.1) has only the attribute.
            until = getattr(obj, self.attr_until, None)
            if safe_callable(until):
                until = until()
            dates = recurrence_sequence_ical(
                date_attr, recrule=recurdef, until=until)
        values = list(IISet(map(dt2int, dates)))
        return values if values else MISSING

    # -- value SQL (a sorted array of numbers per document) -----------------
    def _pgc_any_sql(self, expr, values):
        values = sorted(set(values))
        return or_(*[q("{} @> {}::jsonb", expr, dumps([int(v)]))
                     for v in values])

    def _pgc_range_sql(self, expr, lo, hi):
        first = q("({} -> 0)", expr)
        last = q("({} -> -1)", expr)
        if lo is None and hi is None:
            return self.pgc_present_sql()
        if hi is None:
            return q("({} >= {}::jsonb AND jsonb_typeof({}) = 'number')",
                     last, json_int(lo), last)
        if lo is None:
            return q("({} <= {}::jsonb AND jsonb_typeof({}) = 'number')",
                     first, json_int(hi), first)
        lo_p, hi_p = json_int(lo), json_int(hi)
        # first <= hi and last >= lo; then an occurrence lies in the range
        # when the first or the last does, else look at the others.
        return and_(
            q("{} <= {}::jsonb", first, hi_p),
            q("{} >= {}::jsonb", last, lo_p),
            or_(q("{} >= {}::jsonb", first, lo_p),
                q("{} <= {}::jsonb", last, hi_p),
                q("EXISTS (SELECT 1 FROM jsonb_array_elements({}) AS o(v) "
                  "WHERE o.v >= {}::jsonb AND o.v <= {}::jsonb)",
                  expr, lo_p, hi_p)))

    def _pgc_lookup(self, value):
        # The forward index is an OOBTree of ints: numbers equal to a key
        # find it (5.0 finds 5); other types find nothing.
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int) and self._pgc_in_range(value):
            return value
        if isinstance(value, float) and value.is_integer() and \
                self._pgc_in_range(int(value)):
            return int(value)
        return None

    # -- sorting, decoding, DDL -------------------------------------------
    def pgc_sort(self, qc):
        # ZCatalog sorts by the tuple of all occurrences; jsonb compares
        # arrays by length first, PostgreSQL arrays like Python tuples.
        return (q("(string_to_array(btrim({}, '[]'), ',')::bigint[])",
                  q("(e.idx ->> {})", literal(self.getId()))),), \
            self.pgc_present_sql()

    def pgc_decode(self, value):
        if isinstance(value, list):
            return tuple(value)
        return value

    def pgc_indexes(self):
        key = self.pgc_key_sql(None)
        return [
            # ``->`` on any JSON value gives a value or NULL (shared)
            IndexSpec("daterecurring-first", q("(({} -> 0))", key).ddl,
                      shared=True),
            IndexSpec("daterecurring-last", q("(({} -> -1))", key).ddl,
                      shared=True),
            IndexSpec("daterecurring-gin",
                      q("USING gin ({} jsonb_path_ops)", key).ddl,
                      shared=True),
        ]
