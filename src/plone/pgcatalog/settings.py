"""A site's own settings of its catalog, kept in plone.registry.

The run-time knobs that make sense per site (the slow-query threshold, the
statement timeout of catalog reads, the ZMI's verify limits) are registry
records ``plone.pgcatalog.<field>`` of :class:`IPGCatalogSettings`: the
"PostgreSQL catalog" control panel edits them (Classic and Volto Site
Setup), GenericSetup exports and imports them with the rest of the
registry.  A record left empty (``None``) means "the process's setting".

Precedence, for a site's catalog: its registry record, then zope.conf's
``<product-config plone.pgcatalog>``, then the environment, then the
default (:mod:`plone.pgcatalog.config`).  Deployment settings (the DSN, the
pool, two-phase commit, the cache...) are the process's only.
"""
from plone.registry.interfaces import IRegistry
from zope import schema
from zope.component import queryUtility
from zope.interface import Interface

from plone.pgcatalog import _


#: the registry records' prefix
PREFIX = "plone.pgcatalog"

#: registry field -> setting name (``config.OVERRIDABLE``)
FIELDS = {"statement_timeout_ms": "statement-timeout-ms",
          "slow_query_ms": "slow-query-ms",
          "verify_zmi_max_entries": "verify-zmi-max-entries",
          "verify_zmi_repair_limit": "verify-zmi-repair-limit"}

#: the largest number of milliseconds a field takes (a day)
MAX_MS = 24 * 3600 * 1000


class IPGCatalogSettings(Interface):
    """The site's settings of its PostgreSQL catalog."""

    statement_timeout_ms = schema.Int(
        title=_("Statement timeout of catalog reads (ms)"),
        description=_(
            "A search or lookup running longer is cancelled and ends with a "
            "clear error; writes and commits are never cut short. 0: no "
            "limit. Empty: the process's setting (statement-timeout-ms in "
            "zope.conf)."),
        required=False, min=0, max=MAX_MS)

    slow_query_ms = schema.Int(
        title=_("Slow-query threshold (ms)"),
        description=_(
            "Searches taking at least this long are logged "
            "(plone.pgcatalog.slow) and listed in the catalog's ZMI Query "
            "Report. 0: off. Empty: the process's setting (slow-query-ms in "
            "zope.conf)."),
        required=False, min=0, max=MAX_MS)

    verify_zmi_max_entries = schema.Int(
        title=_("Largest catalog the ZMI verifies (entries)"),
        description=_(
            "The catalog's Verify tab compares catalogs up to this size with "
            "the site's content in the request; larger ones are verified "
            "with the pgcatalog-verify command. Empty: the process's setting "
            "(verify-zmi-max-entries in zope.conf)."),
        required=False, min=0, max=10 ** 9)

    verify_zmi_repair_limit = schema.Int(
        title=_("Entries one repair in the ZMI fixes at most"),
        description=_(
            "A Repair of the Verify tab repairs at most this many entries "
            "and says how many are left. Empty: the process's setting "
            "(verify-zmi-repair-limit in zope.conf)."),
        required=False, min=0, max=10 ** 9)


def site_settings(context=None):
    """The current site's settings (``context``'s site, when given) as a
    dict of setting names, only those set: what ``config.get_*(site)``
    takes.  Empty without a registry or without the records (a site whose
    profile is not installed, or not upgraded yet)."""
    registry = queryUtility(IRegistry, context=context)
    if registry is None:
        return {}
    found = {}
    for field, name in FIELDS.items():
        value = registry.get("%s.%s" % (PREFIX, field))
        if value is not None:
            found[name] = value
    return found
