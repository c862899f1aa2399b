"""DateIndex: one date per document, stored as ZCatalog's minute integer.

The stored value is what ``DateIndex._convert`` makes of the attribute (the
``((((y*12+m)*31+d)*24+h)*60+min)`` encoding of the UTC time; CMFPlone's
``dateIndexPatch`` clamps overflowing dates, and since this class subclasses
DateIndex, ``self._convert`` is the patched method): a JSON number under
``idx[name]``, served by a B-tree expression index on ``(cid, idx -> name)``.

Queries follow ``UnIndex.query_index`` to the letter, quirks included; the
logic lives in :class:`UnIndexDateQuery`, shared with DateRecurringIndex
(whose documents hold a list of such integers).
"""
import datetime

from DateTime import DateTime
from Products.PluginIndexes.DateIndex.DateIndex import DateIndex
from zope.interface import implementer

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.indexes.interfaces import IQueryValueKind
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import not_
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema.tables import IndexSpec

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def json_int(value):
    """An index integer as JSON text (a ``%s::jsonb`` parameter)."""
    return str(int(value))


class UnIndexDateQuery:
    """``UnIndex.query_index`` (query / range / not) for indexes whose
    stored values are integers: a single one (DateIndex) or a sorted JSON
    array of them (DateRecurringIndex).  Their ``query_options`` have no
    ``operator``, so IndexQuery always says "or".  A query's dates count
    as the minutes ``_convert`` makes of them (IQueryValueKind: the result
    cache keys "now" of one minute alike).

    Kinds provide the value-level SQL (Fragments):

    ``_pgc_any_sql(expr, values)``
        the document at ``expr`` has one of ``values``;
    ``_pgc_range_sql(expr, lo, hi)``
        ... has a value in ``[lo, hi]`` (``None`` = open; both None: has a
        value at all);
    ``_pgc_lookup(value)``
        a raw ``not`` value as a key of the original's forward BTree, or
        None when the BTree lookup would find nothing.
    """

    def _pgc_expr(self, alias="e"):
        return self.pgc_key_sql(alias)

    def pgc_query_value(self, value):
        """A date (DateTime, datetime, date) as the minutes ``_convert``
        makes of it, ``("minutes", n)``; other values as they are
        (None)."""
        if isinstance(value, (DateTime, datetime.date)):
            return ("minutes", self._convert(value))
        return None

    def pgc_where(self, iq, qc):
        expr = self._pgc_expr()
        keys = iq.keys
        not_parm = iq.get("not", None)
        range_parm = iq.get("range", None)
        opr_args = None
        if range_parm:
            opr_args = [a for a in ("min", "max") if range_parm.find(a) > -1]

        if not keys and not_parm:
            return self._pgc_not_only(expr, not_parm, opr_args)

        converted = [self._convert(k) for k in keys]
        if opr_args is not None:
            # min/max over the converted keys, as UnIndex (a None among
            # integers raises the same TypeError, no keys ValueError; a
            # range naming neither: every document with a value)
            lo = min(converted) if "min" in opr_args else None
            hi = max(converted) if "max" in opr_args else None
            if not hi:  # UnIndex: ``if hi:`` - a falsy bound is no bound
                hi = None
            cond = self._pgc_range_sql(expr, lo, hi)
        else:
            values = [k for k in converted if k is not None]
            if not values:
                return NO_MATCH
            cond = self._pgc_any_sql(expr, values)

        if not_parm:
            # UnIndex subtracts ``_apply_not(not_parm)`` with the *raw* not
            # values here (they are converted only for a not-only query):
            # only values that are keys of the forward BTree exclude.
            raw = [self._pgc_lookup(v) for v in not_parm]
            raw = [v for v in raw if v is not None]
            if raw:
                cond = and_(cond, not_(self._pgc_any_sql(expr, raw)))
        return cond

    def _pgc_not_only(self, expr, not_parm, opr_args):
        """``{"not": ...}`` without query values.

        ZCatalog starts from every catalogued document and subtracts the
        documents having an excluded value - unless no document at all has
        one: then it falls back to the union of all the index's values,
        i.e. only the documents *with* a value.  With a range option it
        always takes that second path (documents with a value, minus the
        excluded ones)."""
        present = self.pgc_present_sql()
        nots = [self._convert(v) for v in not_parm]
        nots = [v for v in nots if v is not None and self._pgc_in_range(v)]
        if not nots:
            return present
        excluded = self._pgc_any_sql(expr, nots)
        if opr_args is not None:
            return and_(present, not_(excluded))
        excluded_x = self._pgc_any_sql(self._pgc_expr("x"), nots)
        return and_(not_(excluded), or_(present,
                                        common.exists_other(excluded_x)))

    @staticmethod
    def _pgc_in_range(value):
        return isinstance(value, int) and _INT64[0] <= value <= _INT64[1]


@implementer(IHotKind, IQueryValueKind)
class PGDateIndex(UnIndexDateQuery, PGIndex, DateIndex):
    """DateIndex whose minute integers live in ``idx[name]``.

    Queries and sorting read the value as ``bigint`` (comparing and sorting
    numbers is several times cheaper than comparing jsonb values), served
    by a B-tree on ``(cid, ((idx -> name)::bigint))``.  Named in the
    ``hot-indexes`` setting (``modified`` by default), its value is the
    hot row's sort value (hot.py, schema version 21): a page sorted by it
    may walk the hot rows."""

    pgc_walkable_sort = True
    pgc_hot_kind = "sort"

    def pgc_extract(self, obj):
        return common.datum(self, obj)

    def _pgc_expr(self, alias="e"):
        return q("({}::bigint)", self.pgc_key_sql(alias))

    def pgc_present_sql(self):
        # the expression of the bigint index (its statistics)
        return q("({} IS NOT NULL)", self._pgc_expr())

    # -- value SQL (one number per document) --------------------------------
    def _pgc_any_sql(self, expr, values):
        values = sorted(set(values))
        if len(values) == 1:
            return q("{} = {}::bigint", expr, int(values[0]))
        return q("{} = ANY({}::bigint[])", expr, [int(v) for v in values])

    def _pgc_range_sql(self, expr, lo, hi):
        conds = []
        if lo is not None:
            conds.append(q("{} >= {}::bigint", expr, int(lo)))
        if hi is not None:
            conds.append(q("{} <= {}::bigint", expr, int(hi)))
        if not conds:
            return self.pgc_present_sql()
        return and_(*conds)

    def _pgc_lookup(self, value):
        # DateIndex's forward index is an IOBTree: only integers are keys.
        if isinstance(value, int) and self._pgc_in_range(value):
            return int(value)
        return None

    # -- sorting, decoding, DDL -------------------------------------------
    def pgc_sort(self, qc):
        return (self._pgc_expr(),), self.pgc_present_sql()

    def pgc_decode(self, value):
        return value

    def pgc_indexes(self):
        # partial, one per catalog: another catalog's value under this name
        # (another kind) could fail the cast (schema.IndexSpec)
        return [IndexSpec("datebigint", q("({})", self._pgc_expr(None)).ddl)]
