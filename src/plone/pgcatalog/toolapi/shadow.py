"""Shadow mode's part of the tool: the ZMI "Shadow" tab, its settings form,
ending shadow mode, and their Python API (``shadow.py`` does the work).

The tab (``manage_catalogShadow``) and the data method are for "Manage
ZCatalog Entries"; the two actions are published for POST only and check
plone.protect's authenticator (settings live in the ZODB, but ending shadow
mode also decides what the PostgreSQL catalog must answer alone: no write
of this tab may be forged).
"""
import os

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from Acquisition import aq_inner
from Acquisition import aq_parent
from plone.protect import CheckAuthenticator
from plone.protect import PostOnly
from plone.protect import protect
from Products.PageTemplates.PageTemplateFile import PageTemplateFile
from zExceptions import BadRequest
from zope.i18n import translate
from ZPublisher import zpublish

from plone.pgcatalog import _
from plone.pgcatalog import logger
from plone.pgcatalog.ops import shadow

WWW = os.path.join(os.path.dirname(os.path.dirname(__file__)), "www")

#: the tab (tool.py adds it to manage_options)
SHADOW_TABS = ({"action": "manage_catalogShadow", "label": "Shadow"},)


class ShadowAPI:
    """The Shadow tab and shadow mode's settings."""

    security = ClassSecurityInfo()

    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogShadow")
    manage_catalogShadow = PageTemplateFile(os.path.join(WWW, "shadow.zpt"),
                                            globals())

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_shadow_report(self):
        """Shadow mode's settings, this process's counters and differences
        (newest first); ``{"active": False}`` outside shadow mode."""
        current = shadow.settings(self)
        if current is None:
            return {"active": False}
        key = self._pgc_key
        found = shadow.shadow_of(self)
        return {"active": True, "shadow_id": current["id"],
                "shadow_found": found is not None,
                "shadow_entries": len(found) if found is not None else None,
                "primary": current["primary"], "rate": current["rate"],
                "primaries": shadow.PRIMARIES,
                "counters": shadow.counters(key),
                "differences": shadow.differences(key),
                "size": shadow.SIZE}

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_shadow_configure(self, primary=None, rate=None):
        """Set which catalog answers searches (``"pgcatalog"`` or
        ``"zcatalog"``) and/or the sample rate (0.0 to 1.0).  ValueError on
        bad input (nothing changed then)."""
        new = shadow.configure(self, primary, rate)
        logger.info("shadow mode of %s: primary %s, sample rate %s",
                    "/".join(self.getPhysicalPath()), new["primary"],
                    new["rate"])
        return new

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_end_shadow(self):
        """End shadow mode for good: stop writing to the old ZCatalog and
        delete it (in this transaction; irreversible once committed).
        PostgreSQL must be the primary already."""
        current = shadow.settings(self)
        if current is None:
            raise ValueError("this catalog is not in shadow mode")
        if current["primary"] != "pgcatalog":
            raise ValueError("switch the primary to pgcatalog before ending "
                             "shadow mode")
        parent = aq_parent(aq_inner(self))
        shadow.stop(self)
        if parent is not None and current["id"] in parent.objectIds():
            parent._delObject(current["id"], suppress_events=True)
        shadow.clear(self._pgc_key)
        logger.info("shadow mode of %s ended: %s deleted",
                    "/".join(self.getPhysicalPath()), current["id"])
        return current["id"]

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_shadowSettings(self, primary=None, rate=None, REQUEST=None):
        """The Shadow tab's settings form."""
        try:
            self.pgc_shadow_configure(primary, rate)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        if REQUEST is not None:
            return self.manage_catalogShadow(
                manage_tabs_message=translate(
                    _("Shadow mode settings saved."), context=REQUEST))

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_endShadow(self, confirm=None, REQUEST=None):
        """The Shadow tab's "end shadow mode" form (``confirm`` must be
        ``end``)."""
        if confirm != "end":
            raise BadRequest("type 'end' to confirm: the old ZCatalog is "
                             "deleted")
        try:
            removed = self.pgc_end_shadow()
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        if REQUEST is not None:
            return self.manage_catalogShadow(
                manage_tabs_message=translate(
                    _("Shadow mode ended: ${catalog} deleted.",
                      mapping={"catalog": removed}), context=REQUEST))


InitializeClass(ShadowAPI)
