"""UUIDIndex: one unique value per document."""
from Products.PluginIndexes.UUIDIndex.UUIDIndex import UUIDIndex

from plone.pgcatalog.indexes.field import ValueIndex


class PGUUIDIndex(ValueIndex, UUIDIndex):
    """UUIDIndex whose values live in ``idx[name]``.

    ``_index.get(uuid)`` answers with a single rid, as plone.app.uuid expects.
    """

    pgc_unique = True

