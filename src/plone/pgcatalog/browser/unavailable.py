"""What a visitor gets when PostgreSQL cannot be reached.

A catalog call that finds PostgreSQL gone raises
:class:`~plone.pgcatalog.errors.DatabaseUnavailable`, a ``TransientError``:
Zope's publisher runs the request again (three times, waiting a little
longer each time), with a fresh connection.  When the server is still away
after the last attempt (a restart, a failover), the request ends here: a
``503 Service Unavailable`` with ``Retry-After``, which browsers, proxies
and API clients understand as "try again shortly", instead of Plone's
generic error page and its ``500``.  The body follows Plone's own error
view: a short page for browsers, ``{"error_type": ...}`` for the JSON API;
it never shows the DSN or the driver's message (the event log has them).

A request whose catalog snapshot stayed ahead of its objects' through every
retry (``CatalogReadConflictError``: writers committed between the two each
time, as while the pool reconnects after a restart) ends here too: as
transient, and as soon over.
"""
import json
from html import escape

from Products.Five import BrowserView
from zope.i18n import translate

from plone.pgcatalog import _

#: seconds a client is asked to wait before trying again
RETRY_AFTER = 5

MESSAGE = _("unavailable_message",
            default="The site's search database cannot be reached at the "
                    "moment. Please try again in a few seconds.")
TITLE = _("unavailable_title", default="Please try again shortly")

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%(title)s</title></head>
<body><h1>%(title)s</h1><p>%(text)s</p></body></html>
"""


class DatabaseUnavailableView(BrowserView):
    """The exception view of ``DatabaseUnavailable`` (browser.zcml)."""

    def __call__(self):
        response = self.request.response
        # locked: plone.transformchain sets the status again from the
        # exception's class name after this view (a 500 for this one)
        response.setStatus(503, lock=True)
        response.setHeader("Retry-After", str(RETRY_AFTER))
        response.setHeader("Cache-Control", "no-store")
        if "text/html" not in self.request.getHeader("Accept", ""):
            response.setHeader("Content-Type", "application/json")
            return json.dumps({
                "error_type": "ServiceUnavailable",
                "message": translate(MESSAGE, context=self.request),
            })
        response.setHeader("Content-Type", "text/html; charset=utf-8")
        return PAGE % {
            "title": escape(translate(TITLE, context=self.request)),
            "text": escape(translate(MESSAGE, context=self.request)),
        }
