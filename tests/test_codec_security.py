"""Pickles read from the catalog database are untrusted: only allowlisted
classes are loaded, nothing else is imported or called (docs/security.md)."""
import base64
import builtins
import datetime
import logging
import os
import pickle
import tempfile
import unittest
import zoneinfo

import orjson
import pytest
import pytz
import transaction
from DateTime import DateTime
from Missing import MV
from persistent.mapping import PersistentMapping
from zope.i18nmessageid import Message

from plone.pgcatalog.codec import allow_class
from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.codec import unpickle
from plone.pgcatalog.pg.fragment import q


def tagged(data):
    """A meta value as the codec stores a pickle."""
    return {"@pgc:p": base64.b64encode(data).decode("ascii")}


class Reduce:
    """Pickles as ``func(*args)``: what a crafted pickle can ask for."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


class Gadget:
    """An add-on's value class, not allowlisted until a test allows it."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return type(other) is Gadget and other.name == self.name


@pytest.fixture(autouse=True)
def restore_allowlist():
    saved = set(unpickle.ALLOWED)
    unpickle._reported.clear()
    yield
    unpickle.ALLOWED.clear()
    unpickle.ALLOWED.update(saved)


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "executed"
    yield path
    assert not path.exists(), "a pickle from the database ran code"


def attacks(marker):
    """Pickles whose loading would create ``marker``."""
    cmd = "touch %s" % marker
    code = "open(%r, 'w').close()" % str(marker)
    yield pickle.dumps(Reduce(os.system, cmd))
    yield pickle.dumps(Reduce(builtins.eval, code))
    yield pickle.dumps(Reduce(builtins.exec, code))
    yield pickle.dumps(Reduce(os.system, cmd), protocol=0)
    # protocol 0 by hand, with a Python 2 module name (fix_imports)
    yield b"c__builtin__\neval\n(V%s\ntR." % code.encode()
    yield b"cos\nsystem\n(V%s\ntR." % cmd.encode()
    yield b"cposix\nsystem\n(V%s\ntR." % cmd.encode()
    # inside an allowlisted container
    yield pickle.dumps((1, [Reduce(os.system, cmd)]))
    # getattr is allowed for ZoneInfo._unpickle only: not as a way to
    # reach a module's globals from an allowed class
    yield pickle.dumps(Reduce(getattr, DateTime, "__init__"))
    yield pickle.dumps(Reduce(getattr, zoneinfo.ZoneInfo, "__init__"))


def test_malicious_pickles_are_not_executed(marker, caplog):
    for data in attacks(marker):
        with caplog.at_level(logging.ERROR, "plone.pgcatalog.codec"):
            assert codec.decode(tagged(data)) is MV
        assert not marker.exists(), data
        with pytest.raises(unpickle.UnpicklingRefused):
            unpickle.loads(data)
        assert not marker.exists(), data
    assert "refused to unpickle" in caplog.text
    assert "posix.system" in caplog.text or "os.system" in caplog.text
    assert "builtins.eval" in caplog.text


def test_malicious_pickle_in_meta_row(marker, caplog):
    """A meta row as read from pgcatalog_meta: the crafted column reads
    as Missing.Value, the other columns as stored."""
    evil = pickle.dumps(Reduce(os.system, "touch %s" % marker))
    row = orjson.loads(orjson.dumps({
        "Title": "ok", "Subject": ["a"], "getIcon": tagged(evil),
        "nested": [1, tagged(evil)]}))
    with caplog.at_level(logging.ERROR, "plone.pgcatalog.codec"):
        meta = codec.decode_meta(row)
    assert meta == {"Title": "ok", "Subject": ("a",), "getIcon": MV,
                    "nested": (1, MV)}
    assert len([r for r in caplog.records
                if r.levelno == logging.ERROR]) == 1  # once per class


def test_persistent_references_refused():
    data = b"\x80\x02P1\n."  # PERSID: a ZODB reference
    assert codec.decode(tagged(data)) is MV


def test_old_pickled_rows_still_decode():
    """Rows the previous codec wrote with pickles of Plone types."""
    vienna = pytz.timezone("Europe/Vienna")
    for value in [
            Message("Page", "plone", "Page", {"a": 1}),
            PersistentMapping({"image": [{"scales": {}}]}),
            vienna.localize(datetime.datetime(2021, 7, 1, 12)),
            datetime.datetime(2021, 7, 1, tzinfo=pytz.utc),
            datetime.datetime(2021, 7, 1,
                              tzinfo=zoneinfo.ZoneInfo("Europe/Vienna")),
            datetime.datetime(2021, 7, 1, tzinfo=datetime.timezone(
                datetime.timedelta(hours=2), "X")),
            DateTime("2021/07/01 12:00 GMT+2"), MV, {1, 2}, b"x",
    ]:
        back = codec.decode(tagged(pickle.dumps(
            value, protocol=pickle.HIGHEST_PROTOCOL)))
        assert type(back) is type(value)
        assert back == value or back is value
        if isinstance(value, datetime.datetime):
            assert back.tzinfo is value.tzinfo or (
                repr(back.tzinfo) == repr(value.tzinfo))
        if isinstance(value, Message):
            assert back.__reduce__() == value.__reduce__()


def test_allow_class_api(caplog):
    value = (Gadget("g"), "x")
    with caplog.at_level(logging.WARNING, "plone.pgcatalog.codec"):
        data = codec.dumps(value)  # stored, with a warning
    assert "Gadget" in caplog.text
    assert codec.loads(data) == (MV, "x")
    assert allow_class(__name__, "Gadget") == (__name__, "Gadget")
    assert codec.loads(data) == value
    assert codec.loads(codec.dumps(Gadget("h"))) == Gadget("h")


def test_allow_class_by_class_object():
    allow_class(Gadget)
    assert codec.loads(codec.dumps(Gadget("i"))) == Gadget("i")
    with pytest.raises(TypeError):
        allow_class(1, 2)


def test_allow_class_by_configuration(monkeypatch):
    data = codec.dumps(Gadget("c"))
    assert codec.loads(data) is MV
    monkeypatch.setenv(unpickle.ENV_ALLOW, "a.b:C, %s:Gadget" % __name__)
    assert codec.loads(data) == Gadget("c")
    monkeypatch.setenv(unpickle.ENV_ALLOW, "%s.Gadget" % __name__)
    assert codec.loads(data) == Gadget("c")
    monkeypatch.delenv(unpickle.ENV_ALLOW)
    assert codec.loads(data) is MV


def test_allowlisted_module_does_not_allow_other_names(marker):
    # a name the allowlist does not hold, in an allowed module, or a
    # dotted path from an allowed class, is refused
    for module, name in [("datetime", "sys"), ("builtins", "eval"),
                         ("DateTime.DateTime", "DateTime.__init__"),
                         ("BTrees.OOBTree", "OOBTree.__init__"),
                         ("BTrees.xxBTree", "xxBTree"),
                         ("BTrees.OOBTree", "OOBTreePy")]:
        assert not unpickle.is_allowed(module, name), (module, name)
    data = (b"\x80\x04\x8c\x11DateTime.DateTime\x8c\x11DateTime.__init__"
            b"\x93.")
    assert codec.decode(tagged(data)) is MV


# -- in a Plone site ---------------------------------------------------------

class TestPloneSite(unittest.TestCase):
    from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING as layer

    def setUp(self):
        from plone.app.testing import TEST_USER_ID
        from plone.app.testing import setRoles
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.portal.invokeFactory("Document", "sec", title="Sec")
        self.brain = self.catalog(getId="sec")[0]

    def tearDown(self):
        transaction.abort()

    def meta_sql(self):
        return self.catalog._pgc_store().value(q(
            "SELECT m.meta::text FROM pgcatalog_meta m JOIN pgcatalog_entries"
            " e ON e.rid = m.rid WHERE e.rid = {}", self.brain.getRID()))

    def test_type_column_is_json(self):
        self.assertNotIn('"@pgc:p"', self.meta_sql())
        self.assertIsInstance(self.brain.Type, Message)
        self.assertEqual(self.brain.Type.domain, "plone")

    def test_crafted_row_not_executed(self):
        marker = os.path.join(tempfile.mkdtemp(), "executed")
        evil = tagged(pickle.dumps(Reduce(os.system, "touch " + marker)))
        # the Title of the record's array (its layout's digest first)
        position = str(list(self.catalog._catalog.names).index("Title") + 1)
        self.catalog._pgc_store().write(q(
            "UPDATE pgcatalog_meta SET meta = jsonb_set(meta::jsonb, {}, "
            "{}::jsonb)::json WHERE rid = {}", [position],
            orjson.dumps(evil).decode(), self.brain.getRID()))
        brain = self.catalog(getId="sec")[0]
        self.assertIs(brain.Title, MV)
        self.assertIs(self.catalog.getMetadataForRID(
            brain.getRID())["Title"], MV)
        self.assertEqual(brain.getId, "sec")
        self.assertFalse(os.path.exists(marker))
