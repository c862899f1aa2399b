"""Catalog brains: ZCatalog's own brain base class, fed from PostgreSQL.

A brain class is made per metadata schema (as ZCatalog's ``useBrains`` does):
a Record with one field per column plus ``data_record_id_``,
``data_record_score_`` and ``data_record_normalized_score_``, so ``name in
brain``, attribute access, ``Missing.Value`` and acquisition behave as on
ZCatalog."""
from Acquisition import aq_inner
from Acquisition import aq_parent
from Products.ZCatalog.CatalogBrains import AbstractCatalogBrain

from plone.pgcatalog.codec import decode


_DECODE = (dict, list)


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
        tool = aq_parent(aq_inner(self))
        return tool.getpath(self.data_record_id_)


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
    mybrains._pgc_names = tuple(names)
    return mybrains
