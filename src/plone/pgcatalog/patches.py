"""The one patch plone.pgcatalog makes to another package, applied explicitly.

GenericSetup's toolset import step replaces a required tool whose class
differs from the one ``toolset.xml`` names.  Plone's ``toolset.xml`` names
``Products.CMFPlone.CatalogTool.CatalogTool`` for ``portal_catalog``, so
importing it again (an upgrade step, "Import all steps" of the Plone profile)
would throw our tool, and the catalog, away.  :func:`apply` wraps
``ToolsetRegistry.listRequiredToolInfo``: a registry that install pinned
(``_pgcatalog_pinned``, see :mod:`plone.pgcatalog.setuphandlers`) reports our
class for ``portal_catalog``; every other registry is answered unchanged.

Where it is applied: by the ``<pgcatalog:patches />`` directive of this
package's ``configure.zcml`` (:func:`patches_directive`), i.e. whenever the
package's configuration is loaded: at Zope start-up and in test layers that
load the ZCML (plone.testing does not call the product's ``initialize``
unless a layer installs the product, so ``initialize`` would miss them).
Importing a module never patches anything.  :func:`apply` is idempotent.
"""
from Acquisition import aq_base
from Products.GenericSetup.registry import ToolsetRegistry
from zope.interface import Interface

from plone.pgcatalog.setuphandlers import TOOL_ID


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
    """Whether the patch is in place."""
    return ToolsetRegistry.listRequiredToolInfo is _list_required_tool_info


def apply():
    """Put the patch in place (idempotent)."""
    if not applied():
        ToolsetRegistry.listRequiredToolInfo = _list_required_tool_info


class IPatchesDirective(Interface):
    """``<pgcatalog:patches />``: apply :mod:`plone.pgcatalog.patches`."""


def patches_directive(context):
    context.action(discriminator=("plone.pgcatalog", "patches"),
                   callable=apply, args=())
