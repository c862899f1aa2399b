"""BooleanIndex: True/False per document; only the first query key counts."""
from Products.PluginIndexes.BooleanIndex.BooleanIndex import BooleanIndex

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import NO_MATCH
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.schema import index_name


class PGBooleanIndex(PGIndex, BooleanIndex):
    """BooleanIndex whose values live in ``idx[name]`` as JSON booleans."""

    def pgc_extract(self, obj):
        value = common.datum(self, obj)
        return value if value is common.MISSING else bool(value)

    def pgc_where(self, iq, qc):
        keys = iq.keys
        if not keys:
            return NO_MATCH
        # BooleanIndex.query_index uses the first key only.
        value = bool(keys[0])
        return "%s = %s::jsonb" % (self.pgc_key_sql(),
                                   qc.param(common.jsonb(value)))

    def pgc_ddl(self, table):
        return [
            "CREATE INDEX IF NOT EXISTS %s ON %s (cid, (idx -> %s))" % (
                self.pgc_compose(index_name("bool", self.getId())), table,
                self._pgc_key_literal),
        ]
