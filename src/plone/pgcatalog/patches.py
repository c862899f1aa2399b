"""The two changes plone.pgcatalog makes to other packages, applied
explicitly.

**The catalog tool survives Plone's toolset.**  GenericSetup's toolset
import step replaces a required tool whose class differs from the one
``toolset.xml`` names.  Plone's ``toolset.xml`` names
``Products.CMFPlone.CatalogTool.CatalogTool`` for ``portal_catalog``, so
importing it again (an upgrade step, "Import all steps" of the Plone profile)
would throw our tool, and the catalog, away.  :func:`apply` wraps
``ToolsetRegistry.listRequiredToolInfo``: a registry that install pinned
(``_pgcatalog_pinned``, see :mod:`plone.pgcatalog.setuphandlers`) reports our
class for ``portal_catalog``; every other registry is answered unchanged.

**PostgreSQL away is a 503.**  Zope gives an exception that escapes a
request the status its class name has in ``ZPublisher.HTTPResponse.
status_codes`` (Zope itself maps ``NameError`` and ``KeyError`` to 503
there), 500 for a name it does not know; Plone's error page,
plone.transformchain and plone.rest's JSON errors all set it that way.
:data:`STATUSES` adds the catalog's errors that mean "PostgreSQL cannot be
reached, try again" (after Zope's own retries): ``503 Service Unavailable``,
whichever of them renders the error (unavailable.py adds ``Retry-After``
where its view does).  So does a catalog snapshot that stayed ahead of the
objects' through every retry (``CatalogReadConflictError``: writers kept
committing between a request's ZODB snapshot and its catalog's, as while
PostgreSQL comes back from a restart): transient, not the site's fault.

Where they are applied: by the ``<pgcatalog:patches />`` directive of this
package's ``configure.zcml`` (:func:`patches_directive`), i.e. whenever the
package's configuration is loaded: at Zope start-up and in test layers that
load the ZCML (plone.testing does not call the product's ``initialize``
unless a layer installs the product, so ``initialize`` would miss them).
Importing a module never patches anything.  :func:`apply` is idempotent.
"""
from Acquisition import aq_base
from Products.GenericSetup.registry import ToolsetRegistry
from ZPublisher.HTTPResponse import status_codes
from zope.interface import Interface

from plone.pgcatalog.errors import AnswerLost
from plone.pgcatalog.errors import CatalogReadConflictError
from plone.pgcatalog.errors import DatabaseUnavailable
from plone.pgcatalog.setuphandlers import TOOL_ID


#: the HTTP status of a request that ends with these errors
STATUSES = {DatabaseUnavailable: 503, AnswerLost: 503,
            CatalogReadConflictError: 503}


#: ToolsetRegistry.listRequiredToolInfo as GenericSetup defines it
_original = ToolsetRegistry.listRequiredToolInfo


def _list_required_tool_info(self):
    infos = _original(self)
    pinned = getattr(aq_base(self), "_pgcatalog_pinned", None)
    if not pinned:
        return infos
    result = []
    for info in infos:
        if info.get("id") == TOOL_ID:
            info = dict(info, **{"class": pinned})
        result.append(info)
    return result


def applied():
    """Whether the patches are in place."""
    return ToolsetRegistry.listRequiredToolInfo is _list_required_tool_info \
        and all(status_codes.get(error.__name__.lower()) == status
                for error, status in STATUSES.items())


def apply():
    """Put the patches in place (idempotent)."""
    if ToolsetRegistry.listRequiredToolInfo is not _list_required_tool_info:
        ToolsetRegistry.listRequiredToolInfo = _list_required_tool_info
    for error, status in STATUSES.items():
        status_codes[error.__name__.lower()] = status


class IPatchesDirective(Interface):
    """``<pgcatalog:patches />``: apply :mod:`plone.pgcatalog.patches`."""


def patches_directive(context):
    context.action(discriminator=("plone.pgcatalog", "patches"),
                   callable=apply, args=())
