"""Searching: CMFPlone's searchResults (security additions), CMFCore's
unrestricted searches and ZCatalog's programmatic ``search``."""
from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import search_zcatalog
from DateTime import DateTime
from Products.CMFCore.indexing import processQueue
from Products.CMFCore.utils import _getAuthenticatedUser
from Products.CMFPlone.CatalogTool import CatalogTool as PloneCatalogTool
from ZPublisher import zpublish

from plone.pgcatalog.ops import shadow
from plone.pgcatalog.search.query import merge_query_args
from plone.pgcatalog.search.run import search

#: the indexes CMFPlone's searchResults sets from the user and the time
SECURITY_INDEXES = ("allowedRolesAndUsers", "effectiveRange")


def secured(query):
    """``query`` without the ``<security index>_<option>`` keys a caller
    may have added (``allowedRolesAndUsers_range="min"`` would turn the
    user's roles into a range that matches everything; stock ZCatalog reads
    such keys).  A deliberate difference: the security filters cannot be
    weakened by any key a caller passes."""
    if not any(key.startswith(SECURITY_INDEXES) for key in query
               if isinstance(key, str)):
        return query
    prefixes = tuple(name + "_" for name in SECURITY_INDEXES)
    return {key: value for key, value in query.items()
            if not (isinstance(key, str) and key.startswith(prefixes))}


class SearchAPI:
    """searchResults, __call__, unrestrictedSearchResults, search."""

    security = ClassSecurityInfo()

    def _listAllowedRolesAndUsers(self, user):
        return PloneCatalogTool._listAllowedRolesAndUsers(self, user)

    security.declarePrivate("allow_inactive")

    @zpublish(False)
    def allow_inactive(self, query_kw):
        return PloneCatalogTool.allow_inactive(self, query_kw)

    # Search API: for Python and restricted code (TALES, scripts) with
    # "Search ZCatalog", never a URL (stock CMFPlone's have no docstring).
    @zpublish(False)
    @security.protected(search_zcatalog)
    def searchResults(self, query=None, **kw):
        """Search the catalog as CMFPlone does: pending indexing is processed
        first, and allowedRolesAndUsers / effectiveRange are always set by
        the tool, whatever the caller passed."""
        processQueue()
        return self._pgc_search(self._pgc_secured_query(query, kw))

    @security.private
    def _pgc_secured_query(self, query, kw):
        """The query searchResults runs: ``query`` and ``kw`` merged, the
        user's roles and (unless inactive content may be shown) the time
        added by the tool, whatever the caller passed."""
        kw = kw.copy()
        show_inactive = kw.get("show_inactive", None)
        if show_inactive is None and isinstance(query, dict):
            show_inactive = query.get("show_inactive", None)
        if show_inactive is None:
            show_inactive = self.allow_inactive(kw)
        user = _getAuthenticatedUser(self)
        kw["allowedRolesAndUsers"] = self._listAllowedRolesAndUsers(user)
        if not show_inactive:
            kw["effectiveRange"] = DateTime()
        sort_on = kw.get("sort_on") or []
        if isinstance(sort_on, str):
            sort_on = [sort_on]
        valid_indexes = self.indexes()
        try:
            sort_on = [idx for idx in sort_on if idx in valid_indexes]
        except TypeError:
            sort_on = []
        if not sort_on:
            kw.pop("sort_on", None)
        else:
            kw["sort_on"] = sort_on
        return secured(merge_query_args(query, **kw))

    # the tool's own URL: stock CMFPlone marks __call__ zpublish(False) too
    @zpublish(False)
    @security.protected(search_zcatalog)
    def __call__(self, *args, **kw):
        return self.searchResults(*args, **kw)

    @zpublish(False)
    @security.private
    def unrestrictedSearchResults(self, REQUEST=None, **kw):
        """Search without the security additions (see CMFCore)."""
        processQueue()
        return self._pgc_search(merge_query_args(REQUEST, **kw))

    @security.private
    def _unrestrictedSearchResults(self, REQUEST=None, **kw):
        """Like unrestrictedSearchResults, without processQueue()."""
        return self._pgc_search(merge_query_args(REQUEST, **kw))

    @zpublish(False)
    @security.protected(search_zcatalog)
    def search(self, query, sort_index=None, reverse=0, limit=None,
               merge=1):
        """ZCatalog's programmatic search, wrapped as CMFPlone does."""
        processQueue()
        user = _getAuthenticatedUser(self)
        query["allowedRolesAndUsers"] = self._listAllowedRolesAndUsers(user)
        if not self.allow_inactive(query):
            query["effectiveRange"] = DateTime()
        query = dict(query)
        if sort_index is not None:
            if isinstance(sort_index, (list, tuple)):
                query["sort_on"] = [getattr(i, "getId", lambda: i)()
                                    for i in sort_index]
            else:
                query["sort_on"] = getattr(sort_index, "getId",
                                           lambda: sort_index)()
            if isinstance(reverse, (list, tuple)):
                query["sort_order"] = ["descending" if r else "ascending"
                                       for r in reverse]
            else:
                query["sort_order"] = "descending" if reverse else ""
        if limit is not None:
            query["sort_limit"] = limit
        return self._pgc_search(secured(query))

    def _pgc_search(self, query):
        if shadow.settings(self) is not None:   # shadow mode (shadow.py)
            return shadow.search(self, query, self._pgc_search_pg)
        return self._pgc_search_pg(query)

    def _pgc_search_pg(self, query):
        return search(self, self._pgc_store(), query)


InitializeClass(SearchAPI)
