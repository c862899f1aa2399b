"""Site Setup's "PostgreSQL catalog" control panel.

``@@pgcatalog-controlpanel`` shows the essentials: the catalog's status
(entries, server, schema, result cache) and the settings that make sense
per site, the slow-query threshold and the statement timeout of catalog
reads.  They are kept on the site's catalog tool (``_pgc_settings``, a dict
of ``config.OVERRIDABLE`` names, replaced as a whole on save) and win over
zope.conf and the environment for that catalog (``config.get_*(site)``
reads both; the tool hands them to its transaction's session).  An empty
field means "the process's setting".  Guarded by "Manage portal"; saving is
a POST that checks plone.protect's authenticator.
"""
from Acquisition import aq_base
from plone.autoform.form import AutoExtensibleForm
from plone.protect import CheckAuthenticator
from plone.z3cform import layout
from Products.CMFCore.utils import getToolByName
from Products.Five.browser.pagetemplatefile import ViewPageTemplateFile
from Products.statusmessages.interfaces import IStatusMessage
from z3c.form import button
from z3c.form import form
from zope import schema
from zope.component.hooks import getSite
from zope.interface import implementer
from zope.interface import Interface

from plone.pgcatalog import config


#: form field -> setting name (config.OVERRIDABLE)
FIELDS = {"statement_timeout_ms": "statement-timeout-ms",
          "slow_query_ms": "slow-query-ms"}


class IPGCatalogSettings(Interface):

    statement_timeout_ms = schema.Int(
        title="Statement timeout of catalog reads (ms)",
        description="A search or lookup running longer is cancelled and "
                    "ends with a clear error; writes and commits are never "
                    "cut short.  0: no limit.  Empty: the process's setting "
                    "(statement-timeout-ms in zope.conf).",
        required=False, min=0, max=24 * 3600 * 1000)

    slow_query_ms = schema.Int(
        title="Slow-query threshold (ms)",
        description="Searches taking at least this long are logged "
                    "(plone.pgcatalog.slow) and listed in the catalog's ZMI "
                    "Query Report.  0: off.  Empty: the process's setting "
                    "(slow-query-ms in zope.conf).",
        required=False, min=0, max=24 * 3600 * 1000)


@implementer(IPGCatalogSettings)
class CatalogSettings:
    """The form's content: the site's settings on its catalog tool."""

    def __init__(self, tool):
        self.__dict__["_tool"] = tool

    def _settings(self):
        return getattr(aq_base(self._tool), "_pgc_settings", None) or {}

    def __getattr__(self, name):
        if name not in FIELDS:
            raise AttributeError(name)
        return self._settings().get(FIELDS[name])

    def __setattr__(self, name, value):
        if name not in FIELDS:
            raise AttributeError(name)
        settings = dict(self._settings())
        if value is None:
            settings.pop(FIELDS[name], None)
        else:
            settings[FIELDS[name]] = int(value)
        # validated as the process's settings are (a ConfigurationError
        # here is a bug: the fields' bounds come first)
        config.get_statement_timeout_ms(settings)
        config.get_slow_query_ms(settings)
        self._tool._pgc_settings = settings  # a new dict: the tool changes


class PGCatalogSettingsForm(AutoExtensibleForm, form.EditForm):

    schema = IPGCatalogSettings
    label = "PostgreSQL catalog"
    description = ("plone.pgcatalog keeps this site's catalog in PostgreSQL. "
                   "Settings left empty follow the process's configuration.")
    control_panel_view = "@@overview-controlpanel"

    def getContent(self):
        return CatalogSettings(getToolByName(self.context, "portal_catalog"))

    def updateActions(self):
        super().updateActions()
        self.actions["save"].addClass("btn btn-primary")
        self.actions["cancel"].addClass("btn btn-secondary")

    @button.buttonAndHandler("Save", name="save")
    def handleSave(self, action):
        CheckAuthenticator(self.request)
        if self.request.method != "POST":
            raise ValueError("the settings are saved by POST only")
        data, errors = self.extractData()
        if errors:
            self.status = self.formErrorsMessage
            return
        self.applyChanges(data)
        IStatusMessage(self.request).addStatusMessage("Changes saved.",
                                                      "info")
        self.request.response.redirect(self.request.getURL())

    @button.buttonAndHandler("Cancel", name="cancel")
    def handleCancel(self, action):
        IStatusMessage(self.request).addStatusMessage("Changes canceled.",
                                                      "info")
        self.request.response.redirect(
            "%s/%s" % (getSite().absolute_url(), self.control_panel_view))


class PGCatalogControlPanel(layout.FormWrapper):
    """The form in Site Setup's layout, with the catalog's status above."""

    form = PGCatalogSettingsForm
    index = ViewPageTemplateFile("controlpanel.pt")

    @property
    def control_panel_url(self):
        return "%s/@@overview-controlpanel" % getSite().absolute_url()

    def status(self):
        """The catalog's facts (the ZMI status page's) and the settings in
        force for this site."""
        tool = getToolByName(self.context, "portal_catalog")
        status = tool.pgc_status()
        settings = getattr(aq_base(tool), "_pgc_settings", None) or {}
        status["timeout_ms"] = config.get_statement_timeout_ms(settings)
        status["slow_ms"] = config.get_slow_query_ms(settings)
        status["zmi_url"] = tool.absolute_url() + "/manage_catalogStatus"
        return status
