"""Catalog brains: ZCatalog's own brain base class, fed from PostgreSQL.

A brain class is made per metadata schema (as ZCatalog's ``useBrains`` does):
a Record with one field per column plus ``data_record_id_``,
``data_record_score_`` and ``data_record_normalized_score_``, so ``name in
brain``, attribute access, ``Missing.Value`` and acquisition behave as on
ZCatalog.

Reading a brain is on every listing's path, so two things are quicker than
Record's own way, with the same answers:

- each column is a descriptor on the brain class (Record finds it through
  ``__getattr__``, called after the class lookup failed: 0.58 -> 0.16 us a
  read); a column named like a method of the class stays the method, as
  on ZCatalog, where the class attribute wins over ``__getattr__``;
- ``getURL()`` asks the brain's parents for the request, not the brain
  (whose Record ``__getattr__`` fails first, slowly);
- a brain made by a result sequence carries its path and the store of the
  transaction that read it, beyond the record's fields: ``getPath()`` (twice
  per rendered brain, with ``getURL()``) answers from it while that store is
  the transaction's, and asks the catalog as ZCatalog does otherwise (a
  brain kept beyond its transaction, or across a savepoint rollback).
"""
from Acquisition import aq_get
from Acquisition import aq_inner
from Acquisition import aq_parent
from ExtensionClass import Base
from Products.ZCatalog.CatalogBrains import AbstractCatalogBrain
from Record import Record
from zope.globalrequest import getRequest

from plone.pgcatalog.codec.core import decode

_DECODE = (dict, list)
# Record's slots, set without its Python-level __setattr__
_SET_DATA = Record.__dict__["__data__"].__set__
_SET_SCHEMA = Record.__dict__["__schema__"].__set__


class PGCatalogBrain(AbstractCatalogBrain):
    """Brain fed with metadata as stored (JSON); typed values (DateTime,
    tuples, ...) are decoded when a column is read, so making a brain costs
    no decoding and a page decodes only the columns it shows."""

    def __getitem__(self, key):
        value = self.__data__[key if isinstance(key, int)
                              else self.__schema__[key]]
        if type(value) in _DECODE:
            return decode(value)
        return value

    def getPath(self):
        data = self.__data__
        if len(data) > len(self.__schema__):
            path, store = data[-2:]
            store = store()     # a weak reference: a kept brain keeps no store
            if store is not None and store.is_current():
                return path
        tool = aq_parent(aq_inner(self))
        return tool.getpath(self.data_record_id_)

    def getURL(self, relative=0):
        """Generate a URL for this record"""
        # ZCatalog's asks the brain itself for REQUEST (``aq_get(self,
        # ...)``), which first fails through Record's ``__getattr__``
        # (7.7 us a brain): the brain has no REQUEST of its own unless a
        # column is so named, so its parents are asked directly.
        if "REQUEST" in self.__record_schema__:
            return AbstractCatalogBrain.getURL(self, relative)
        request = aq_get(aq_parent(self), "REQUEST", None)
        if request is None:
            request = getRequest()
        return request.physicalPathToURL(self.getPath(), relative)

    @classmethod
    def _pgc_make(cls, data):
        """A brain of ``data``: the record's fields, then the path and a
        weak reference to the store it was read in (Record's
        ``__setstate__`` would cut those)."""
        brain = Base.__new__(cls)
        _SET_DATA(brain, data)
        _SET_SCHEMA(brain, cls.__record_schema__)
        return brain


def _column(pos):
    def read(self):
        value = self.__data__[pos]
        if type(value) in _DECODE:
            return decode(value)
        return value
    return property(read)


def make_brain_class(names):
    class mybrains(PGCatalogBrain):
        pass

    # named as ZCatalog's own dynamic brain class (Catalog.useBrains), so a
    # brain's repr reads the same (doctests of Plone packages show it);
    # the class itself stays PGCatalogBrain's subclass
    mybrains.__module__ = "Products.ZCatalog.Catalog"
    mybrains.__qualname__ = "Catalog.useBrains.<locals>.mybrains"

    schema = {name: i for i, name in enumerate(names)}
    n = len(names)
    schema["data_record_id_"] = n
    schema["data_record_score_"] = n + 1
    schema["data_record_normalized_score_"] = n + 2
    mybrains.__record_schema__ = schema
    for name, pos in schema.items():
        if not hasattr(mybrains, name):
            setattr(mybrains, name, _column(pos))
    mybrains._pgc_names = tuple(names)
    return mybrains
