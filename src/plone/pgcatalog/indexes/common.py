"""SQL building blocks shared by the index kinds (Field, UUID, ...).

Everything here composes :class:`~plone.pgcatalog.pg.fragment.Fragment`
values.  This module imports nothing of the index machinery (base.py and
access.py import it), so the sentinels and :func:`find_tool` live here and
base.py hands them on.
"""
import functools

import orjson
from Acquisition import aq_base
from Acquisition import aq_chain
from Products.PluginIndexes.unindex import _marker

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import not_
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema


class _Sentinel:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __bool__(self):
        return False


#: ``pgc_extract`` result: the object is not indexed in this index.
MISSING = _Sentinel("MISSING")
#: ``pgc_where`` result: the query matches nothing.
NO_MATCH = _Sentinel("NO_MATCH")


def find_tool(index):
    """The catalog tool an index belongs to (through acquisition, else the
    tool that last handed the index out)."""
    for ob in aq_chain(index):
        if getattr(aq_base(ob), "_pgc_is_tool", False):
            return ob
    tool = getattr(aq_base(index), "_v_pgc_tool", None)
    if tool is not None:
        return tool
    raise CatalogError(
        "index %r is not attached to a plone.pgcatalog catalog; get it "
        "through catalog._catalog.getIndex(name) or catalog.Indexes[name]"
        % index.getId())


#: the JSONB column of an entry: bare (index definitions) or through the
#: aliases the kinds use (``e`` the entry, ``x`` another entry)
_COLUMNS = {None: q("idx"), "e": q("e.idx"), "x": q("x.idx")}


def column(alias):
    """The ``idx`` column of the entry ``alias`` (None: bare)."""
    found = _COLUMNS.get(alias)
    return found if found is not None else ident(alias, "idx")


@functools.lru_cache(maxsize=2048)
def key_sql(name, alias="e"):
    """``(<alias>.idx -> 'name')``: the name as a literal, whatever it
    holds."""
    return q("({} -> {})", column(alias), literal(name))


@functools.lru_cache(maxsize=2048)
def text_sql(name, alias="e"):
    """``((<alias>.idx ->> 'name') COLLATE "C")``."""
    return q('(({} ->> {}) COLLATE "C")', column(alias), literal(name))


#: comparison operators by their spelling (constants only)
OPS = {op: q(op) for op in ("=", "<", "<=", ">", ">=")}


def stored(value):
    """A Python index value in its stored form: JSON scalars as they are,
    lists/tuples as JSON arrays of stored values, anything else (DateTime
    in a FieldIndex, ...) through the typed codec."""
    kind = type(value)
    if kind is bool:
        return value
    if isinstance(value, str):
        # str subclasses (zope.i18nmessageid Message: the ``Type`` index)
        # compare as plain strings in ZCatalog's BTrees: store them as
        # JSON strings, or ``Type="Page"`` would find nothing.  Strings
        # PostgreSQL cannot hold (NUL, lone surrogates) go through the
        # codec's tag, the same way when stored and when queried: they
        # match exactly (but sort among the non-strings).
        if kind is not str:
            value = str(value)
        return _codec_encode(value) if needs_tag(value) else value
    if kind is int:
        return value if -2**63 <= value < 2**63 else _codec_encode(value)
    if kind is float:
        return value if value == value and value not in (
            float("inf"), float("-inf")) else _codec_encode(value)
    if kind in (list, tuple):
        return [stored(v) for v in value]
    return _codec_encode(value)


def needs_tag(text):
    """``text`` holds what PostgreSQL text cannot (NUL, lone surrogates)."""
    return codec._str_needs_tag(text)


def text_bound(value, op):
    """``(op, value)`` for comparing stored strings (never NUL nor lone
    surrogates: those are stored tagged) with a bound that may hold such
    characters, giving the same answer as comparing with ``value``: a
    string is ``>= "a\x00b"`` when it is ``>= "a\x01"`` and ``<= "a\x00b"``
    when ``<= "a"``; lone surrogates sit between U+D7FF and U+E000."""
    if not needs_tag(value):
        return op, value
    for i, ch in enumerate(value):
        if ch == "\x00":
            return (">=", value[:i] + "\x01") if op == ">=" else \
                ("<=", value[:i])
        if "\ud800" <= ch <= "\udfff":
            return (">=" if op == ">=" else "<"), value[:i] + "\ue000"
    return op, value  # pragma: no cover - needs_tag said otherwise


def _codec_encode(value):
    return codec.encode(value)


def jsonb(value):
    """A Python index value as JSON text, as stored in ``idx``."""
    return dumps(stored(value))


def dumps(stored_value):
    """A value already in its stored form as JSON text."""
    return orjson.dumps(stored_value).decode("utf-8")


def datum(index, obj):
    """The value a UnIndex-style index takes from ``obj`` (last indexed
    attribute with a value wins, as UnIndex's forward index ends up), run
    through the index's own ``_convert``; MISSING when not indexed."""
    value = MISSING
    for attr in index.getIndexSourceNames():
        found = index._get_object_datum(obj, attr)
        if found is None or found is _marker:
            value = MISSING
            continue
        found = index._convert(found, default=_marker)
        value = MISSING if found is _marker else found
    return value if value is MISSING else stored(value)


def range_bounds(iq, keys):
    """``(lo, hi)`` for a UnIndex range query, or None when not a range.

    Mirrors UnIndex.query_index: the option is matched by substring and a
    falsy upper bound means no upper bound."""
    range_parm = iq.get("range", None)
    if not range_parm:
        return None
    lo = min(keys) if range_parm.find("min") > -1 else None
    hi = max(keys) if range_parm.find("max") > -1 else None
    if not hi:
        hi = None
    return lo, hi


def compare_sql(expr, text_expr, value, op, kind_expr=None):
    """``expr op value`` (Fragments ``expr``, ``text_expr``; ``op`` one of
    :data:`OPS`) with ZCatalog's (Python's) ordering: strings by code
    point, numbers numerically; other types never compare.  ``kind_expr``
    (``sort_kind_sql``), when given, says "is a string" the way the sort
    index does, so string ranges use that index."""
    if isinstance(value, str):
        op, value = text_bound(str(value), op)
        if kind_expr is not None:
            # the prefix comparison (implied by the exact one: truncating
            # keeps code point order) lets the sort index serve the range
            return q("({} IS NULL AND {} {} {} AND {} {} {})",
                     kind_expr, prefix_of(text_expr),
                     OPS["<=" if op == "<" else op], value[:PREFIX],
                     text_expr, OPS[op], value)
        return q("(jsonb_typeof({}) = 'string' AND {} {} {})",
                 expr, text_expr, OPS[op], value)
    if isinstance(value, bool):
        return q("(jsonb_typeof({}) = 'boolean' AND {} {} {}::jsonb)",
                 expr, expr, OPS[op], jsonb(value))
    if isinstance(value, (int, float)):
        # CASE, not AND: PostgreSQL may evaluate the cast before the type
        # test, and casting a JSON string to numeric is an error
        return q("(CASE WHEN jsonb_typeof({}) = 'number' THEN ({})::numeric "
                 "END {} {})", expr, expr, OPS[op], value)
    return q("({} {} {}::jsonb)", expr, OPS[op], jsonb(value))


def value_where(index, iq, convert=None):
    """The UnIndex query semantics (query, range, not) for an index that
    stores one value per document under ``idx[name]``: a Fragment, or
    NO_MATCH."""
    expr = index.pgc_key_sql()
    convert = convert or (lambda v: index._convert(v))
    not_parm = iq.get("not", None)
    keys = iq.keys
    if not keys and not_parm:
        return not_only_sql(index, [convert(v) for v in not_parm],
                            bool(iq.get("range", None)), eq_any_sql)
    parts = []
    if not_parm:
        not_values = [jsonb(convert(v)) for v in not_parm if v is not None]
        if not_values:
            parts.append(not_(q("{} = ANY({}::jsonb[])", expr, not_values)))
    if iq.get("range", None):
        # a range, even without values: ``{"range": "mni"}`` (neither min
        # nor max) means every document with a value, as in UnIndex;
        # "min"/"max" over no values raise its ValueError
        lo, hi = range_bounds(iq, [convert(k) for k in keys])
        if lo is not None:
            parts.append(compare_sql(expr, index.pgc_text_sql(), lo,
                                     ">=", sort_kind_sql(index)))
        if hi is not None:
            parts.append(compare_sql(expr, index.pgc_text_sql(), hi,
                                     "<=", sort_kind_sql(index)))
        if lo is None and hi is None:
            parts.append(index.pgc_present_sql())
    else:
        keys = [convert(k) for k in keys if k is not None]
        if not keys:
            return NO_MATCH
        parts.append(index.pgc_eq_sql(keys))
    return and_(*parts)


def eq_any_sql(index, alias, values):
    """The entry ``alias`` has one of ``values`` in the index."""
    return index.pgc_eq_sql(values, alias)


def value_eq_sql(index, values, alias="e"):
    """The entry ``alias`` has one of ``values`` (Python values) under a
    value index, through its sort index (:func:`sort_index_spec`): a
    string by its kind (NULL) and prefix, the whole string compared only
    when it is longer than the prefix (shorter ones are equal to their
    prefix exactly); any other value by its kind (the value itself)."""
    kind = sort_kind_sql(index, alias)
    text = index.pgc_text_sql(alias)
    prefix = prefix_of(text)
    short, long_, other = [], [], []
    for value in values:
        value = stored(value)
        if isinstance(value, str):
            (short if len(value) < PREFIX else long_).append(value)
        else:
            other.append(dumps(value))
    parts = []
    if short:
        if len(short) == 1:
            parts.append(q("({} IS NULL AND {} = {})", kind, prefix,
                           short[0]))
        else:
            parts.append(q("({} IS NULL AND {} = ANY({}::text[]))", kind,
                           prefix, short))
    for value in long_:
        parts.append(q("({} IS NULL AND {} = {} AND {} = {})", kind, prefix,
                       value[:PREFIX], text, value))
    if other:
        # the sort key (what the B-tree holds) found, the value compared
        # (a key longer than the B-tree holds is cut)
        expr = index.pgc_key_sql(alias)
        if len(other) == 1:
            parts.append(q("({} = {} AND {} = {}::jsonb)", kind,
                           value_key_sql(q("{}::jsonb", other[0])), expr,
                           other[0]))
        else:
            parts.append(q("({} = ANY(ARRAY(SELECT {} FROM unnest({}::jsonb[]) "
                           "AS v(v))) AND {} = ANY({}::jsonb[]))", kind,
                           value_key_sql(q("v.v")), other, expr, other))
    return or_(*parts)


def value_key_sql(value):
    """The sort key of ``value`` (a Fragment, ``jsonb``, not a string): what
    :func:`sort_kind_sql` gives an entry holding it."""
    return q("(left(pgcatalog_json_key({}), {}) COLLATE \"C\")", value,
             literal(schema.KEY_CHARS))


def not_only_sql(index, not_values, has_range, any_sql):
    """``{"not": ...}`` without query values, as ``UnIndex.query_index``.

    ZCatalog starts from every catalogued document and subtracts the
    documents having an excluded value - unless no document at all has
    one: then it takes the union of all the index's values instead, i.e.
    only the documents *with* a value (an index without values gives
    nothing).  With a range option it always takes that second path.
    ``any_sql(index, alias, values)`` is the kind's "entry ``alias`` has
    one of ``values``" condition (None values are never keys)."""
    present = index.pgc_present_sql()
    values = [v for v in not_values if v is not None]
    if not values:
        return present
    excluded = any_sql(index, "e", values)
    if has_range:
        return and_(present, not_(excluded))
    return and_(not_(excluded), or_(present, exists_other(
        any_sql(index, "x", values))))


def exists_other(condition):
    """Some entry ``x`` of the catalog of the entry ``e`` meets
    ``condition`` (a Fragment over ``x``)."""
    return q("EXISTS (SELECT 1 FROM {} x WHERE x.cid = e.cid AND {})",
             schema.ENTRIES_TABLE, condition)


#: characters of a string value a B-tree holds (at most 1,600 bytes of
#: UTF-8, below PostgreSQL's 2,704-byte limit on an index row): longer
#: values are compared on their whole text after the prefix
PREFIX = 400


@functools.lru_cache(maxsize=2048)
def prefix_of(text_expr):
    """The first PREFIX characters of ``text_expr`` (the length written
    out: an index definition takes no parameters)."""
    return q("left({}, {})", text_expr, literal(PREFIX))


def sort_kind_sql(index, alias="e"):
    """NULL for a string value, else the value's sort key
    (``schema.value_kind_sql``: text in the value's order, JSON's order
    of the types, Python's within a type): the first sort key, so
    non-strings come first in their order and strings follow by code point
    (Python's order for the values ZCatalog can sort together)."""
    return _kind_of(index.pgc_key_sql(alias))


@functools.lru_cache(maxsize=2048)
def _kind_of(expr):
    return Fragment(schema.value_kind_sql(expr.text), expr.params)


def sort_sql(index):
    """The sort keys (a tuple of Fragments) ordering by the stored value
    with Python's ordering: numbers/booleans by their JSON order, strings
    by code point (their prefix, then the whole text: the same order).
    The value indexes' B-tree (:func:`sort_index_spec`) gives this order up
    to the prefix (a page of a title-sorted listing is read from the
    index), and serves equality and string ranges."""
    text = index.pgc_text_sql()
    return (sort_kind_sql(index), prefix_of(text), text)


def sort_index_spec(index):
    """The B-tree of :func:`sort_sql` (kind, prefix): bounded for any
    string, however long (a 3,000-byte title commits).  Shared by the
    catalogs (no stored value can fail it: schema.IndexSpec)."""
    return schema.IndexSpec("valuesort", q(
        "(({}), ({}))", sort_kind_sql(index, None),
        prefix_of(index.pgc_text_sql(None))).ddl, shared=True)
