"""``@pgcatalog-facets``: facet counts over plone.restapi (docs/facets.md).

``POST`` with a JSON body: ``query``, a plone.app.querystring query (as
Volto's search block sends to ``@querystring-search``), and ``facets``,
index ids or an object of index id -> options (``pgc_facets``'). Answers
``{"facets": {id: {"values": [{"value": v, "count": n}, ...], "total":
n}}}``: the values of the matches the user may see.  Reads only: nothing
is written, so no CSRF token is asked (as ``@querystring-search``).
"""
from DateTime.interfaces import DateTimeError
from plone.app.querystring import queryparser
from plone.restapi.deserializer import json_body
from plone.restapi.exceptions import DeserializationError
from plone.restapi.serializer.converters import json_compatible
from zExceptions import BadRequest

from plone.pgcatalog.browser.service import CatalogService


class FacetsPost(CatalogService):

    def reply(self):
        catalog = self.catalog()
        try:
            body = json_body(self.request)
        except DeserializationError:
            body = None
        if not isinstance(body, dict):
            raise BadRequest("a JSON object with 'query' and 'facets'")
        facets = body.get("facets")
        if not facets or not isinstance(facets, (list, dict)):
            raise BadRequest("'facets': a list of index ids, or an object "
                             "of index id -> options")
        querystring = body.get("query") or []
        if not isinstance(querystring, list) or not all(
                isinstance(row, dict) for row in querystring):
            raise BadRequest("'query': a plone.app.querystring query (a "
                             "list of {i, o, v})")
        try:
            # (its order and batch do not count: pgc_facets leaves them out)
            query = queryparser.parseFormquery(self.context, querystring) \
                if querystring else {}
        except Exception as exc:  # noqa: B902 - reading the query only
            raise BadRequest("'query' cannot be read: %s" % exc)
        try:
            found = catalog.pgc_facets(query, facets=facets)
        except (ValueError, TypeError, DateTimeError) as exc:
            # (an option, or a value of the query: a date DateTime cannot
            # read)
            raise BadRequest(str(exc))
        return {"facets": {
            name: {"values": [{"value": json_compatible(value),
                               "count": count}
                              for value, count in counted["values"]],
                   "total": counted["total"]}
            for name, counted in found.items()}}
