"""UUIDIndex: one unique value per document."""
from Products.PluginIndexes.UUIDIndex.UUIDIndex import UUIDIndex

from plone.pgcatalog.indexes.field import ValueIndex
from plone.pgcatalog.schema import index_name


class PGUUIDIndex(ValueIndex, UUIDIndex):
    """UUIDIndex whose values live in ``idx[name]``.

    ``_index.get(uuid)`` answers with a single rid, as plone.app.uuid expects.
    """

    pgc_unique = True

    def pgc_ddl(self, table):
        return [
            "CREATE INDEX IF NOT EXISTS %s ON %s (cid, (idx -> %s))" % (
                self.pgc_compose(index_name("uuid", self.getId())), table,
                self._pgc_key_literal),
        ]
