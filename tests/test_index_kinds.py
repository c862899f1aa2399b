"""Every index kind provides IIndexKind and keeps the capabilities it
declares; the value kinds speak Fragments.

No database: the contract's shape (signatures, return types), the check
at registration, and the SQL of names full of SQL's own characters (they
must stay literals).
"""
import ast
import pathlib
import sys
import types

import pytest
from DateTime import DateTime
from Products.ZCatalog.query import IndexQuery
from zope.interface import implementer
from zope.interface.interface import Method
from zope.interface.verify import verifyClass
from zope.interface.verify import verifyObject

import plone.pgcatalog
from plone.pgcatalog.errors import IndexKindContractError
from plone.pgcatalog.indexes import KINDS
from plone.pgcatalog.indexes import check_kind
from plone.pgcatalog.indexes import convert_index
from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.indexes.field import PGFieldIndex
from plone.pgcatalog.indexes.interfaces import CAPABILITIES
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.indexes.interfaces import IIndexKind
from plone.pgcatalog.indexes.interfaces import IPythonSortKind
from plone.pgcatalog.indexes.interfaces import IQueryValueKind
from plone.pgcatalog.indexes.interfaces import IRankingKind
from plone.pgcatalog.indexes.interfaces import IReindexedKind
from plone.pgcatalog.indexes.interfaces import ISetQueryKind
from plone.pgcatalog.indexes.interfaces import ISubtreeKind
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import literal

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


#: the capabilities each kind declares (a kind losing one would silently
#: lose hot keys, subtrees, ranking...)
DECLARED = {
    "FieldIndex": {IHotKind, IHotConditionKind, ISetQueryKind},
    "UUIDIndex": {IHotKind, IHotConditionKind, ISetQueryKind},
    "KeywordIndex": {IHotKind, IHotConditionKind, ISetQueryKind},
    "BooleanIndex": {IHotKind, IHotConditionKind},
    "DateIndex": {IHotKind, IQueryValueKind},
    "DateRangeIndex": {IHotKind, IHotConditionKind, IQueryValueKind},
    "DateRecurringIndex": {IQueryValueKind},
    "ExtendedPathIndex": {IHotConditionKind, ISubtreeKind},
    "GopipIndex": {IPythonSortKind},
    "ZCTextIndex": {ITextKind, IRankingKind, IReindexedKind},
}


def test_every_kind_is_listed():
    assert set(DECLARED) == set(KINDS)


@pytest.mark.parametrize("meta_type", sorted(KINDS))
def test_every_kind_keeps_the_contracts_it_declares(meta_type):
    klass = kind_for(meta_type)
    declared = {c for c in CAPABILITIES if c.implementedBy(klass)}
    assert declared == DECLARED[meta_type]
    for iface in {IIndexKind} | declared:
        assert verifyClass(iface, klass)
        for name, desc in iface.namesAndDescriptions(all=True):
            if not isinstance(desc, Method):
                # read without a fallback: a class default
                assert hasattr(klass, name), (iface, name)
    # no capability's member left undeclared
    for capability in set(CAPABILITIES) - declared:
        assert not [n for n in capability.names() if hasattr(klass, n)]


@pytest.mark.parametrize("meta_type", sorted(KINDS))
def test_hot_kinds_say_what_the_row_keeps(meta_type):
    klass = kind_for(meta_type)
    if IHotKind.implementedBy(klass):
        assert klass.pgc_hot_kind in ("keys", "bool", "range", "sort")


@implementer(ISubtreeKind)
class NoSubtrees(PGFieldIndex):
    """Declares ISubtreeKind without its method."""


@implementer(IRankingKind)
class ShortRanking(PGFieldIndex):
    """Declares IRankingKind with a method taking too few arguments."""

    pgc_rank_mode = "okapi"
    pgc_df_limit = None

    def pgc_rank_sql(self, node):
        return None

    def pgc_rank_columns(self, node, qc=None, row="e"):
        return None

    def pgc_postings_sql(self, node, qc, cid):
        return None

    def pgc_df_sql(self, cid, tsquery, exact=False):
        return None

    def pgc_doclen_sql(self, alias="t"):
        return None


class UndeclaredSubtrees(PGFieldIndex):
    """Has ISubtreeKind's method without declaring it."""

    def pgc_subtrees(self, iq, qc, column=None):
        return None


class NotAKind:
    """Not a PGIndex at all."""


@pytest.mark.parametrize("klass, words", [
    (NoSubtrees, ("ISubtreeKind", "pgc_subtrees")),
    (ShortRanking, ("IRankingKind", "pgc_rank_sql")),
    (UndeclaredSubtrees, ("pgc_subtrees", "without declaring ISubtreeKind")),
    (NotAKind, ("IIndexKind",)),
])
def test_a_kind_breaking_its_contract_is_refused(klass, words):
    with pytest.raises(IndexKindContractError) as raised:
        check_kind(klass)
    message = str(raised.value)
    assert klass.__name__ in message
    for word in words:
        assert word in message


def test_an_attribute_needs_a_class_default():
    # ValueIndex's default is inherited: taken away on a class of its own
    @implementer(IHotKind)
    class Bare(PGIndex):
        def pgc_extract(self, obj):
            return None

        def pgc_where(self, iq, qc):
            return None

    with pytest.raises(IndexKindContractError) as raised:
        check_kind(Bare)
    assert "pgc_hot_kind" in str(raised.value)


def test_registration_refuses_a_broken_kind(monkeypatch):
    module = types.ModuleType("plone.pgcatalog.indexes._broken_kind")
    module.NoSubtrees = NoSubtrees
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(KINDS, "BrokenIndex", "_broken_kind:NoSubtrees")
    with pytest.raises(IndexKindContractError, match="pgc_subtrees"):
        kind_for("BrokenIndex")
    with pytest.raises(IndexKindContractError, match="pgc_subtrees"):
        convert_index(make("FieldIndex", "f"), target=NoSubtrees)


SRC = pathlib.Path(plone.pgcatalog.__file__).parent
INDEXES = SRC / "indexes"


def _probes(path):
    """``getattr``/``hasattr`` calls naming an index kind's member
    (``pgc_*``, hot.py's ``_pgc_hot_*`` record) and meta_type tests
    against an index type, in one module: ``(line, text)``."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "hasattr") and \
                len(node.args) >= 2 and \
                isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str) and \
                node.args[1].value.startswith(("pgc_", "_pgc_hot")):
            found.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.Compare) and \
                isinstance(node.left, ast.Attribute) and \
                node.left.attr == "meta_type" and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and c.value.endswith("Index")
                    for c in node.comparators):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_probe_finder_finds_probes(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        'a = getattr(index, "pgc_subtrees", None)\n'
        'b = hasattr(\n    index, "pgc_storage")\n'
        'c = getattr(index, "_pgc_hot_codes", None) or ()\n'
        'd = index.meta_type == "DateRangeIndex"\n'
        'e = getattr(tool, "_pgc_shadow", None)\n')
    # (not the tool's own state: ``_pgc_shadow``)
    assert [line for line, _ in _probes(module)] == [1, 2, 4, 5]


def test_the_engine_asks_capabilities_not_members():
    """Outside indexes/, no getattr/hasattr of a kind's ``pgc_*`` member
    and no meta_type test: the engine asks ``ICapability.providedBy`` or
    reads a declared default (IIndexKind, PGIndex)."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        if INDEXES in path.parents:
            continue
        probes = _probes(path)
        if probes:
            found[str(path.relative_to(SRC))] = probes
    assert found == {}
