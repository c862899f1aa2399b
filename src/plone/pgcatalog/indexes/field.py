"""FieldIndex: one hashable value per document."""
from Products.PluginIndexes.FieldIndex.FieldIndex import FieldIndex

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.schema import index_name


class ValueIndex(PGIndex):
    """One value per document under ``idx[name]``, UnIndex query semantics
    (query, range, not), Python ordering for sorting."""

    pgc_walkable_sort = True

    def pgc_extract(self, obj):
        return common.datum(self, obj)

    def pgc_where(self, iq, qc):
        return common.value_where(self, iq, qc)

    def pgc_sort(self, qc):
        return common.sort_sql(self), self.pgc_present_sql()


class PGFieldIndex(ValueIndex, FieldIndex):
    """FieldIndex whose values live in ``idx[name]``."""

    def pgc_ddl(self, table):
        name = self.getId()
        return [
            "CREATE INDEX IF NOT EXISTS %s ON %s (cid, (idx -> %s))" % (
                self.pgc_compose(index_name("field", name)), table,
                self._pgc_key_literal),
            common.sort_index_ddl(self, table),
        ]
