"""Verify and repair (``verify.py``): the Python API and the ZMI's "Verify"
tab.

The tab shows this process's last report and verifies (or repairs) in the
request, for catalogs up to ``verify-zmi-max-entries`` entries; one
"Repair" repairs up to ``verify-zmi-repair-limit`` entries and says how
many are left.  A full run on a large site is the command line's
(``pgcatalog-verify``, docs/verify.md).
"""
import time
from urllib.parse import quote

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from plone.protect import CheckAuthenticator
from plone.protect import PostOnly
from plone.protect import protect
from Products.PageTemplates.PageTemplateFile import PageTemplateFile
from zope.i18n import translate
from ZPublisher import zpublish

from plone.pgcatalog import _
from plone.pgcatalog import config
from plone.pgcatalog import settings
from plone.pgcatalog.ops import verify
from plone.pgcatalog.ops import verifyreport
from plone.pgcatalog.ops.walk import portal_of


class VerifyAPI:
    """pgc_verify and the "Verify" tab (manage_catalogVerify) with its two
    POST actions."""

    security = ClassSecurityInfo()

    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogVerify")
    manage_catalogVerify = PageTemplateFile("../www/verify.zpt", globals())

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_verify(self, repair=False, repair_limit=None,
                   batch=verify.DEFAULT_BATCH, sample=verify.DEFAULT_SAMPLE,
                   on_difference=None, on_batch=None, progress=None,
                   values=True, fresh=None):
        """Compare this catalog with the ZODB (and repair it if ``repair``);
        the :class:`plone.pgcatalog.ops.verify.Report`, kept as this process's
        last report."""
        report = verify.verify(
            self, repair=repair, repair_limit=repair_limit, batch=batch,
            sample=sample, on_difference=on_difference, on_batch=on_batch,
            progress=progress, values=values, fresh=fresh)
        verifyreport.remember(self, report)
        return report

    @zpublish(False)  # data for manage_catalogVerify, not a page
    @security.protected(manage_zcatalog_entries)
    def pgc_verify_status(self):
        """What the "Verify" tab shows."""
        entries = len(self)
        site = settings.site_settings()
        limit = config.get_verify_zmi_max_entries(site)
        report = verifyreport.last_report(self)
        data = None
        if report is not None:
            data = report.to_dict()
            data["when"] = time.strftime(
                "%Y-%m-%d %H:%M:%S", time.localtime(report.started))
            data["rows"] = [
                {"kind": kind, "count": report.counts[kind],
                 "samples": report.samples[kind]}
                for kind in verifyreport.KINDS]
        return {"entries": entries, "max_entries": limit,
                "too_large": entries > limit,
                "site": portal_of(self).getId(),
                "repair_limit": config.get_verify_zmi_repair_limit(site),
                "report": data}

    def _pgc_verify_in_request(self, repair, REQUEST, RESPONSE, URL1):
        """Verify (or repair), then redirect to the tab with what was found
        (in the request's language); the message."""
        status = self.pgc_verify_status()
        if status["too_large"]:
            message = _(
                "This catalog has ${entries} entries, more than the ${limit} "
                "the ZMI verifies (verify-zmi-max-entries): use the "
                "pgcatalog-verify command.",
                mapping={"entries": status["entries"],
                         "limit": status["max_entries"]})
        else:
            limit = status["repair_limit"] if repair else None
            report = self.pgc_verify(repair=repair, repair_limit=limit)
            if report.clean:
                message = _("Clean: the catalog matches the site.")
            elif repair:
                message = _(
                    "Repaired ${repaired} entries, ${left} left "
                    "(${differences} differences).",
                    mapping={"repaired": report.repaired,
                             "left": report.unrepaired,
                             "differences": report.total})
            else:
                message = _("${differences} differences found.",
                            mapping={"differences": report.total})
        message = translate(message, context=REQUEST)
        if RESPONSE is not None and URL1 is not None:
            RESPONSE.redirect(URL1 + "/manage_catalogVerify?"
                              "manage_tabs_message=" + quote(message))
        return message

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_verifyCatalog(self, REQUEST=None, RESPONSE=None, URL1=None):
        """Verify the catalog now (the "Verify" tab's form)."""
        return self._pgc_verify_in_request(False, REQUEST, RESPONSE, URL1)

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_repairCatalog(self, REQUEST=None, RESPONSE=None, URL1=None):
        """Verify and repair up to ``verify-zmi-repair-limit`` entries (the
        "Verify" tab's form)."""
        return self._pgc_verify_in_request(True, REQUEST, RESPONSE, URL1)


InitializeClass(VerifyAPI)
