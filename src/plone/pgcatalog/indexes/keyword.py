"""KeywordIndex: a set of keywords per document; 'or' / 'and' queries."""
from Products.PluginIndexes.KeywordIndex.KeywordIndex import KeywordIndex
from zope.interface import implementer

from plone.pgcatalog.indexes import common
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.indexes.interfaces import ISetQueryKind
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import not_
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema.tables import IndexSpec

#: an element of a keyword list, and its text (range queries)
_ELEMENT = q("v.value")
_ELEMENT_TEXT = q("((v.value #>> '{{}}') COLLATE \"C\")")


@implementer(IHotKind, IHotConditionKind, ISetQueryKind)
class PGKeywordIndex(PGIndex, KeywordIndex):
    """KeywordIndex whose keyword lists live in ``idx[name]`` (JSON array,
    GIN-indexed; a long list is stored once and ``idx[name]`` holds its
    digest: :mod:`plone.pgcatalog.pg.lists`)."""

    pgc_multi = True
    pgc_hot_kind = "keys"
    pgc_long_lists = True
    pgc_forward_sets = True

    def pgc_extract(self, obj):
        # KeywordIndex._index_object for a new document: the first source
        # with keywords gives them in the order _get_object_keywords makes
        # them (a set's), a later source with other keywords replaces them
        # (an OOSet's order: sorted)
        keywords = None
        for attr in self.getIndexSourceNames():
            found = self._get_object_keywords(obj, attr)
            if not found:
                continue
            if keywords is None:
                keywords = list(found)
            elif set(found) != set(keywords):
                keywords = _sorted(found)
        if not keywords:
            return MISSING
        values = common.stored(keywords)
        if not _self_sorting(values):
            # other lists are kept sorted, as the sort expression reads
            # them in their stored order (these it orders itself)
            values = common.stored(_sorted(keywords))
        return lists.stored_list(values)

    def pgc_where(self, iq, qc):
        expr = self.pgc_key_sql()
        parts = []
        not_parm = iq.get("not", None)
        if not iq.keys and not_parm:
            return common.not_only_sql(self, list(not_parm),
                                       bool(iq.get("range", None)),
                                       _keyword_any_sql)
        if not_parm:
            values = [v for v in not_parm if v is not None]
            if values:
                parts.append(not_(self._pgc_any_sql(values)))
        keys = iq.keys
        bounds = common.range_bounds(iq, list(keys))
        if bounds is not None or keys:
            # a range even without values (UnIndex: every document with a
            # value when the range names neither min nor max)
            if bounds is not None:
                lo, hi = bounds
                conds = []
                if lo is not None:
                    conds.append(common.compare_sql(
                        _ELEMENT, _ELEMENT_TEXT, lo, ">="))
                if hi is not None:
                    conds.append(common.compare_sql(
                        _ELEMENT, _ELEMENT_TEXT, hi, "<="))
                whole = lists.expanded_sql(expr)
                parts.append(q(
                    "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN "
                    "jsonb_typeof({}) = 'array' THEN {} END) AS v(value) "
                    "WHERE {})", whole, whole, and_(*conds)))
            else:
                keys = [k for k in keys if k is not None]
                if not keys:
                    return NO_MATCH
                if iq.operator == "and":
                    wanted = common.jsonb(list(keys))
                    parts.append(or_(
                        q("{} @> {}::jsonb", expr, wanted),
                        lists.holding_sql(expr, q("l.value @> {}::jsonb",
                                                  wanted))))
                else:
                    parts.append(self._pgc_any_sql(keys))
        elif keys is not None and not not_parm:
            return NO_MATCH
        return and_(*parts)

    def pgc_hot_where(self, iq, qc):
        found = hot.query_keys(self, iq, qc, common.stored)
        if not found:
            return None
        kept = hot.kept_in(self, qc.cid)
        return hot.all_of(found, kept) if iq.operator == "and" else \
            hot.any_of(found, kept)

    def _pgc_any_sql(self, values, alias="e"):
        """The entry ``alias`` has one of ``values``: in its list, or in
        the stored list its digest names."""
        expr = self.pgc_key_sql(alias)
        values = [common.stored(v) for v in values]
        if all(isinstance(v, str) for v in values):
            return or_(q("{} ?| {}::text[]", expr, values),
                       lists.holding_sql(expr, q("l.value ?| {}::text[]",
                                                 values)))
        return or_(*[q("{} @> {}::jsonb", expr, common.dumps([v]))
                     for v in values], lists.holding_sql(expr, or_(*[
                         q("l.value @> {}::jsonb", common.dumps([v]))
                         for v in values])))

    def pgc_eq_sql(self, values, alias="e"):
        """The entry has one of ``values`` among its keywords."""
        return self._pgc_any_sql(values, alias)

    def pgc_sort(self, qc):
        # ZCatalog sorts by the keyword lists of documentToKeyMap, compared
        # as Python lists (element-wise, code point order, a prefix first);
        # jsonb would compare arrays by length first.  The key is the list
        # of the keywords' texts in sorted order: lists of strings, or of
        # numbers, are sorted here (they are stored in ZCatalog's order);
        # other lists are stored sorted (see pgc_extract) and read in
        # their stored order.
        expr = lists.expanded_sql(self.pgc_key_sql())
        return (q(
            "(ARRAY(SELECT t.v #>> '{{}}' FROM jsonb_array_elements(CASE WHEN "
            "jsonb_typeof({}) = 'array' THEN {} END) WITH ORDINALITY AS "
            "t(v, n), (SELECT NOT ({} @? '$[*] ? (@.type() != \"string\")')"
            " AS strings, NOT ({} @? '$[*] ? (@.type() != \"number\")') AS "
            "numbers) AS s ORDER BY CASE WHEN s.strings THEN t.v #>> '{{}}' "
            "END COLLATE \"C\", CASE WHEN s.numbers THEN (t.v)::numeric END,"
            " t.n) COLLATE \"C\")", expr, expr, expr, expr),), \
            self.pgc_present_sql()

    def pgc_indexes(self):
        return [IndexSpec("keyword", q("USING gin ({})",
                                       self.pgc_key_sql(None)).ddl,
                          shared=True)]


def _sorted(keywords):
    try:
        return sorted(keywords)
    except TypeError:
        return list(keywords)


def _self_sorting(values):
    """The SQL sort key orders these stored values as Python sorts them:
    all strings (code point order: ``COLLATE "C"``), or all numbers."""
    if all(type(v) is str for v in values):
        return True
    return all(type(v) in (int, float) for v in values)


def _keyword_any_sql(index, alias, values):
    return index._pgc_any_sql(values, alias)
