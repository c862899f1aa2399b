"""FieldIndex: one hashable value per document."""
from Products.PluginIndexes.FieldIndex.FieldIndex import FieldIndex
from zope.interface import implementer

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.indexes.interfaces import ISetQueryKind
from plone.pgcatalog.pg import hot


@implementer(IHotKind, IHotConditionKind, ISetQueryKind)
class ValueIndex(PGIndex):
    """One value per document under ``idx[name]``, UnIndex query semantics
    (query, range, not), Python ordering for sorting; its string values
    are hot keys when it is named hot."""

    pgc_walkable_sort = True
    pgc_hot_kind = "keys"

    def pgc_extract(self, obj):
        return common.datum(self, obj)

    def pgc_where(self, iq, qc):
        return common.value_where(self, iq)

    def pgc_sort(self, qc):
        return common.sort_sql(self), self.pgc_present_sql()

    def pgc_hot_where(self, iq, qc):
        # the values converted and stored as value_where compares them
        found = hot.query_keys(self, iq, qc,
                               lambda v: common.stored(self._convert(v)))
        return hot.any_of(found, hot.kept_in(self, qc.cid)) if found \
            else None

    def pgc_eq_sql(self, values, alias="e"):
        return common.value_eq_sql(self, values, alias)

    def pgc_indexes(self):
        # one B-tree (kind, prefix) for equality, ranges and sorting
        return [common.sort_index_spec(self)]


class PGFieldIndex(ValueIndex, FieldIndex):
    """FieldIndex whose values live in ``idx[name]``."""
