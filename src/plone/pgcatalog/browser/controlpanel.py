"""Site Setup's "PostgreSQL catalog" control panel.

``@@pgcatalog-controlpanel`` (Classic Site Setup) shows the catalog's
status (entries, server, schema, result cache) above the form of the site's
settings (:mod:`plone.pgcatalog.settings`, registry records
``plone.pgcatalog.*``); Volto's Site Setup edits the same records through
plone.restapi's ``@controlpanels/pgcatalog`` (:class:`PGCatalogControlpanel`,
registered when plone.restapi is installed).  Guarded by "Manage portal";
saving is a POST that checks plone.protect's authenticator.
"""
from plone.app.registry.browser.controlpanel import ControlPanelFormWrapper
from plone.app.registry.browser.controlpanel import RegistryEditForm
from plone.protect import CheckAuthenticator
from Products.CMFCore.utils import getToolByName
from Products.Five.browser.pagetemplatefile import ViewPageTemplateFile
from Products.statusmessages.interfaces import IStatusMessage
from z3c.form import button
from zope.component.hooks import getSite
from zope.i18nmessageid import MessageFactory

from plone.pgcatalog import _
from plone.pgcatalog import config
from plone.pgcatalog import settings

#: Plone's own messages (the form's buttons, as every control panel's)
_plone = MessageFactory("plone")


class PGCatalogSettingsForm(RegistryEditForm):

    schema = settings.IPGCatalogSettings
    schema_prefix = settings.PREFIX
    label = _("PostgreSQL catalog")
    description = _("plone.pgcatalog keeps this site's catalog in "
                    "PostgreSQL. Settings left empty follow the process's "
                    "configuration.")

    @button.buttonAndHandler(_plone("Save"), name="save")
    def handleSave(self, action):
        CheckAuthenticator(self.request)
        if self.request.method != "POST":
            raise ValueError("the settings are saved by POST only")
        data, errors = self.extractData()
        if errors:
            self.status = self.formErrorsMessage
            return
        self.applyChanges(data)
        IStatusMessage(self.request).addStatusMessage(
            _plone("Changes saved."), "info")
        self.request.response.redirect(self.request.getURL())

    @button.buttonAndHandler(_plone("Cancel"), name="cancel")
    def handleCancel(self, action):
        IStatusMessage(self.request).addStatusMessage(
            _plone("Changes canceled."), "info")
        self.request.response.redirect("%s/%s" % (
            getSite().absolute_url(), self.control_panel_view))


class PGCatalogControlPanel(ControlPanelFormWrapper):
    """The form in Site Setup's layout, with the catalog's status above."""

    form = PGCatalogSettingsForm
    index = ViewPageTemplateFile("controlpanel.pt")

    def status(self):
        """The catalog's facts (the ZMI status page's) and the settings in
        force for this site."""
        tool = getToolByName(self.context, "portal_catalog")
        status = tool.pgc_status()
        site = settings.site_settings()
        status["timeout_ms"] = config.get_statement_timeout_ms(site)
        status["slow_ms"] = config.get_slow_query_ms(site)
        status["zmi_url"] = tool.absolute_url() + "/manage_catalogStatus"
        return status


try:
    from plone.restapi.controlpanels import RegistryConfigletPanel
except ImportError:  # pragma: no cover - plone.restapi is not installed
    RegistryConfigletPanel = None

if RegistryConfigletPanel is not None:

    class PGCatalogControlpanel(RegistryConfigletPanel):
        """The control panel for Volto's Site Setup (plone.restapi's
        ``@controlpanels/pgcatalog``): the same registry records."""

        schema = settings.IPGCatalogSettings
        schema_prefix = settings.PREFIX
        configlet_id = "pgcatalog"
        configlet_category_id = "plone-advanced"
