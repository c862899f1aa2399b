"""Suggestions for a prefix (docs/suggest.md): ``pgc_suggest``."""
from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import search_zcatalog
from Products.ZCTextIndex.ParseTree import ParseError
from ZPublisher import zpublish

from plone.pgcatalog.search.query import merge_query_args
from plone.pgcatalog.search.suggest import suggest_query


class SuggestAPI:
    """pgc_suggest (a mixin of the tool, beside SearchAPI)."""

    security = ClassSecurityInfo()

    # for Python and restricted code with "Search ZCatalog", never a URL
    @zpublish(False)
    @security.protected(search_zcatalog)
    def pgc_suggest(self, text, limit=10, index="Title", query=None, **kw):
        """The first ``limit`` entries (brains, by relevance) whose text
        index ``index`` holds every word of ``text`` as a prefix, beside
        the search ``query`` / ``kw``, as ``searchResults`` would list
        them for this user now: what to suggest while ``text`` is typed."""
        found = suggest_query(self._catalog, text, index, limit,
                              merge_query_args(query, **kw))
        if found is None:
            return []
        try:
            # searchResults: pending indexing processed, CMFPlone's
            # security additions
            return list(self.searchResults(found)[:limit])
        except ParseError:
            # only the lexicon's stop words (or none of its words): nothing
            # to suggest (searchResults raises it, as ZCatalog's)
            return []


InitializeClass(SuggestAPI)
