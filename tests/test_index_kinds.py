"""Every index kind provides IIndexKind; the value kinds speak Fragments.

No database: the contract's shape (signatures, return types) and the SQL
of names full of SQL's own characters (they must stay literals).
"""
import types

import pytest
from DateTime import DateTime
from Products.ZCatalog.query import IndexQuery
from zope.interface.verify import verifyClass
from zope.interface.verify import verifyObject

from plone.pgcatalog.fragment import Fragment
from plone.pgcatalog.fragment import literal
from plone.pgcatalog.indexes import KINDS
from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.indexes.base import NO_MATCH
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.indexes.interfaces import IIndexKind


VALUE_KINDS = ("FieldIndex", "KeywordIndex", "BooleanIndex", "UUIDIndex",
               "DateIndex", "DateRangeIndex", "DateRecurringIndex")
HOSTILE = "a%b(c,d) e.idx 'q' \"{}\" %s"


def make(meta_type, name=HOSTILE):
    klass = kind_for(meta_type)
    if meta_type == "DateRangeIndex":
        return klass(name, "effective", "expires")
    if meta_type == "DateRecurringIndex":
        return klass(name, extra=types.SimpleNamespace(
            recurdef="recurrence", until="recurrence_until"))
    return klass(name)


@pytest.mark.parametrize("meta_type", sorted(KINDS))
def test_every_kind_provides_the_interface(meta_type):
    klass = kind_for(meta_type)
    assert issubclass(klass, PGIndex)
    assert IIndexKind.implementedBy(klass)
    assert verifyClass(IIndexKind, klass)


@pytest.mark.parametrize("meta_type", VALUE_KINDS)
def test_value_kinds_compose_fragments(meta_type):
    index = make(meta_type)
    assert verifyObject(IIndexKind, index)
    name = literal(HOSTILE).text
    assert "'a%%b(c,d) e.idx ''q'' \"{}\" %%s'" == name
    key = index.pgc_key_sql()
    assert key == Fragment("(e.idx -> %s)" % name)
    assert index.pgc_key_sql("x") == Fragment("(x.idx -> %s)" % name)
    assert index.pgc_key_sql(None) == Fragment("(idx -> %s)" % name)
    assert index.pgc_text_sql("e") == Fragment(
        '((e.idx ->> %s) COLLATE "C")' % name)
    present = index.pgc_present_sql()
    assert isinstance(present, Fragment) and not present.params
    keys, present = index.pgc_sort(QueryContext())
    assert isinstance(keys, tuple) and keys
    assert all(isinstance(k, Fragment) and not k.params for k in keys)
    assert isinstance(present, Fragment)
    eq = index.pgc_eq_sql([5], "x")
    assert isinstance(eq, Fragment) and "x.idx" in eq.text
    for spec in index.pgc_indexes():
        assert name in spec.body
    value = DateTime(2024, 1, 1) if meta_type.startswith("Date") else "v"
    if meta_type == "BooleanIndex":
        value = True
    where = index.pgc_where(IndexQuery(
        {HOSTILE: value}, HOSTILE, index.query_options,
        getattr(index, "operators", ("or", "and")),
        getattr(index, "useOperator", "or")), QueryContext())
    assert isinstance(where, Fragment) and where.params
    # the name is in the text (a literal), never a parameter
    assert HOSTILE not in where.params
    assert name in where.text


def test_no_match_and_none():
    index = make("FieldIndex")
    iq = IndexQuery({HOSTILE: []}, HOSTILE, index.query_options)
    assert index.pgc_where(iq, QueryContext()) is NO_MATCH
