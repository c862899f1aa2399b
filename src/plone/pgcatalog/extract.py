"""What an object gives the catalog: its index values and metadata record.

``entry_for`` turns an (IIndexableObject-wrapped) object into the
:class:`~plone.pgcatalog.pg.writer.Upsert` the session buffers: every index
kind extracts its own value (``pgc_extract``), metadata is recorded as
ZCatalog's ``recordify`` does and encoded by the typed codec.
"""
from Missing import MV
from plone.indexer.interfaces import IIndexableObject
from Products.ZCatalog.Catalog import safe_callable
from zope.component import queryMultiAdapter

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.pg.writer import Upsert


def indexable(tool, obj):
    """``obj`` as ``catalog_object`` indexes it: wrapped by its
    IIndexableObject adapter for ``tool`` (plone.indexer's indexers), if
    any and not wrapped yet."""
    if IIndexableObject.providedBy(obj):
        return obj
    found = queryMultiAdapter((obj, tool), IIndexableObject)
    return obj if found is None else found


def recordify(catalog, obj):
    """The metadata record of ``obj`` (column -> value), as ZCatalog's."""
    record = {}
    for name in catalog.names:
        attr = getattr(obj, name, MV)
        if attr is not MV and safe_callable(attr):
            attr = attr()
        record[name] = attr
    return record


def metadata(catalog, obj):
    """``(metadata JSON text, [(column, exception)] of values that cannot
    be stored)``."""
    unpicklable = []
    meta = codec.encode_meta(recordify(catalog, obj),
                             unpicklable).decode("utf-8")
    return meta, unpicklable


def index_values(catalog, obj, idxs):
    """``(full, idx_set, idx_remove, text_set, text_remove)``: the values of
    every index (``idxs`` empty) or of the named ones."""
    indexes = catalog._indexes
    full = not idxs
    names = list(indexes) if full else [n for n in idxs if n in indexes]
    idx_set, idx_remove, text_set, text_remove = {}, [], {}, []
    for name in names:
        index = catalog.getIndex(name)
        storage = index.pgc_storage
        if storage not in ("idx", "text"):
            continue
        value = index.pgc_extract(obj)
        if storage == "idx":
            if value is MISSING:
                idx_remove.append(name)
            else:
                idx_set[name] = value
        elif value is MISSING:
            text_remove.append(name)
        else:
            text_set[name] = value
    return full, idx_set, idx_remove, text_set, text_remove


def entry_for(catalog, obj, idxs, meta, meta_from=None):
    """The Upsert of ``obj``: ``meta`` the encoded metadata (None: keep the
    stored one), ``meta_from`` a callable giving it should the entry turn
    out to have none (a partial reindex of an entry new to the catalog)."""
    full, idx_set, idx_remove, text_set, text_remove = index_values(
        catalog, obj, idxs)
    return Upsert(full, idx_set, idx_remove, meta, text_set, text_remove,
                  meta_from=meta_from)
