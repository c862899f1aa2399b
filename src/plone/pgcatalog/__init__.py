"""plone.pgcatalog: portal_catalog kept in PostgreSQL.

Distributed as ``pgcatalog-plone``: the name ``plone.pgcatalog`` on the
Python Package Index belongs to another project that installs an import
package of the same name.  The two cannot be installed side by side (their
files would overwrite each other's), so importing this package fails at
once when the other distribution is present.
"""
import importlib.metadata
import logging

from zope.i18nmessageid import MessageFactory


logger = logging.getLogger("plone.pgcatalog")

#: messages shown to people, in the plone.pgcatalog translation domain
#: (locales/)
_ = MessageFactory("plone.pgcatalog")

#: this package's distribution
DISTRIBUTION = "pgcatalog-plone"
#: distributions that install an import package of the same name
CONFLICTING = ("plone.pgcatalog",)


def _version():
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # a bare source tree
        return "0+unknown"


def _refuse_conflicts():
    for name in CONFLICTING:
        try:
            other = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        raise ImportError(
            "%s %s and %s %s are both installed in this environment and "
            "install the same import package (plone.pgcatalog), so their "
            "files overwrite each other's.  Uninstall both "
            "(pip uninstall %s %s), then install %s again."
            % (DISTRIBUTION, __version__, other.metadata["Name"],
               other.version, name, DISTRIBUTION, DISTRIBUTION))


#: the release (the distribution's version: pyproject.toml is its one source)
__version__ = _version()

_refuse_conflicts()


def initialize(context):
    """Zope 2 product initialisation (nothing to register: the tool is added by
    the GenericSetup profile, not through the ZMI add list; the GenericSetup
    patch is applied from ZCML, see :mod:`plone.pgcatalog.patches`)."""
