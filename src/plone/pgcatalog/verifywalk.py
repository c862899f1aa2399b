"""What the ZODB says the catalog should hold, for the verifier.

- :func:`contentish` walks a site the way CMFPlone's
  ``clearFindAndRebuild`` does (the site itself, then ``ZopeFindAndApply``:
  every item of every ``objectItems()``, depth first; plone.app.discussion's
  comments of each object), lazily: one object at a time, with a stack of
  iterators instead of recursion, so a walk of a million objects holds
  only the current branch (the verifier trims the ZODB cache between
  batches).
- :func:`not_indexed_reason` says why ``clearFindAndRebuild`` would not
  index an object (None: it would).
- :func:`resolve` finds the object a catalogued path names, refusing what
  traversal only *acquires* from elsewhere (a path whose object is gone
  must not resolve to a namesake higher up).
"""
from Acquisition import aq_base
from Acquisition import aq_inner
from Acquisition import aq_parent
from plone.base.utils import base_hasattr
from plone.base.utils import safe_callable
from Products.CMFCore.indexing import filterTemporaryItems
from ZODB.POSException import ConflictError
from zope.annotation.interfaces import IAnnotations


try:
    from plone.app.discussion.interfaces import DISCUSSION_ANNOTATION_KEY
except ImportError:  # pragma: no cover - plone.app.discussion is optional
    DISCUSSION_ANNOTATION_KEY = None


def physical_path(obj):
    return "/".join(obj.getPhysicalPath())


def not_indexed_reason(obj, catalog, portal_path=None):
    """Why ``clearFindAndRebuild`` would not index ``obj`` (a short text),
    or None when it would.  ``portal_path``: the site's path (objects
    outside it are never found by the rebuild)."""
    if aq_base(obj) is aq_base(catalog):
        return "the catalog itself"
    if not (base_hasattr(obj, "reindexObject")
            and safe_callable(obj.reindexObject)):
        return "not contentish (no reindexObject)"
    if filterTemporaryItems(obj) is None:
        return "temporary, or not an item of its container"
    if portal_path is not None:
        path = physical_path(obj)
        if path != portal_path and not path.startswith(portal_path + "/"):
            return "outside the site"
    return None


def _comments(obj):
    """plone.app.discussion's comments of ``obj`` (as the rebuild indexes
    them: the conversation in the object's context)."""
    if DISCUSSION_ANNOTATION_KEY is None:
        return ()
    try:
        annotations = IAnnotations(obj)
    except TypeError:  # not annotatable (the rebuild catches it too)
        return ()
    if DISCUSSION_ANNOTATION_KEY not in annotations:
        return ()
    conversation = annotations[DISCUSSION_ANNOTATION_KEY].__of__(obj)
    return conversation.getComments()


def _visit(obj, catalog):
    """What indexing ``obj`` the way the rebuild does catalogues:
    ``[(path, object)]`` (the object and its comments), or ``[]``."""
    if not_indexed_reason(obj, catalog) is not None:
        return []
    found = [(physical_path(obj), obj)]
    for comment in _comments(obj):
        found.append((physical_path(comment), comment))
    return found


def _items(obj):
    """``obj.objectItems()`` as ZopeFindAndApply reads it (None: no
    items)."""
    if not hasattr(aq_base(obj), "objectItems"):
        return None
    try:
        return iter(obj.objectItems())
    except ConflictError:
        raise
    except Exception:  # ZopeFindAndApply skips such a container too
        return None


def contentish(portal, catalog):
    """``(path, object)`` of everything ``clearFindAndRebuild`` of
    ``catalog`` would index in ``portal``, in the rebuild's order."""
    yield from _visit(portal, catalog)
    stack = []
    items = _items(portal)
    if items is not None:
        stack.append(items)
    while stack:
        try:
            _, ob = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        yield from _visit(ob, catalog)
        items = _items(ob)
        if items is not None:
            stack.append(items)


def resolve(root, path):
    """The object catalogued at ``path``, or None when nothing lives there
    (traversal fails, or reaches an object whose own path is another: an
    acquired namesake, a method)."""
    try:
        obj = root.unrestrictedTraverse(path, None)
    except ConflictError:
        raise
    except Exception:
        return None
    if obj is None:
        return None
    try:
        if physical_path(obj) != path:
            return None
    except ConflictError:
        raise
    except Exception:  # no getPhysicalPath: an attribute, a method
        return None
    return obj


def portal_of(catalog):
    """The site the catalog serves (the rebuild walks it)."""
    return aq_parent(aq_inner(catalog))
