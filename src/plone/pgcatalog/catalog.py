"""``portal_catalog._catalog``: the catalog's configuration.

Plone and add-ons reach into ZCatalog's internal ``Catalog`` object:
``_catalog.getIndex(name)`` (GenericSetup import, search views, vocabularies),
``_catalog.indexes`` (plone.restapi adapts index objects by class),
``_catalog.schema`` (plone.namedfile checks for ``image_scales``),
``_catalog.names``.  This persistent object keeps exactly that configuration,
the index objects (which hold configuration, not data) and the metadata
schema; the entries themselves live in PostgreSQL.
"""
from Acquisition import Implicit
from Acquisition import aq_parent
from ComputedAttribute import ComputedAttribute
from Persistence import Persistent
from persistent.mapping import PersistentMapping

from plone.pgcatalog import logger
from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.search.brains import make_brain_class


class IndexesView:
    """``_catalog.indexes``: name -> index, handed out attached to the tool
    (so an index found here can answer data questions) and keeping the
    index's class (for adapters registered by class)."""

    def __init__(self, catalog):
        self._catalog = catalog

    def _wrap(self, index):
        return index.__of__(self._catalog)

    def __getitem__(self, name):
        return self._wrap(self._catalog._indexes[name])

    def get(self, name, default=None):
        index = self._catalog._indexes.get(name)
        return default if index is None else self._wrap(index)

    def __contains__(self, name):
        return name in self._catalog._indexes

    def __iter__(self):
        return iter(list(self._catalog._indexes.keys()))

    def __len__(self):
        return len(self._catalog._indexes)

    def keys(self):
        return list(self._catalog._indexes.keys())

    def values(self):
        return [self._wrap(i) for i in self._catalog._indexes.values()]

    def items(self):
        return [(k, self._wrap(i)) for k, i in self._catalog._indexes.items()]


#: the longest index name plone.pgcatalog takes (characters)
MAX_INDEX_NAME = 256


def check_index_name(name):
    """Refuse, with a clear CatalogError, an index name plone.pgcatalog
    cannot keep: not a string, too long, or holding characters PostgreSQL
    text cannot (NUL, lone surrogates).  Any other string works, ``%``,
    quotes and spaces included (names reach SQL as literals)."""
    if not isinstance(name, str):
        raise CatalogError("An index name must be a string, not %r"
                           % type(name).__name__)
    if len(name) > MAX_INDEX_NAME:
        raise CatalogError("Index names are limited to %d characters (%d "
                           "given)" % (MAX_INDEX_NAME, len(name)))
    if "\x00" in name:
        raise CatalogError("An index name cannot contain NUL characters")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise CatalogError("An index name cannot contain lone surrogates "
                           "(%r)" % name) from None


class CatalogConfig(Persistent, Implicit):
    """Index objects and metadata schema of one plone.pgcatalog catalog."""

    def __init__(self):
        self._indexes = PersistentMapping()
        self.schema = {}  # column -> position
        self.names = ()

    # -- indexes ------------------------------------------------------------
    # ComputedAttribute(..., 1) is computed on the acquisition wrapper, so the
    # view (and the indexes it hands out) knows its tool.
    indexes = ComputedAttribute(lambda self: IndexesView(self), 1)

    def getIndex(self, name):
        """The index object, acquisition-wrapped in this catalog."""
        return self._indexes[name].__of__(self)

    def addIndex(self, name, index):
        check_index_name(name)
        if name in self._indexes:
            raise CatalogError("The index %s already exists" % name)
        if name.startswith("_"):
            raise CatalogError("Cannot index fields beginning with '_'")
        if not name:
            raise CatalogError("Name of index is empty")
        if name != index.getId():
            raise CatalogError("Index name %r and id %r differ" % (
                name, index.getId()))
        self._indexes[name] = index

    def delIndex(self, name):
        if name not in self._indexes:
            raise CatalogError("The index %s does not exist" % name)
        del self._indexes[name]

    # -- metadata -----------------------------------------------------------
    def addColumn(self, name, default_value=None, threshold=10000):
        if name in self.schema:
            raise CatalogError("The column %s already exists" % name)
        if name[0] == "_":
            raise CatalogError(
                "Cannot cache fields beginning with '_', %s" % name)
        self.names = tuple(self.names) + (name,)
        self.schema = {n: i for i, n in enumerate(self.names)}
        self._v_brain_class = None

    def delColumn(self, name, threshold=10000):
        if name not in self.schema:
            logger.error("delColumn attempted to delete nonexistent "
                         "column %s.", str(name))
            return
        self.names = tuple(n for n in self.names if n != name)
        self.schema = {n: i for i, n in enumerate(self.names)}
        self._v_brain_class = None

    # -- brains -------------------------------------------------------------
    _v_brain_class = None
    _v_query_names = None

    def brain_class(self):
        klass = self._v_brain_class
        if klass is None or klass._pgc_names != self.names:
            klass = self._v_brain_class = make_brain_class(self.names)
        return klass

    # -- ZCatalog.Catalog compatibility ------------------------------------
    def __len__(self):
        return len(aq_parent(self))

    def __getitem__(self, rid):
        return aq_parent(self)._pgc_brain_for_rid(rid)

    paths = ComputedAttribute(lambda self: _RidPaths(aq_parent(self)), 1)
    data = ComputedAttribute(lambda self: _RidMetadata(aq_parent(self)), 1)
    uids = ComputedAttribute(lambda self: _PathRids(aq_parent(self)), 1)
    _length = ComputedAttribute(
        lambda self: (lambda: len(aq_parent(self))), 1)

    def getMetadataForRID(self, rid):
        return aq_parent(self).getMetadataForRID(rid)

    def getIndexDataForRID(self, rid):
        return aq_parent(self).getIndexDataForRID(rid)

    def uniqueValuesFor(self, name):
        return tuple(self.getIndex(name).uniqueValues())

    def useBrains(self, brains):
        """Brains are plone.pgcatalog's own classes; accepted for API
        compatibility (a custom brain mix-in is not supported)."""


class _RidPaths:
    """``_catalog.paths``: rid -> path, read from PostgreSQL."""

    def __init__(self, tool):
        self.tool = tool

    def get(self, rid, default=None):
        path = self.tool.getpath(rid, None) if rid is not None else None
        return default if path is None else path

    def __getitem__(self, rid):
        path = self.get(rid)
        if path is None:
            raise KeyError(rid)
        return path

    def __contains__(self, rid):
        return self.get(rid) is not None

    def items(self):
        return self.tool._pgc_all_paths()

    def keys(self):
        return [rid for rid, _ in self.items()]

    def values(self):
        return [path for _, path in self.items()]

    def __len__(self):
        return len(self.tool)


class _RidMetadata:
    """``_catalog.data``: rid -> metadata tuple (read and written by
    plone.app.upgrade's metadata helpers)."""

    def __init__(self, tool):
        self.tool = tool

    def __getitem__(self, rid):
        return self.tool._pgc_metadata_tuple(rid)

    def get(self, rid, default=None):
        try:
            return self[rid]
        except KeyError:
            return default

    def __setitem__(self, rid, record):
        self.tool._pgc_set_metadata_tuple(rid, record)

    def __contains__(self, rid):
        return self.get(rid) is not None

    def __len__(self):
        return len(self.tool)


class _PathRids(_RidPaths):
    """``_catalog.uids``: path -> rid."""

    def get(self, path, default=None):
        rid = self.tool.getrid(path, None)
        return default if rid is None else rid

    def items(self):
        return [(path, rid) for rid, path in self.tool._pgc_all_paths()]

    def keys(self):
        return [path for path, _ in self.items()]

    def values(self):
        return [rid for _, rid in self.items()]

