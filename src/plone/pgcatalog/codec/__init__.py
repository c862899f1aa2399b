"""The typed JSON codec of index values and metadata, with its Zope/Plone types
and restricted unpickling."""

# the integrators' API (docs/security.md): ``codec.allow_class(...)``
from plone.pgcatalog.codec.unpickle import allow_class  # noqa: F401
