"""plone.pgcatalog: portal_catalog kept in PostgreSQL."""
import logging


logger = logging.getLogger("plone.pgcatalog")


def initialize(context):
    """Zope 2 product initialisation (nothing to register: the tool is added by
    the GenericSetup profile, not through the ZMI add list; the GenericSetup
    patch is applied from ZCML, see :mod:`plone.pgcatalog.patches`)."""
