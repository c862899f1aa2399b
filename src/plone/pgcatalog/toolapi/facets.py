"""Facet counts of a search (docs/facets.md): ``pgc_facets``."""
from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import search_zcatalog
from Products.CMFCore.indexing import processQueue
from ZPublisher import zpublish

from plone.pgcatalog.search.facets import facet_counts


class FacetsAPI:
    """pgc_facets (a mixin of the tool, beside SearchAPI)."""

    security = ClassSecurityInfo()

    # for Python and restricted code with "Search ZCatalog", never a URL
    @zpublish(False)
    @security.protected(search_zcatalog)
    def pgc_facets(self, query=None, facets=(), **kw):
        """For each index of ``facets`` (names, or a dict of name ->
        options: ``limit``, ``filter``, ``disjunctive``, ``buckets``), the
        values the matches of the search ``query`` / ``kw`` hold and how
        many matches hold each, as ``searchResults`` would list them for
        this user now: ``{name: {"values": [(value, count), ...], "total":
        distinct values}}``, most matches first."""
        processQueue()
        return facet_counts(self, self._pgc_store(),
                            self._pgc_secured_query(query, kw), facets)


InitializeClass(FacetsAPI)
