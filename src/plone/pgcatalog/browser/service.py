"""What plone.pgcatalog's plone.restapi endpoints share: the site's catalog
(theirs only when it is plone.pgcatalog's) and a number read from the
request's form."""
from Acquisition import aq_base
from plone.restapi.services import Service
from Products.CMFCore.utils import getToolByName
from zExceptions import BadRequest
from zExceptions import NotFound

from plone.pgcatalog.tool import PGCatalogTool


class CatalogService(Service):
    """A read-only endpoint of the site's plone.pgcatalog catalog."""

    def catalog(self):
        """The site's catalog; NotFound when it is not plone.pgcatalog's."""
        catalog = getToolByName(self.context, "portal_catalog")
        if not isinstance(aq_base(catalog), PGCatalogTool):
            raise NotFound("this site's catalog is not plone.pgcatalog's")
        return catalog

    def number(self, name, default, why="a number"):
        """The whole number the form gives as ``name`` (``default`` when
        absent); BadRequest saying ``why`` when it is not one."""
        try:
            return int(self.request.form.get(name, default))
        except (TypeError, ValueError):
            raise BadRequest("'%s': %s" % (name, why))
