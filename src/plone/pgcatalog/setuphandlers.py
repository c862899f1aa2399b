"""Install and uninstall: swap portal_catalog, keeping its definitions.

Install replaces the site's ZCatalog-based portal_catalog by a
:class:`~plone.pgcatalog.tool.PGCatalogTool` carrying the same index and
metadata definitions (Plone's and add-ons'), the same lexicon pipelines and
properties, registers it as the ``ICatalogTool`` utility and in the
GenericSetup toolset, then indexes all content (comments included), unless
``install-index later`` leaves that to an online build (docs/rebuild.md).
Uninstall does the reverse and puts back a fully indexed ZCatalog.

Install also pins the tool's class in the toolset registry
(``_pgcatalog_pinned``), which :mod:`plone.pgcatalog.patches` reads so that
importing Plone's ``toolset.xml`` again keeps this tool.
"""
from Acquisition import aq_base
from plone.registry.interfaces import IRegistry
from Products.CMFCore.indexing import processQueue
from Products.CMFCore.interfaces import ICatalogTool
from Products.CMFCore.utils import getToolByName
from Products.CMFPlone.CatalogTool import CatalogTool
from Products.ZCatalog.ZCatalog import ZCatalog
from Products.ZCTextIndex.ZCTextIndex import PLexicon
from Products.ZCTextIndex.ZCTextIndex import index_types
from zope.component import getUtility

from plone.pgcatalog import config
from plone.pgcatalog import logger
from plone.pgcatalog import settings
from plone.pgcatalog.ops import shadow
# re-exported from its old home (callers that import it from here)
from plone.pgcatalog.tool import PGCatalogTool

TOOL_ID = "portal_catalog"
TOOL_CLASS = "plone.pgcatalog.tool.PGCatalogTool"
ZCATALOG_CLASS = "Products.CMFPlone.CatalogTool.CatalogTool"


def _copy_lexicons(old, new):
    for oid, obj in old.objectItems():
        obj = aq_base(obj)
        if obj.meta_type == "ZCTextIndex Lexicon":
            pipeline = list(getattr(obj, "_pipeline", ()))
            new._setObject(oid, PLexicon(oid, obj.title, *pipeline),
                           suppress_events=True)


def _copy_definitions(old, new):
    for prop in ("title", "unwrapobjects"):
        if hasattr(aq_base(old), prop):
            setattr(new, prop, getattr(aq_base(old), prop))
    old_catalog = aq_base(old)._catalog
    for name in list(old_catalog.indexes.keys()):
        index = old_catalog.indexes[name]
        try:
            new.addIndex(name, index)
        except Exception:
            logger.exception("could not carry index %s (%s) over", name,
                             getattr(index, "meta_type", "?"))
            raise
    for name in old_catalog.names:
        new.addColumn(name)


def _keep_as_shadow(portal, old):
    """Move the old ZCatalog aside (shadow mode, shadow.py): same object,
    its BTrees intact, under shadow.SHADOW_ID."""
    old = aq_base(old)
    portal._delObject(TOOL_ID, suppress_events=True)
    old.id = shadow.SHADOW_ID   # a tool refuses _setId
    portal._setObject(shadow.SHADOW_ID, old, suppress_events=True)


def _swap_tool(portal, new, keep_old=False):
    if keep_old:
        _keep_as_shadow(portal, portal[TOOL_ID])
    else:
        portal._delObject(TOOL_ID, suppress_events=True)
    portal._setObject(TOOL_ID, new, suppress_events=True)
    tool = portal[TOOL_ID]
    sm = portal.getSiteManager()
    sm.registerUtility(aq_base(tool), ICatalogTool)
    return tool


def install(portal):
    """Replace portal_catalog by plone.pgcatalog's tool and index all."""
    old = portal[TOOL_ID]
    keep_old = False
    if isinstance(aq_base(old), PGCatalogTool):
        tool = old
        portal.getSiteManager().registerUtility(aq_base(tool), ICatalogTool)
    else:
        new = PGCatalogTool()
        _copy_lexicons(old, new)
        new_wrapped = new.__of__(portal)
        _copy_definitions(old, new_wrapped)
        # shadow mode: the old ZCatalog stays, fully indexed (shadow.py)
        keep_old = shadow.wanted() and isinstance(aq_base(old), ZCatalog) \
            and shadow.SHADOW_ID not in portal.objectIds()
        tool = _swap_tool(portal, new, keep_old)
    toolset = portal.portal_setup.getToolsetRegistry()
    toolset.addRequiredTool(TOOL_ID, TOOL_CLASS)
    toolset._pgcatalog_pinned = TOOL_CLASS
    tool._pgc_mark_created()
    if config.get_install_index() == "later":
        # a big site: indexed by an online build (docs/rebuild.md)
        logger.warning("plone.pgcatalog installed without indexing "
                       "(install-index later): run pgcatalog-rebuild")
        return tool
    tool.clearFindAndRebuild()
    if keep_old:
        # after the indexing above (its queued part too): it wrote
        # PostgreSQL only, the old catalog is complete
        processQueue()
        shadow.start(tool)
        logger.info("shadow mode: %s kept beside the PostgreSQL catalog",
                    shadow.SHADOW_ID)
    logger.info("plone.pgcatalog installed: %d entries indexed", len(tool))
    return tool


def uninstall(portal):
    """Put back a ZCatalog-based portal_catalog, fully indexed."""
    old = portal[TOOL_ID]
    if not isinstance(aq_base(old), PGCatalogTool):
        return old
    if shadow.shadow_of(old) is not None:
        return _restore_shadow(portal, old)
    new = CatalogTool()
    _copy_lexicons(old, new)
    new_wrapped = new.__of__(portal)
    for prop in ("title", "unwrapobjects"):
        setattr(new, prop, getattr(aq_base(old), prop, ""))
    for name in old.indexes():
        index = old._catalog._indexes[name]
        original = [k for k in type(index).__mro__[1:]
                    if getattr(k, "meta_type", None) == index.meta_type
                    and not k.__module__.startswith("plone.pgcatalog")][0]
        fresh = original.__new__(original)
        fresh.__dict__.update(
            {k: v for k, v in aq_base(index).__dict__.items()
             if not k.startswith(("_v_", "_p_"))})
        if hasattr(fresh, "clear"):
            try:
                if original.__name__ == "GopipIndex":
                    fresh.catalog = aq_base(new._catalog)
                elif original.__name__ == "ZCTextIndex":
                    fresh.index = None
                    fresh._v_lexicon = None
                    lexicon = getattr(new_wrapped, fresh.lexicon_id)
                    fresh.index = index_types[fresh._index_type](lexicon) \
                        if hasattr(fresh, "_index_type") else \
                        index_types["Okapi BM25 Rank"](lexicon)
                else:
                    fresh.clear()
            except Exception:
                logger.exception("resetting index %s failed", name)
        ZCatalog.addIndex(new_wrapped, name, fresh)
    for name in old._catalog.names:
        ZCatalog.addColumn(new_wrapped, name)
    old.manage_catalogClear()
    tool = _swap_tool(portal, new)
    toolset = portal.portal_setup.getToolsetRegistry()
    toolset.addRequiredTool(TOOL_ID, ZCATALOG_CLASS)
    if "_pgcatalog_pinned" in toolset.__dict__:
        del toolset._pgcatalog_pinned
        toolset._p_changed = True
    tool.clearFindAndRebuild()
    return tool


def _restore_shadow(portal, old):
    """Uninstall in shadow mode: the shadow ZCatalog (kept in sync) becomes
    portal_catalog again, no reindexing; the PostgreSQL rows are cleared."""
    kept = aq_base(shadow.shadow_of(old))
    shadow.stop(old)
    old.manage_catalogClear()
    portal._delObject(shadow.SHADOW_ID, suppress_events=True)
    kept.id = TOOL_ID
    tool = _swap_tool(portal, kept)
    toolset = portal.portal_setup.getToolsetRegistry()
    toolset.addRequiredTool(TOOL_ID, ZCATALOG_CLASS)
    if "_pgcatalog_pinned" in toolset.__dict__:
        del toolset._pgcatalog_pinned
        toolset._p_changed = True
    logger.info("shadow mode: the ZCatalog is portal_catalog again")
    return tool


def _portal(setup_tool):
    return getToolByName(setup_tool, "portal_url").getPortalObject()


def post_install(setup_tool):
    """GenericSetup post_handler of the default profile."""
    install(_portal(setup_tool))


def post_uninstall(setup_tool):
    """GenericSetup post_handler of the uninstall profile."""
    uninstall(_portal(setup_tool))


PROFILE = "profile-plone.pgcatalog:default"


def settings_to_registry(setup_tool):
    """Upgrade to 1008: the registry records of the site's settings
    (settings.py) and the control panel's configlet; the values the control
    panel of an earlier version kept on the catalog tool (``_pgc_settings``)
    move to the records."""
    setup_tool.runImportStepFromProfile(PROFILE, "plone.app.registry",
                                        run_dependencies=False)
    setup_tool.runImportStepFromProfile(PROFILE, "controlpanel",
                                        run_dependencies=False)
    tool = aq_base(getToolByName(setup_tool, "portal_catalog"))
    old = tool.__dict__.get("_pgc_settings")
    if old is None:
        return
    registry = getUtility(IRegistry)
    for field, name in settings.FIELDS.items():
        if old.get(name) is not None:
            registry["%s.%s" % (settings.PREFIX, field)] = int(old[name])
    del tool._pgc_settings
    logger.info("catalog settings moved to the registry: %s",
                ", ".join(sorted(old)) or "none set")
