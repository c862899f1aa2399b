"""What an online rebuild indexes, found lazily and in a resumable order.

``clearFindAndRebuild`` (CMFPlone) indexes the site root and every
contentish object ``ZopeFindAndApply`` reaches (those with a callable
``reindexObject``), plus plone.app.discussion's comments of each.  This
walk finds the same objects without materialising them: a generator,
depth first, each container's ids in sorted order, so the walk order is the
order of the physical path tuples.  A build remembers the path of the last
object done; :func:`walk` started with it skips everything up to it without
loading skipped subtrees (only the containers on the way to it).

Each item is a *unit*: ``(path tuple, [objects])``, the object and its
comments, done in the same batch.
"""
from Acquisition import aq_base
from Acquisition import aq_inner
from Acquisition import aq_parent
from plone.base.utils import base_hasattr
from Products.CMFPlone.CatalogTool import DISCUSSION_ANNOTATION_KEY
from Products.ZCatalog.Catalog import safe_callable
from zope.annotation.interfaces import IAnnotations


def _contentish(obj, tool):
    return (aq_base(obj) is not aq_base(tool)
            and base_hasattr(obj, "reindexObject")
            and safe_callable(obj.reindexObject))


def _comments(obj):
    """plone.app.discussion's comments of ``obj`` (as CMFPlone finds
    them)."""
    if DISCUSSION_ANNOTATION_KEY is None:
        return []
    try:
        annotations = IAnnotations(obj)
    except TypeError:
        return []
    if DISCUSSION_ANNOTATION_KEY not in annotations:
        return []
    conversation = annotations[DISCUSSION_ANNOTATION_KEY].__of__(obj)
    return list(conversation.getComments())


def _unit(obj, tool):
    if not _contentish(obj, tool):
        return None
    return [obj] + _comments(obj)


def walk(tool, after=None):
    """Units ``(path tuple, [objects])`` of the site ``tool`` belongs to,
    in path order, those up to and including ``after`` (a path tuple)
    skipped."""
    portal = aq_parent(aq_inner(tool))
    root = tuple(portal.getPhysicalPath())
    after = tuple(after) if after else None
    if after is None or root > after:
        unit = _unit(portal, tool)
        if unit:
            yield root, unit
    yield from _below(portal, root, tool, after)


def _below(container, path, tool, after):
    if not base_hasattr(container, "objectIds") or \
            aq_base(container) is aq_base(tool):
        return
    try:
        ids = sorted(container.objectIds())
    except Exception:  # noqa: B902 - ZopeFindAndApply skips these too
        return
    for id_ in ids:
        child_path = path + (id_,)
        if after is not None and child_path <= after:
            if after[:len(child_path)] != child_path:
                continue           # a subtree wholly before the position
            descend_after = after  # on the way to the position
            unit = None
        else:
            descend_after = None
            unit = True
        try:
            child = container._getOb(id_)
        except (AttributeError, KeyError):
            continue               # removed since the ids were read
        if unit:
            found = _unit(child, tool)
            if found:
                yield child_path, found
        yield from _below(child, child_path, tool, descend_after)
