"""``@pgcatalog-suggest``: suggestions over plone.restapi (docs/suggest.md).

``GET <object>/@pgcatalog-suggest?q=<typed text>`` answers ``{"items":
[{"@id", "@type", "title", "description", "review_state", "UID"}, ...]}``:
the first entries (by relevance) whose ``Title`` holds every typed word as
a prefix, below the object, of the site's searchable types unless
``portal_type`` is given, that the user may see.  Reads only.
"""
from plone.restapi.serializer.converters import json_compatible
from Products.CMFCore.utils import getToolByName
from zExceptions import BadRequest

from plone.pgcatalog.browser.service import CatalogService
from plone.pgcatalog.search.suggest import MAX_LIMIT


#: the brain's columns an item shows, by the answer's key
COLUMNS = (("@type", "portal_type"), ("title", "Title"),
           ("description", "Description"), ("review_state", "review_state"),
           ("UID", "UID"))


class SuggestGet(CatalogService):

    def reply(self):
        catalog = self.catalog()
        form = self.request.form
        text = form.get("q")
        if not isinstance(text, str):
            raise BadRequest("'q': the text typed so far")
        limit = self.number("limit", 10, "from 1 to %d" % MAX_LIMIT)
        types = form.get("portal_type")
        if types is None:
            types = getToolByName(
                self.context, "plone_utils").getUserFriendlyTypes()
        elif isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not all(
                isinstance(name, str) for name in types):
            raise BadRequest("'portal_type': type names")
        query = {"portal_type": types,
                 "path": "/".join(self.context.getPhysicalPath())}
        try:
            brains = catalog.pgc_suggest(text, limit=limit, query=query)
        except (ValueError, TypeError) as exc:
            raise BadRequest(str(exc))
        return {"items": [self.item(brain) for brain in brains]}

    def item(self, brain):
        found = {"@id": brain.getURL()}
        for key, column in COLUMNS:
            found[key] = json_compatible(getattr(brain, column, None))
        return found
