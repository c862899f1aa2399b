"""Records: rids, paths, objects, metadata and index data of entries."""
from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import search_zcatalog
from Acquisition import aq_parent
from Missing import MV
from ZPublisher import zpublish

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.indexes.common import needs_tag
from plone.pgcatalog.ops import shadow
from plone.pgcatalog.pg.store import rid_key
from plone.pgcatalog.search.results import make_results


def path_key(path):
    """``path`` if a record can have it, else None: None and strings
    PostgreSQL cannot hold are found nowhere (as in ZCatalog's uids
    OIBTree, which holds no such key); any other type raises TypeError,
    as comparing it with the OIBTree's string keys does."""
    if path is None:
        return None
    if not isinstance(path, str):
        raise TypeError("'<' not supported between instances of 'str' and "
                        "%r" % type(path).__name__)
    if needs_tag(path):
        return None
    return path


class RecordsAPI:
    """getpath, getrid, getobject, getMetadataForRID, getIndexDataForRID,
    getAllBrains, searchAll, and what ``_catalog``'s compatibility views
    (catalog.py) read."""

    security = ClassSecurityInfo()

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getpath(self, rid, default=KeyError):
        """The path of record ``rid``."""
        rid = rid_key(rid)
        path = None if rid is None else self._pgc_store().path_of(rid)
        if path is None:
            if default is KeyError:
                raise KeyError(rid)
            return default
        return path

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getrid(self, path, default=None):
        """The record id of ``path``, or ``default``."""
        if not path_key(path):
            return default
        rid = self._pgc_store().rid_of(path)
        return default if rid is None else rid

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getobject(self, rid, REQUEST=None):
        """The object of record ``rid``."""
        return aq_parent(self).unrestrictedTraverse(self.getpath(rid))

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getMetadataForRID(self, rid):
        rid = rid_key(int(rid))  # int(): ZCatalog's first step
        meta = None if rid is None else self._pgc_store().metadata(rid)
        if meta is None:
            raise KeyError(rid)
        meta = codec.decode_meta(meta, self._pgc_store().meta_layout())
        return {name: meta.get(name, MV) for name in self._catalog.names}

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getIndexDataForRID(self, rid):
        # a rid of a search result: the primary's (shadow.py)
        zcatalog = shadow.primary_shadow(self)
        if zcatalog is not None:
            return zcatalog.getIndexDataForRID(rid)
        return {name: self._catalog.getIndex(name).getEntryForObject(rid, "")
                for name in self._catalog._indexes}

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getAllBrains(self):
        """All brains, as a generator (ZCatalog API)."""
        rids = self._pgc_store().all_rids()
        results = make_results(self, rids, len(rids))
        for brain in results:
            yield brain

    @zpublish(False)
    @security.protected(search_zcatalog)
    def searchAll(self):
        rids = self._pgc_store().all_rids()
        return make_results(self, rids, len(rids))

    def __len__(self):
        return self._pgc_store().count()

    def __bool__(self):
        return True

    # -- for _catalog's views (catalog.py) ------------------------------------
    def _pgc_brain_for_rid(self, rid):
        if self.getpath(rid, None) is None:
            raise KeyError(rid)
        return make_results(self, [rid_key(rid)], 1)[0]

    def _pgc_metadata_tuple(self, rid):
        meta = self.getMetadataForRID(rid)
        return tuple(meta[name] for name in self._catalog.names)

    def _pgc_set_metadata_tuple(self, rid, record):
        names = self._catalog.names
        meta = codec.encode_meta(dict(zip(names, record))).decode("utf-8")
        self._pgc_store().set_metadata(rid, meta)

    def _pgc_all_paths(self):
        return self._pgc_store().all_paths()


InitializeClass(RecordsAPI)
