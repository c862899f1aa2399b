"""What the catalog of a site should hold, and the walk that finds it: the
one definition an online rebuild (``rebuild.py``) and the verifier
(``verify.py``) share, shadow mode's old ZCatalog included.

What ``clearFindAndRebuild`` (CMFPlone) catalogues: it offers the site
root and every object ``ZopeFindAndApply`` reaches (every item of every
``objectItems()``, depth first) to ``reindexObject`` when it is
*contentish* (not the catalog, a callable ``reindexObject``), and then
plone.app.discussion's comments of it to ``indexObject``.  Both are
CMFCore's queued indexing, which drops what ``filterTemporaryItems`` drops
(no acquisition parent, not an item of its container, ``isTemporary()``:
portal_factory's objects and what they hold, their comments too) unless
``CATALOG_OPTIMIZATION_DISABLED``; ``catalog_object`` then skips the
shadow ZCatalog (shadow mode, ``shadow.py``).  :func:`unit` applies these
rules to one object met by the walk, :func:`not_indexed_reason` to an
object a catalogued path names.

:func:`walk` finds the same objects without materialising them: a stack of
the containers on the current branch (no recursion), each container's
items loaded one by one.  Each item is a *unit*: ``(path tuple,
[objects])``, the object and its comments (an online rebuild does them in
the same batch).  The order changes nothing of what is catalogued
(CMFCore's queue reorders the rebuild's indexing anyway).  By default each
container's ids are sorted, so the walk order is the order of the path
tuples and a position is resumable: a build remembers the path of the
last unit done, and :func:`walk` started with it skips everything up to it
without loading skipped subtrees (only the containers on the way to it).
:func:`objects` is the same walk one object at a time in
``ZopeFindAndApply``'s order (each container's own: the verifier's, whose
report and bounded repairs follow the site's order).

:func:`resolve` finds the object a catalogued path names, refusing what
traversal only *acquires* from elsewhere (a path whose object is gone must
not resolve to a namesake higher up).
"""
from Acquisition import aq_base
from Acquisition import aq_inner
from Acquisition import aq_parent
from plone.base.utils import base_hasattr
from plone.base.utils import safe_callable
from Products.CMFCore import CatalogTool as cmf_catalog_tool
from Products.CMFCore.indexing import filterTemporaryItems
from Products.CMFPlone.CatalogTool import DISCUSSION_ANNOTATION_KEY
from ZODB.POSException import ConflictError
from zope.annotation.interfaces import IAnnotations

from plone.pgcatalog.ops import shadow


def portal_of(catalog):
    """The site the catalog serves (the rebuild walks it)."""
    return aq_parent(aq_inner(catalog))


def physical_path(obj):
    return "/".join(obj.getPhysicalPath())


def _offered_reason(obj, catalog):
    """Why ``clearFindAndRebuild`` does not offer ``obj`` (and its
    comments) to the catalog at all, or None when it does."""
    if aq_base(obj) is aq_base(catalog):
        return "the catalog itself"
    if not (base_hasattr(obj, "reindexObject")
            and safe_callable(obj.reindexObject)):
        return "not contentish (no reindexObject)"
    return None


def _queued_reason(obj, catalog):
    """Why CMFCore's queued indexing and ``catalog_object`` leave out an
    object offered to them, or None when they catalogue it."""
    if not cmf_catalog_tool.CATALOG_OPTIMIZATION_DISABLED and \
            filterTemporaryItems(obj) is None:
        return "temporary, or not an item of its container"
    if shadow.is_shadow(catalog, obj):
        return "the shadow ZCatalog"
    return None


def not_indexed_reason(obj, catalog, portal_path=None):
    """Why ``clearFindAndRebuild`` would not index ``obj`` (a short text),
    or None when it would.  ``portal_path``: the site's path (objects
    outside it are never found by the rebuild)."""
    reason = _offered_reason(obj, catalog) or _queued_reason(obj, catalog)
    if reason is not None:
        return reason
    if portal_path is not None:
        path = physical_path(obj)
        if path != portal_path and not path.startswith(portal_path + "/"):
            return "outside the site"
    return None


def comments(obj):
    """plone.app.discussion's comments of ``obj``, as ``clearFindAndRebuild``
    finds them (the conversation in the object's context)."""
    if DISCUSSION_ANNOTATION_KEY is None:
        return []
    try:
        annotations = IAnnotations(obj)
    except TypeError:  # not annotatable (the rebuild catches it too)
        return []
    if DISCUSSION_ANNOTATION_KEY not in annotations:
        return []
    conversation = annotations[DISCUSSION_ANNOTATION_KEY].__of__(obj)
    return list(conversation.getComments())


def unit(obj, catalog):
    """What ``clearFindAndRebuild`` of ``catalog`` catalogues when its walk
    meets ``obj``: ``obj`` and its comments, those left out removed (each
    judged by itself, as the queue judges them: the comments of an object
    that is not an item of its container are catalogued, those of a
    temporary one acquire its ``isTemporary``).  ``[]``: nothing."""
    if _offered_reason(obj, catalog) is not None:
        return []
    return [found for found in [obj] + comments(obj)
            if _queued_reason(found, catalog) is None]


def _items(container, order):
    """The ids of ``container``'s items (``order``: sorted, else in the
    container's order) and a function getting one by its id; None when
    ``ZopeFindAndApply`` does not look into it (no ``objectItems``, or
    reading them fails)."""
    base = aq_base(container)
    if not hasattr(base, "objectItems"):
        return None
    try:
        if hasattr(base, "objectIds") and hasattr(base, "_getOb"):
            # every OFS container: ids only, the items loaded one by one
            ids, get = list(container.objectIds()), container._getOb
        else:
            found = dict(container.objectItems())
            ids, get = list(found), found.__getitem__
        if order:
            ids.sort()
        return ids, get
    except ConflictError:
        raise
    except Exception:  # noqa: B902 - ZopeFindAndApply skips these too
        return None


def _children(container, path, after, order):
    """``(child, path tuple, position, new)`` of each item of
    ``container`` (at ``path``) not wholly before ``after`` (a path tuple
    or None; ``order`` is then true): ``new`` when it comes after it (to
    be offered), else it is on the way to it (``position``: ``after``, to
    look into)."""
    items = _items(container, order)
    if items is None:
        return
    ids, get = items
    for id_ in ids:
        child_path = path + (id_,)
        if after is not None and child_path <= after:
            if after[:len(child_path)] != child_path:
                continue           # a subtree wholly before the position
            position, new = after, False
        else:
            position, new = None, True
        try:
            child = get(id_)
        except (AttributeError, KeyError):
            continue               # removed since the ids were read
        yield child, child_path, position, new


def walk(tool, after=None, order=True):
    """Units ``(path tuple, [objects])`` of the site ``tool`` (its catalog)
    belongs to, in path order, those up to and including ``after`` (a path
    tuple) skipped; ``order`` false: in ``ZopeFindAndApply``'s order
    (``after`` not allowed)."""
    if after and not order:
        raise ValueError("only a walk in path order resumes")
    portal = portal_of(tool)
    root = tuple(portal.getPhysicalPath())
    after = tuple(after) if after else None
    if after is None or root > after:
        found = unit(portal, tool)
        if found:
            yield root, found
    stack = [_children(portal, root, after, order)]
    while stack:
        try:
            child, path, position, new = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if new:
            found = unit(child, tool)
            if found:
                yield path, found
        if hasattr(aq_base(child), "objectItems"):
            stack.append(_children(child, path, position, order))


def objects(catalog):
    """``(path, object)`` of everything ``clearFindAndRebuild`` of
    ``catalog`` would index, in its order (``ZopeFindAndApply``'s)."""
    for _, found in walk(catalog, order=False):
        for obj in found:
            yield physical_path(obj), obj


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
