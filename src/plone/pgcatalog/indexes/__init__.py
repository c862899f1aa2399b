"""Index kinds: one class per ZCatalog index type (see base.py).

:func:`kind_for` names the class serving a ZCatalog meta_type;
:func:`convert_index` copies a ZCatalog index's configuration into one
(``addIndex`` with an index object, the install's carrying over).  Either
registers the class: :func:`check_kind` verifies it, once, against the
interfaces it declares (``interfaces.py``).
"""
from importlib import import_module

from Acquisition import aq_base
from Persistence import Persistent
from zope.interface.exceptions import BrokenImplementation
from zope.interface.exceptions import BrokenMethodImplementation
from zope.interface.exceptions import Invalid
from zope.interface.interface import Method
from zope.interface.verify import verifyClass

from plone.pgcatalog.errors import IndexKindContractError
from plone.pgcatalog.errors import UnsupportedIndexType
from plone.pgcatalog.indexes.interfaces import CAPABILITIES
from plone.pgcatalog.indexes.interfaces import IIndexKind
from plone.pgcatalog.indexes.interfaces import ITextKind


#: meta_type -> "module:Class" of the class serving it.
KINDS = {
    "FieldIndex": "field:PGFieldIndex",
    "KeywordIndex": "keyword:PGKeywordIndex",
    "BooleanIndex": "boolean:PGBooleanIndex",
    "UUIDIndex": "uuid:PGUUIDIndex",
    "DateIndex": "date:PGDateIndex",
    "DateRangeIndex": "daterange:PGDateRangeIndex",
    "DateRecurringIndex": "daterecurring:PGDateRecurringIndex",
    "ExtendedPathIndex": "path:PGExtendedPathIndex",
    "ZCTextIndex": "text:PGZCTextIndex",
    "GopipIndex": "gopip:PGGopipIndex",
}


def kind_for(meta_type):
    """The class serving ``meta_type``; UnsupportedIndexType otherwise."""
    spec = KINDS.get(meta_type)
    if spec is None:
        raise UnsupportedIndexType(
            "plone.pgcatalog cannot serve index type %r (supported: %s)"
            % (meta_type, ", ".join(sorted(KINDS))))
    module, name = spec.split(":")
    # a table of names, imported on demand: the kinds import this package
    return check_kind(getattr(
        import_module("plone.pgcatalog.indexes." + module), name))


#: the kinds' classes that passed :func:`check_kind`
_checked = set()


def check_kind(klass):
    """``klass``, a kind's class, once it keeps its contract; else
    IndexKindContractError naming what breaks it:

    - it provides IIndexKind (it subclasses PGIndex);
    - each interface it provides (IIndexKind and every capability of
      ``interfaces.CAPABILITIES`` it declares) passes zope.interface's
      ``verifyClass`` (its methods, with signatures that take the
      interface's arguments), and each of their attributes has a class
      default (the engine reads them without a fallback);
    - it defines none of a capability's own members without declaring the
      capability (the engine asks ``ICapability.providedBy`` and would
      never use them);
    - its words in ``pgcatalog_text`` (``pgc_storage`` 'text') come with
      ITextKind.

    Checked once per class (:func:`kind_for`, :func:`convert_index`)."""
    if klass in _checked:
        return klass
    problems = []
    if not IIndexKind.implementedBy(klass):
        problems.append("it does not provide IIndexKind (subclass "
                        "plone.pgcatalog.indexes.base.PGIndex)")
    for iface in (IIndexKind,) + CAPABILITIES:
        if iface.implementedBy(klass):
            problems.extend(_broken(klass, iface))
        elif iface is not IIndexKind:
            found = sorted(name for name in iface.names()
                           if hasattr(klass, name))
            if found:
                problems.append("it defines %s without declaring %s "
                                "(@implementer)" % (", ".join(found),
                                                    iface.__name__))
    if getattr(klass, "pgc_storage", None) == "text" and \
            not ITextKind.implementedBy(klass):
        problems.append("it stores text rows (pgc_storage 'text') "
                        "without declaring ITextKind")
    if problems:
        raise IndexKindContractError(
            "index kind %s.%s breaks its contract: %s" % (
                klass.__module__, klass.__qualname__, "; ".join(problems)))
    _checked.add(klass)
    return klass


def _broken(klass, iface):
    """What ``klass`` lacks of ``iface`` (texts; none when it keeps it)."""
    problems = []
    try:
        verifyClass(iface, klass)
    except Invalid as error:
        found = getattr(error, "exceptions", None) or (error,)
        problems.extend("%s: %s" % (iface.__name__, _said(e)) for e in found)
    for name, desc in iface.namesAndDescriptions(all=True):
        if not isinstance(desc, Method) and not hasattr(klass, name):
            problems.append("%s: no class default for the attribute %s"
                            % (iface.__name__, name))
    return problems


def _said(error):
    """One failure verifyClass found, briefly."""
    if isinstance(error, BrokenMethodImplementation):
        return "%s %s" % (getattr(error.method, "__name__", error.method),
                          error.mess)
    if isinstance(error, BrokenImplementation):
        return "no %s" % getattr(error.name, "__name__", error.name)
    return str(error)


def _is_data(value):
    """Index attributes that hold data (BTrees, Lengths, Okapi indexes)."""
    return isinstance(value, Persistent) or type(value).__module__.startswith(
        ("BTrees", "Products.ZCTextIndex.OkapiIndex",
         "Products.ZCTextIndex.CosineIndex"))


def convert_index(index, target=None):
    """A copy of ``index``'s configuration as an index of class ``target``
    (default: the plone.pgcatalog kind serving its meta_type)."""
    index = aq_base(index)
    klass = check_kind(target) if target is not None else \
        kind_for(index.meta_type)
    new = klass.__new__(klass)
    for key, value in index.__dict__.items():
        if key.startswith("_v_") or key.startswith("_p_") or _is_data(value):
            continue
        new.__dict__[key] = value
    return new
