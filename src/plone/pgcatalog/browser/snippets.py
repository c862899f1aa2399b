"""``@pgcatalog-snippets``: snippets of text results over plone.restapi
(docs/snippets.md).

``GET <object>/@pgcatalog-snippets?q=<searched text>&UID=<uid>&UID=...``
answers ``{"items": {uid: html}}``: for each result the user may see (the
UIDs are searched as the user), the passages of its text where the searched
words are, in ``<mark>``.  Reads only.
"""
import re

from Products.ZCTextIndex.ParseTree import ParseError
from Products.ZCTextIndex.ParseTree import QueryError
from zExceptions import BadRequest

from plone.pgcatalog.browser.service import CatalogService
from plone.pgcatalog.toolapi.snippets import MAX_ROWS


class SnippetsGet(CatalogService):

    def reply(self):
        catalog = self.catalog()
        form = self.request.form
        text = form.get("q")
        if not isinstance(text, str):
            raise BadRequest("'q': the searched text")
        uids = form.get("UID") or []
        if isinstance(uids, str):
            uids = [uids]
        if not isinstance(uids, list) or not all(
                isinstance(uid, str) for uid in uids) \
                or len(uids) > MAX_ROWS:
            raise BadRequest("'UID': at most %d UIDs of results" % MAX_ROWS)
        index = form.get("index", "SearchableText")
        size = self.number("size", 30)
        fragments = self.number("fragments", 2)
        if not uids:
            return {"items": {}}
        # the results the user may see
        brains = list(catalog.searchResults(UID=list(dict.fromkeys(uids))))
        try:
            made = catalog.pgc_snippets(brains, text, index=index, size=size,
                                        fragments=fragments)
        except (ValueError, TypeError, ParseError, QueryError,
                re.error) as exc:
            raise BadRequest(str(exc))
        return {"items": {brain.UID: html
                          for brain, html in zip(brains, made)}}
