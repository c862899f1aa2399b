"""UUIDIndex: one unique value per document."""
from Products.PluginIndexes.UUIDIndex.UUIDIndex import UUIDIndex

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.schema import index_name


class PGUUIDIndex(PGIndex, UUIDIndex):
    """UUIDIndex whose values live in ``idx[name]``.

    ``_index.get(uuid)`` answers with a single rid, as plone.app.uuid expects.
    """

    pgc_unique = True

    def pgc_extract(self, obj):
        return common.datum(self, obj)

    def pgc_where(self, iq, qc):
        return common.value_where(self, iq, qc)

    def pgc_sort(self, qc):
        return common.sort_sql(self), self.pgc_present_sql()

    def pgc_ddl(self, table):
        return [
            "CREATE INDEX IF NOT EXISTS %s ON %s (cid, (idx -> %s))" % (
                self.pgc_compose(index_name("uuid", self.getId())), table,
                self._pgc_key_literal),
        ]
