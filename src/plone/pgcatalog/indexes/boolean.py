"""BooleanIndex: True/False per document; only the first query key counts."""
from Products.PluginIndexes.BooleanIndex.BooleanIndex import BooleanIndex
from zope.interface import implementer

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema.tables import IndexSpec


@implementer(IHotKind, IHotConditionKind)
class PGBooleanIndex(PGIndex, BooleanIndex):
    """BooleanIndex whose values live in ``idx[name]`` as JSON booleans.

    Its B-tree holds the values' text (``'true'`` / ``'false'``), which
    PostgreSQL's B-tree deduplication stores once per page run: about 3
    bytes an entry, where a B-tree of the JSON values (jsonb cannot be
    deduplicated) took 31.  The values are always booleans
    (``pgc_extract``), so the text compares as the value does."""

    pgc_hot_kind = "bool"

    def pgc_extract(self, obj):
        value = common.datum(self, obj)
        return value if value is MISSING else bool(value)

    def pgc_hot_where(self, iq, qc):
        # the first key only, as pgc_where (hot.py: code<RS>true/false)
        if iq is None or not iq.keys or not hot.ready(self, qc.cid):
            return None
        return hot.all_of([hot.bool_key(hot.code(self, qc.cid),
                                        bool(iq.keys[0]))],
                          hot.kept_in(self, qc.cid))

    def pgc_where(self, iq, qc):
        keys = iq.keys
        if not keys:
            return NO_MATCH
        # BooleanIndex.query_index uses the first key only.
        value = bool(keys[0])
        return q("{} = {}", self.pgc_text_sql(),
                 "true" if value else "false")

    def pgc_indexes(self):
        # the value's text: no stored value fails it (shared)
        return [IndexSpec("booltext",
                          q("({})", self.pgc_text_sql(None)).ddl,
                          shared=True)]

    def uniqueValues(self, name=None, withLengths=0):
        """Both values, as BooleanIndex gives them: the value it keeps in
        its forward index (the less frequent one; True on a tie) first."""
        if name is None:
            name = self.getId()
        elif name != self.getId():
            return
        counts = dict(self._pgc_unique_values())
        n_true, n_false = counts.get(True, 0), counts.get(False, 0)
        indexed = n_true <= n_false
        for key in (indexed, not indexed):
            count = n_true if key else n_false
            yield (key, count) if withLengths else key
